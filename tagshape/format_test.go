package tagshape_test

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// oracle writes an ID with the standard library's conversions, an
// implementation independent of the package's. big.Int's radix 62 puts
// lower case first, the package upper case (ASCII order): swap the cases.
func oracle(f leaf.IDFormat, key string, seq int64) string {
	r := f.Radix
	if r == 0 {
		r = 10
	}
	var digits string
	if r == 62 {
		digits = strings.Map(func(c rune) rune {
			switch {
			case c >= 'a' && c <= 'z':
				return c - 'a' + 'A'
			case c >= 'A' && c <= 'Z':
				return c - 'A' + 'a'
			}
			return c
		}, big.NewInt(seq).Text(62))
	} else {
		digits = strconv.FormatInt(seq, r)
	}
	if n := f.Width - len(digits); n > 0 {
		digits = strings.Repeat("0", n) + digits
	}
	if key != "" {
		key += "-"
	}
	return f.Prefix + key + digits
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		f    leaf.IDFormat
		key  string
		seq  int64
		want string
	}{
		{leaf.IDFormat{}, "", 123, "123"},
		{leaf.IDFormat{}, "", 1, "1"},
		{leaf.IDFormat{Radix: 10}, "", 123, "123"},
		{leaf.IDFormat{}, "", math.MaxInt64, "9223372036854775807"},
		{leaf.IDFormat{}, "20261124", 5, "20261124-5"},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, "20261124", 123, "ORD-20261124-000123"},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, "202611", 123, "ORD-202611-000123"},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, "2026", 999999, "ORD-2026-999999"},
		{leaf.IDFormat{Prefix: "INV", Width: 8, Radix: 36}, "", 123, "INV0000003f"},
		{leaf.IDFormat{Width: 11, Radix: 62}, "", 123, "0000000001z"},
		{leaf.IDFormat{Radix: 36}, "", 35, "z"},
		{leaf.IDFormat{Radix: 36}, "", 36, "10"},
		{leaf.IDFormat{Radix: 62}, "", 35, "Z"},
		{leaf.IDFormat{Radix: 62}, "", 36, "a"},
		{leaf.IDFormat{Radix: 62}, "", 61, "z"},
		{leaf.IDFormat{Radix: 62}, "", 62, "10"},
		{leaf.IDFormat{Radix: 62}, "", math.MaxInt64, "AzL8n0Y58m7"},
		{leaf.IDFormat{Radix: 36}, "", math.MaxInt64, "1y2p0ij32e8e7"},
		{leaf.IDFormat{Width: 19}, "", math.MaxInt64, "9223372036854775807"},
		{leaf.IDFormat{Width: 19, Radix: 62}, "", 1, "0000000000000000001"},
		{leaf.IDFormat{Width: 3}, "", 999, "999"},
		{leaf.IDFormat{Prefix: "a.b_c:d-", Width: 1}, "", 7, "a.b_c:d-7"},
	} {
		got, err := tagshape.Format(tc.f, tc.key, tc.seq)
		if err != nil || got != tc.want {
			t.Errorf("Format(%+v, %q, %d) = %q, %v, want %q", tc.f, tc.key, tc.seq, got, err, tc.want)
		}
		if o := oracle(tc.f, tc.key, tc.seq); o != tc.want {
			t.Errorf("oracle(%+v, %q, %d) = %q, want %q: the table or the oracle is wrong", tc.f, tc.key, tc.seq, o, tc.want)
		}
		dst := []byte("x,")
		b, err := tagshape.AppendFormat(dst, tc.f, tc.key, tc.seq)
		if err != nil || string(b) != "x,"+tc.want {
			t.Errorf("AppendFormat(%q, %+v, %q, %d) = %q, %v", dst, tc.f, tc.key, tc.seq, b, err)
		}
	}
}

func TestFormatRefuses(t *testing.T) {
	for _, tc := range []struct {
		f    leaf.IDFormat
		key  string
		seq  int64
		want error
		msg  []string // parts of the message
	}{
		{leaf.IDFormat{}, "", 0, leaf.ErrInvalidArgument, []string{"sequence 0", "positive"}},
		{leaf.IDFormat{}, "", -1, leaf.ErrInvalidArgument, []string{"sequence -1"}},
		{leaf.IDFormat{}, "", math.MinInt64, leaf.ErrInvalidArgument, []string{"positive"}},
		{leaf.IDFormat{Radix: 16}, "", 1, leaf.ErrInvalidArgument, []string{"radix 16"}},
		{leaf.IDFormat{Width: 20}, "", 1, leaf.ErrInvalidArgument, []string{"width 20"}},
		{leaf.IDFormat{Width: -1}, "", 1, leaf.ErrInvalidArgument, []string{"width -1"}},
		{leaf.IDFormat{Prefix: "a b"}, "", 1, leaf.ErrInvalidArgument, []string{"prefix", "offset 1"}},
		{leaf.IDFormat{Prefix: "{x}"}, "", 1, leaf.ErrInvalidArgument, []string{"prefix", "offset 0"}},
		{leaf.IDFormat{Prefix: strings.Repeat("p", 33)}, "", 1, leaf.ErrInvalidArgument, []string{"33 bytes"}},
		{leaf.IDFormat{}, "2026112", 1, leaf.ErrInvalidArgument, []string{"period key", "yyyymmdd"}},
		{leaf.IDFormat{}, "20", 1, leaf.ErrInvalidArgument, []string{"period key"}},
		{leaf.IDFormat{}, "2026x124", 1, leaf.ErrInvalidArgument, []string{"offset 4", "digits"}},
		{leaf.IDFormat{Width: 3}, "", 1000, tagshape.ErrWidthExceeded,
			[]string{"sequence 1000 needs 4 digits", "format {seq:3}", "width 3", "up to 999"}},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, "20261124", 1000000, tagshape.ErrWidthExceeded,
			[]string{"ORD-{period}-{seq:6}", "up to 999999"}},
		{leaf.IDFormat{Width: 2, Radix: 36}, "", 36 * 36, tagshape.ErrWidthExceeded, []string{"{seq:2:36}", "up to 1295"}},
		{leaf.IDFormat{Width: 2, Radix: 62}, "", 62 * 62, tagshape.ErrWidthExceeded, []string{"{seq:2:62}", "up to 3843"}},
		{leaf.IDFormat{Width: 18}, "", math.MaxInt64, tagshape.ErrWidthExceeded, []string{"needs 19 digits", "up to 999999999999999999"}},
		{leaf.IDFormat{Width: 10, Radix: 62}, "", math.MaxInt64, tagshape.ErrWidthExceeded, []string{"needs 11 digits"}},
	} {
		got, err := tagshape.Format(tc.f, tc.key, tc.seq)
		if !errors.Is(err, tc.want) || got != "" {
			t.Errorf("Format(%+v, %q, %d) = %q, %v, want %v", tc.f, tc.key, tc.seq, got, err, tc.want)
			continue
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("Format(%+v, %q, %d): %q does not say %q", tc.f, tc.key, tc.seq, err, m)
			}
		}
		dst := []byte("kept")
		b, err2 := tagshape.AppendFormat(dst, tc.f, tc.key, tc.seq)
		if err2 == nil || string(b) != "kept" {
			t.Errorf("AppendFormat(%+v, %q, %d) = %q, %v, want dst unchanged and an error", tc.f, tc.key, tc.seq, b, err2)
		}
	}
}

// formats are the widths worth testing in each radix: none, small, the
// widest that stays below MaxInt64 and the ones it caps.
func formats() []leaf.IDFormat {
	var fs []leaf.IDFormat
	for _, r := range []int{10, 36, 62} {
		for _, w := range []int{0, 1, 2, 3, 6, 10, 11, 12, 13, 18, 19} {
			fs = append(fs, leaf.IDFormat{Prefix: "P-", Width: w, Radix: r})
		}
	}
	return fs
}

// edges are the sequences around every power of r up to MaxInt64, and
// around the width's limit.
func edges(f leaf.IDFormat) []int64 {
	seqs := []int64{1, 2, math.MaxInt64 - 1, math.MaxInt64}
	r := int64(f.Radix)
	for p := r; ; p *= r {
		seqs = append(seqs, p-1, p, p+1)
		if p > math.MaxInt64/r {
			break
		}
	}
	if m := tagshape.MaxSeq(f); m < math.MaxInt64 {
		seqs = append(seqs, m-1, m, m+1)
	}
	return seqs
}

func TestRoundTripPerRadix(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 62))
	for _, f := range formats() {
		max := tagshape.MaxSeq(f)
		seqs := edges(f)
		for range 200 {
			seqs = append(seqs, 1+rng.Int64N(math.MaxInt64), 1+rng.Int64N(max))
			if max > 1000 {
				seqs = append(seqs, 1+rng.Int64N(1000))
			}
		}
		for _, key := range []string{"", "20261124"} {
			period := leaf.PeriodNone
			if key != "" {
				period = leaf.PeriodDay
			}
			for _, seq := range seqs {
				id, err := tagshape.Format(f, key, seq)
				if seq > max {
					if !errors.Is(err, tagshape.ErrWidthExceeded) || id != "" {
						t.Fatalf("Format(%+v, %q, %d) = %q, %v, want ErrWidthExceeded (max %d)", f, key, seq, id, err, max)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Format(%+v, %q, %d): %v", f, key, seq, err)
				}
				if want := oracle(f, key, seq); id != want {
					t.Fatalf("Format(%+v, %q, %d) = %q, want %q", f, key, seq, id, want)
				}
				k, s, err := tagshape.Parse(f, period, id)
				if err != nil || k != key || s != seq {
					t.Fatalf("Parse(%+v, %q, %q) = %q, %d, %v, want %q, %d", f, period, id, k, s, err, key, seq)
				}
			}
		}
	}
}

// TestFixedWidthSortsAsNumbers holds the alphabets to ASCII order: the IDs
// of one fixed-width format compare as strings as their sequences do.
func TestFixedWidthSortsAsNumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range formats() {
		if f.Width == 0 {
			continue
		}
		max := tagshape.MaxSeq(f)
		for range 500 {
			a, b := 1+rng.Int64N(max), 1+rng.Int64N(max)
			if rng.IntN(4) == 0 && a < max {
				b = a + 1 // neighbours, where a carry happens
			}
			ia, err1 := tagshape.Format(f, "", a)
			ib, err2 := tagshape.Format(f, "", b)
			if err1 != nil || err2 != nil {
				t.Fatalf("%+v: %v, %v", f, err1, err2)
			}
			if (a < b) != (ia < ib) || (a == b) != (ia == ib) {
				t.Fatalf("%+v: %d -> %q and %d -> %q sort apart", f, a, ia, b, ib)
			}
		}
	}
}

func TestMaxSeq(t *testing.T) {
	for _, tc := range []struct {
		f    leaf.IDFormat
		want int64
	}{
		{leaf.IDFormat{}, math.MaxInt64},
		{leaf.IDFormat{Radix: 62}, math.MaxInt64},
		{leaf.IDFormat{Width: 1}, 9},
		{leaf.IDFormat{Width: 6, Radix: 10}, 999999},
		{leaf.IDFormat{Width: 18}, 999999999999999999},
		{leaf.IDFormat{Width: 19}, math.MaxInt64},
		{leaf.IDFormat{Width: 2, Radix: 36}, 1295},
		{leaf.IDFormat{Width: 12, Radix: 36}, 4738381338321616895},
		{leaf.IDFormat{Width: 13, Radix: 36}, math.MaxInt64},
		{leaf.IDFormat{Width: 1, Radix: 62}, 61},
		{leaf.IDFormat{Width: 10, Radix: 62}, 839299365868340223},
		{leaf.IDFormat{Width: 11, Radix: 62}, math.MaxInt64},
		{leaf.IDFormat{Width: 19, Radix: 62}, math.MaxInt64},
		{leaf.IDFormat{Width: 20}, 0},
		{leaf.IDFormat{Radix: 16}, 0},
	} {
		if got := tagshape.MaxSeq(tc.f); got != tc.want {
			t.Errorf("MaxSeq(%+v) = %d, want %d", tc.f, got, tc.want)
		}
	}
}

func TestHeadroom(t *testing.T) {
	w3 := leaf.IDFormat{Width: 3}
	for _, tc := range []struct {
		f    leaf.IDFormat
		last int64
		want int64
	}{
		{w3, 0, 999},
		{w3, -5, 999},
		{w3, 1, 998},
		{w3, 990, 9},
		{w3, 998, 1},
		{w3, 999, 0},
		{w3, 5000, 0},
		{leaf.IDFormat{}, 1, math.MaxInt64 - 1},
		{leaf.IDFormat{}, math.MaxInt64, 0},
		{leaf.IDFormat{Width: 2, Radix: 62}, 3800, 43},
		{leaf.IDFormat{Radix: 16}, 1, 0},
	} {
		if got := tagshape.Headroom(tc.f, tc.last); got != tc.want {
			t.Errorf("Headroom(%+v, %d) = %d, want %d", tc.f, tc.last, got, tc.want)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		f      leaf.IDFormat
		period leaf.Period
		id     string
		key    string
		seq    int64
	}{
		{leaf.IDFormat{}, leaf.PeriodNone, "1", "", 1},
		{leaf.IDFormat{}, leaf.PeriodNone, "9223372036854775807", "", math.MaxInt64},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, leaf.PeriodDay, "ORD-20240229-000123", "20240229", 123},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, leaf.PeriodDay, "ORD-20261231-999999", "20261231", 999999},
		{leaf.IDFormat{Prefix: "ORD-", Width: 6}, leaf.PeriodMonth, "ORD-202612-000001", "202612", 1},
		{leaf.IDFormat{Prefix: "ORD-"}, leaf.PeriodYear, "ORD-2026-10", "2026", 10},
		{leaf.IDFormat{Prefix: "INV", Width: 8, Radix: 36}, leaf.PeriodNone, "INV0000003f", "", 123},
		{leaf.IDFormat{Width: 11, Radix: 62}, leaf.PeriodNone, "0000000001z", "", 123},
		{leaf.IDFormat{Radix: 62}, leaf.PeriodNone, "AzL8n0Y58m7", "", math.MaxInt64},
		{leaf.IDFormat{Width: 19, Radix: 62}, leaf.PeriodNone, "00000000AzL8n0Y58m7", "", math.MaxInt64},
	} {
		key, seq, err := tagshape.Parse(tc.f, tc.period, tc.id)
		if err != nil || key != tc.key || seq != tc.seq {
			t.Errorf("Parse(%+v, %q, %q) = %q, %d, %v, want %q, %d", tc.f, tc.period, tc.id, key, seq, err, tc.key, tc.seq)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	ord := leaf.IDFormat{Prefix: "ORD-", Width: 6}
	inv := leaf.IDFormat{Prefix: "INV", Width: 8, Radix: 36}
	plain := leaf.IDFormat{}
	for _, tc := range []struct {
		f      leaf.IDFormat
		period leaf.Period
		id     string
		msg    string // part of the error
	}{
		{plain, leaf.PeriodNone, "", "ends at offset 0, want the sequence"},
		{plain, leaf.PeriodNone, "0", "offset 0 is 0"},
		{plain, leaf.PeriodNone, "00", "leading zero"},
		{plain, leaf.PeriodNone, "0123", "leading zero"},
		{plain, leaf.PeriodNone, "+123", "byte 0x2b at offset 0 is not a radix-10 digit (0-9)"},
		{plain, leaf.PeriodNone, "-1", "byte 0x2d at offset 0"},
		{plain, leaf.PeriodNone, " 123", "byte 0x20 at offset 0"},
		{plain, leaf.PeriodNone, "123 ", "byte 0x20 at offset 3"},
		{plain, leaf.PeriodNone, "12a", "byte 0x61 at offset 2"},
		{plain, leaf.PeriodNone, "9223372036854775808", "exceeds 9223372036854775807"},
		{plain, leaf.PeriodNone, "99999999999999999999", "exceeds"},
		{plain, leaf.PeriodNone, "20261124-5", "byte 0x2d at offset 8"},
		{plain, leaf.Period("week"), "1", "period \"week\""},
		{leaf.IDFormat{Radix: 16}, leaf.PeriodNone, "1", "radix 16"},
		{ord, leaf.PeriodDay, "ORX-20261124-000123", "want the prefix \"ORD-\" at offset 0"},
		{ord, leaf.PeriodDay, "ORD", "want the prefix"},
		{ord, leaf.PeriodDay, "ord-20261124-000123", "want the prefix"},
		{ord, leaf.PeriodDay, "ORD-", "ends at offset 4, want the day period's 8 digits (yyyymmdd) at offset 4"},
		{ord, leaf.PeriodDay, "ORD-2026112-000123", "byte 0x2d at offset 11, want the day period's 8 digits"},
		{ord, leaf.PeriodDay, "ORD-20261324-000123", "period 20261324 at offset 4 is not a yyyymmdd: month 13"},
		{ord, leaf.PeriodDay, "ORD-20261100-000123", "day 00, want 01..30"},
		{ord, leaf.PeriodDay, "ORD-20260229-000123", "day 29, want 01..28"},
		{ord, leaf.PeriodDay, "ORD-20261124000123", "want \"-\" after the period at offset 12"},
		{ord, leaf.PeriodDay, "ORD-20261124", "want \"-\" after the period at offset 12"},
		{ord, leaf.PeriodDay, "ORD-20261124-", "ends at offset 13, want the sequence"},
		{ord, leaf.PeriodDay, "ORD-20261124-00123", "offset 13 has 5 characters, want exactly 6"},
		{ord, leaf.PeriodDay, "ORD-20261124-0000123", "has 7 characters, want exactly 6"},
		{ord, leaf.PeriodDay, "ORD-20261124-00012a", "byte 0x61 at offset 18"},
		{ord, leaf.PeriodDay, "ORD-20261124-000000", "offset 13 is 0"},
		{ord, leaf.PeriodMonth, "ORD-202600-000001", "month 00"},
		{ord, leaf.PeriodMonth, "ORD-20261124-000001", "want \"-\" after the period at offset 10"},
		{ord, leaf.PeriodYear, "ORD-26-000001", "byte 0x2d at offset 6, want the year period's 4 digits (yyyy)"},
		{ord, leaf.PeriodNone, "ORD-20261124-000123", "offset 4 has 15 characters, want exactly 6"},
		{inv, leaf.PeriodNone, "INV0000003F", "byte 0x46 at offset 10 is not a radix-36 digit (0-9 a-z)"},
		{inv, leaf.PeriodNone, "INV000000-3", "byte 0x2d at offset 9"},
		{leaf.IDFormat{Radix: 62}, leaf.PeriodNone, "AzL8n0Y58m8", "exceeds"},
		{leaf.IDFormat{Radix: 62}, leaf.PeriodNone, "a_b", "byte 0x5f at offset 1 is not a radix-62 digit (0-9 A-Z a-z)"},
		{leaf.IDFormat{Width: 19, Radix: 62}, leaf.PeriodNone, strings.Repeat("z", 19), "exceeds"},
		{leaf.IDFormat{Width: 13, Radix: 36}, leaf.PeriodNone, "3w5e11264sgsg", "exceeds"},
		{leaf.IDFormat{Width: 19}, leaf.PeriodNone, "9999999999999999999", "exceeds"},
	} {
		key, seq, err := tagshape.Parse(tc.f, tc.period, tc.id)
		if !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) || key != "" || seq != 0 {
			t.Errorf("Parse(%+v, %q, %q) = %q, %d, %v, want ErrInvalidArgument saying %q", tc.f, tc.period, tc.id, key, seq, err, tc.msg)
		}
	}
}

// TestAppendFormatAllocates nothing: the issuing path writes every ID.
func TestAppendFormatAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 64)
	for _, f := range []leaf.IDFormat{{}, {Prefix: "ORD-", Width: 6}, {Width: 11, Radix: 62}, {Prefix: "INV", Width: 8, Radix: 36}} {
		allocs := testing.AllocsPerRun(100, func() {
			var err error
			if _, err = tagshape.AppendFormat(buf[:0], f, "20261124", 123456); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("AppendFormat(%+v): %v allocations per call, want 0", f, allocs)
		}
	}
}

var sink []byte

func BenchmarkAppendFormat(b *testing.B) {
	for _, bc := range []struct {
		name string
		f    leaf.IDFormat
		key  string
	}{
		{"plain", leaf.IDFormat{}, ""},
		{"ORD-period-6", leaf.IDFormat{Prefix: "ORD-", Width: 6}, "20261124"},
		{"36w8", leaf.IDFormat{Prefix: "INV", Width: 8, Radix: 36}, ""},
		{"62w11", leaf.IDFormat{Width: 11, Radix: 62}, ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			seq := int64(100000)
			for b.Loop() {
				var err error
				if buf, err = tagshape.AppendFormat(buf[:0], bc.f, bc.key, seq); err != nil {
					b.Fatal(err)
				}
				seq++
				if seq > 999999 {
					seq = 100000
				}
			}
			sink = buf
		})
	}
}

var sinkString string

func BenchmarkFormat(b *testing.B) {
	f := leaf.IDFormat{Prefix: "ORD-", Width: 6}
	b.ReportAllocs()
	seq := int64(100000)
	for b.Loop() {
		var err error
		if sinkString, err = tagshape.Format(f, "20261124", seq); err != nil {
			b.Fatal(err)
		}
		seq++
		if seq > 999999 {
			seq = 100000
		}
	}
}
