package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// fakeSegment and fakeWorker return fixed statuses and totals, so the test
// can assert exact exported values.
type fakeSegment struct {
	status   []leaf.SegmentStatus
	totals   leaf.SegmentTotals // Known is at least len(status); no LoadLatency: all bounds, 0
	degraded []string
}

func (f *fakeSegment) Status() []leaf.SegmentStatus { return f.status }
func (f *fakeSegment) Degraded() []string           { return f.degraded }
func (f *fakeSegment) Totals() leaf.SegmentTotals {
	t := f.totals
	t.Known = max(t.Known, len(f.status))
	if t.LoadLatency.Bounds == nil { // as the generator's: every bound, from the start
		t.LoadLatency = loadHistogram(make([]uint64, len(loadBuckets)))
	}
	return t
}

type fakeWorker struct {
	status   leaf.WorkerStatus
	degraded []string
}

func (f *fakeWorker) Status() leaf.WorkerStatus { return f.status }
func (f *fakeWorker) Degraded() []string        { return f.degraded }

// scrape fetches m's /metrics over a real loopback server and parses the
// text exposition.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	return parse(t, scrapeText(t, m))
}

// scrapeText fetches m's /metrics over a real loopback server, in the text
// exposition format.
func scrapeText(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	return string(b)
}

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
}

// find returns the series of family name whose labels are exactly labels.
func find(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (*dto.Metric, bool) {
	f, ok := fams[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value reads a counter, gauge or untyped series.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := find(fams, name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("%s%v is not a counter or gauge", name, labels)
	return 0
}

func tagLabel(tag string) map[string]string { return map[string]string{"tag": tag} }

func TestScrapeFakeSources(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	latency := make([]uint64, len(loadBuckets))
	for i := range latency { // 1 load <= 1ms, 2 more <= 5ms, all 4 <= 0.1s
		switch {
		case i == 0:
			latency[i] = 1
		case loadBuckets[i] < 0.1:
			latency[i] = 3
		default:
			latency[i] = 4
		}
	}
	seg := &fakeSegment{
		status: []leaf.SegmentStatus{
			{
				Tag: "orders", InitOK: true, Issued: 1234, Loads: 4, LoadErrors: 1, Waits: 2, GivenBack: 10,
				Step: 2000, MinStep: 1000, Remaining: 1766, Rate: 100, SecondsLeft: 17.66, NextReady: true,
				LoadSeconds: 0.125, LoadLatency: loadHistogram(latency),
			},
			// Idle, and a source that did not time its one load.
			{Tag: "idle", InitOK: true, Issued: 0, Loads: 1, Step: 500, MinStep: 500, Remaining: 500, SecondsLeft: -1},
			// A source counting by other bounds: one load at most 2ms,
			// the other at most 20s. Its buffers last 3s, under LowBuffer.
			{Tag: "short", InitOK: true, Loads: 2, LoadSeconds: 0.5, Rate: 1, SecondsLeft: 3, LoadLatency: leaf.Histogram{
				Bounds: []time.Duration{2 * time.Millisecond, 20 * time.Second}, Counts: []uint64{1, 2}}},
			// Known, never requested.
			{Tag: "fresh", Step: 1000, MinStep: 1000, SecondsLeft: -1},
			// Its first load failed.
			{Tag: "broken", LoadErrors: 3, LoadError: "store down", SecondsLeft: -1},
		},
		degraded: []string{"tag orders: buffered IDs last 3.0s"},
	}
	// The totals are the generator's, not sums of the statuses: they
	// include tags dropped since (here 1000 IDs issued and a load of ≤1ms).
	totalLatency := slices.Clone(latency)
	for i := range totalLatency {
		totalLatency[i]++
	}
	seg.totals = leaf.SegmentTotals{Issued: 2234, Loads: 8, LoadErrors: 4, Waits: 2, GivenBack: 10,
		LoadSeconds: 0.75, LoadLatency: loadHistogram(totalLatency)}
	sf := &fakeWorker{status: leaf.WorkerStatus{
		WorkerID: 7, Issued: 99, HighWater: now.UnixMilli() + 2500,
		Rollbacks: 2, RollbackMs: 1500, MaxRollbackMs: 1000, HeartbeatFailures: 4,
		FromCache: true, LeaseExpires: now.Add(30 * time.Second),
	}}
	m := metrics.New(metrics.Config{Segment: seg, Snowflake: sf, Version: "v1.2.3", Now: func() time.Time { return now },
		TopTags: 20, DegradedTags: 100, LowBuffer: 5 * time.Second})
	fams := scrape(t, m)

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leaf_ids_issued_total", map[string]string{"mode": "segment"}, 2234},
		{"leaf_ids_issued_total", map[string]string{"mode": "snowflake"}, 99},
		{"leaf_segment_all_loads_total", nil, 8},
		{"leaf_segment_all_load_errors_total", nil, 1 + 3},
		{"leaf_segment_all_waits_total", nil, 2},
		{"leaf_segment_all_given_back_ids_total", nil, 10},
		{"leaf_segment_min_seconds_until_dry", nil, 3},
		{"leaf_segment_tags", map[string]string{"state": "load_error"}, 1},
		{"leaf_segment_tags", map[string]string{"state": "low_buffer"}, 1},
		{"leaf_segment_tags", map[string]string{"state": "unloaded"}, 1},
		{"leaf_segment_tags", map[string]string{"state": "idle"}, 1},
		{"leaf_segment_tags", map[string]string{"state": "active"}, 1},
		{"leaf_segment_ids_issued_total", tagLabel("orders"), 1234},
		{"leaf_segment_ids_issued_total", tagLabel("idle"), 0},
		{"leaf_segment_loads_total", tagLabel("orders"), 4},
		{"leaf_segment_load_errors_total", tagLabel("orders"), 1},
		{"leaf_segment_load_errors_total", tagLabel("broken"), 3},
		{"leaf_segment_load_seconds_total", tagLabel("orders"), 0.125},
		{"leaf_segment_waits_total", tagLabel("orders"), 2},
		{"leaf_segment_given_back_ids_total", tagLabel("orders"), 10},
		{"leaf_segment_step", tagLabel("orders"), 2000},
		{"leaf_segment_min_step", tagLabel("orders"), 1000},
		{"leaf_segment_remaining_ids", tagLabel("orders"), 1766},
		{"leaf_segment_ids_per_second", tagLabel("orders"), 100},
		{"leaf_segment_seconds_until_dry", tagLabel("orders"), 17.66},
		{"leaf_segment_seconds_until_dry", tagLabel("idle"), math.Inf(1)},
		{"leaf_segment_seconds_until_dry", tagLabel("short"), 3},
		{"leaf_segment_next_ready", tagLabel("orders"), 1},
		{"leaf_segment_next_ready", tagLabel("idle"), 0},
		{"leaf_segment_step", tagLabel("idle"), 500},
		{"leaf_segment_step", tagLabel("fresh"), 1000},
		{"leaf_snowflake_worker_id", nil, 7},
		{"leaf_snowflake_high_water_lead_seconds", nil, 2.5},
		{"leaf_snowflake_clock_rollbacks_total", nil, 2},
		{"leaf_snowflake_clock_rollback_seconds_total", nil, 1.5},
		{"leaf_snowflake_clock_rollback_max_seconds", nil, 1},
		{"leaf_snowflake_heartbeat_failures_total", nil, 4},
		{"leaf_snowflake_from_cache", nil, 1},
		{"leaf_snowflake_lease_remaining_seconds", nil, 30},
		{"leaf_degraded", map[string]string{"mode": "segment"}, 1},
		{"leaf_degraded", map[string]string{"mode": "snowflake"}, 0},
		{"leaf_build_info", map[string]string{"version": "v1.2.3", "goversion": runtime.Version()}, 1},
	} {
		t.Run(fmt.Sprintf("%s%v", c.name, c.labels), func(t *testing.T) {
			if got := value(t, fams, c.name, c.labels); got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}

	// One load-time histogram over all tags: the totals', as they are.
	checkHistogram(t, fams, "leaf_segment_load_duration_seconds", nil, 8, 0.75, totalLatency)
	if _, ok := find(fams, "leaf_segment_load_duration_seconds", tagLabel("orders")); ok {
		t.Error("per-tag load-time histogram exported")
	}

	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("runtime/process metric %s missing", name)
		}
	}
}

// loadBuckets are the bounds of leaf_segment_load_duration_seconds, in
// seconds, which dashboards and alerts name.
var loadBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// loadHistogram is a source's load-time histogram by loadBuckets.
func loadHistogram(cumulative []uint64) leaf.Histogram {
	h := leaf.Histogram{Counts: cumulative}
	for _, le := range loadBuckets {
		h.Bounds = append(h.Bounds, time.Duration(math.Round(le*1e9)))
	}
	return h
}

// checkHistogram checks a histogram series' count, sum and cumulative
// buckets, one per loadBuckets.
func checkHistogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, count uint64, sum float64, buckets []uint64) {
	t.Helper()
	s, ok := find(fams, name, labels)
	if !ok || s.Histogram == nil {
		t.Fatalf("no histogram %s%v", name, labels)
	}
	h := s.GetHistogram()
	if h.GetSampleCount() != count || math.Abs(h.GetSampleSum()-sum) > 1e-9 {
		t.Errorf("%s%v: count %d sum %v, want %d %v", name, labels, h.GetSampleCount(), h.GetSampleSum(), count, sum)
	}
	var got []uint64
	for i, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue // the parser may add the implied +Inf bucket
		}
		if i >= len(loadBuckets) || b.GetUpperBound() != loadBuckets[i] {
			t.Fatalf("%s: bucket %d has le=%v, want le=%v", name, i, b.GetUpperBound(), loadBuckets)
		}
		got = append(got, b.GetCumulativeCount())
	}
	if !slices.Equal(got, buckets) {
		t.Errorf("%s%v: buckets %v, want %v", name, labels, got, buckets)
	}
}

func TestScrapeWorkerLost(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	sf := &fakeWorker{
		status:   leaf.WorkerStatus{WorkerID: -1, HighWater: now.UnixMilli() - 1250},
		degraded: []string{"snowflake worker ID lost; re-registering"},
	}
	fams := scrape(t, metrics.New(metrics.Config{Snowflake: sf, Now: func() time.Time { return now }}))
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leaf_snowflake_worker_id", nil, -1},
		{"leaf_snowflake_high_water_lead_seconds", nil, -1.25},
		{"leaf_snowflake_from_cache", nil, 0},
		{"leaf_degraded", map[string]string{"mode": "snowflake"}, 1},
		{"leaf_build_info", map[string]string{"version": "unknown", "goversion": runtime.Version()}, 1},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if _, ok := fams["leaf_snowflake_lease_remaining_seconds"]; ok {
		t.Error("lease remaining exported for a registry without leases")
	}
	if _, ok := find(fams, "leaf_degraded", map[string]string{"mode": "segment"}); ok {
		t.Error("leaf_degraded exported for the disabled segment mode")
	}
}

func TestModesOff(t *testing.T) {
	var typedNil *fakeSegment // the wiring mistake New must survive
	for _, c := range []struct {
		name string
		cfg  metrics.Config
	}{
		{"nil interfaces", metrics.Config{}},
		{"typed nil pointer", metrics.Config{Segment: typedNil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fams := scrape(t, metrics.New(c.cfg))
			for _, name := range []string{"leaf_ids_issued_total", "leaf_degraded", "leaf_segment_step", "leaf_snowflake_worker_id"} {
				if _, ok := fams[name]; ok {
					t.Errorf("%s exported with no generator", name)
				}
			}
			if _, ok := fams["leaf_build_info"]; !ok {
				t.Error("leaf_build_info missing")
			}
		})
	}
}

func TestObserveRequestConcurrent(t *testing.T) {
	m := metrics.New(metrics.Config{})
	routes := []string{"/api/segment/get/{tag}", "/api/snowflake/get/{key}", "/actuator/health"}
	statuses := []int{200, 404, 503}
	const goroutines, perPair = 16, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perPair {
				// Vary the order so goroutines race on first resolution.
				for j := range routes {
					r := routes[(j+g)%len(routes)]
					s := statuses[(j+i)%len(statuses)]
					m.ObserveRequest(r, s, time.Millisecond)
				}
			}
		})
	}
	wg.Wait()

	// Replay the schedule serially for the expected count per pair.
	want := make(map[[2]string]uint64)
	for g := range goroutines {
		for i := range perPair {
			for j := range routes {
				want[[2]string{routes[(j+g)%len(routes)], fmt.Sprint(statuses[(j+i)%len(statuses)])}]++
			}
		}
	}
	fams := scrape(t, m)
	if n := len(fams["leaf_http_request_duration_seconds"].GetMetric()); n != len(want) {
		t.Errorf("%d (route, code) series, want %d", n, len(want))
	}
	for k, n := range want {
		s, ok := find(fams, "leaf_http_request_duration_seconds", map[string]string{"route": k[0], "code": k[1]})
		if !ok {
			t.Errorf("no series for route %s code %s", k[0], k[1])
			continue
		}
		h := s.GetHistogram()
		if h.GetSampleCount() != n {
			t.Errorf("route %s code %s: count %d, want %d", k[0], k[1], h.GetSampleCount(), n)
		}
		if got, want := h.GetSampleSum(), float64(n)*0.001; math.Abs(got-want) > 1e-9 {
			t.Errorf("route %s code %s: sum %v, want %v", k[0], k[1], got, want)
		}
	}
}

// TestObserveBadRequest: refused requests are counted by reason, and no
// reason is exported before it happens.
func TestObserveBadRequest(t *testing.T) {
	m := metrics.New(metrics.Config{})
	if _, ok := scrape(t, m)["leaf_http_bad_requests_total"]; ok {
		t.Error("leaf_http_bad_requests_total exported before any bad request")
	}
	for range 3 {
		m.ObserveBadRequest("malformed")
	}
	m.ObserveBadRequest("tls_handshake")
	fams := scrape(t, m)
	if n := value(t, fams, "leaf_http_bad_requests_total", map[string]string{"reason": "malformed"}); n != 3 {
		t.Errorf("malformed = %v, want 3", n)
	}
	if n := value(t, fams, "leaf_http_bad_requests_total", map[string]string{"reason": "tls_handshake"}); n != 1 {
		t.Errorf("tls_handshake = %v, want 1", n)
	}
}

func TestObserveRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	m := metrics.New(metrics.Config{})
	m.ObserveRequest("/api/segment/get/{tag}", 200, time.Millisecond) // resolve once
	if n := testing.AllocsPerRun(1000, func() {
		m.ObserveRequest("/api/segment/get/{tag}", 200, time.Millisecond)
	}); n != 0 {
		t.Errorf("ObserveRequest allocates %v times per call, want 0", n)
	}
}

func BenchmarkObserveRequest(b *testing.B) {
	m := metrics.New(metrics.Config{})
	routes := []string{"/api/segment/get/{tag}", "/api/snowflake/get/{key}", "/v2/segment/{tag}/ids"}
	statuses := []int{200, 200, 200, 404}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.ObserveRequest(routes[i%len(routes)], statuses[i%len(statuses)], 50*time.Microsecond)
			i++
		}
	})
}

func TestRealSegmentGenerator(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, testutil.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTag(ctx, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, slog.New(slog.DiscardHandler)
	g, err := segment.New(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(context.Background()); err != nil {
			t.Errorf("close generator: %v", err)
		}
	})

	const issued = 1234
	for i := range issued {
		if _, err := g.NextID(ctx, "orders"); err != nil {
			t.Fatalf("NextID #%d: %v", i, err)
		}
	}
	// The prefetch of the next range runs in the background; wait for it so
	// Status and the scrape see the same buffers.
	status := func() leaf.SegmentStatus {
		for _, s := range g.Status() {
			if s.Tag == "orders" {
				return s
			}
		}
		t.Fatal("tag orders missing from Status")
		return leaf.SegmentStatus{}
	}
	testutil.WaitFor(t, "the segment load in flight to land", func() bool { return !status().Loading })
	want := status()

	fams := scrape(t, metrics.New(metrics.Config{Segment: g, TopTags: 20}))
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leaf_ids_issued_total", map[string]string{"mode": "segment"}, issued},
		{"leaf_segment_ids_issued_total", tagLabel("orders"), issued},
		{"leaf_segment_all_loads_total", nil, float64(want.Loads)},
		{"leaf_segment_min_step", tagLabel("orders"), 1000},
		// The first two loads use the stored step; the third, started by
		// the prefetch once the second range was 10% used, may already
		// have doubled it (SPEC §2), so the step is Status's.
		{"leaf_segment_step", tagLabel("orders"), float64(want.Step)},
		{"leaf_segment_remaining_ids", tagLabel("orders"), float64(want.Remaining)},
		{"leaf_segment_loads_total", tagLabel("orders"), float64(want.Loads)},
		{"leaf_degraded", map[string]string{"mode": "segment"}, 0},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if want.Remaining <= 0 {
		t.Errorf("Status reports %d IDs remaining after a settled prefetch, want > 0", want.Remaining)
	}
	// The generator counts by the exported bounds, so its counts carry
	// over as they are.
	if !slices.Equal(want.LoadLatency.Bounds, loadHistogram(nil).Bounds) {
		t.Errorf("the generator counts loads by %v, not the exported bounds %v", want.LoadLatency.Bounds, loadBuckets)
	}
	checkHistogram(t, fams, "leaf_segment_load_duration_seconds", nil, want.Loads, want.LoadSeconds, want.LoadLatency.Counts)
	var tags float64
	for _, s := range fams["leaf_segment_tags"].GetMetric() {
		tags += s.GetGauge().GetValue()
	}
	if tags != 1 {
		t.Errorf("leaf_segment_tags sums to %v over the states, want 1", tags)
	}
	t.Logf("orders: step %d, min step %d, loads %d, remaining %d", want.Step, want.MinStep, want.Loads, want.Remaining)
}
