package metrics

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// countingSource reports a few tags in use and more known.
type countingSource struct {
	statuses []leaf.SegmentStatus
	known    int
}

func (s countingSource) Status() []leaf.SegmentStatus { return s.statuses }
func (s countingSource) Degraded() []string           { return nil }
func (s countingSource) TagCount() int                { return s.known }

// Tags known but never asked for (the generator keeps no state for them)
// count as unloaded, so the states add up to every tag known.
func TestUnloadedCountsKnownNames(t *testing.T) {
	src := countingSource{statuses: []leaf.SegmentStatus{
		{Tag: "a", InitOK: true, Rate: 5, SecondsLeft: 100},
		{Tag: "b", InitOK: true, SecondsLeft: -1},
	}, known: 100000}
	c := newCollector(Config{Segment: src, TopTags: 20, DegradedTags: 100, Now: time.Now})
	ch := make(chan prometheus.Metric, 1000)
	c.Collect(ch)
	close(ch)
	var total, unloaded float64
	for m := range ch {
		if !strings.HasPrefix(m.Desc().String(), `Desc{fqName: "leaf_segment_tags"`) {
			continue
		}
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		total += pb.GetGauge().GetValue()
		for _, l := range pb.GetLabel() {
			if l.GetName() == "state" && l.GetValue() == "unloaded" {
				unloaded = pb.GetGauge().GetValue()
			}
		}
	}
	if total != 100000 || unloaded != 99998 {
		t.Fatalf("leaf_segment_tags: %v in all, %v unloaded; want 100000 and 99998", total, unloaded)
	}
}
