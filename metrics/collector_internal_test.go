package metrics

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/leafgo/leaf"
)

// tagCounters holds the load-time buckets in an array; its length must be
// the root package's bucket count, or buckets would be dropped or read as 0.
func TestLoadBucketsCount(t *testing.T) {
	if len(leaf.SegmentLoadBuckets) != numLoadBuckets {
		t.Fatalf("numLoadBuckets = %d, len(leaf.SegmentLoadBuckets) = %d", numLoadBuckets, len(leaf.SegmentLoadBuckets))
	}
}

// TestBoundedHeap checks the heap's pick against a full sort, with ties.
func TestBoundedHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, k int }{{0, 5}, {3, 5}, {5, 5}, {1000, 1}, {1000, 20}, {1000, 0}, {50, 49}} {
		vals := make([]int, c.n)
		for i := range vals {
			vals[i] = rng.IntN(30) // many ties, broken by index
		}
		better := func(a, b int) bool { return vals[a] > vals[b] || vals[a] == vals[b] && a < b }
		h := boundedHeap{k: c.k, below: func(a, b int) bool { return better(b, a) }}
		all := make([]int, c.n)
		for i := range all {
			all[i] = i
			h.offer(i)
		}
		slices.SortFunc(all, func(a, b int) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		want := all[:min(c.k, c.n)]
		slices.Sort(want)
		got := slices.Sorted(slices.Values(h.idx))
		if !slices.Equal(got, want) {
			t.Errorf("n %d k %d: kept %v, want %v", c.n, c.k, got, want)
		}
	}
}
