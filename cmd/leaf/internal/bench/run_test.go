package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
)

// The run tests use fake callers inside a synctest bubble: the clock moves
// only when every goroutine waits, so a request that "takes 3ms" takes
// exactly that, and counts, schedules and latencies are exact however
// loaded the machine.

// fakeServer answers the fake callers: count increasing IDs a call, from a
// shared counter, after a pause.
type fakeServer struct {
	start time.Time
	count int
	// took is how long call i (from 1, over every caller) takes; slow
	// marks the callers made slow.
	took      func(i int64, slow bool) time.Duration
	failEvery int64   // every failEvery-th call fails with a 503; 0: none
	repeatAt  int64   // this call answers the probe's IDs again; 0: none
	probe     []int64 // the probe's IDs, which the counter starts after

	calls, next atomic.Int64
	mu          sync.Mutex
	sent        []time.Duration // when each call was made, from start
}

func newFakeServer(count int, took func(i int64, slow bool) time.Duration) *fakeServer {
	s := &fakeServer{start: time.Now(), count: count, took: took}
	for i := range int64(count) {
		s.probe = append(s.probe, i+1)
	}
	s.next.Store(int64(count) + 1)
	return s
}

type fakeCaller struct {
	srv  *fakeServer
	slow bool
}

func (c *fakeCaller) call(ctx context.Context, ids []int64) ([]int64, *failure) {
	s := c.srv
	i := s.calls.Add(1)
	s.mu.Lock()
	s.sent = append(s.sent, time.Since(s.start))
	s.mu.Unlock()
	select {
	case <-time.After(s.took(i, c.slow)):
	case <-ctx.Done():
		return ids, &failure{kind: "transport", detail: ctx.Err().Error()}
	}
	if s.failEvery > 0 && i%s.failEvery == 0 {
		return ids, &failure{kind: "http 503", detail: "no IDs"}
	}
	if i == s.repeatAt {
		return append(ids, s.probe...), nil
	}
	first := s.next.Add(int64(s.count)) - int64(s.count)
	for k := range int64(s.count) {
		ids = append(ids, first+k)
	}
	return ids, nil
}

// runFake runs o against s; the first caller made is the probe's, which
// is not slow.
func runFake(ctx context.Context, o *Config, s *fakeServer) *Summary {
	if o.UniqueCap == 0 {
		o.UniqueCap = MaxUnique
	}
	made := 0
	newCaller := func() caller {
		made++
		return &fakeCaller{srv: s, slow: made > 1}
	}
	probe := newCaller()
	return run(ctx, o, newCaller, probe, s.probe)
}

func constant(d time.Duration) func(int64, bool) time.Duration {
	return func(int64, bool) time.Duration { return d }
}

// TestRunCountsAgree: the summary's counts agree with each other:
// IDs = count × successful requests, IDs checked + unchecked = IDs (the
// probe's IDs compared but counted in neither), one latency per successful
// request, and the CheckUnique cap shared by the workers however unevenly
// they go.
func TestRunCountsAgree(t *testing.T) {
	const count = 3
	tests := []struct {
		name        string
		cap         int64
		repeatProbe bool // the second answer repeats the probe's IDs
	}{
		{"under the cap", MaxUnique, false},
		{"past the cap", 60, false},
		{"probe repeated", MaxUnique, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Worker 0 (the probe's caller) answers at once, the others
				// slowly: alone it would fill a per-worker share of the cap.
				s := newFakeServer(count, func(_ int64, slow bool) time.Duration {
					if slow {
						return 50 * time.Millisecond
					}
					return 50 * time.Microsecond
				})
				s.failEvery = 5
				if tt.repeatProbe {
					s.repeatAt = 2
				}
				o := &Config{Mode: "segment", Tag: "t", Count: count, Concurrency: 3, Duration: 150 * time.Millisecond,
					CheckUnique: true, UniqueCap: tt.cap}
				sum := runFake(t.Context(), o, s)
				ok := sum.Requests - sum.Errors
				if sum.Errors == 0 || ok == 0 || sum.IDs != count*ok || sum.Requests != s.calls.Load() {
					t.Fatalf("%d IDs from %d requests (%d calls), %d failed; want %d per successful request and some of each",
						sum.IDs, sum.Requests, s.calls.Load(), sum.Errors, count)
				}
				if int64(sum.hist.n) != ok || int64(sum.service.n) != ok {
					t.Errorf("%d latencies (%d service times) for %d successful requests", sum.hist.n, sum.service.n, ok)
				}
				u := sum.Unique
				if u.Checked+u.Unchecked != sum.IDs || u.Checked != min(tt.cap, sum.IDs) {
					t.Errorf("unique %+v for %d IDs with a cap of %d: want checked + unchecked = IDs, checked up to the cap", u, sum.IDs, tt.cap)
				}
				wantDup, wantErr := int64(0), "of"
				if tt.repeatProbe {
					wantDup, wantErr = count, "duplicate IDs"
				}
				if u.Duplicates != wantDup {
					t.Errorf("%d duplicates, want %d", u.Duplicates, wantDup)
				}
				if err := sum.Err(); err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Errorf("Err() = %v, want %q", err, wantErr)
				}
				if len(sum.ErrorKinds) != 1 || sum.ErrorKinds[0].Kind != "http 503" || sum.ErrorKinds[0].Count != sum.Errors {
					t.Errorf("error kinds %+v, want the 503s", sum.ErrorKinds)
				}
			})
		})
	}
}

// TestRunPaced: with a Rate the workers together send exactly the
// schedule's requests, each when its slot is due, and latency counts from
// the slot; without, each worker sends its next request as soon as it has
// an answer, until the duration has passed.
func TestRunPaced(t *testing.T) {
	const ms = time.Millisecond
	every := func(step time.Duration, n, times int) []time.Duration {
		var v []time.Duration
		for i := range n {
			for range times {
				v = append(v, time.Duration(i)*step)
			}
		}
		return v
	}
	var sevenths []time.Duration
	for n := range 7 {
		sevenths = append(sevenths, time.Duration(n)*time.Second/7)
	}
	tests := []struct {
		name        string
		rate        int
		concurrency int
		took        time.Duration
		duration    time.Duration
		wantSent    []time.Duration
		wantFrom    string
		elapsed     time.Duration
	}{
		{"100/s for 2s, 8 workers", 100, 8, 3 * ms, 2 * time.Second, every(10*ms, 200, 1), "schedule", 1993 * ms},
		{"1000/s for 1s, 32 workers", 1000, 32, 20 * ms, time.Second, every(ms, 1000, 1), "schedule", 1019 * ms},
		{"7/s for 1s: seven slots, not eight", 7, 2, ms, time.Second, sevenths, "schedule", 857142857 + ms},
		// Back to back: requests start every 3ms on each worker; the one
		// started at 1998ms ends after the duration, and is the last.
		{"unpaced, 8 workers", 0, 8, 3 * ms, 2 * time.Second, every(3*ms, 667, 8), "send", 2001 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newFakeServer(1, constant(tt.took))
				o := &Config{Mode: "segment", Tag: "t", Count: 1, Concurrency: tt.concurrency, Duration: tt.duration, Rate: tt.rate}
				sum := runFake(t.Context(), o, s)
				slices.Sort(s.sent)
				if !slices.Equal(s.sent, tt.wantSent) {
					t.Errorf("requests sent at %v\nwant %v", s.sent, tt.wantSent)
				}
				if sum.Requests != int64(len(tt.wantSent)) || sum.Errors != 0 || sum.LatencyFrom != tt.wantFrom ||
					sum.ElapsedSeconds != tt.elapsed.Seconds() || sum.Interrupted {
					t.Errorf("summary %+v, want %d requests, latency from %s, %v elapsed", sum, len(tt.wantSent), tt.wantFrom, tt.elapsed)
				}
				// On time, every request waits exactly its service time.
				want := float64(tt.took.Microseconds())
				if l := sum.LatencyUS; l.Max != want || l.Mean != want || l != sum.ServiceTimeUS {
					t.Errorf("latency %+v, service time %+v; want both %vµs throughout", l, sum.ServiceTimeUS, want)
				}
			})
		})
	}
}

// TestRunLatencyFromSchedule: with a Rate, latency counts from when each
// request was due, so a server stall shows for every request it held back
// (no coordinated omission), while the service time, from send to answer,
// shows it once. One worker, at 200/s, each answer taking 1ms but the 50th,
// which takes 300ms: the 74 requests due meanwhile are sent late, one after
// the other, their latencies 296ms, 292ms, ... 4ms.
func TestRunLatencyFromSchedule(t *testing.T) {
	const ms = time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(1, func(i int64, _ bool) time.Duration {
			if i == 50 {
				return 300 * ms
			}
			return ms
		})
		o := &Config{Mode: "segment", Tag: "t", Count: 1, Concurrency: 1, Duration: time.Second, Rate: 200}
		sum := runFake(t.Context(), o, s)
		if sum.Requests != 200 || sum.Errors != 0 || sum.LatencyFrom != "schedule" {
			t.Fatalf("summary %+v, want the schedule's 200 requests", sum)
		}
		// within says v is exact's bucket: at most 1/64 above it.
		within := func(v float64, exact time.Duration) bool {
			e := float64(exact.Microseconds())
			return v >= e && v <= e*65/64
		}
		// p99 is the 198th of 200: the third longest, 292ms; p99.9 the
		// stalled request itself.
		l := sum.LatencyUS
		if !within(l.P99, 292*ms) || l.P999 != 300_000 || l.Max != 300_000 || !within(l.P50, ms) {
			t.Errorf("latency from schedule %+v, want p50 1ms, p99 292ms, p99.9 and max 300ms", l)
		}
		sv := sum.ServiceTimeUS
		if !within(sv.P99, ms) || !within(sv.P999, 300*ms) || sv.Max != 300_000 {
			t.Errorf("service time %+v, want p99 1ms, p99.9 and max 300ms: one request was slow", sv)
		}
	})
}

// TestRunInterrupted: a run whose context ends stops at once, marked
// interrupted; the requests the end cut short count neither as requests
// nor as failures.
func TestRunInterrupted(t *testing.T) {
	for _, rate := range []int{0, 50} {
		t.Run(fmt.Sprintf("rate %d", rate), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(100*time.Millisecond, cancel)
				s := newFakeServer(1, constant(30*time.Millisecond))
				o := &Config{Mode: "segment", Tag: "t", Count: 1, Concurrency: 2, Duration: time.Second, Rate: rate}
				sum := runFake(ctx, o, s)
				// Unpaced, each worker finishes 3 requests by 90ms; at
				// 50/s, those of the slots at 0, 20, 40 and 60ms end by
				// 90ms, and the one at 80ms is cut short.
				want := int64(6)
				if rate > 0 {
					want = 4
				}
				if !sum.Interrupted || sum.Requests != want || sum.Errors != 0 || sum.ElapsedSeconds != 0.1 {
					t.Errorf("summary %+v, want interrupted after 100ms with %d requests and no error", sum, want)
				}
			})
		})
	}
}

// TestRunProgress: a progress line a second, with the rates of that second
// and the errors so far.
func TestRunProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 7ms a request: two workers finish 142 requests each in the
		// first second, 285 by the second (none ends on a tick).
		s := newFakeServer(3, constant(7*time.Millisecond))
		s.failEvery = 100
		var out strings.Builder
		o := &Config{Mode: "segment", Tag: "t", Count: 3, Concurrency: 2, Duration: 2500 * time.Millisecond, Progress: &out}
		sum := runFake(t.Context(), o, s)
		want := fmt.Sprintf("%6.1fs  %12.0f req/s  %14.0f IDs/s  %d errors\n", 1.0, 284.0, 3*(284.0-2), 2) +
			fmt.Sprintf("%6.1fs  %12.0f req/s  %14.0f IDs/s  %d errors\n", 2.0, 286.0, 3*(286.0-3), 5)
		if out.String() != want {
			t.Errorf("progress\n%s\nwant\n%s", out.String(), want)
		}
		if sum.Requests != 2*358 {
			t.Errorf("%d requests, want %d", sum.Requests, 2*358)
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:8080")
	ftp, _ := url.Parse("ftp://h")
	good := func() Config {
		return Config{URL: u, Mode: "segment", Tag: "t", Count: 1, Concurrency: 1, Duration: time.Second}
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   error
	}{
		{"no server", func(o *Config) { o.URL = nil }, leaf.ErrInvalidArgument},
		{"two servers", func(o *Config) { o.GRPC = "h:1" }, leaf.ErrInvalidArgument},
		{"not http", func(o *Config) { o.URL = ftp }, leaf.ErrInvalidArgument},
		{"mode", func(o *Config) { o.Mode = "uuid" }, leaf.ErrInvalidArgument},
		{"tag", func(o *Config) { o.Tag = "a/b" }, leaf.ErrInvalidTag},
		{"count", func(o *Config) { o.Count = 0 }, leaf.ErrInvalidCount},
		{"concurrency", func(o *Config) { o.Concurrency = MaxConcurrency + 1 }, leaf.ErrInvalidArgument},
		{"duration", func(o *Config) { o.Duration = MinDuration - 1 }, leaf.ErrInvalidArgument},
		{"rate", func(o *Config) { o.Rate = -1 }, leaf.ErrInvalidArgument},
		{"cap", func(o *Config) { o.UniqueCap = -1 }, leaf.ErrInvalidArgument},
	}
	for _, tt := range tests {
		o := good()
		tt.change(&o)
		if err := o.validate(); !errors.Is(err, tt.want) {
			t.Errorf("%s: validate() = %v, want %v", tt.name, err, tt.want)
		}
	}
	o := good()
	if err := o.validate(); err != nil || o.UniqueCap != MaxUnique {
		t.Errorf("valid options: %v, cap %d", err, o.UniqueCap)
	}
}

// TestRunProbe: Run's first request tells a server that cannot serve the
// run from a loaded one; nothing more is sent.
func TestRunProbe(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "tag not found", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	sum, err := Run(t.Context(), Config{URL: u, Mode: "segment", Tag: "nope", Count: 1, Concurrency: 4, Duration: time.Hour})
	want := "first request to " + srv.URL + " failed (http 404): tag not found"
	if sum != nil || err == nil || err.Error() != want || calls.Load() != 1 {
		t.Errorf("Run = %v, %v after %d requests; want %q after one", sum, err, calls.Load(), want)
	}
	if _, err := Run(t.Context(), Config{URL: u}); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("Run with no mode: %v", err)
	}
}
