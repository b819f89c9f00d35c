package tagshape

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/leafgo/leaf"
)

// ParseSpec reads a format spec (see the package doc): the format, with
// Radix 0 for decimal, and whether it has {period}. Errors wrap
// leaf.ErrInvalidArgument and name the offset of what is wrong.
func ParseSpec(spec string) (f leaf.IDFormat, periodic bool, err error) {
	bad := func(format string, args ...any) (leaf.IDFormat, bool, error) {
		return leaf.IDFormat{}, false, fmt.Errorf("%w: format spec %q: %s", leaf.ErrInvalidArgument, truncate(spec, 80), fmt.Sprintf(format, args...))
	}
	if spec == "" {
		return bad("empty, want e.g. {seq}, INV{seq:8:36} or ORD-{period}-{seq:6}")
	}
	i := 0
	for ; i < len(spec) && spec[i] != '{'; i++ {
		switch c := spec[i]; {
		case c == '}':
			return bad("'}' at offset %d closes no placeholder", i)
		case !leaf.IsTagByte(c):
			return bad("byte %#02x at offset %d; a prefix has only A-Z a-z 0-9 . _ : -", c, i)
		}
	}
	if i > leaf.MaxFormatPrefix {
		return bad("the prefix is %d bytes, at most %d", i, leaf.MaxFormatPrefix)
	}
	f.Prefix = spec[:i]
	if i == len(spec) {
		return bad("no {seq}; the sequence placeholder comes last, e.g. %s{seq}", f.Prefix)
	}
	name, end, msg := placeholder(spec, i)
	if msg != "" {
		return bad("%s", msg)
	}
	if name == "period" {
		periodic = true
		i = end
		if i == len(spec) || spec[i] != '-' {
			return bad("want \"-\" after {period}, at offset %d", i)
		}
		i++
		if i == len(spec) || spec[i] != '{' {
			return bad("want {seq} at offset %d, right after {period}-", i)
		}
		if name, end, msg = placeholder(spec, i); msg != "" {
			return bad("%s", msg)
		}
	}
	switch {
	case name == "period":
		return bad("{period} again at offset %d; it comes once, before {seq}", i)
	case name == "seq":
	case strings.HasPrefix(name, "seq:"):
		args := strings.Split(name[len("seq:"):], ":")
		if len(args) > 2 {
			return bad("{%s} at offset %d, want {seq}, {seq:W} or {seq:W:R}", name, i)
		}
		off := i + len("{seq:")
		w, ok := smallUint(args[0])
		if !ok || w > 19 {
			return bad("width %q at offset %d, want 0..19 (0: as many digits as needed)", args[0], off)
		}
		f.Width = w
		if len(args) == 2 {
			off += len(args[0]) + 1
			switch args[1] {
			case "10":
			case "36":
				f.Radix = leaf.Radix36
			case "62":
				f.Radix = leaf.Radix62
			default:
				return bad("radix %q at offset %d, want 10, 36 or 62", args[1], off)
			}
		}
	default:
		return bad("unknown placeholder %q at offset %d, want {period} or {seq}", "{"+truncate(name, 20)+"}", i)
	}
	if end != len(spec) {
		return bad("text after {%s} at offset %d; the sequence comes last", name, end)
	}
	// The grammar maps onto what the store accepts; this only guards that.
	if err := check(f); err != nil {
		return bad("%v", err)
	}
	return f, periodic, nil
}

// placeholder reads the placeholder that opens at spec[i] ('{'): its name
// and the offset after its '}', or what is wrong with it.
func placeholder(spec string, i int) (name string, end int, msg string) {
	for j := i + 1; j < len(spec); j++ {
		switch spec[j] {
		case '}':
			return spec[i+1 : j], j + 1, ""
		case '{':
			return "", 0, fmt.Sprintf("'{' at offset %d inside the placeholder opened at offset %d", j, i)
		}
	}
	return "", 0, fmt.Sprintf("the '{' at offset %d is not closed", i)
}

// smallUint reads a width: decimal digits without a leading zero (but "0"),
// at most two of them.
func smallUint(s string) (int, bool) {
	if s == "" || len(s) > 2 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// Spec writes f as a format spec, with {period} if periodic, in the
// shortest spelling: {seq} for decimal without a width, {seq:W} for
// decimal, {seq:W:R} otherwise. ParseSpec reads it back as f (decimal as
// Radix 0) for any valid f.
func Spec(f leaf.IDFormat, periodic bool) string {
	var b strings.Builder
	b.Grow(len(f.Prefix) + len("{period}-{seq:19:62}"))
	b.WriteString(f.Prefix)
	if periodic {
		b.WriteString("{period}-")
	}
	r := radixOf(f)
	switch {
	case r == leaf.Radix10 && f.Width == 0:
		b.WriteString("{seq}")
	case r == leaf.Radix10:
		b.WriteString("{seq:" + strconv.Itoa(f.Width) + "}")
	default:
		b.WriteString("{seq:" + strconv.Itoa(f.Width) + ":" + strconv.Itoa(r) + "}")
	}
	return b.String()
}

// ParseSpecFor is ParseSpec for a tag whose period is period: a spec with
// {period} is refused for a tag without one, and a spec without it for a
// periodic tag, whose IDs always carry the period (each period restarts the
// sequence, so the period is what tells its IDs apart).
func ParseSpecFor(spec string, period leaf.Period) (leaf.IDFormat, error) {
	f, periodic, err := ParseSpec(spec)
	if err != nil {
		return leaf.IDFormat{}, err
	}
	switch {
	case period != leaf.PeriodNone && period != leaf.PeriodDay && period != leaf.PeriodMonth && period != leaf.PeriodYear:
		return leaf.IDFormat{}, fmt.Errorf("%w: period %q, want day, month or year (or none)", leaf.ErrInvalidArgument, truncate(string(period), 20))
	case periodic && period == leaf.PeriodNone:
		return leaf.IDFormat{}, fmt.Errorf("%w: format spec %q has {period}, but the tag has no period", leaf.ErrInvalidArgument, spec)
	case !periodic && period != leaf.PeriodNone:
		return leaf.IDFormat{}, fmt.Errorf("%w: format spec %q lacks {period}, which a tag with a %s period needs before {seq}: e.g. %s", leaf.ErrInvalidArgument, spec, truncate(string(period), 20), Spec(f, true))
	}
	return f, nil
}

// ParseShape builds the shape of a tag about to be created from its
// settings as an operator gives them (the API's fields, the CLI's flags):
// period, time zone, format spec and opaque bits, each checked, and the
// tag's name checked against the shape (a periodic tag's is shorter). Errors
// wrap leaf.ErrInvalidArgument or leaf.ErrInvalidTag.
func ParseShape(tag, period, tz, spec string, opaqueBits int) (leaf.TagShape, error) {
	sh := leaf.TagShape{Period: leaf.Period(period), TimeZone: tz, OpaqueBits: opaqueBits}
	if err := Validate(sh); err != nil {
		return sh, err
	}
	if spec != "" {
		f, err := ParseSpecFor(spec, sh.Period)
		if err != nil {
			return sh, err
		}
		sh.Format = f
	}
	if err := Validate(sh); err != nil {
		return sh, err
	}
	return sh, ValidateTag(tag, sh)
}
