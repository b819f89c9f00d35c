package tagshape_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

func TestParseSpec(t *testing.T) {
	long := strings.Repeat("P", leaf.MaxFormatPrefix)
	for _, tc := range []struct {
		spec     string
		f        leaf.IDFormat
		periodic bool
		canon    string // Spec's spelling; "" when it is spec
	}{
		{"{seq}", leaf.IDFormat{}, false, ""},
		{"{period}-{seq}", leaf.IDFormat{}, true, ""},
		{"ORD-{period}-{seq:6}", leaf.IDFormat{Prefix: "ORD-", Width: 6}, true, ""},
		{"INV{seq:8:36}", leaf.IDFormat{Prefix: "INV", Width: 8, Radix: 36}, false, ""},
		{"{seq:11:62}", leaf.IDFormat{Width: 11, Radix: 62}, false, ""},
		{"{seq:0:62}", leaf.IDFormat{Radix: 62}, false, ""},
		{"{seq:0:36}", leaf.IDFormat{Radix: 36}, false, ""},
		{"{seq:19}", leaf.IDFormat{Width: 19}, false, ""},
		{"{seq:1}", leaf.IDFormat{Width: 1}, false, ""},
		{"a.b_c:d-{seq}", leaf.IDFormat{Prefix: "a.b_c:d-"}, false, ""},
		{"x{period}-{seq:19:62}", leaf.IDFormat{Prefix: "x", Width: 19, Radix: 62}, true, ""},
		{long + "{period}-{seq:3}", leaf.IDFormat{Prefix: long, Width: 3}, true, ""},
		// Other spellings of the same formats.
		{"{seq:0}", leaf.IDFormat{}, false, "{seq}"},
		{"{seq:0:10}", leaf.IDFormat{}, false, "{seq}"},
		{"{seq:6:10}", leaf.IDFormat{Width: 6}, false, "{seq:6}"},
		{"ORD-{period}-{seq:6:10}", leaf.IDFormat{Prefix: "ORD-", Width: 6}, true, "ORD-{period}-{seq:6}"},
	} {
		f, periodic, err := tagshape.ParseSpec(tc.spec)
		if err != nil || f != tc.f || periodic != tc.periodic {
			t.Errorf("ParseSpec(%q) = %+v, %v, %v, want %+v, %v", tc.spec, f, periodic, err, tc.f, tc.periodic)
			continue
		}
		canon := tc.canon
		if canon == "" {
			canon = tc.spec
		}
		if got := tagshape.Spec(f, periodic); got != canon {
			t.Errorf("Spec(ParseSpec(%q)) = %q, want %q", tc.spec, got, canon)
		}
	}
}

func TestParseSpecRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec string
		msg  string // part of the error
	}{
		{"", "empty"},
		{"ORD-", "no {seq}"},
		{"{seq}x", "text after {seq} at offset 5"},
		{"{seq}{seq}", "text after {seq} at offset 5"},
		{"ORD-{seq:6}-X", "text after {seq:6} at offset 11"},
		{"{seq}{period}-", "text after {seq} at offset 5"},
		{"{seq", "the '{' at offset 0 is not closed"},
		{"ORD-{period", "the '{' at offset 4 is not closed"},
		{"{se{q}", "'{' at offset 3 inside the placeholder opened at offset 0"},
		{"}{seq}", "'}' at offset 0 closes no placeholder"},
		{"OR}D{seq}", "'}' at offset 2"},
		{"OR D{seq}", "byte 0x20 at offset 2"},
		{"ORD/{seq}", "byte 0x2f at offset 3"},
		{"\xc3\xa9{seq}", "byte 0xc3 at offset 0"},
		{"ORD{period}{seq}", "want \"-\" after {period}, at offset 11"},
		{"{period}", "want \"-\" after {period}, at offset 8"},
		{"{period}-", "want {seq} at offset 9"},
		{"{period}-X{seq}", "want {seq} at offset 9"},
		{"{period}--{seq}", "want {seq} at offset 9"},
		{"{period}-{period}", "{period} again at offset 9"},
		{"{period}-{seq}-{period}", "text after {seq} at offset 14"},
		{"{foo}", "unknown placeholder \"{foo}\" at offset 0"},
		{"{Seq}", "unknown placeholder \"{Seq}\""},
		{"{}", "unknown placeholder \"{}\""},
		{"{ seq}", "unknown placeholder"},
		{"{seq }", "unknown placeholder"},
		{"{period:day}-{seq}", "unknown placeholder \"{period:day}\""},
		{"{seq:}", "width \"\" at offset 5"},
		{"{seq::62}", "width \"\" at offset 5"},
		{"{seq:20}", "width \"20\" at offset 5, want 0..19"},
		{"{seq:99}", "width \"99\""},
		{"{seq:100}", "width \"100\""},
		{"{seq:06}", "width \"06\""},
		{"{seq:00}", "width \"00\""},
		{"{seq:-1}", "width \"-1\""},
		{"{seq:+6}", "width \"+6\""},
		{"{seq: 6}", "width \" 6\""},
		{"{seq:x}", "width \"x\""},
		{"ORD{seq:6:16}", "radix \"16\" at offset 10, want 10, 36 or 62"},
		{"{seq:6:}", "radix \"\" at offset 7"},
		{"{seq:6:062}", "radix \"062\""},
		{"{seq:6:36:1}", "want {seq}, {seq:W} or {seq:W:R}"},
		{strings.Repeat("P", leaf.MaxFormatPrefix+1) + "{seq}", "the prefix is 33 bytes, at most 32"},
	} {
		f, periodic, err := tagshape.ParseSpec(tc.spec)
		if !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) || f != (leaf.IDFormat{}) || periodic {
			t.Errorf("ParseSpec(%q) = %+v, %v, %v, want ErrInvalidArgument saying %q", tc.spec, f, periodic, err, tc.msg)
		}
	}
}

// TestSpecRoundTrip writes every valid format (but for prefixes) as a spec
// and reads it back.
func TestSpecRoundTrip(t *testing.T) {
	for _, prefix := range []string{"", "A", "ORD-", "x.y_z:0-", strings.Repeat("9", leaf.MaxFormatPrefix)} {
		for w := 0; w <= 19; w++ {
			for _, r := range []int{0, 10, 36, 62} {
				for _, periodic := range []bool{false, true} {
					f := leaf.IDFormat{Prefix: prefix, Width: w, Radix: r}
					spec := tagshape.Spec(f, periodic)
					got, p, err := tagshape.ParseSpec(spec)
					want := f
					if want.Radix == 10 {
						want.Radix = 0
					}
					if err != nil || got != want || p != periodic {
						t.Fatalf("ParseSpec(Spec(%+v, %v) = %q) = %+v, %v, %v", f, periodic, spec, got, p, err)
					}
				}
			}
		}
	}
}

func TestParseSpecFor(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		period leaf.Period
		want   leaf.IDFormat
		msg    string // part of the error, "" for none
	}{
		{"{seq}", leaf.PeriodNone, leaf.IDFormat{}, ""},
		{"ORD-{period}-{seq:6}", leaf.PeriodDay, leaf.IDFormat{Prefix: "ORD-", Width: 6}, ""},
		{"{period}-{seq:4:36}", leaf.PeriodYear, leaf.IDFormat{Width: 4, Radix: 36}, ""},
		{"ORD-{period}-{seq:6}", leaf.PeriodNone, leaf.IDFormat{}, "has {period}, but the tag has no period"},
		{"ORD-{seq:6}", leaf.PeriodMonth, leaf.IDFormat{}, "lacks {period}, which a tag with a month period needs before {seq}: e.g. ORD-{period}-{seq:6}"},
		{"{seq}", leaf.Period("week"), leaf.IDFormat{}, "period \"week\""},
		{"{seq", leaf.PeriodNone, leaf.IDFormat{}, "not closed"},
	} {
		f, err := tagshape.ParseSpecFor(tc.spec, tc.period)
		switch {
		case tc.msg == "" && (err != nil || f != tc.want):
			t.Errorf("ParseSpecFor(%q, %q) = %+v, %v, want %+v", tc.spec, tc.period, f, err, tc.want)
		case tc.msg != "" && (!errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) || f != (leaf.IDFormat{})):
			t.Errorf("ParseSpecFor(%q, %q) = %+v, %v, want ErrInvalidArgument saying %q", tc.spec, tc.period, f, err, tc.msg)
		}
	}
}
