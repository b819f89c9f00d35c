package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/history"
)

// segmentSource is a segment generator's counters, set by the test: the
// sampler's rates and choices are then exact.
type segmentSource struct {
	mu     sync.Mutex
	tags   map[string]*leaf.SegmentStatus
	issued uint64 // over all tags, dropped ones included
}

func newSegmentSource() *segmentSource {
	return &segmentSource{tags: map[string]*leaf.SegmentStatus{}}
}

// issue adds n IDs to tag at the given rate (the generator's 10-second
// rate, which ranks the busiest), with left IDs buffered.
func (s *segmentSource) issue(tag string, n uint64, rate float64, left int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tags[tag]
	if st == nil {
		st = &leaf.SegmentStatus{Tag: tag, InitOK: true}
		s.tags[tag] = st
	}
	st.Issued += n
	s.issued += n
	st.Rate, st.Remaining, st.SecondsLeft = rate, left, -1
	if rate > 0 {
		st.SecondsLeft = float64(left) / rate
	}
}

// drop forgets tag's state, as the generator does with an idle tag.
func (s *segmentSource) drop(tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tags, tag)
}

func (s *segmentSource) Totals() leaf.SegmentTotals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return leaf.SegmentTotals{Issued: s.issued, Active: len(s.tags)}
}

func (s *segmentSource) Busiest(n int, also ...string) []leaf.SegmentStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]leaf.SegmentStatus, 0, len(s.tags))
	for _, st := range s.tags {
		all = append(all, *st)
	}
	slices.SortFunc(all, func(a, b leaf.SegmentStatus) int {
		if leaf.Busier(&a, &b) {
			return -1
		}
		return 1
	})
	var out []leaf.SegmentStatus
	for i, st := range all {
		if i < n || slices.Contains(also, st.Tag) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b leaf.SegmentStatus) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

type workerSource struct {
	mu sync.Mutex
	st leaf.WorkerStatus
}

func (w *workerSource) set(f func(*leaf.WorkerStatus)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.st)
}

func (w *workerSource) Status() leaf.WorkerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// latencySource is a cumulative latency histogram the test fills.
type latencySource struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64 // per bound, then all
}

// observe records n requests of d seconds.
func (l *latencySource) observe(d float64, n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, le := range l.bounds {
		if d <= le {
			l.counts[i] += n
		}
	}
	l.counts[len(l.bounds)] += n
}

func (l *latencySource) read(dst []uint64) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(dst[:0], l.counts...)
}

// run starts h's sampler in the bubble and stops it at the test's end;
// when it returns, the first sample is taken. step lets one Interval pass
// and returns once the sample it brings is taken.
func run(t *testing.T, h *history.History) (step func(n int)) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done // Run returned: no sampler left behind
	})
	synctest.Wait()
	return func(n int) {
		for range n {
			time.Sleep(history.Interval)
			synctest.Wait()
		}
	}
}

// values turns a series into comparable text, four significant digits,
// NaN as "-".
func values(s history.Series) string {
	var b strings.Builder
	for i, v := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		if math.IsNaN(v) {
			b.WriteByte('-')
		} else {
			fmt.Fprintf(&b, "%.4g", v)
		}
	}
	return b.String()
}

// TestRates: IDs/s per mode are the counters' differences over the
// seconds between samples, none for the first; the lead is the mark minus
// the sample's time; samples are a second apart.
func TestRates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seg := newSegmentSource()
		snow := &workerSource{}
		h := history.New(history.Config{Segment: seg, Snowflake: snow})
		step := run(t, h)
		for i := range 3 {
			seg.issue("orders", uint64(100*(i+1)), 10, 1000)
			snow.set(func(st *leaf.WorkerStatus) {
				st.Issued += 7
				st.HighWater = time.Now().Add(time.Duration(i+2) * time.Second).UnixMilli()
			})
			step(1)
		}
		w := h.Window(0)
		if w.First != 0 || w.Next != 4 || len(w.TimeMS) != 4 || w.IntervalMS != 1000 {
			t.Fatalf("window: first %d, next %d, %d times, interval %d ms", w.First, w.Next, len(w.TimeMS), w.IntervalMS)
		}
		for i := 1; i < len(w.TimeMS); i++ {
			if d := w.TimeMS[i] - w.TimeMS[i-1]; d != 1000 {
				t.Errorf("samples %d ms apart, want 1000", d)
			}
		}
		for name, tc := range map[string]struct {
			got  history.Series
			want string
		}{
			"segment IDs/s":   {w.Segment.IDsPerSec, "- 100 200 300"},
			"snowflake IDs/s": {w.Snowflake.IDsPerSec, "- 7 7 7"},
			// The mark was set one second before each sample, 2, 3, 4 s
			// ahead of that.
			"lead": {w.Snowflake.LeadS, "- 1 2 3"},
		} {
			if got := values(tc.got); got != tc.want {
				t.Errorf("%s: %s, want %s", name, got, tc.want)
			}
		}
		if w.Latency != nil {
			t.Errorf("latency series without a latency source")
		}
		if len(w.Tags) != 1 || w.Tags[0].Tag != "orders" {
			t.Fatalf("tags: %+v", w.Tags)
		}
		// First seen at the second sample: the generator's rate, then the
		// differences.
		if got := values(w.Tags[0].IDsPerSec); got != "- 10 200 300" {
			t.Errorf("orders IDs/s: %s", got)
		}
		if got := values(w.Tags[0].Remaining); got != "- 1000 1000 1000" {
			t.Errorf("orders remaining: %s", got)
		}
		if got := values(w.Tags[0].SecondsLeft); got != "- 100 100 100" {
			t.Errorf("orders until dry: %s", got)
		}
	})
}

// TestModesOff: a mode that is off has no series, and sampling it reads
// nothing.
func TestModesOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := history.New(history.Config{Snowflake: &workerSource{}})
		run(t, h)(2)
		w := h.Window(0)
		if w.Segment != nil || w.Tags != nil || w.Latency != nil || w.Snowflake == nil {
			t.Errorf("snowflake only: %+v", w)
		}
		// No mark persisted yet: no lead, rather than minus the epoch.
		if got := values(w.Snowflake.LeadS); got != "- - -" {
			t.Errorf("lead without a mark: %s", got)
		}
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, `"segment"`) || strings.Contains(s, `"tags"`) || strings.Contains(s, `"latency"`) {
			t.Errorf("JSON of a snowflake-only history: %s", s)
		}
	})
}

// TestBounded: the history keeps the last Samples samples, asked from any
// point, and a request for samples since a point answers only those after
// it.
func TestBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seg := newSegmentSource()
		h := history.New(history.Config{Segment: seg})
		step := run(t, h)
		start := time.Now().UnixMilli()
		step(history.Samples + 99) // 700 samples
		for _, tc := range []struct {
			since       uint64
			first, size uint64
		}{
			{0, 100, history.Samples},
			{50, 100, history.Samples},   // no longer kept
			{100, 100, history.Samples},  // the oldest kept
			{650, 650, 50},               // the newest only
			{700, 700, 0},                // nothing new
			{9999, 100, history.Samples}, // a cursor from another server
		} {
			w := h.Window(tc.since)
			if w.First != tc.first || w.Next != 700 || uint64(len(w.TimeMS)) != tc.size || uint64(len(w.Segment.IDsPerSec)) != tc.size {
				t.Errorf("since %d: first %d, next %d, %d samples; want first %d, next 700, %d samples",
					tc.since, w.First, w.Next, len(w.TimeMS), tc.first, tc.size)
				continue
			}
			if tc.size > 0 {
				if want := start + int64(tc.first)*1000; w.TimeMS[0] != want {
					t.Errorf("since %d: the first sample at %d ms, want %d", tc.since, w.TimeMS[0]-start, want-start)
				}
			}
		}
	})
}

// TestTagChurn: however many tags pass through the busiest set, at most
// MaxTagSeries have series; the current busiest always do, and the slot
// taken over is that of the tag longest out of the set.
func TestTagChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seg := newSegmentSource()
		h := history.New(history.Config{Segment: seg})
		step := run(t, h)
		// Each second a new tag is the busiest; the rest slow down.
		const rounds = 3 * history.Samples
		for r := range rounds {
			seg.issue(fmt.Sprintf("t%04d", r), 1000, float64(1000+r), 5000)
			if r >= 2*history.MaxTagSeries {
				seg.drop(fmt.Sprintf("t%04d", r-2*history.MaxTagSeries)) // long idle
			}
			step(1)
			w := h.Window(uint64(r + 1)) // the last sample
			if len(w.Tags) > history.MaxTagSeries {
				t.Fatalf("round %d: %d tags with series, at most %d", r, len(w.Tags), history.MaxTagSeries)
			}
			// The busiest TopTags are the last ones issued; each has its
			// value in the last sample.
			for k := max(0, r-history.TopTags+1); k <= r; k++ {
				tag := fmt.Sprintf("t%04d", k)
				i := slices.IndexFunc(w.Tags, func(s history.TagSeries) bool { return s.Tag == tag })
				if i < 0 || math.IsNaN(w.Tags[i].Remaining[0]) {
					t.Fatalf("round %d: busy tag %s has no series: %+v", r, tag, w.Tags)
				}
			}
		}
		// The last MaxTagSeries tags hold the slots, each where it was
		// given one.
		w := h.Window(0)
		var got []string
		for _, s := range w.Tags {
			got = append(got, s.Tag)
		}
		slices.Sort(got)
		var want []string
		for k := rounds - history.MaxTagSeries; k < rounds; k++ {
			want = append(want, fmt.Sprintf("t%04d", k))
		}
		if !slices.Equal(got, want) {
			t.Errorf("tags with series: %v, want %v", got, want)
		}
		// A slot taken over starts empty: its new tag has no value from
		// before it got the slot.
		for _, s := range w.Tags {
			var r int
			fmt.Sscanf(s.Tag, "t%04d", &r)
			// Tag r was issued after sample r, so sample r+1 is its first.
			firstValue := slices.IndexFunc(s.Remaining, func(v float64) bool { return !math.IsNaN(v) })
			if want := r + 1 - int(w.First); firstValue != want {
				t.Errorf("%s: first value at sample %d of the window, want %d", s.Tag, firstValue, want)
			}
		}
	})
}

// TestTagLeavesAndReturns: a tag out of the busiest keeps its slot and its
// line while newer ones fill the free slots; a dropped tag leaves a gap.
func TestTagLeavesAndReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seg := newSegmentSource()
		h := history.New(history.Config{Segment: seg})
		step := run(t, h)
		seg.issue("flappy", 10, 1, 100)
		step(1)
		for r := range history.TopTags {
			seg.issue(fmt.Sprintf("busy%d", r), 1000, 100, 5000) // push flappy out
		}
		step(2)
		seg.issue("flappy", 10, 500, 100) // and back in
		step(1)
		seg.drop("flappy")
		step(1)
		w := h.Window(0)
		i := slices.IndexFunc(w.Tags, func(s history.TagSeries) bool { return s.Tag == "flappy" })
		if i != 0 {
			t.Fatalf("flappy lost its slot: %+v", w.Tags)
		}
		if got := values(w.Tags[0].Remaining); got != "- 100 100 100 100 -" {
			t.Errorf("flappy remaining: %s", got)
		}
		if got := values(w.Tags[0].IDsPerSec); got != "- 1 0 0 10 -" {
			t.Errorf("flappy IDs/s: %s", got)
		}
		if len(w.Tags) != 1+history.TopTags {
			t.Errorf("%d tags with series, want %d", len(w.Tags), 1+history.TopTags)
		}
	})
}

// TestLatency: each sample's p50 and p99 are those of the requests since
// the previous one, estimated within their buckets; a second without
// requests has none.
func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lat := &latencySource{bounds: []float64{0.001, 0.01, 0.1}, counts: make([]uint64, 4)}
		lat.observe(0.0005, 1000) // before the first sample: not in any second
		h := history.New(history.Config{Latency: lat.read, LatencyBounds: lat.bounds})
		step := run(t, h)
		lat.observe(0.0005, 100) // all in (0, 1ms]
		step(1)
		step(1) // no requests
		lat.observe(0.0005, 98)
		lat.observe(0.05, 2) // the slowest 2% in (10ms, 100ms]
		step(1)
		lat.observe(5, 10) // beyond the last bound
		step(1)
		w := h.Window(0)
		if w.Latency == nil || w.Segment != nil || w.Snowflake != nil {
			t.Fatalf("latency only: %+v", w)
		}
		if got := values(w.Latency.P50MS); got != "- 0.5 - 0.5102 100" {
			t.Errorf("p50: %s", got)
		}
		if got := values(w.Latency.P99MS); got != "- 0.99 - 55 100" {
			t.Errorf("p99: %s", got)
		}
	})
}

// TestSeriesJSON: the values are written compactly, null for none.
func TestSeriesJSON(t *testing.T) {
	for _, tc := range []struct {
		in   history.Series
		want string
	}{
		{history.Series{}, `[]`},
		{history.Series{math.NaN(), math.Inf(1), 0, 1, -1.5}, `[null,null,0,1,-1.5]`},
		{history.Series{0.123456, 12.3456, 99.99, 100.4, 123456.7, -2500.5}, `[0.123,12.3,100,100,123457,-2501]`},
		{history.Series{0.0000123}, `[1.23e-05]`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil {
			t.Fatalf("%v: %v", tc.in, err)
		}
		if string(b) != tc.want {
			t.Errorf("%v: %s, want %s", tc.in, b, tc.want)
		}
	}
}

// TestReadWhileSampling: Window may be called while Run samples; the race
// detector checks the two share nothing unguarded.
func TestReadWhileSampling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seg := newSegmentSource()
		h := history.New(history.Config{Segment: seg, Snowflake: &workerSource{}})
		run(t, h)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 50 {
				if _, err := json.Marshal(h.Window(0)); err != nil {
					t.Error(err)
				}
				time.Sleep(history.Interval / 10)
			}
		})
		for range 5 {
			seg.issue("orders", 10, 10, 100)
			time.Sleep(history.Interval)
		}
		wg.Wait()
		if n := h.Window(0).Next; n < 5 {
			t.Errorf("%d samples in 5 s", n)
		}
	})
}
