package segment

import (
	"slices"
	"time"

	"github.com/leafgo/leaf"
)

// loadBuckets are the upper bounds the generator counts its reserve calls'
// durations by (leaf.SegmentStatus.LoadLatency, Totals.LoadLatency): from a
// local SQLite commit, well under a millisecond, to a database that takes
// seconds to answer. Clipped, so that an append to a status's copy cannot
// write into it.
var loadBuckets = slices.Clip([]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
})

// loadHistogram turns per-bucket counts of loadBuckets into the cumulative
// histogram a status reports; nil (nothing timed) is the zero histogram.
func loadHistogram(perBucket []uint64) leaf.Histogram {
	if perBucket == nil {
		return leaf.Histogram{}
	}
	h := leaf.Histogram{Bounds: loadBuckets, Counts: make([]uint64, len(perBucket))}
	var sum uint64
	for i, n := range perBucket {
		sum += n
		h.Counts[i] = sum
	}
	return h
}
