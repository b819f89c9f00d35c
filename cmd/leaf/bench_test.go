package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchDuration is how long each in-process run lasts: long enough for
// several thousand requests, short enough for the race detector.
func benchDuration() string {
	if testing.Short() {
		return "300ms"
	}
	return "1s"
}

// runBenchJSON runs 'leaf bench ... --json --quiet' and decodes the summary.
func runBenchJSON(t *testing.T, args ...string) (result, *benchSummary) {
	t.Helper()
	r := runCLI(t, nil, append([]string{"bench", "--json", "--quiet"}, args...)...)
	var s benchSummary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("exit %d, stdout is not a JSON summary: %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	return r, &s
}

// TestBenchAgainstServer runs leaf bench against a real in-process server
// over HTTP and gRPC, single IDs and batches, both modes, and checks that
// the summary adds up. Nothing is asserted about speed.
func TestBenchAgainstServer(t *testing.T) {
	t.Parallel()
	env := dataEnv(t)
	// A big step, so that the run measures requests, not segment loads (and
	// a slow load on a busy machine cannot turn into a 503).
	if r := runCLI(t, env, "tags", "create", "bench", "--step", "1000000"); r.code != 0 {
		t.Fatalf("tags create: %d %s", r.code, r.stderr)
	}
	s := serveInProcess(t, env, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0")
	m := grpcListeningRE.FindStringSubmatch(s.log.String())
	if m == nil {
		t.Fatalf("no gRPC address logged:\n%s", s.log.String())
	}
	httpTarget, grpcTarget := []string{"--server", "http://" + s.addr}, []string{"--grpc", m[1]}

	tests := []struct {
		name      string
		target    []string
		mode      string
		count     int
		transport string
	}{
		{"http single", httpTarget, "segment", 1, "http"},
		{"http batch", httpTarget, "segment", 100, "http"},
		{"grpc single", grpcTarget, "segment", 1, "grpc"},
		{"grpc batch", grpcTarget, "segment", 100, "grpc"},
		{"http snowflake", httpTarget, "snowflake", 1, "http"},
		{"http snowflake batch", httpTarget, "snowflake", 50, "http"},
		{"grpc snowflake batch", grpcTarget, "snowflake", 50, "grpc"},
	}
	for _, tt := range tests {
		// One after the other: the runs would only slow each other down.
		t.Run(tt.name, func(t *testing.T) {
			args := append(slices.Clone(tt.target), "--mode", tt.mode, "--tag", "bench", "--count", strconv.Itoa(tt.count),
				"--concurrency", "4", "--duration", benchDuration(), "--check-unique")
			r, sum := runBenchJSON(t, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if sum.Transport != tt.transport || sum.Mode != tt.mode || sum.Count != tt.count || sum.Concurrency != 4 || sum.Tag != "bench" {
				t.Errorf("summary describes another run: %+v", sum)
			}
			if sum.Requests < 1 {
				t.Fatalf("no requests: %+v", sum)
			}
			if sum.Errors != 0 || len(sum.ErrorKinds) != 0 {
				t.Errorf("errors: %d %+v", sum.Errors, sum.ErrorKinds)
			}
			if sum.IDs != sum.Requests*int64(tt.count) {
				t.Errorf("%d IDs from %d requests of %d", sum.IDs, sum.Requests, tt.count)
			}
			// Every ID counted is checked (and compared with the probe's).
			u := sum.Unique
			if u == nil || u.Checked != sum.IDs || u.Unchecked != 0 || u.Duplicates != 0 {
				t.Errorf("unique check %+v, want %d IDs checked, no duplicates", u, sum.IDs)
			}
			if sum.LatencyFrom != "send" || sum.LatencyUS != sum.ServiceTimeUS {
				t.Errorf("without --rate latency %+v (from %q) differs from the service time %+v", sum.LatencyUS, sum.LatencyFrom, sum.ServiceTimeUS)
			}
			l := sum.LatencyUS
			if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max && l.Mean <= l.Max) {
				t.Errorf("latency quantiles out of order: %+v", l)
			}
			if sum.ElapsedSeconds < sum.DurationSeconds || sum.RequestsPerSecond <= 0 ||
				math.Abs(sum.IDsPerSecond-sum.RequestsPerSecond*float64(tt.count)) > 1e-6*sum.IDsPerSecond {
				t.Errorf("rates: %+v", sum)
			}
		})
	}

	t.Run("text", func(t *testing.T) {
		r := runCLI(t, nil, "bench", "--server", s.addr, "--tag", "bench", "--concurrency", "2", "--duration", "1500ms", "--check-unique")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{`leaf bench: segment IDs of tag "bench", 1 per request, HTTP http://` + s.addr,
			"requests", "IDs", "latency   p50 ", "p99.9", "latency distribution", "%", "no duplicates"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("summary lacks %q:\n%s", want, r.stdout)
			}
		}
		if !regexp.MustCompile(`\n  errors +0\n`).MatchString(r.stdout) {
			t.Errorf("summary does not say 0 errors:\n%s", r.stdout)
		}
		// The ticker fires at 1s, the run lasts 1.5s.
		if !strings.Contains(r.stderr, "req/s") || !strings.Contains(r.stderr, "0 errors") {
			t.Errorf("no progress line on stderr: %q", r.stderr)
		}
	})

	t.Run("unknown tag", func(t *testing.T) {
		r := runCLI(t, nil, "bench", "--server", s.addr, "--tag", "nope", "--duration", "200ms")
		if r.code != 1 || !strings.Contains(r.stderr, "(http 404)") || r.stdout != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the 404", r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, nil, "bench", "--grpc", m[1], "--tag", "nope", "--duration", "200ms")
		if r.code != 1 || !strings.Contains(r.stderr, "(grpc NotFound)") {
			t.Errorf("exit %d, stderr %q; want 1 and NotFound", r.code, r.stderr)
		}
	})
}

// TestBenchCountsBadAnswers: every kind of wrong answer is an error of its
// own kind, a failed run exits 1 after printing its summary, and repeated
// IDs are found.
func TestBenchCountsBadAnswers(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/segment/get/bench" || r.URL.Query().Get("count") != "2" {
			http.Error(w, "wrong request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		i := n.Add(1)
		switch i % 5 {
		case 1: // the first request, which must succeed
			fmt.Fprintf(w, "%d\n%d", 2*i, 2*i+1)
		case 2:
			http.Error(w, "no IDs", http.StatusServiceUnavailable)
		case 3:
			fmt.Fprintf(w, "%d\nx", 2*i)
		case 4:
			fmt.Fprintf(w, "%d", 2*i)
		case 0:
			fmt.Fprintf(w, "%d\n%d", 2*i+1, 2*i)
		}
	}))
	t.Cleanup(srv.Close)
	r, sum := runBenchJSON(t, "--server", srv.URL, "--tag", "bench", "--count", "2", "--concurrency", "2", "--duration", "300ms", "--check-unique")
	if r.code != 1 || !strings.Contains(r.stderr, "requests failed") {
		t.Errorf("exit %d, stderr %q; want 1, requests failed", r.code, r.stderr)
	}
	kinds := map[string]int64{}
	var total int64
	for _, k := range sum.ErrorKinds {
		kinds[k.Kind] = k.Count
		total += k.Count
	}
	for _, k := range []string{"http 503", "bad body", "wrong count", "not increasing"} {
		if kinds[k] == 0 {
			t.Errorf("no %q error counted: %+v", k, sum.ErrorKinds)
		}
	}
	if len(kinds) != 4 || total != sum.Errors || sum.Errors >= sum.Requests {
		t.Errorf("error kinds %v, %d errors of %d requests", kinds, sum.Errors, sum.Requests)
	}
	if sum.IDs != 2*(sum.Requests-sum.Errors) || sum.Unique.Duplicates != 0 {
		t.Errorf("%d IDs from %d good requests, unique %+v", sum.IDs, sum.Requests-sum.Errors, sum.Unique)
	}

	// Every ID of the run repeats the probe's.
	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "7") }))
	t.Cleanup(same.Close)
	r, sum = runBenchJSON(t, "--server", same.URL, "--concurrency", "2", "--duration", "200ms", "--check-unique")
	if r.code != 1 || !strings.Contains(r.stderr, "duplicate IDs") || sum.Errors != 0 ||
		sum.Unique.Duplicates != sum.Unique.Checked || sum.Unique.Checked != sum.IDs || !slices.Equal(sum.Unique.Examples, []int64{7}) {
		t.Errorf("exit %d, stderr %q, summary %+v %+v; want duplicates of 7", r.code, r.stderr, sum, sum.Unique)
	}
}

// TestBenchRate: with --rate the workers together send that many requests a
// second, spread over the run rather than in a burst, and no more than the
// schedule holds.
func TestBenchRate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var times []time.Time
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		fmt.Fprint(w, n.Add(1))
	}))
	t.Cleanup(srv.Close)
	const rate, secs = 100, 2
	r, sum := runBenchJSON(t, "--server", srv.URL, "--rate", strconv.Itoa(rate), "--concurrency", "8", "--duration", strconv.Itoa(secs)+"s")
	if r.code != 0 || sum.Errors != 0 || sum.Rate != rate {
		t.Fatalf("exit %d, stderr %q, summary %+v", r.code, r.stderr, sum)
	}
	// The schedule holds rate*secs slots; a loaded machine may send fewer.
	if sum.Requests > rate*secs || sum.Requests < rate*secs*3/4 {
		t.Errorf("%d requests at --rate %d for %ds, want at most %d and not far fewer", sum.Requests, rate, secs, rate*secs)
	}
	mu.Lock()
	got := slices.Clone(times)
	mu.Unlock()
	// Evenly spread: each half second (after the probe, the first request)
	// holds about a half second's share, where an unpaced run would send
	// everything in the first few milliseconds.
	start := got[1]
	var perHalf [2 * secs]int
	for _, at := range got[1:] {
		if i := int(at.Sub(start) / (500 * time.Millisecond)); i < len(perHalf) {
			perHalf[i]++
		}
	}
	for i, c := range perHalf {
		if c < rate/2/3 || c > rate/2*2 {
			t.Errorf("half second %d had %d requests, want about %d: %v", i, c, rate/2, perHalf)
		}
	}
	text := runCLI(t, nil, "bench", "--server", srv.URL, "--rate", "50", "--duration", "200ms", "--quiet")
	if text.code != 0 || !strings.Contains(text.stdout, "concurrency 32, 200ms, rate 50/s\n") {
		t.Errorf("exit %d, summary does not give the rate:\n%s\n%s", text.code, text.stdout, text.stderr)
	}
	for _, want := range []string{"\n  latency from schedule   p50 ", "\n  service time            p50 ",
		"latency distribution (successful requests, from schedule)", "\n  unique    not checked (--check-unique)\n"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, text.stdout)
		}
	}
}

// TestBenchLatencyFromSchedule: with --rate, latency counts from when each
// request was due, so a server stall shows in the quantiles for every
// request it held back (no coordinated omission), while the service time,
// from send to answer, shows it once. One worker, so that the stalled
// request holds the schedule back as a stalled server would.
func TestBenchLatencyFromSchedule(t *testing.T) {
	t.Parallel()
	const stall = 300 * time.Millisecond
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		if i == 50 { // a quarter second into the run
			time.Sleep(stall)
		}
		fmt.Fprint(w, i)
	}))
	t.Cleanup(srv.Close)
	r, sum := runBenchJSON(t, "--server", srv.URL, "--rate", "200", "--concurrency", "1", "--duration", "1s")
	if r.code != 0 || sum.Errors != 0 {
		t.Fatalf("exit %d, stderr %q, summary %+v", r.code, r.stderr, sum)
	}
	// About 60 slots fell due during the stall: the first third of them
	// waited over 200ms, well over 1% of the run's ~200 requests.
	if sum.LatencyFrom != "schedule" || sum.LatencyUS.P99 < 200_000 || sum.LatencyUS.Max < float64(stall.Microseconds()) {
		t.Errorf("latency from schedule %+v (from %q), want p99 >= 200ms: the stall held back many requests", sum.LatencyUS, sum.LatencyFrom)
	}
	if s := sum.ServiceTimeUS; s.P99 >= 100_000 || s.Max < float64(stall.Microseconds()) {
		t.Errorf("service time %+v, want p99 well under the stall and max at least the stall: one request was slow", s)
	}
	if sum.LatencyUS.P50 < sum.ServiceTimeUS.P50 {
		t.Errorf("latency from schedule p50 %v below the service time's %v", sum.LatencyUS.P50, sum.ServiceTimeUS.P50)
	}
}

// TestBenchCountsAgree: the summary's counts agree with each other:
// IDs = count × successful requests, IDs checked + unchecked = IDs (the
// probe's IDs compared but counted in neither), one latency per successful
// request, and the --check-unique cap shared by the workers however
// unevenly they go.
func TestBenchCountsAgree(t *testing.T) {
	t.Parallel()
	const count = 3
	tests := []struct {
		name        string
		cap         int64
		repeatProbe bool // the first answer repeats the probe's IDs
	}{
		{"under the cap", benchMaxUnique, false},
		{"past the cap", 60, false},
		{"probe repeated", benchMaxUnique, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var next, calls atomic.Int64
			next.Store(1)
			probeIDs := []int64{1, 2, 3}
			next.Add(count)
			workers := 0
			newCaller := func() benchCaller {
				workers++
				// Worker 0 (the probe's caller) answers at once, the others
				// slowly: alone it would fill a per-worker share of the cap.
				return &fakeBenchCaller{next: &next, calls: &calls, slow: workers > 1, repeat: tt.repeatProbe, probe: probeIDs}
			}
			probe := newCaller()
			o := &benchOptions{mode: "segment", tag: "t", count: count, concurrency: 3, duration: 150 * time.Millisecond,
				quiet: true, checkUnique: true, uniqueCap: tt.cap}
			sum := runBench(t.Context(), o, newCaller, probe, probeIDs, io.Discard)
			ok := sum.Requests - sum.Errors
			if sum.Errors == 0 || ok == 0 || sum.IDs != count*ok {
				t.Fatalf("%d IDs from %d requests, %d failed; want %d per successful request and some of each", sum.IDs, sum.Requests, sum.Errors, count)
			}
			if int64(sum.hist.n) != ok || int64(sum.service.n) != ok {
				t.Errorf("%d latencies (%d service times) for %d successful requests", sum.hist.n, sum.service.n, ok)
			}
			u := sum.Unique
			if u.Checked+u.Unchecked != sum.IDs || u.Checked != min(tt.cap, sum.IDs) {
				t.Errorf("unique %+v for %d IDs with a cap of %d: want checked + unchecked = IDs, checked up to the cap", u, sum.IDs, tt.cap)
			}
			wantDup := int64(0)
			if tt.repeatProbe {
				wantDup = count
			}
			if u.Duplicates != wantDup {
				t.Errorf("%d duplicates, want %d", u.Duplicates, wantDup)
			}
		})
	}
}

// fakeBenchCaller answers count increasing IDs from a shared counter; every
// fifth call fails.
type fakeBenchCaller struct {
	next, calls *atomic.Int64
	slow        bool
	repeat      bool
	probe       []int64
}

func (c *fakeBenchCaller) call(_ context.Context, ids []int64) ([]int64, *benchFailure) {
	i := c.calls.Add(1)
	if c.slow {
		time.Sleep(50 * time.Millisecond)
	} else {
		time.Sleep(50 * time.Microsecond)
	}
	if i%5 == 0 {
		return ids, &benchFailure{kind: "http 503", detail: "no IDs"}
	}
	if c.repeat && i == 2 { // the first call after the probe
		return append(ids, c.probe...), nil
	}
	start := c.next.Add(int64(len(c.probe))) - int64(len(c.probe))
	for k := range int64(len(c.probe)) {
		ids = append(ids, start+k)
	}
	return ids, nil
}

func TestBenchUsageAndUnreachable(t *testing.T) {
	t.Parallel()
	closed := closedAddr(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"-h"}, 0, ""},
		{"extra arg", []string{"now"}, 2, `takes no arguments, got "now"`},
		{"unknown flag", []string{"--qps", "5"}, 2, "flag provided but not defined: -qps"},
		{"rate negative", []string{"--rate", "-1"}, 2, "--rate -1: want 0..1000000"},
		{"rate too big", []string{"--rate", "1000001"}, 2, "--rate 1000001: want 0..1000000"},
		{"rate NaN", []string{"--rate", "fast"}, 2, `invalid value "fast" for flag -rate`},
		{"server and grpc", []string{"--server", "h:1", "--grpc", "h:2"}, 2, "--server and --grpc exclude each other"},
		{"bad server", []string{"--server", "ftp://x"}, 2, "is not an http(s) URL"},
		{"bad grpc", []string{"--grpc", "localhost"}, 2, `--grpc "localhost" is not host:port`},
		{"grpc no host", []string{"--grpc", ":80"}, 2, "is not host:port"},
		{"grpc bad port", []string{"--grpc", "h:99999"}, 2, "is not host:port"},
		{"bad mode", []string{"--mode", "uuid"}, 2, `--mode "uuid" is not segment or snowflake`},
		{"bad tag", []string{"--tag", "a/b"}, 2, "invalid tag"},
		{"count 0", []string{"--count", "0"}, 2, "invalid count: 0"},
		{"count too big", []string{"--count", "10001"}, 2, "invalid count: 10001"},
		{"count NaN", []string{"--count", "x"}, 2, `invalid value "x" for flag -count`},
		{"concurrency 0", []string{"--concurrency", "0"}, 2, "--concurrency 0: want 1..1024"},
		{"concurrency too big", []string{"--concurrency", "1025"}, 2, "want 1..1024"},
		{"duration 0", []string{"--duration", "0s"}, 2, "--duration 0s: want 100ms..1h"},
		{"duration too short", []string{"--duration", "10ms"}, 2, "want 100ms..1h"},
		{"duration too long", []string{"--duration", "61m"}, 2, "want 100ms..1h"},
		{"duration not a duration", []string{"--duration", "10"}, 2, `invalid value "10" for flag -duration`},
		{"http unreachable", []string{"--server", closed, "--duration", "200ms"}, 1, "(transport connection refused)"},
		{"grpc unreachable", []string{"--grpc", closed, "--duration", "200ms"}, 1, "(grpc Unavailable)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, nil, append([]string{"bench"}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tt.code, tt.stderr)
			}
			if tt.code != 0 && (r.stdout != "" || !strings.HasPrefix(r.stderr, "leaf bench: ")) {
				t.Errorf("stdout %q, stderr %q; want only a message on stderr", r.stdout, r.stderr)
			}
			if tt.code == 0 && !strings.Contains(r.stdout, "--check-unique") {
				t.Errorf("help lacks the flags: %s", r.stdout)
			}
		})
	}
	if r := runCLI(t, nil, "help"); !strings.Contains(r.stdout, "leaf bench [--server URL | --grpc ADDR]") {
		t.Errorf("main usage does not list bench:\n%s", r.stdout)
	}
}

func TestBenchHistogramQuantiles(t *testing.T) {
	t.Parallel()
	seq := func(from, to int64) []int64 {
		var v []int64
		for i := from; i <= to; i++ {
			v = append(v, i)
		}
		return v
	}
	repeat := func(v int64, n int) []int64 { return slices.Repeat([]int64{v}, n) }
	tests := []struct {
		name   string
		values []int64
		// want maps a quantile to the expected value: exact below 128,
		// the highest value of its bucket above.
		want map[float64]int64
		max  int64
	}{
		{"empty", nil, map[float64]int64{0.5: 0, 0.99: 0}, 0},
		{"one value", []int64{42}, map[float64]int64{0: 42, 0.5: 42, 1: 42}, 42},
		{"exact range 1..100", seq(1, 100), map[float64]int64{0.01: 1, 0.5: 50, 0.9: 90, 0.99: 99, 0.999: 100, 1: 100}, 100},
		// 500 is in the bucket [500, 503], 900 in [896, 903], 990 in
		// [984, 991]; 999 in [992, 999]; 1000 is the max.
		{"1..1000", seq(1, 1000), map[float64]int64{0.5: 503, 0.9: 903, 0.99: 991, 0.999: 999, 1: 1000}, 1000},
		// A repeated large value is reported exactly: the bucket's top is
		// capped by the largest value recorded.
		{"constant 1ms", repeat(1_000_000, 1000), map[float64]int64{0.5: 1_000_000, 0.999: 1_000_000}, 1_000_000},
		// 99% at 100µs, 1% at 1s: the tail shows from p99.9 on.
		{"bimodal", append(repeat(100_000, 990), repeat(1_000_000_000, 10)...),
			map[float64]int64{0.5: 100_351, 0.99: 100_351, 0.991: 1_000_000_000, 0.999: 1_000_000_000}, 1_000_000_000},
		{"negative and huge are clamped", []int64{-5, 0, 1 << 40}, map[float64]int64{0.33: 0, 0.66: 0, 1: histMax}, histMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h histogram
			for _, v := range tt.values {
				h.record(v)
			}
			for q, want := range tt.want {
				if got := h.quantile(q); got != want {
					t.Errorf("quantile(%v) = %d, want %d", q, got, want)
				}
			}
			if h.max != tt.max || h.n != uint64(len(tt.values)) {
				t.Errorf("max %d n %d, want %d %d", h.max, h.n, tt.max, len(tt.values))
			}
		})
	}
}

// TestHistogramPrecision: against random latencies spanning six orders of
// magnitude, every quantile is at least the exact one and at most 1/64
// above it, whether recorded in one histogram or merged from several.
func TestBenchHistogramPrecision(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	values := make([]int64, 100_000)
	parts := make([]histogram, 7)
	var whole histogram
	for i := range values {
		v := int64(math.Exp(rng.Float64()*math.Log(1e9))) + rng.Int64N(100)
		values[i] = v
		whole.record(v)
		parts[i%len(parts)].record(v)
	}
	var merged histogram
	for i := range parts {
		merged.merge(&parts[i])
	}
	merged.merge(&histogram{}) // an empty one changes nothing
	if merged != whole {
		t.Fatal("merged histogram differs from the one recorded directly")
	}
	slices.Sort(values)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		exact := values[int(math.Ceil(q*float64(len(values))-1e-6))-1]
		got := whole.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/64 {
			t.Errorf("quantile(%v) = %d, exact %d: beyond 1/64", q, got, exact)
		}
	}
	if whole.min != values[0] || whole.max != values[len(values)-1] {
		t.Errorf("min %d max %d, want %d %d", whole.min, whole.max, values[0], values[len(values)-1])
	}
	var rows uint64
	prev := int64(0)
	for _, r := range whole.coarse() {
		if r.le <= prev {
			t.Errorf("coarse rows not increasing at %d", r.le)
		}
		rows += r.count
		prev = r.le
	}
	if rows != whole.n {
		t.Errorf("coarse rows hold %d values, want %d", rows, whole.n)
	}
}

// TestHistogramBuckets: buckets tile 0..histMax without gaps or overlaps,
// each at most 1/64 of its values wide, and every value lands in its own.
func TestBenchHistogramBuckets(t *testing.T) {
	t.Parallel()
	next := int64(0)
	for i := range histBuckets {
		lo, hi := histBounds(i)
		if lo != next || hi < lo || (lo > histExactMax && float64(hi-lo+1) > float64(lo)/64) {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d and be at most 1/64 wide", i, lo, hi, next)
		}
		for _, v := range []int64{lo, (lo + hi) / 2, hi} {
			if got := histIndex(v); got != i {
				t.Fatalf("histIndex(%d) = %d, want %d", v, got, i)
			}
		}
		next = hi + 1
	}
	if next != histMax+1 {
		t.Errorf("buckets end at %d, want %d", next-1, int64(histMax))
	}
}

func TestBenchParseIDLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want []int64
		err  string
	}{
		{"1", []int64{1}, ""},
		{"1263177670456266794", []int64{1263177670456266794}, ""},
		{"5\n6\n7", []int64{5, 6, 7}, ""},
		{"5\n6\n", []int64{5, 6}, ""},
		{"9223372036854775807", []int64{math.MaxInt64}, ""},
		{"9223372036854775808", nil, "not an ID"},
		{"", nil, "empty body"},
		{"\n", nil, "empty body"},
		{"0", nil, "line 1: not an ID"},
		{"-1", nil, "line 1: not an ID"},
		{"1\n\n2", nil, "line 2: not an ID"},
		{"1\n2x", nil, "line 2: not an ID"},
		{" 1", nil, "not an ID"},
		{"1\r\n2", nil, "line 1: not an ID"},
		{`{"id":1}`, nil, "not an ID"},
	}
	for _, tt := range tests {
		got, err := parseIDLines([]byte(tt.body), nil)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseIDLines(%q) error %v, want %q", tt.body, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseIDLines(%q) = %v, %v, want %v", tt.body, got, err, tt.want)
		}
	}
}

func TestBenchCheckIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ids   []int64
		count int
		kind  string
	}{
		{[]int64{1}, 1, ""},
		{[]int64{1, 2, 9}, 3, ""},
		{[]int64{1, 2}, 3, "wrong count"},
		{nil, 1, "wrong count"},
		{[]int64{0}, 1, "bad ID"},
		{[]int64{-3}, 1, "bad ID"},
		{[]int64{2, 2}, 2, "not increasing"},
		{[]int64{3, 2}, 2, "not increasing"},
	}
	for _, tt := range tests {
		f := checkBenchIDs(tt.ids, tt.count)
		if (f == nil) != (tt.kind == "") || (f != nil && f.kind != tt.kind) {
			t.Errorf("checkBenchIDs(%v, %d) = %+v, want %q", tt.ids, tt.count, f, tt.kind)
		}
	}
}

func TestBenchFmtLatency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "0s"},
		{999, "999ns"},
		{1234, "1.23µs"},
		{412_345, "412µs"},
		{1_234_567, "1.23ms"},
		{int64(12*time.Second + 340*time.Millisecond), "12.3s"},
	}
	for _, tt := range tests {
		if got := fmtLatency(tt.ns); got != tt.want {
			t.Errorf("fmtLatency(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}
