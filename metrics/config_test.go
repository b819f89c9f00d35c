package metrics_test

import (
	"errors"
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

// TestNewTakesInvalidAsOff: a Config Validate refuses still makes a
// scrape that works, its negative counts taken as none.
func TestNewTakesInvalidAsOff(t *testing.T) {
	m := metrics.New(metrics.Config{Segment: &fakeSegment{}, TopTags: -5, DegradedTags: -1, LowBuffer: -time.Second})
	if text := scrapeText(t, m); !strings.Contains(text, "leaf_build_info") {
		t.Errorf("scrape without leaf_build_info:\n%s", text)
	}
}
