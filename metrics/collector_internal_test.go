package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leafgo/leaf"
)

// TestAddLatency: a source's histogram carries over exactly where its
// bounds are the exported ones, and conservatively where they are not.
func TestAddLatency(t *testing.T) {
	ms := time.Millisecond
	same := make([]uint64, len(loadBuckets))
	for i := range same {
		same[i] = uint64(10 * (i + 1))
	}
	for _, c := range []struct {
		name string
		h    leaf.Histogram
		want []uint64 // by loadBuckets: 1ms 2.5ms 5ms 10ms 25ms 50ms 100ms 250ms 500ms 1s 2.5s 5s 10s
	}{
		{"nothing timed", leaf.Histogram{}, make([]uint64, len(loadBuckets))},
		{"same bounds", leaf.Histogram{Bounds: loadBuckets[:], Counts: same}, same},
		{"coarser", leaf.Histogram{Bounds: []time.Duration{2 * ms, 7 * ms, 20 * time.Second}, Counts: []uint64{1, 3, 5}},
			[]uint64{0, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
		{"finer", leaf.Histogram{Bounds: []time.Duration{ms / 2, ms, 3 * ms / 2, 2 * ms, 5 * ms}, Counts: []uint64{1, 2, 3, 4, 5}},
			[]uint64{2, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}},
		{"counts cut short", leaf.Histogram{Bounds: loadBuckets[:], Counts: []uint64{1, 2}},
			[]uint64{1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
	} {
		var got [len(loadBuckets)]uint64
		addLatency(&got, c.h)
		if !slices.Equal(got[:], c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
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
