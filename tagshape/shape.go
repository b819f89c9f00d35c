package tagshape

import (
	"fmt"
	"time"

	"github.com/leafgo/leaf"
)

// Validate checks a shape about to be stored: a known period, a time zone
// the system knows (for a periodic tag only), a format whose prefix is made
// of tag bytes, opaque bits in range and a key check only with them. Errors
// wrap leaf.ErrInvalidArgument.
func Validate(s leaf.TagShape) error {
	switch s.Period {
	case leaf.PeriodNone:
		if s.TimeZone != "" {
			return fmt.Errorf("%w: a time zone (%q) is for periodic tags only", leaf.ErrInvalidArgument, truncate(s.TimeZone, 40))
		}
	case leaf.PeriodDay, leaf.PeriodMonth, leaf.PeriodYear:
		if s.TimeZone != "" {
			if _, err := time.LoadLocation(s.TimeZone); err != nil {
				return fmt.Errorf("%w: time zone %q: %v", leaf.ErrInvalidArgument, truncate(s.TimeZone, 40), err)
			}
		}
	default:
		return fmt.Errorf("%w: period %q, want day, month or year", leaf.ErrInvalidArgument, truncate(string(s.Period), 20))
	}
	f := s.Format
	if len(f.Prefix) > leaf.MaxFormatPrefix {
		return fmt.Errorf("%w: format prefix is %d bytes, at most %d", leaf.ErrInvalidArgument, len(f.Prefix), leaf.MaxFormatPrefix)
	}
	for i := 0; i < len(f.Prefix); i++ {
		if !leaf.IsTagByte(f.Prefix[i]) {
			return fmt.Errorf("%w: format prefix %q has byte %#02x at offset %d; allowed: A-Z a-z 0-9 . _ : -", leaf.ErrInvalidArgument, truncate(f.Prefix, 40), f.Prefix[i], i)
		}
	}
	if f.Width < 0 || f.Width > 19 {
		return fmt.Errorf("%w: format width %d, want 1..19 (or 0: as many digits as needed)", leaf.ErrInvalidArgument, f.Width)
	}
	switch f.Radix {
	case 0, leaf.Radix10, leaf.Radix36, leaf.Radix62:
	default:
		return fmt.Errorf("%w: format radix %d, want 10, 36 or 62", leaf.ErrInvalidArgument, f.Radix)
	}
	if s.OpaqueBits != 0 && (s.OpaqueBits < leaf.MinOpaqueBits || s.OpaqueBits > leaf.MaxOpaqueBits) {
		return fmt.Errorf("%w: opaque bits %d, want %d..%d (or 0: plain)", leaf.ErrInvalidArgument, s.OpaqueBits, leaf.MinOpaqueBits, leaf.MaxOpaqueBits)
	}
	if s.OpaqueBits == 0 && s.KeyCheck != "" {
		return fmt.Errorf("%w: a key check without opaque bits", leaf.ErrInvalidArgument)
	}
	return nil
}
