package segment

import (
	"slices"
	"testing"
	"time"
)

// TestLoadHistogram: a load counts in the first bucket whose bound it does
// not exceed (a bound is inclusive, as Prometheus's le), a load above the
// last bound in none, and the status's counts are cumulative.
func TestLoadHistogram(t *testing.T) {
	if !slices.IsSorted(loadBuckets) || len(loadBuckets) == 0 {
		t.Fatalf("loadBuckets %v are not ascending", loadBuckets)
	}
	var b buffer
	if h := loadHistogram(b.loadLatency); h.Bounds != nil || h.Counts != nil {
		t.Fatalf("no load timed: %+v, want the zero histogram", h)
	}
	for _, d := range []time.Duration{0, time.Millisecond, time.Millisecond + 1, 3 * time.Millisecond, 10 * time.Second, time.Minute} {
		b.recordLoadLocked(d)
	}
	h := loadHistogram(b.loadLatency)
	want := map[time.Duration]uint64{time.Millisecond: 2, 2500 * time.Microsecond: 3, 5 * time.Millisecond: 4, 10 * time.Second: 5}
	var last uint64
	for i, le := range h.Bounds {
		if n, ok := want[le]; ok {
			last = n
		}
		if h.Counts[i] != last {
			t.Errorf("count at most %v = %d, want %d (histogram %+v)", le, h.Counts[i], last, h)
		}
	}
	if len(h.Counts) != len(loadBuckets) || !slices.Equal(h.Bounds, loadBuckets) {
		t.Fatalf("histogram %+v, want the bounds %v", h, loadBuckets)
	}
	if want := time.Minute + 10*time.Second + 5*time.Millisecond + 1; b.loadTime != want {
		t.Errorf("load time %v, want %v", b.loadTime, want)
	}
}
