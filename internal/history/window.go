package history

import (
	"math"
	"strconv"
)

// Window is the samples from one sample on, as /v2/status/history answers
// them: every series has one value per sample, in TimeMS's order, null
// where there is none (before the first rate could be taken, no request in
// that second, a tag idle or not yet among the busiest). A mode that is
// off, or latency that is not measured, is left out.
type Window struct {
	IntervalMS int64 `json:"interval_ms"`
	// First is the number of the first sample here, Next that of the
	// sample to come: asked again with since=Next, the answer holds only
	// the samples taken in between.
	First uint64 `json:"first"`
	Next  uint64 `json:"next"`
	// TimeMS is each sample's time, Unix milliseconds.
	TimeMS    []int64          `json:"time_ms"`
	Segment   *SegmentSeries   `json:"segment,omitempty"`
	Snowflake *SnowflakeSeries `json:"snowflake,omitempty"`
	Latency   *LatencySeries   `json:"latency,omitempty"`
	// Tags are the tags with series, at most MaxTagSeries, each in the
	// same place as long as it keeps its slot.
	Tags []TagSeries `json:"tags,omitempty"`
}

// SegmentSeries are the segment mode's IDs/s over all tags.
type SegmentSeries struct {
	IDsPerSec Series `json:"ids_per_sec"`
}

// SnowflakeSeries are the snowflake worker's IDs/s and high-water lead:
// the persisted mark minus the sample's time, in seconds (negative: IDs
// wait for a heartbeat).
type SnowflakeSeries struct {
	IDsPerSec Series `json:"ids_per_sec"`
	LeadS     Series `json:"lead_s"`
}

// LatencySeries are the median and 99th percentile of the ID requests
// served in each second, in milliseconds, estimated from the latency
// histogram's buckets.
type LatencySeries struct {
	P50MS Series `json:"p50_ms"`
	P99MS Series `json:"p99_ms"`
}

// TagSeries are one tag's IDs/s, IDs left in its two buffers, and how long
// they last at the tag's rate if no range arrives (null when idle).
type TagSeries struct {
	Tag         string `json:"tag"`
	IDsPerSec   Series `json:"ids_per_sec"`
	Remaining   Series `json:"remaining"`
	SecondsLeft Series `json:"seconds_left"`
}

// Series is one value per sample; NaN, written null, is no value.
type Series []float64

// MarshalJSON writes the values compactly: whole numbers from 100 up,
// three significant digits below.
func (s Series) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+6*len(s))
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			b = append(b, "null"...)
		case math.Abs(v) >= 100:
			b = strconv.AppendFloat(b, math.Round(v), 'f', -1, 64)
		default:
			b = strconv.AppendFloat(b, v, 'g', 3, 64)
		}
	}
	return append(b, ']'), nil
}

// Window returns the samples from sample since on; since 0, or one no
// longer kept or not yet taken, returns every sample kept.
func (h *History) Window(since uint64) Window {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.next - min(h.next, Samples)
	if since > first && since <= h.next {
		first = since
	}
	n := int(h.next - first)
	w := Window{IntervalMS: Interval.Milliseconds(), First: first, Next: h.next, TimeMS: make([]int64, n)}
	for k := range n {
		w.TimeMS[k] = h.timeMS[(first+uint64(k))%Samples]
	}
	series := func(ring *[Samples]float64) Series {
		s := make(Series, n)
		for k := range s {
			s[k] = ring[(first+uint64(k))%Samples]
		}
		return s
	}
	if h.cfg.Segment != nil {
		w.Segment = &SegmentSeries{IDsPerSec: series(&h.segRate)}
		w.Tags = []TagSeries{}
		for k := range h.tags {
			s := &h.tags[k]
			if s.tag == "" {
				break // slots are filled in order and never emptied
			}
			w.Tags = append(w.Tags, TagSeries{
				Tag:         s.tag,
				IDsPerSec:   series(&s.rate),
				Remaining:   series(&s.remaining),
				SecondsLeft: series(&s.untilDry),
			})
		}
	}
	if h.cfg.Snowflake != nil {
		w.Snowflake = &SnowflakeSeries{IDsPerSec: series(&h.snowRate), LeadS: series(&h.lead)}
	}
	if h.cfg.Latency != nil {
		w.Latency = &LatencySeries{P50MS: series(&h.p50), P99MS: series(&h.p99)}
	}
	return w
}
