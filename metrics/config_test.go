package metrics_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/metrics"
)

func TestConfigValidate(t *testing.T) {
	if err := metrics.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	for name, c := range map[string]metrics.Config{
		"negative top":      {TopTags: -1},
		"negative degraded": {DegradedTags: -1},
		"negative low":      {LowBuffer: -time.Second},
		"bad tag":           {Tags: []string{"orders", strings.Repeat("x", 200)}},
		"empty tag":         {Tags: []string{""}},
	} {
		if err := c.Validate(); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("%s: Validate = %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestNewTakesInvalidAsOff: a negative count or LowBuffer, which
// Validate refuses, exports what 0 exports: per-tag series for the tag
// soonest dry alone, no tag counted as low on buffers.
func TestNewTakesInvalidAsOff(t *testing.T) {
	seg := &fakeSegment{status: []leaf.SegmentStatus{
		{Tag: "orders", InitOK: true, Issued: 1000, Rate: 100, SecondsLeft: 1},
		{Tag: "broken", InitOK: true, LoadError: "connection refused", SecondsLeft: -1},
	}, degraded: []string{"broken"}}
	series := func(c metrics.Config) []string {
		c.Segment = seg
		var out []string
		for _, line := range strings.Split(scrapeText(t, metrics.New(c)), "\n") {
			if strings.HasPrefix(line, "leaf_segment_") {
				out = append(out, line)
			}
		}
		return out
	}
	has := func(lines []string, sub string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, sub) })
	}
	off := series(metrics.Config{})
	if !slices.Contains(off, `leaf_segment_tags{state="load_error"} 1`) || has(off, `tag="broken"`) {
		t.Fatalf("with 0: want the states counted and no series of the degraded tag:\n%s", strings.Join(off, "\n"))
	}
	on := series(metrics.Config{TopTags: 5, DegradedTags: 5, LowBuffer: 5 * time.Second})
	if !has(on, `tag="broken"`) || !slices.Contains(on, `leaf_segment_tags{state="low_buffer"} 1`) {
		t.Fatalf("with counts and LowBuffer set: want the degraded tag's series and orders low on buffers:\n%s", strings.Join(on, "\n"))
	}
	if neg := series(metrics.Config{TopTags: -5, DegradedTags: -1, LowBuffer: -time.Second}); !slices.Equal(neg, off) {
		t.Errorf("negative counts and LowBuffer export\n%s\nwant what 0 exports\n%s", strings.Join(neg, "\n"), strings.Join(off, "\n"))
	}
}
