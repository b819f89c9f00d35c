package tagshape

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leafgo/leaf"
)

// ErrWidthExceeded: a sequence needs more digits than its format's width.
// The tag cannot issue under its format any more; the transports answer it
// as unavailable (503) rather than write a truncated or longer ID.
var ErrWidthExceeded = errors.New("sequence outgrew the ID format's width")

// The alphabets, in ASCII order so that fixed-width IDs sort like numbers.
const (
	digits10 = "0123456789"
	digits36 = "0123456789abcdefghijklmnopqrstuvwxyz"
	digits62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// value tables: a byte's digit value in the radix, or -1.
var (
	values10 = valueTable(digits10)
	values36 = valueTable(digits36)
	values62 = valueTable(digits62)
)

func valueTable(digits string) *[256]int8 {
	var t [256]int8
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(digits); i++ {
		t[digits[i]] = int8(i)
	}
	return &t
}

// maxIDLen is the longest ID a valid format writes: prefix, period key and
// "-", 19 digits (a width of 19, or MaxInt64 in decimal).
const maxIDLen = leaf.MaxFormatPrefix + 8 + 1 + 19

// radixOf is f's radix, 10 for the zero value.
func radixOf(f leaf.IDFormat) int {
	if f.Radix == 0 {
		return leaf.Radix10
	}
	return f.Radix
}

// check validates f as the store does, so that a format refused at tag
// creation is refused here too rather than written half-way.
func check(f leaf.IDFormat) error {
	return Validate(leaf.TagShape{Format: f})
}

// Format writes the ID of sequence seq under f: f.Prefix, then period and
// "-" when period is not "", then seq in f's radix, zero-padded to f.Width.
// period is the tag's period key (yyyymmdd, yyyymm or yyyy) or "" for a tag
// without one. A seq that needs more than f.Width digits fails with an
// error wrapping ErrWidthExceeded; an invalid f or period key, or a seq
// below 1, with one wrapping leaf.ErrInvalidArgument.
func Format(f leaf.IDFormat, period string, seq int64) (string, error) {
	var buf [maxIDLen]byte
	b, err := AppendFormat(buf[:0], f, period, seq)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendFormat is Format appending to dst, for the issuing path: it
// allocates nothing beyond what growing dst takes. On error it returns dst
// unchanged.
func AppendFormat(dst []byte, f leaf.IDFormat, period string, seq int64) ([]byte, error) {
	if err := check(f); err != nil {
		return dst, err
	}
	if err := checkPeriodKey(period); err != nil {
		return dst, err
	}
	if seq < 1 {
		return dst, fmt.Errorf("%w: sequence %d: IDs are positive", leaf.ErrInvalidArgument, seq)
	}
	// Digits are written from the end of buf. Each radix has its own loop
	// so that the divisions are by constants, which compile to multiplies.
	var buf [64]byte
	i := len(buf)
	v := uint64(seq)
	switch radixOf(f) {
	case leaf.Radix10:
		for ; v > 0; v /= 10 {
			i--
			buf[i] = digits10[v%10]
		}
	case leaf.Radix36:
		for ; v > 0; v /= 36 {
			i--
			buf[i] = digits36[v%36]
		}
	default: // 62, check passed
		for ; v > 0; v /= 62 {
			i--
			buf[i] = digits62[v%62]
		}
	}
	if f.Width > 0 {
		n := len(buf) - i
		if n > f.Width {
			return dst, widthError(f, period != "", seq, n)
		}
		for ; n < f.Width; n++ {
			i--
			buf[i] = '0'
		}
	}
	dst = append(dst, f.Prefix...)
	if period != "" {
		dst = append(dst, period...)
		dst = append(dst, '-')
	}
	return append(dst, buf[i:]...), nil
}

func widthError(f leaf.IDFormat, periodic bool, seq int64, digits int) error {
	return fmt.Errorf("%w: sequence %d needs %d digits; format %s (width %d, radix %d) holds sequences up to %d",
		ErrWidthExceeded, seq, digits, Spec(f, periodic), f.Width, radixOf(f), MaxSeq(f))
}

// checkPeriodKey accepts "" and the keys of the three periods by their
// length and digits; the calendar is Parse's to check, not the hot path's.
func checkPeriodKey(key string) error {
	if key == "" {
		return nil
	}
	if n := len(key); n != 4 && n != 6 && n != 8 {
		return fmt.Errorf("%w: period key %q, want yyyy, yyyymm or yyyymmdd", leaf.ErrInvalidArgument, truncate(key, 20))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return fmt.Errorf("%w: period key %q has byte %#02x at offset %d, want digits", leaf.ErrInvalidArgument, key, key[i], i)
		}
	}
	return nil
}

// MaxSeq is the largest sequence f's width holds: radix^width - 1, capped at
// math.MaxInt64 (which a width of 0 holds too). It is 0 for an invalid f.
func MaxSeq(f leaf.IDFormat) int64 {
	if check(f) != nil {
		return 0
	}
	if f.Width == 0 {
		return math.MaxInt64
	}
	r := int64(radixOf(f))
	m := int64(1)
	for range f.Width {
		if m > math.MaxInt64/r {
			return math.MaxInt64
		}
		m *= r
	}
	return m - 1
}

// Headroom is how many sequences after last f's width still holds:
// MaxSeq(f) - last, and 0 once last reaches MaxSeq. last is the highest
// sequence a tag has issued, or reserved: a range reserved past MaxSeq
// cannot be issued in full. Divided by the tag's issuing rate it is the
// time left before the format refuses IDs, which /readyz can hold to the
// same threshold as a low buffer.
func Headroom(f leaf.IDFormat, last int64) int64 {
	m := MaxSeq(f)
	if last < 0 {
		last = 0
	}
	if last >= m {
		return 0
	}
	return m - last
}

// Parse reads an ID Format wrote under f for a tag whose period is period
// (leaf.PeriodNone for a tag without one): it returns the period key ("" for
// none) and the sequence. It accepts exactly the strings Format writes: the
// prefix, the period key as a date of the period's length (yyyymmdd,
// yyyymm, yyyy) and "-", then the sequence in f's alphabet, in exactly
// f.Width digits if f.Width is not 0 or without leading zeros if it is,
// from 1 to math.MaxInt64. Errors wrap leaf.ErrInvalidArgument and say what
// was expected at which offset.
func Parse(f leaf.IDFormat, period leaf.Period, s string) (key string, seq int64, err error) {
	if err := check(f); err != nil {
		return "", 0, err
	}
	var keyLen int
	var keyForm string
	switch period {
	case leaf.PeriodNone:
	case leaf.PeriodDay:
		keyLen, keyForm = 8, "yyyymmdd"
	case leaf.PeriodMonth:
		keyLen, keyForm = 6, "yyyymm"
	case leaf.PeriodYear:
		keyLen, keyForm = 4, "yyyy"
	default:
		return "", 0, fmt.Errorf("%w: period %q, want day, month or year (or none)", leaf.ErrInvalidArgument, truncate(string(period), 20))
	}
	bad := func(format string, args ...any) (string, int64, error) {
		return "", 0, fmt.Errorf("%w: ID %q: %s", leaf.ErrInvalidArgument, truncate(s, 2*maxIDLen), fmt.Sprintf(format, args...))
	}
	if len(s) < len(f.Prefix) || s[:len(f.Prefix)] != f.Prefix {
		return bad("want the prefix %q at offset 0", f.Prefix)
	}
	off := len(f.Prefix)
	if keyLen > 0 {
		for i := off; i < off+keyLen; i++ {
			if i >= len(s) {
				return bad("ends at offset %d, want the %s period's %d digits (%s) at offset %d", i, period, keyLen, keyForm, off)
			}
			if c := s[i]; c < '0' || c > '9' {
				return bad("byte %#02x at offset %d, want the %s period's %d digits (%s) at offset %d", c, i, period, keyLen, keyForm, off)
			}
		}
		key = s[off : off+keyLen]
		if msg := checkDate(key); msg != "" {
			return bad("period %s at offset %d is not a %s: %s", key, off, keyForm, msg)
		}
		off += keyLen
		if off >= len(s) || s[off] != '-' {
			return bad("want \"-\" after the period at offset %d", off)
		}
		off++
	}
	digits := s[off:]
	r := radixOf(f)
	values, alphabet := values10, "0-9"
	switch r {
	case leaf.Radix36:
		values, alphabet = values36, "0-9 a-z"
	case leaf.Radix62:
		values, alphabet = values62, "0-9 A-Z a-z"
	}
	switch {
	case digits == "":
		return bad("ends at offset %d, want the sequence", off)
	case f.Width > 0 && len(digits) != f.Width:
		return bad("the sequence at offset %d has %d characters, want exactly %d", off, len(digits), f.Width)
	case f.Width == 0 && digits[0] == '0' && len(digits) > 1:
		return bad("the sequence at offset %d has a leading zero", off)
	}
	for i := 0; i < len(digits); i++ {
		d := values[digits[i]]
		if d < 0 {
			return bad("byte %#02x at offset %d is not a radix-%d digit (%s)", digits[i], off+i, r, alphabet)
		}
		if seq > (math.MaxInt64-int64(d))/int64(r) {
			return bad("the sequence at offset %d exceeds %d, the largest ID", off, int64(math.MaxInt64))
		}
		seq = seq*int64(r) + int64(d)
	}
	if seq == 0 {
		return bad("the sequence at offset %d is 0, IDs are positive", off)
	}
	return key, seq, nil
}

// checkDate says what is wrong with a period key of digits, "" if nothing:
// a month 01..12 and a day that month has.
func checkDate(key string) string {
	if len(key) < 6 {
		return ""
	}
	num := func(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }
	month := num(key[4:6])
	if month < 1 || month > 12 {
		return fmt.Sprintf("month %s, want 01..12", key[4:6])
	}
	if len(key) < 8 {
		return ""
	}
	year := num(key[0:2])*100 + num(key[2:4])
	days := time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
	if day := num(key[6:8]); day < 1 || day > days {
		return fmt.Sprintf("day %s, want 01..%02d", key[6:8], days)
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
