package metrics_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/metrics"
)

// The shape of the segment series, which docs/operating.md's cardinality formula
// states: fixedSegmentSeries without a tag label (build info, leaf_degraded,
// leaf_ids_issued_total, the four all-tag counters, the load-time histogram's
// 13 buckets + Inf + sum + count, five states, the lowest time until dry),
// and perTagSeries for each tag of the bounded set: top_tags +
// degraded_tags + len(tags) + 1, the tag soonest dry.
var fixedSegmentSeries = 1 + 1 + 1 + 4 + (len(loadBuckets) + 3) + 5 + 1

const perTagSeries = 12

// perTagFamilies are the families with a tag label.
var perTagFamilies = []string{
	"leaf_segment_ids_issued_total", "leaf_segment_loads_total", "leaf_segment_load_errors_total",
	"leaf_segment_load_seconds_total", "leaf_segment_waits_total", "leaf_segment_given_back_ids_total",
	"leaf_segment_step", "leaf_segment_min_step", "leaf_segment_remaining_ids", "leaf_segment_ids_per_second",
	"leaf_segment_seconds_until_dry", "leaf_segment_next_ready",
}

// unloadedTags returns n known tags nobody has asked for yet, as the
// generator reports a large table right after start.
func unloadedTags(n int) []leaf.SegmentStatus {
	st := make([]leaf.SegmentStatus, n)
	for i := range st {
		st[i] = leaf.SegmentStatus{Tag: fmt.Sprintf("tag%06d", i), Step: 1000, MinStep: 1000, SecondsLeft: -1}
	}
	return st
}

// active makes st a loaded tag issuing rate IDs/s with remaining IDs left.
func active(st *leaf.SegmentStatus, rate float64, remaining int64) {
	st.InitOK, st.Loads = true, max(st.Loads, 1)
	st.Rate, st.Remaining = rate, remaining
	st.SecondsLeft = -1
	if rate > 0 {
		st.SecondsLeft = float64(remaining) / rate
	}
}

// exported returns the tags with per-tag series, sorted, after checking
// that every per-tag family has the same tags.
func exported(t *testing.T, fams map[string]*dto.MetricFamily) []string {
	t.Helper()
	var want []string
	for i, name := range perTagFamilies {
		var tags []string
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tag" {
					tags = append(tags, l.GetValue())
				}
			}
		}
		slices.Sort(tags)
		if i == 0 {
			want = tags
		} else if !slices.Equal(tags, want) {
			t.Fatalf("%s has series for tags %v, %s for %v", name, tags, perTagFamilies[0], want)
		}
	}
	return want
}

// leafSeries counts the series of the leaf collector in an exposition: the
// sample lines named leaf_, less the HTTP histogram's.
func leafSeries(text string) int {
	n := 0
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "leaf_") && !strings.HasPrefix(line, "leaf_http_") {
			n++
		}
	}
	return n
}

func names(prefix string, idx ...int) []string {
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = fmt.Sprintf("%s%06d", prefix, n)
	}
	slices.Sort(out)
	return out
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestSeriesBounded holds the scrape of 100,000 tags to docs/operating.md's
// formula, fixed + 12 × (top_tags + degraded_tags + len(tags) + 1), whatever
// state the tags are in.
func TestSeriesBounded(t *testing.T) {
	const n = 100_000
	explicit := names("tag", 99_999, 50_000, 77_777)
	for _, c := range []struct {
		name          string
		top, degraded int
		tags          []string
		setup         func(st []leaf.SegmentStatus)
		want          []string // the exported tags
	}{
		{
			name: "unloaded table", top: 20, degraded: 100, tags: explicit,
			setup: func([]leaf.SegmentStatus) {},
			// Idle slots of the top set go to the most-issued tags, then by
			// name: with nothing issued, the first 20 names.
			want: append(names("tag", seq(0, 20)...), explicit...),
		},
		{
			name: "store outage on every tag", top: 20, degraded: 100, tags: explicit,
			setup: func(st []leaf.SegmentStatus) {
				for i := range st {
					st[i].LoadError, st[i].LoadErrors = "store down", 1
				}
				for i := 1000; i < 1030; i++ { // busy tags, bound to fail first
					active(&st[i], float64(i), 1)
				}
			},
			// The busy tags are the most urgent (their buffers run dry
			// first), then by name; the 20 busiest are among them.
			want: slices.Concat(names("tag", seq(1000, 1030)...), names("tag", seq(0, 70)...), explicit),
		},
		{
			name: "every tag busy, all but the busiest low", top: 20, degraded: 100, tags: explicit,
			setup: func(st []leaf.SegmentStatus) {
				for i := range st {
					if i < 1000 {
						active(&st[i], float64(10_000+i), 1_000_000)
					} else {
						active(&st[i], 1, 1)
					}
				}
			},
			// The busiest 20; of the equally low, the first 100 by name,
			// the first of which is the soonest dry.
			want: slices.Concat(names("tag", seq(980, 1000)...), names("tag", seq(1000, 1100)...), explicit),
		},
		{
			name: "aggregates and the tag soonest dry", top: 0, degraded: 0,
			setup: func(st []leaf.SegmentStatus) {
				for i := range st {
					active(&st[i], 1, int64(10+i%1000))
				}
			},
			want: names("tag", 0), // the first of the equally soonest dry
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := unloadedTags(n)
			c.setup(st)
			m := metrics.New(metrics.Config{Segment: &fakeSegment{status: st},
				TopTags: c.top, DegradedTags: c.degraded, Tags: c.tags, LowBuffer: 2 * time.Second})
			text := scrapeText(t, m)
			tags := exported(t, parse(t, text))
			bound := c.top + c.degraded + len(c.tags) + 1
			if len(tags) > bound {
				t.Errorf("%d tags exported, more than %d + %d + %d + 1", len(tags), c.top, c.degraded, len(c.tags))
			}
			if want := slices.Sorted(slices.Values(c.want)); !slices.Equal(tags, want) {
				t.Errorf("exported %v, want %v", tags, want)
			}
			if got, want := leafSeries(text), fixedSegmentSeries+perTagSeries*len(tags); got != want {
				t.Errorf("%d leaf series, want %d + %d × %d = %d", got, fixedSegmentSeries, perTagSeries, len(tags), want)
			}
			t.Logf("%d tags exported, %d leaf series, %d bytes", len(tags), leafSeries(text), len(text))
		})
	}
}

// TestTopTagsFollowTraffic moves the traffic between tags across scrapes of
// one server: the per-tag set follows the busiest tags, and the series of
// the tags that left it are gone at once.
func TestTopTagsFollowTraffic(t *testing.T) {
	seg := &fakeSegment{status: unloadedTags(10_000)}
	m := metrics.New(metrics.Config{Segment: seg, TopTags: 5, DegradedTags: 100})
	st := seg.status
	for _, step := range []struct {
		name    string
		traffic map[int]float64 // tag index: IDs/s; every other tag goes idle
		want    []string
	}{
		{"morning", map[int]float64{10: 500, 11: 400, 12: 300, 13: 200, 14: 100}, names("tag", 10, 11, 12, 13, 14)},
		{"one more tag busier than the fifth", map[int]float64{10: 500, 11: 400, 12: 300, 13: 200, 14: 100, 9000: 150}, names("tag", 10, 11, 12, 13, 9000)},
		{"traffic moves", map[int]float64{20: 50, 21: 40, 22: 30, 23: 20, 24: 10}, names("tag", 20, 21, 22, 23, 24)},
		// Two busy tags; the three idle slots go to the tags that issued
		// the most so far.
		{"quiet", map[int]float64{23: 5, 24: 5}, names("tag", 10, 11, 12, 23, 24)},
		{"night", nil, names("tag", 10, 11, 12, 13, 14)},
	} {
		for i := range st {
			st[i].Rate, st[i].SecondsLeft = 0, -1
		}
		for i, r := range step.traffic {
			active(&st[i], r, 1_000_000)
			st[i].Issued += uint64(10 * r)
		}
		got := exported(t, scrape(t, m))
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: exported %v, want %v", step.name, got, step.want)
		}
	}
}

// TestDegradedTags: a degraded tag gets per-tag series while it is degraded
// and loses them when it recovers; many degraded tags are capped, the most
// urgent kept. Tag 0 is busy but not low; it is exported only while it is
// the tag soonest dry.
func TestDegradedTags(t *testing.T) {
	seg := &fakeSegment{status: unloadedTags(1000)}
	st := seg.status
	healthy := func(i int) {
		st[i].LoadError = ""
		active(&st[i], 0, 1_000_000)
	}
	for i := range st {
		healthy(i)
	}
	active(&st[0], 100, 201) // 2.01s, above LowBuffer
	m := metrics.New(metrics.Config{Segment: seg, DegradedTags: 3, LowBuffer: 2 * time.Second})
	for _, step := range []struct {
		name   string
		change func()
		want   []string
		low    float64 // tags in state low_buffer
	}{
		{"healthy", func() {}, names("tag", 0), 0},
		{"load error", func() { st[7].LoadError = "store down" }, names("tag", 0, 7), 0},
		{"recovered, another low", func() { healthy(7); active(&st[8], 100, 150) }, names("tag", 8), 1},
		{"low no more", func() { active(&st[8], 100, 250) }, names("tag", 0), 0},
		{"exactly at the threshold is not low, but soonest dry", func() { active(&st[8], 100, 200) }, names("tag", 8), 0},
		{"idle with an empty buffer is not low", func() { active(&st[8], 0, 0) }, names("tag", 0), 0},
		{
			// Five degraded, three kept: load errors first, then the sooner
			// dry.
			"cap", func() {
				active(&st[1], 100, 150) // 1.5s
				active(&st[2], 100, 50)  // 0.5s
				active(&st[3], 100, 100) // 1s
				st[4].LoadError = "store down"
				active(&st[5], 100, 10) // 0.1s
			}, names("tag", 4, 5, 2), 4,
		},
		{"all recovered", func() {
			for i := 1; i <= 5; i++ {
				healthy(i)
			}
		}, names("tag", 0), 0},
	} {
		step.change()
		fams := scrape(t, m)
		if got := exported(t, fams); !slices.Equal(got, step.want) {
			t.Errorf("%s: exported %v, want %v", step.name, got, step.want)
		}
		if got := value(t, fams, "leaf_segment_tags", map[string]string{"state": "low_buffer"}); got != step.low {
			t.Errorf("%s: %v tags low, want %v", step.name, got, step.low)
		}
	}

	t.Run("low_buffer off", func(t *testing.T) {
		seg := &fakeSegment{status: unloadedTags(10)}
		active(&seg.status[3], 100, 1)
		active(&seg.status[4], 100, 2)
		fams := scrape(t, metrics.New(metrics.Config{Segment: seg, DegradedTags: 3}))
		if got, want := exported(t, fams), names("tag", 3); !slices.Equal(got, want) {
			t.Errorf("exported %v with LowBuffer 0, want only the soonest dry, %v", got, want)
		}
		if got := value(t, fams, "leaf_segment_tags", map[string]string{"state": "low_buffer"}); got != 0 {
			t.Errorf("%v tags low with LowBuffer 0", got)
		}
		if got := value(t, fams, "leaf_segment_min_seconds_until_dry", nil); got != 0.01 {
			t.Errorf("min seconds until dry %v, want 0.01", got)
		}
	})
}

// TestExplicitTags: the operator's tags are exported whatever their state,
// among 100,000; one the server does not know is skipped, and one the
// server forgets is dropped.
func TestExplicitTags(t *testing.T) {
	seg := &fakeSegment{status: unloadedTags(100_000)}
	m := metrics.New(metrics.Config{Segment: seg, Tags: []string{"tag012345", "tag099999", "nosuchtag"}})
	want := names("tag", 12345, 99999)
	if got := exported(t, scrape(t, m)); !slices.Equal(got, want) {
		t.Errorf("exported %v, want %v", got, want)
	}
	active(&seg.status[12345], 10, 100)
	seg.status = seg.status[:99_999] // tag099999 deleted
	if got, want := exported(t, scrape(t, m)), names("tag", 12345); !slices.Equal(got, want) {
		t.Errorf("after a delete: exported %v, want %v", got, want)
	}
}

// TestAggregates checks every series over all tags, over 100,000 tags in
// assorted states: the states and the soonest dry counted here, the totals
// the generator's.
func TestAggregates(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	st := unloadedTags(n)
	var want struct {
		issued, loads, errors, waits, givenBack, count uint64
		seconds                                        float64
		buckets                                        []uint64
		states                                         map[string]float64
		minDry                                         float64
	}
	want.buckets = make([]uint64, len(loadBuckets))
	want.states = map[string]float64{"load_error": 0, "low_buffer": 0, "unloaded": 0, "idle": 0, "active": 0}
	want.minDry = math.Inf(1)
	for i := range st {
		s := &st[i]
		state := "unloaded"
		switch rng.IntN(5) {
		case 0: // unloaded
		case 1:
			state = "idle"
			active(s, 0, rng.Int64N(5000))
		case 2:
			state = "active"
			active(s, float64(1+rng.IntN(1000)), 10_000+rng.Int64N(1_000_000))
		case 3:
			state = "low_buffer"
			active(s, float64(100+rng.IntN(1000)), rng.Int64N(100))
		case 4:
			state = "load_error"
			s.LoadError = "store down"
		}
		want.states[state]++
		if state != "unloaded" {
			s.Issued, s.Waits, s.LoadErrors, s.GivenBack = rng.Uint64N(1e9), rng.Uint64N(10), rng.Uint64N(10), rng.Uint64N(1000)
		}
		if s.InitOK {
			s.Loads = 1 + rng.Uint64N(100)
			s.LoadLatency = loadHistogram(make([]uint64, len(loadBuckets)))
			for b := range s.LoadLatency.Counts {
				s.LoadLatency.Counts[b] = min(s.Loads, uint64(b)*s.Loads/8)
				want.buckets[b] += s.LoadLatency.Counts[b]
			}
			s.LoadSeconds = float64(s.Loads) * rng.Float64() / 100
		}
		if s.SecondsLeft >= 0 {
			want.minDry = min(want.minDry, s.SecondsLeft)
		}
		want.issued += s.Issued
		want.loads += s.Loads
		want.errors += s.LoadErrors
		want.waits += s.Waits
		want.givenBack += s.GivenBack
		want.seconds += s.LoadSeconds
	}

	// The totals are the generator's own (they include tags it dropped):
	// the collector exports them as they are.
	tot := leaf.SegmentTotals{Issued: want.issued, Loads: want.loads, LoadErrors: want.errors, Waits: want.waits,
		GivenBack: want.givenBack, LoadSeconds: want.seconds, LoadLatency: loadHistogram(want.buckets)}
	fams := scrape(t, metrics.New(metrics.Config{Segment: &fakeSegment{status: st, totals: tot}, TopTags: 20, DegradedTags: 100, LowBuffer: 2 * time.Second}))
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leaf_ids_issued_total", map[string]string{"mode": "segment"}, float64(want.issued)},
		{"leaf_segment_all_loads_total", nil, float64(want.loads)},
		{"leaf_segment_all_load_errors_total", nil, float64(want.errors)},
		{"leaf_segment_all_waits_total", nil, float64(want.waits)},
		{"leaf_segment_all_given_back_ids_total", nil, float64(want.givenBack)},
		{"leaf_segment_min_seconds_until_dry", nil, want.minDry},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	for state, n := range want.states {
		if got := value(t, fams, "leaf_segment_tags", map[string]string{"state": state}); got != n {
			t.Errorf("leaf_segment_tags{state=%q} = %v, want %v", state, got, n)
		}
	}
	checkHistogram(t, fams, "leaf_segment_load_duration_seconds", nil, want.loads, want.seconds, want.buckets)
}

// BenchmarkScrape100kTags serves /metrics over 100,000 tags, 2,000 of them
// in use (the scenario), with the default set sizes. The source
// hands out a ready slice, so this is the collector's cost and the
// exposition's, not the generator's Status().
func BenchmarkScrape100kTags(b *testing.B) {
	st := unloadedTags(100_000)
	for i := 0; i < len(st); i += 50 {
		active(&st[i], float64(i%997), int64(i%5000))
		st[i].Issued, st[i].Loads = uint64(i), 2
		st[i].LoadLatency = loadHistogram(make([]uint64, len(loadBuckets)))
	}
	m := metrics.New(metrics.Config{Segment: &fakeSegment{status: st}, TopTags: 20, DegradedTags: 100,
		Tags: []string{"tag000001", "tag050000"}, LowBuffer: 2 * time.Second})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, req)
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}
