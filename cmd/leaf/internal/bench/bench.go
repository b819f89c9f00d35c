// Package bench is the load generator behind 'leaf bench': it sends
// requests for IDs to a running server, over HTTP (Leaf's routes) or gRPC
// (leaf.v1.Leaf), and reports throughput, errors and latency. It exists
// because wrk and ghz measure throughput but do not look at what came back;
// for an ID service a fast wrong answer is worse than a slow right one, so
// every answer is parsed, counted and, with CheckUnique, checked for
// repeats.
//
// The hot path takes no lock: each worker goroutine owns its counters (read
// by the progress printer through atomics), its latency histogram, its error
// table and its collected IDs, and they are merged once the run is over.
// With a Rate, the workers share a schedule (pacer) and latency counts from
// each request's slot in it, so that a stalled server shows in the
// quantiles as it would to clients arriving at that rate (no coordinated
// omission).
package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
)

// Bounds of the options. The duration is capped so a forgotten run ends; the
// concurrency because each worker holds a 16 KB histogram and, over HTTP, a
// connection, and far more connections than cores measures the scheduler.
const (
	DefaultDuration    = 10 * time.Second
	MinDuration        = 100 * time.Millisecond
	MaxDuration        = time.Hour
	DefaultConcurrency = 32
	MaxConcurrency     = 1024
	MaxRate            = 1_000_000
)

// MaxUnique caps the IDs CheckUnique keeps, over all workers: 400 MB of
// int64, plus as much again while sorting. IDs past it are counted but not
// checked.
const MaxUnique = 50_000_000

// requestTimeout bounds one request. The server answers or fails within
// its wait_timeout (1s by default), so this only catches a hung
// connection; such a request counts as a transport timeout.
const requestTimeout = 10 * time.Second

// probeTimeout bounds the first request, which tells an unreachable or
// misconfigured server (no run) from a loaded one.
const probeTimeout = 5 * time.Second

// Config describe a run. Exactly one of URL, GRPC and Servers names the
// server or servers.
type Config struct {
	URL  *url.URL    // HTTP: the server's base URL, http:// or https://
	GRPC string      // gRPC: the server's host:port
	TLS  *tls.Config // the CAs to trust; nil: the system's (HTTPS), plaintext (gRPC)

	// Servers are HTTP servers called through the Go client (package
	// client, the /v2 routes), as an application calls them: round robin,
	// failing over, and with Zone, that zone's servers first. A request
	// counts as failed when the client gives up on it.
	Servers []client.Endpoint
	Zone    string
	// Logger gets the client's warnings (a server failing, calls leaving
	// the zone); nil: none.
	Logger *slog.Logger

	Mode        string        // "segment" or "snowflake"
	Tag         string        // segment tag; in snowflake mode the key, which the server ignores
	Count       int           // IDs per request: 1 asks for single IDs, more for batches
	Concurrency int           // workers, each with a request in flight: 1..MaxConcurrency
	Duration    time.Duration // how long to send requests: MinDuration..MaxDuration
	Rate        int           // requests per second in all, evenly spaced; 0: as fast as the workers go

	// CheckUnique keeps every ID, up to UniqueCap (0: MaxUnique), and
	// checks that none repeats.
	CheckUnique bool
	UniqueCap   int64

	// Progress, if set, gets a line a second: requests and IDs a second,
	// errors so far.
	Progress io.Writer
}

// target names the server in messages and the summary.
func (o *Config) target() string {
	switch {
	case o.URL != nil:
		return o.URL.Redacted()
	case len(o.Servers) > 0:
		names := make([]string, len(o.Servers))
		for i, e := range o.Servers {
			names[i] = e.URL
			if e.Zone != "" {
				names[i] = e.Zone + "=" + e.URL
			}
		}
		return strings.Join(names, ",")
	}
	return o.GRPC
}

// validate checks o, and fills in the default cap.
func (o *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: bench: %s", leaf.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	switch {
	case btoi(o.URL != nil)+btoi(o.GRPC != "")+btoi(len(o.Servers) > 0) != 1:
		return bad("name the server by exactly one of URL, GRPC and Servers")
	case o.Zone != "" && len(o.Servers) == 0:
		return bad("a zone is for Servers")
	case o.URL != nil && o.URL.Scheme != "http" && o.URL.Scheme != "https":
		return bad("server %q is not an http(s) URL", o.URL.Redacted())
	case o.Mode != "segment" && o.Mode != "snowflake":
		return bad("mode %q is not segment or snowflake", o.Mode)
	case o.Concurrency < 1 || o.Concurrency > MaxConcurrency:
		return bad("concurrency %d: want 1..%d", o.Concurrency, MaxConcurrency)
	case o.Duration < MinDuration || o.Duration > MaxDuration:
		return bad("duration %v: want %v..%v", o.Duration, MinDuration, MaxDuration)
	case o.Rate < 0 || o.Rate > MaxRate:
		return bad("rate %d: want 0..%d", o.Rate, MaxRate)
	case o.UniqueCap < 0:
		return bad("unique cap %d is negative", o.UniqueCap)
	}
	if err := leaf.ValidateTag(o.Tag); err != nil {
		return err
	}
	if err := leaf.ValidateCount(o.Count); err != nil {
		return err
	}
	if o.UniqueCap == 0 {
		o.UniqueCap = MaxUnique
	}
	return nil
}

// Run checks the server with one request, then runs o and returns its
// summary: for an unreachable server, an unknown tag or a mode the server
// does not run, that first request fails and Run returns its error rather
// than a run of errors. Invalid options give an error wrapping
// leaf.ErrInvalidArgument (or leaf's tag and count errors). A run that ctx
// ends early is summarized, marked Interrupted; if ctx ends during the
// first request, Run returns ctx.Err().
func Run(ctx context.Context, o Config) (*Summary, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var zc *client.Client // with Servers
	var newCaller func() caller
	var closeAll func()
	var err error
	if len(o.Servers) > 0 {
		zc, newCaller, closeAll, err = clientCallers(&o)
	} else {
		newCaller, closeAll, err = newCallers(&o)
	}
	if err != nil {
		return nil, err
	}
	defer closeAll()

	probe := newCaller()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	ids, f := probe.call(pctx, nil)
	cancel()
	if f == nil {
		f = checkIDs(ids, o.Count)
	}
	if f != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("first request to %s failed (%s): %s", o.target(), f.kind, f.detail)
	}
	sum := run(ctx, &o, newCaller, probe, ids)
	if zc != nil {
		sum.setServers(zc.Stats())
	}
	return sum, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// worker is one goroutine's share of the run. The counters are atomic
// only so the progress printer can read them; the worker is their one
// writer. The padding keeps them off the cache lines of the fields around
// them, including the tail of the worker allocated just before, which its
// own goroutine writes.
type worker struct {
	_                     [64]byte
	requests, ids, errors atomic.Int64
	_                     [64]byte

	hist     histogram  // service time: from send to answer
	sched    *histogram // Rate: from the request's slot in the schedule to its answer
	failures map[string]*ErrorKind
	seen     []int64 // CheckUnique: the IDs kept
}

func (w *worker) fail(f *failure) {
	w.errors.Add(1)
	if w.failures == nil {
		w.failures = map[string]*ErrorKind{}
	}
	k := w.failures[f.kind]
	if k == nil {
		k = &ErrorKind{Kind: f.kind, Example: f.detail}
		w.failures[f.kind] = k
	}
	k.Count++
}

// keep keeps ids for the uniqueness check while the room shared by every
// worker lasts. The room is shared, not split per worker, so that no ID goes
// unchecked before the cap is reached, however unevenly the workers go.
func (w *worker) keep(ids []int64, room *atomic.Int64) {
	if room.Load() <= 0 {
		return
	}
	n := int64(len(ids))
	left := room.Add(-n)
	switch {
	case left >= 0:
		w.seen = append(w.seen, ids...)
	case left > -n:
		w.seen = append(w.seen, ids[:n+left]...)
	}
}

// run runs the workers until the duration passes or ctx ends, printing
// progress to o.Progress, and returns the merged summary. The probe's IDs are compared
// with the run's for uniqueness, but are not counted: neither in the IDs nor
// in the IDs checked.
func run(ctx context.Context, o *Config, newCaller func() caller, probe caller, probeIDs []int64) *Summary {
	workers := make([]*worker, o.Concurrency)
	callers := make([]caller, o.Concurrency)
	var room atomic.Int64 // IDs CheckUnique may still keep
	room.Store(o.UniqueCap)
	for i := range workers {
		workers[i] = &worker{}
		if o.Rate > 0 {
			workers[i].sched = &histogram{}
		}
		if i == 0 {
			callers[i] = probe // its connection is already open
		} else {
			callers[i] = newCaller()
		}
	}

	// stop is read by every worker before each request: one shared word,
	// written once, so it stays in every core's cache until then.
	var stop atomic.Bool
	start := time.Now()
	var pace *pacer
	if o.Rate > 0 {
		pace = &pacer{start: start, end: start.Add(o.Duration), rate: int64(o.Rate)}
	}
	timer := time.AfterFunc(o.Duration, func() { stop.Store(true) })
	defer timer.Stop()
	interrupted := false
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func(c caller) {
			defer wg.Done()
			ids := make([]int64, 0, o.Count)
			var wait *time.Timer
			for !stop.Load() {
				var due time.Time // the request's slot in the schedule
				if pace != nil {
					var ok bool
					if due, ok = pace.wait(ctx, &wait); !ok {
						return
					}
				}
				t0 := time.Now()
				var f *failure
				ids, f = c.call(ctx, ids[:0])
				end := time.Now()
				if f == nil {
					f = checkIDs(ids, o.Count)
				}
				if f != nil && ctx.Err() != nil {
					return // interrupted: not the server's failure
				}
				if f != nil {
					w.fail(f)
				} else {
					w.hist.record(int64(end.Sub(t0)))
					if w.sched != nil {
						// A request sent late, behind a stalled one, waited
						// from its slot on, as a client arriving on
						// schedule would have.
						w.sched.record(int64(end.Sub(due)))
					}
					w.ids.Add(int64(len(ids)))
					if o.CheckUnique {
						w.keep(ids, &room)
					}
				}
				w.requests.Add(1)
			}
		}(callers[i])
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastReq, lastIDs int64
	last := start
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-ctx.Done():
			interrupted = true
			stop.Store(true)
			<-done
			running = false
		case now := <-tick.C:
			if o.Progress == nil {
				continue
			}
			var req, ids, errs int64
			for _, w := range workers {
				req += w.requests.Load()
				ids += w.ids.Load()
				errs += w.errors.Load()
			}
			dt := now.Sub(last).Seconds()
			fmt.Fprintf(o.Progress, "%6.1fs  %12.0f req/s  %14.0f IDs/s  %d errors\n",
				now.Sub(start).Seconds(), float64(req-lastReq)/dt, float64(ids-lastIDs)/dt, errs)
			lastReq, lastIDs, last = req, ids, now
		}
	}
	elapsed := time.Since(start)
	return summarize(o, workers, probeIDs, elapsed, interrupted)
}
