package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckSnowflakeLifetime(t *testing.T) {
	now := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		set     func(*Snowflake)
		origins Origins
		want    string // "" for no error
	}{
		{"Leaf's layout", func(*Snowflake) {}, nil, ""},
		{"30 time bits", func(s *Snowflake) { s.TimeBits = 30 }, Origins{"snowflake.time_bits": "LEAF_SNOWFLAKE_TIME_BITS"},
			"snowflake.time_bits (from LEAF_SNOWFLAKE_TIME_BITS): layout 30/10/12 bits, epoch 2010-11-04T01:42:54.657Z runs out at 2010-11-16T"},
		{"epoch in the future", func(s *Snowflake) { s.Epoch = int(now.Add(time.Minute).UnixMilli()) }, Origins{"snowflake.epoch": "leaf.yml:3"},
			"snowflake.epoch (from leaf.yml:3): 2026-08-01T00:01:00.000Z is in the future (the clock reads 2026-08-01T00:00:00.000Z)"},
		{"epoch now", func(s *Snowflake) { s.Epoch = int(now.UnixMilli()) }, nil, ""},
		// Left to Validate, which names the widths.
		{"invalid layout", func(s *Snowflake) { s.TimeBits = 60 }, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c.Snowflake)
			err := c.CheckSnowflakeLifetime(now, tt.origins)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckSnowflakeLifetime = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckSnowflakeLifetime = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	// The limit itself: a layout ending exactly SnowflakeLifetime from now
	// passes, a millisecond less does not.
	end := now.Add(SnowflakeLifetime).UnixMilli()
	for _, tc := range []struct {
		end  int64
		okay bool
	}{{end, true}, {end - 1, false}} {
		c := Default()
		c.Snowflake.TimeBits = 39
		c.Snowflake.Epoch = int(tc.end - 1<<39)
		if l := c.Snowflake.Layout(); l.Validate() != nil || l.End() != tc.end {
			t.Fatalf("layout %v: %v, end %d", l, l.Validate(), l.End())
		}
		if err := c.CheckSnowflakeLifetime(now, nil); (err == nil) != tc.okay {
			t.Errorf("layout ending %d ms after now: %v, want ok %v", tc.end-now.UnixMilli(), err, tc.okay)
		}
	}
}
