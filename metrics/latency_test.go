package metrics_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf/metrics"
)

// TestRequestLatency: the cumulative counts sum the routes asked for, per
// bucket, and the last is the count of all; a second read reuses dst.
func TestRequestLatency(t *testing.T) {
	m := metrics.New(metrics.Config{})
	bounds := metrics.RequestBuckets()
	idx := func(le float64) int { return slices.Index(bounds, le) }
	if idx(0.001) < 0 || idx(0.1) < 0 || idx(0.0005) < 0 {
		t.Fatalf("buckets %v lack a bound the test uses", bounds)
	}
	m.ObserveRequest("/api/segment/get/{key}", 200, 300*time.Microsecond) // le 0.0005
	m.ObserveRequest("/api/segment/get/{key}", 200, 800*time.Microsecond) // le 0.001
	m.ObserveRequest("/api/segment/get/{key}", 503, 80*time.Millisecond)  // le 0.1
	m.ObserveRequest("/v2/snowflake", 200, 10*time.Second)                // beyond every bound
	m.ObserveRequest("/v2/status/summary", 200, 400*time.Microsecond)     // not an ID route

	ids := func(route string) bool {
		return strings.HasPrefix(route, "/api/") || strings.HasPrefix(route, "/v2/snowflake")
	}
	for _, tc := range []struct {
		name    string
		include func(string) bool
		want    map[float64]uint64 // cumulative counts at some bounds
		all     uint64
	}{
		{"ID routes", ids, map[float64]uint64{0.0005: 1, 0.001: 2, 0.1: 3, bounds[len(bounds)-1]: 3}, 4},
		{"every route", nil, map[float64]uint64{0.0005: 2, 0.001: 3, 0.1: 4, bounds[len(bounds)-1]: 4}, 5},
		{"none", func(string) bool { return false }, map[float64]uint64{0.1: 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]uint64, 3, 40)
			dst[0] = 99 // stale contents must not leak into the sum
			got := m.RequestLatency(tc.include, dst)
			if len(got) != len(bounds)+1 {
				t.Fatalf("%d counts, want %d", len(got), len(bounds)+1)
			}
			if &got[0] != &dst[0] {
				t.Errorf("dst was not reused")
			}
			for le, n := range tc.want {
				if got[idx(le)] != n {
					t.Errorf("le %g: %d, want %d (all %v)", le, got[idx(le)], n, got)
				}
			}
			if got[len(bounds)] != tc.all {
				t.Errorf("count of all: %d, want %d", got[len(bounds)], tc.all)
			}
		})
	}
}
