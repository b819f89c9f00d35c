package tagshape_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// FuzzParseSpec: no spec panics; one accepted names a format the store
// accepts, and Spec writes it back in a spelling that reads as the same.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"{seq}", "{period}-{seq}", "ORD-{period}-{seq:6}", "INV{seq:8:36}", "{seq:11:62}", "{seq:0:62}",
		"{seq:6:10}", "{seq:19}", "{seq:20}", "{seq:06}", "{seq:6:16}", "{seq:6:36:1}", "{seq}x", "{foo}",
		"{period}{seq}", "{period}-{period}", "}{seq}", "{se{q}", "{seq", "", "ORD-", "a b{seq}",
		strings.Repeat("P", 33) + "{seq}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fm, periodic, err := tagshape.ParseSpec(spec)
		if err != nil {
			if !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Fatalf("ParseSpec(%q): %v does not wrap ErrInvalidArgument", spec, err)
			}
			if fm != (leaf.IDFormat{}) || periodic {
				t.Fatalf("ParseSpec(%q) = %+v, %v with error %v", spec, fm, periodic, err)
			}
			return
		}
		shape := leaf.TagShape{Format: fm}
		if periodic {
			shape.Period = leaf.PeriodDay
		}
		if err := tagshape.Validate(shape); err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, which the store refuses: %v", spec, fm, err)
		}
		if fm.Radix == leaf.Radix10 {
			t.Fatalf("ParseSpec(%q) = %+v, want decimal as Radix 0", spec, fm)
		}
		canon := tagshape.Spec(fm, periodic)
		fm2, periodic2, err := tagshape.ParseSpec(canon)
		if err != nil || fm2 != fm || periodic2 != periodic {
			t.Fatalf("ParseSpec(%q) = %+v, %v; its Spec %q reads as %+v, %v, %v", spec, fm, periodic, canon, fm2, periodic2, err)
		}
		if len(canon) > len(spec) {
			t.Fatalf("Spec(ParseSpec(%q)) = %q, longer than the spec", spec, canon)
		}
	})
}

// tagBytes is the prefix alphabet; the fuzzer's prefixes are mapped onto it
// so that most inputs make a valid format.
const tagBytes = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"

// FuzzFormatParse: for any valid format, period and sequence, Format writes
// what the standard library's conversions write, or refuses a sequence past
// the width; Parse reads it back. And any string Parse accepts is what
// Format writes for what Parse read: one ID, one spelling.
func FuzzFormatParse(f *testing.F) {
	f.Add("ORD-", 6, 10, uint8(1), int64(739579), int64(123), "ORD-20261124-000123")
	f.Add("INV", 8, 36, uint8(0), int64(0), int64(123), "INV0000003f")
	f.Add("", 11, 62, uint8(0), int64(0), int64(123), "0000000001z")
	f.Add("", 0, 62, uint8(3), int64(1), int64(9223372036854775807), "AzL8n0Y58m7")
	f.Add("", 0, 0, uint8(2), int64(5), int64(1), "20261124-5")
	f.Add("x", 3, 10, uint8(0), int64(0), int64(1000), "x999")
	f.Add("", 19, 10, uint8(0), int64(0), int64(-1), "0000000000000000000")
	f.Fuzz(func(t *testing.T, prefix string, width, radix int, kind uint8, day, seq int64, s string) {
		p := make([]byte, min(len(prefix), leaf.MaxFormatPrefix))
		for i := range p {
			p[i] = tagBytes[int(prefix[i])%len(tagBytes)]
		}
		fm := leaf.IDFormat{
			Prefix: string(p),
			Width:  int(uint(width) % 20),
			Radix:  []int{0, 10, 36, 62}[uint(radix)%4],
		}
		period := []leaf.Period{leaf.PeriodNone, leaf.PeriodDay, leaf.PeriodMonth, leaf.PeriodYear}[kind%4]
		// A date from 0001-01-01 to year 9000 or so, written by package time.
		date := time.Date(1, 1, 1+int(uint64(day)%3_280_000), 0, 0, 0, 0, time.UTC)
		key := map[leaf.Period]string{
			leaf.PeriodDay:   date.Format("20060102"),
			leaf.PeriodMonth: date.Format("200601"),
			leaf.PeriodYear:  date.Format("2006"),
		}[period]

		id, err := tagshape.Format(fm, key, seq)
		switch {
		case seq < 1:
			if !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Fatalf("Format(%+v, %q, %d) = %q, %v, want ErrInvalidArgument", fm, key, seq, id, err)
			}
		case seq > tagshape.MaxSeq(fm):
			if !errors.Is(err, tagshape.ErrWidthExceeded) || id != "" {
				t.Fatalf("Format(%+v, %q, %d) = %q, %v, want ErrWidthExceeded", fm, key, seq, id, err)
			}
		default:
			if want := oracle(fm, key, seq); err != nil || id != want {
				t.Fatalf("Format(%+v, %q, %d) = %q, %v, want %q", fm, key, seq, id, err, want)
			}
			k, sq, err := tagshape.Parse(fm, period, id)
			if err != nil || k != key || sq != seq {
				t.Fatalf("Parse(%+v, %q, %q) = %q, %d, %v, want %q, %d", fm, period, id, k, sq, err, key, seq)
			}
		}

		k, sq, err := tagshape.Parse(fm, period, s)
		if err != nil {
			if !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Fatalf("Parse(%+v, %q, %q): %v does not wrap ErrInvalidArgument", fm, period, s, err)
			}
			return
		}
		if back, err := tagshape.Format(fm, k, sq); err != nil || back != s {
			t.Fatalf("Parse(%+v, %q, %q) = %q, %d, which Format writes as %q, %v", fm, period, s, k, sq, back, err)
		}
	})
}
