package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leafgo/leaf"
)

// countingSource reports a few tags in use and more known.
type countingSource struct {
	statuses []leaf.SegmentStatus
	known    int
}

func (s countingSource) Status() []leaf.SegmentStatus { return s.statuses }
func (s countingSource) Degraded() []string           { return nil }
func (s countingSource) Totals() leaf.SegmentTotals   { return leaf.SegmentTotals{Known: s.known} }

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
