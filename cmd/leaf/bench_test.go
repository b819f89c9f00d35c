package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leafgo/leaf/cmd/leaf/internal/bench"
)

// These tests drive 'leaf bench' as a user does: flags, output, exit
// status, against real servers. The engine itself (pacing, histogram,
// counting) is tested deterministically in cmd/leaf/internal/bench.

// benchDuration is how long each in-process run lasts: long enough for
// several thousand requests, short enough for the race detector.
func benchDuration() string {
	if testing.Short() {
		return "300ms"
	}
	return "1s"
}

// runBenchJSON runs 'leaf bench ... --json --quiet' and decodes the summary.
func runBenchJSON(t *testing.T, args ...string) (result, *bench.Summary) {
	t.Helper()
	r := runCLI(t, nil, append([]string{"bench", "--json", "--quiet"}, args...)...)
	var s bench.Summary
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
	m := grpcListeningRE.FindStringSubmatch(s.Log.String())
	if m == nil {
		t.Fatalf("no gRPC address logged:\n%s", s.Log.String())
	}
	httpTarget, grpcTarget := []string{"--server", "http://" + s.Addr}, []string{"--grpc", m[1]}

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
		r := runCLI(t, nil, "bench", "--server", s.Addr, "--tag", "bench", "--concurrency", "2", "--duration", "1500ms", "--check-unique")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{`leaf bench: segment IDs of tag "bench", 1 per request, HTTP http://` + s.Addr,
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
		r := runCLI(t, nil, "bench", "--server", s.Addr, "--tag", "nope", "--duration", "200ms")
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

// TestBenchRate: --rate paces the run, never past the schedule's slots, and
// the summary says so and reports latency from the schedule beside the
// service time. How evenly the requests are spread is cmd/leaf/internal/bench's
// TestRunPaced.
func TestBenchRate(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, n.Add(1)) }))
	t.Cleanup(srv.Close)
	const rate = 100
	r, sum := runBenchJSON(t, "--server", srv.URL, "--rate", strconv.Itoa(rate), "--concurrency", "8", "--duration", "1s")
	if r.code != 0 || sum.Errors != 0 || sum.Rate != rate || sum.LatencyFrom != "schedule" {
		t.Fatalf("exit %d, stderr %q, summary %+v", r.code, r.stderr, sum)
	}
	// The schedule holds rate*1s slots; a loaded machine may send fewer.
	if sum.Requests < 1 || sum.Requests > rate {
		t.Errorf("%d requests at --rate %d for 1s, want 1..%d", sum.Requests, rate, rate)
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
