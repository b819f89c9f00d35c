package config

import (
	"errors"
	"fmt"

	"github.com/leafgo/leaf/snowflake"
)

// resolveLayout applies snowflake.layout once every source is read. A preset
// fills epoch and the *_bits keys; a source may set them too, but only to
// the preset's own values: a number that differs is refused rather than
// either one silently winning, since each is a choice of what every ID will
// look like for decades. With no layout set anywhere, the numbers decide,
// and the layout is named after them (custom unless they are a preset's).
func (c *Config) resolveLayout(origin Origins) error {
	s := &c.Snowflake
	if !origin.Set("snowflake.layout") {
		for _, k := range layoutKeys {
			if origin.Set(k) {
				s.LayoutName = s.Layout().Name()
				break
			}
		}
		return nil
	}
	preset, err := snowflake.Preset(s.LayoutName)
	if err != nil {
		return nil // custom: the numbers decide
	}
	want := layoutNumbers(preset)
	var errs []error
	for i, k := range layoutKeys {
		if got := layoutNumbers(s.Layout())[i]; origin.Set(k) && got != want[i] {
			errs = append(errs, fmt.Errorf("%w: %s (from %s): %d differs from the %s layout's %d (snowflake.layout from %s): remove %s, or set snowflake.layout custom to lay IDs out by the numbers",
				ErrInvalid, k, origin[k], got, s.LayoutName, want[i], origin["snowflake.layout"], k))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.setLayout(preset)
	return nil
}

// layoutNumbers are the values of layoutKeys, in that order.
func layoutNumbers(l snowflake.Layout) [4]int64 {
	return [4]int64{l.Epoch, int64(l.TimeBits), int64(l.WorkerBits), int64(l.SequenceBits)}
}

func (s *Snowflake) setLayout(l snowflake.Layout) {
	s.Epoch, s.TimeBits, s.WorkerBits, s.SeqBits = int(l.Epoch), l.TimeBits, l.WorkerBits, l.SequenceBits
}

// validateLayoutName checks that a preset named by snowflake.layout is what
// the numbers say: Load makes it so, a Config built in code may not.
func (s Snowflake) validateLayoutName(bad func(path, format string, args ...any)) {
	preset, err := snowflake.Preset(s.LayoutName)
	if err != nil {
		return // custom, or a name the enum check reports
	}
	if l := s.Layout(); l != preset {
		bad("snowflake.layout", "%s is %s, but epoch and the *_bits keys say %s: set them to the preset's values, or the layout to custom",
			s.LayoutName, preset, l)
	}
}
