// Package history keeps the server's last ten minutes in memory for the
// monitor page's charts: IDs/s per mode and for the busiest tags, the ID
// requests' latency (p50, p99), those tags' buffered IDs and time until
// dry, and the snowflake high-water lead.
//
// A sampler (Run) reads, once a second, what the server already keeps: the
// segment generator's totals and status, the snowflake worker's status and
// the request latency histogram of package metrics. Nothing is added to the
// request path. Memory is fixed: Samples samples of a fixed number of
// series, and at most MaxTagSeries tags with series of their own, however
// many tags pass through the busiest set (a newcomer takes the slot of the
// tag longest out of it).
package history

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/topn"
)

const (
	// Samples is how many samples are kept: ten minutes, one a second.
	Samples = 600
	// Interval is the time between two samples.
	Interval = time.Second
	// TopTags is how many of the busiest tags (by IDs/s, then IDs issued,
	// then name) are given series at each sample.
	TopTags = 5
	// MaxTagSeries bounds the tags with series: the TopTags busiest and
	// those that left the set most recently, so that a tag dropping in and
	// out of it keeps its line.
	MaxTagSeries = 2 * TopTags
)

// SegmentSource is what the sampler reads from the segment generator
// (*segment.Generator satisfies it).
type SegmentSource interface {
	// Totals are the counters over every tag since start; Issued never
	// goes down.
	Totals() leaf.SegmentTotals
	// Busiest reports, sorted by tag, the n busiest tags in use
	// (leaf.Busier) and those of also in use; not every tag's status,
	// which a sample every second could not afford with many tags in use.
	Busiest(n int, also ...string) []leaf.SegmentStatus
}

// WorkerSource is what the sampler reads from the snowflake generator
// (*snowflake.Generator satisfies it).
type WorkerSource interface {
	Status() leaf.WorkerStatus
}

// Config configures New. Leave a source nil (a nil interface, not a nil
// pointer in one) when its mode is off: its series are then left out.
type Config struct {
	Segment   SegmentSource
	Snowflake WorkerSource
	// Latency reads the request latency histogram into dst: one
	// cumulative count per LatencyBounds bound (the requests that took at
	// most that many seconds), then the count of all requests. Nil: no
	// latency series. (*metrics.Metrics).RequestLatency fits.
	Latency       func(dst []uint64) []uint64
	LatencyBounds []float64
	// Now is the clock of the samples and the high-water lead. Default:
	// time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults a zero field of Config takes; the
// sources have none (a nil one has no series), and New refuses nothing.
func DefaultConfig() Config { return Config{Now: time.Now} }

// History is the bounded record. It is safe for concurrent use: Run writes
// it while Window reads it.
type History struct {
	cfg Config

	// The sampler's own state, touched by Run's goroutine only.
	prev         time.Time // the previous sample's time; zero before the first
	segIssued    uint64
	snowIssued   uint64
	lat, prevLat []uint64

	mu   sync.Mutex
	next uint64 // samples taken; sample s is at s % Samples
	// The series, rings of Samples; NaN where there is no value.
	timeMS            [Samples]int64
	segRate, snowRate [Samples]float64
	lead, p50, p99    [Samples]float64
	tags              [MaxTagSeries]tagSeries
}

// tagSeries is one tag's slot. A slot, once given a tag, keeps one until a
// newcomer to the busiest tags takes it over.
type tagSeries struct {
	tag string
	// lastTop is the last sample at which the tag was among the busiest:
	// the slot longest out of the set is the first taken over.
	lastTop uint64
	// issued is the tag's count at sample seen, when counted, for the
	// next IDs/s.
	issued, seen uint64
	counted      bool
	// The tag's rings; NaN before it had the slot.
	rate, remaining, untilDry [Samples]float64
}

// New makes an empty history; Run fills it.
func New(cfg Config) *History {
	if cfg.Now == nil {
		cfg.Now = DefaultConfig().Now
	}
	if cfg.Latency != nil && len(cfg.LatencyBounds) == 0 {
		cfg.Latency = nil
	}
	return &History{cfg: cfg}
}

// Run samples at once and then every Interval until ctx is done, and
// returns when it has stopped: start it once, with the server, and cancel
// ctx to stop it.
func (h *History) Run(ctx context.Context) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		h.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one sample. The generators are read outside the lock, so a
// reader of Window never waits for them.
func (h *History) sample() {
	now := h.cfg.Now()
	var dt float64 // seconds since the previous sample; 0: none
	if !h.prev.IsZero() {
		dt = now.Sub(h.prev).Seconds()
	}
	h.prev = now
	perSec := func(cur uint64, prev *uint64) float64 {
		last := *prev
		*prev = cur
		if dt <= 0 || cur < last {
			return math.NaN()
		}
		return float64(cur-last) / dt
	}

	segRate, snowRate, lead := math.NaN(), math.NaN(), math.NaN()
	var statuses []leaf.SegmentStatus
	var top []int
	if h.cfg.Segment != nil {
		segRate = perSec(h.cfg.Segment.Totals().Issued, &h.segIssued)
		h.mu.Lock()
		var slotted []string
		for _, s := range h.tags {
			if s.tag != "" {
				slotted = append(slotted, s.tag)
			}
		}
		h.mu.Unlock()
		statuses = h.cfg.Segment.Busiest(TopTags, slotted...)
		top = busiest(statuses, TopTags)
	}
	if h.cfg.Snowflake != nil {
		st := h.cfg.Snowflake.Status()
		snowRate = perSec(st.Issued, &h.snowIssued)
		// A zero mark is none persisted yet, not a lead of minus the epoch.
		if st.HighWater != 0 {
			lead = float64(st.HighWater-now.UnixMilli()) / 1000
		}
	}
	p50, p99 := math.NaN(), math.NaN()
	if h.cfg.Latency != nil {
		h.lat = h.cfg.Latency(h.lat)
		p50, p99 = h.quantiles()
		h.lat, h.prevLat = h.prevLat, h.lat
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	seq := h.next
	i := seq % Samples
	h.timeMS[i] = now.UnixMilli()
	h.segRate[i], h.snowRate[i], h.lead[i] = segRate, snowRate, lead
	h.p50[i], h.p99[i] = p50, p99
	h.sampleTags(seq, dt, statuses, top)
	h.next++
}

// sampleTags gives slots to the busiest tags, top (indexes into
// statuses), and records every slot's tag at sample seq. h.mu is held.
func (h *History) sampleTags(seq uint64, dt float64, statuses []leaf.SegmentStatus, top []int) {
	for _, j := range top {
		tag := statuses[j].Tag
		k := slices.IndexFunc(h.tags[:], func(s tagSeries) bool { return s.tag == tag })
		if k < 0 {
			k = h.slotFor(seq, statuses, top)
			s := &h.tags[k]
			s.tag, s.counted = tag, false
			for _, ring := range []*[Samples]float64{&s.rate, &s.remaining, &s.untilDry} {
				for r := range ring {
					ring[r] = math.NaN()
				}
			}
		}
		h.tags[k].lastTop = seq
	}
	i := seq % Samples
	for k := range h.tags {
		s := &h.tags[k]
		if s.tag == "" {
			continue
		}
		s.rate[i], s.remaining[i], s.untilDry[i] = math.NaN(), math.NaN(), math.NaN()
		j, ok := slices.BinarySearchFunc(statuses, s.tag, func(st leaf.SegmentStatus, tag string) int {
			return strings.Compare(st.Tag, tag)
		})
		if !ok {
			continue // dropped as idle, or deleted: a gap
		}
		st := &statuses[j]
		if s.counted && s.seen+1 == seq && st.Issued >= s.issued && dt > 0 {
			s.rate[i] = float64(st.Issued-s.issued) / dt
		} else {
			// New to the slot, back after a gap, or its counters restarted:
			// the generator's own rate over its last 10 seconds.
			s.rate[i] = st.Rate
		}
		s.issued, s.seen, s.counted = st.Issued, seq, true
		s.remaining[i] = float64(st.Remaining)
		if st.SecondsLeft >= 0 {
			s.untilDry[i] = st.SecondsLeft
		}
	}
}

// slotFor picks the slot for a tag new to the busiest: a free one, else
// the one whose tag has been out of the busiest the longest. One exists:
// the busiest are at most TopTags < MaxTagSeries, and the newcomer holds
// no slot.
func (h *History) slotFor(seq uint64, statuses []leaf.SegmentStatus, top []int) int {
	best := -1
	for k := range h.tags {
		s := &h.tags[k]
		if s.tag == "" {
			return k
		}
		if s.lastTop == seq || slices.ContainsFunc(top, func(j int) bool { return statuses[j].Tag == s.tag }) {
			continue
		}
		if best < 0 || s.lastTop < h.tags[best].lastTop {
			best = k
		}
	}
	return best
}

// busiest returns the indexes of the n busiest tags of statuses that have
// issued IDs since start, busiest first.
func busiest(statuses []leaf.SegmentStatus, n int) []int {
	top := topn.New(n, func(a, b int) bool { return leaf.Busier(&statuses[a], &statuses[b]) })
	for i := range statuses {
		if st := &statuses[i]; st.Issued != 0 || st.Rate != 0 {
			top.Offer(i)
		}
	}
	return top.Best()
}

// quantiles estimates, in milliseconds, the median and 99th percentile of
// the requests served between the previous latency read (prevLat) and the
// last (lat); NaN when there were none, or no previous read.
func (h *History) quantiles() (p50, p99 float64) {
	n := len(h.cfg.LatencyBounds) + 1
	if len(h.lat) != n || len(h.prevLat) != n || h.lat[n-1] <= h.prevLat[n-1] {
		return math.NaN(), math.NaN()
	}
	delta := make([]uint64, n)
	for i := range delta {
		if h.lat[i] < h.prevLat[i] {
			return math.NaN(), math.NaN() // the histogram restarted
		}
		delta[i] = h.lat[i] - h.prevLat[i]
	}
	return 1000 * quantile(0.5, h.cfg.LatencyBounds, delta), 1000 * quantile(0.99, h.cfg.LatencyBounds, delta)
}

// quantile estimates the q-quantile of a histogram as Prometheus's
// histogram_quantile does: linearly within the bucket that holds it.
// cumulative has one count per bound and then the count of all, which
// must be positive. A quantile beyond the last bound is that bound.
func quantile(q float64, bounds []float64, cumulative []uint64) float64 {
	total := cumulative[len(bounds)]
	rank := q * float64(total)
	i := 0
	for i < len(bounds) && float64(cumulative[i]) < rank {
		i++
	}
	if i == len(bounds) {
		return bounds[len(bounds)-1]
	}
	lower, below := 0.0, uint64(0)
	if i > 0 {
		lower, below = bounds[i-1], cumulative[i-1]
	}
	in := cumulative[i] - below
	if in == 0 {
		return bounds[i]
	}
	return lower + (bounds[i]-lower)*(rank-float64(below))/float64(in)
}
