package main

// leaf bench: a load generator for a running server, over HTTP (Leaf's
// routes) or gRPC (leaf.v1.Leaf). It exists because wrk and ghz measure
// throughput but do not look at what came back; for an ID service a fast
// wrong answer is worse than a slow right one, so every answer is parsed,
// counted and, with --check-unique, checked for repeats.
//
// The hot path takes no lock: each worker goroutine owns its counters (read
// by the progress printer through atomics), its latency histogram, its error
// table and its collected IDs, and they are merged once the run is over.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/config"
)

const benchUsage = `Usage: leaf bench [--server URL | --grpc ADDR] [flags]

Sends requests for IDs to a running server from --concurrency goroutines
for --duration, and reports throughput, errors and latency. Over HTTP it
uses Leaf's routes, /api/segment/get/TAG and /api/snowflake/get/TAG (with
?count=N when --count > 1); over gRPC, NextID(s) or SnowflakeNextID(s).

With --rate N the workers share a schedule of N requests a second, evenly
spaced, instead of each sending its next request as soon as it has an
answer: a steady load for soak tests. A worker whose answer comes late sends
its next request at once, until the schedule is caught up. Latency is then
measured from when each request was due by the schedule, not from when it
was sent, so a server that stalls shows in the quantiles as it would to
clients arriving at that rate (no coordinated omission); the service time,
from send to answer, is reported beside it.

Every answer is checked: a request counts as an error if its status is not
200 (gRPC: not OK), its body is not --count positive decimal IDs one per
line, or its IDs are not strictly increasing. --check-unique also keeps
every ID (up to 50,000,000) and reports repeats.

Progress goes to stderr once a second (--quiet turns it off); the summary,
text or --json, to stdout. Latencies are those of successful requests; the
IDs counted are those of successful answers, and with --check-unique every
one of them is checked (up to the cap) against every other ID received.

Exit status: 0 when every request succeeded (and no ID repeated), 1 if the
server is unreachable at the start, any request failed or an ID repeated
(the summary is printed first), 2 for bad flags.
`

// Bounds of the flags. The duration is capped so a forgotten run ends; the
// concurrency because each worker holds a 16 KB histogram and, over HTTP, a
// connection, and far more connections than cores measures the scheduler.
const (
	benchDefaultDuration    = 10 * time.Second
	benchMinDuration        = 100 * time.Millisecond
	benchMaxDuration        = time.Hour
	benchDefaultConcurrency = 32
	benchMaxConcurrency     = 1024
	benchMaxRate            = 1_000_000
)

// benchRequestTimeout bounds one request. The server answers or fails
// within its wait_timeout (1s by default), so this only catches a hung
// connection; such a request counts as a transport timeout.
const benchRequestTimeout = 10 * time.Second

// benchProbeTimeout bounds the first request, which tells an unreachable or
// misconfigured server (exit 1, no run) from a loaded one.
const benchProbeTimeout = 5 * time.Second

// benchMaxUnique caps the IDs --check-unique keeps, over all workers: 400
// MB of int64, plus as much again while sorting. IDs past it are counted but
// not checked.
const benchMaxUnique = 50_000_000

// benchGRPCConns is how many gRPC connections the workers share, round
// robin. One HTTP/2 connection funnels every frame through one writer and
// one reader goroutine on each side; a few spread that without opening one
// connection per worker as HTTP/1.1 must.
const benchGRPCConns = 4

// benchOptions is a validated command line.
type benchOptions struct {
	grpc        bool
	target      string   // base URL (HTTP) or host:port (gRPC)
	url         *url.URL // HTTP only
	mode        string   // "segment" or "snowflake"
	tag         string
	count       int
	concurrency int
	duration    time.Duration
	rate        int // requests per second in all; 0: unpaced
	quiet       bool
	json        bool
	checkUnique bool
	uniqueCap   int64       // the most IDs --check-unique keeps: benchMaxUnique
	tls         *tls.Config // --cacert: the CAs to trust; nil: the system's (HTTPS), plaintext (gRPC)
}

func (a *app) bench(ctx context.Context, args []string) error {
	o, err := a.benchFlags(args)
	if err != nil {
		return err
	}
	newCaller, closeAll, err := benchCallers(o)
	if err != nil {
		return err
	}
	defer closeAll()

	// One request first: an unreachable server, an unknown tag or a mode the
	// server does not run is a failure to report, not ten seconds of errors.
	probe := newCaller()
	pctx, cancel := context.WithTimeout(ctx, benchProbeTimeout)
	ids, cerr := probe.call(pctx, nil)
	cancel()
	if cerr == nil {
		cerr = checkBenchIDs(ids, o.count)
	}
	if cerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("first request to %s failed (%s): %s", o.target, cerr.kind, cerr.detail)
	}

	sum := runBench(ctx, o, newCaller, probe, ids, a.stderr)
	if o.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else if err := sum.writeText(a.stdout, o); err != nil {
		return err
	}
	switch {
	case sum.Unique != nil && sum.Unique.Duplicates > 0:
		return fmt.Errorf("%d duplicate IDs", sum.Unique.Duplicates)
	case sum.Errors > 0:
		return fmt.Errorf("%d of %d requests failed", sum.Errors, sum.Requests)
	case sum.Requests == 0:
		return errors.New("no request completed")
	}
	return nil
}

func (a *app) benchFlags(args []string) (*benchOptions, error) {
	fs := newFlagSet("bench")
	server := fs.String("server", "", "base `URL` of the HTTP server (default $"+envServer+", else "+defaultServer+")")
	grpcAddr := fs.String("grpc", "", "`ADDR` (host:port) of the gRPC server, instead of --server (plaintext, TLS with --cacert)")
	cacert := fs.String("cacert", "", cacertUsage+"; with --grpc, connect over TLS")
	mode := fs.String("mode", "segment", "which IDs to ask for: `segment` or snowflake")
	tag := fs.String("tag", config.SeedTag, "segment `TAG` (in snowflake mode the key, which the server ignores)")
	count := fs.Int("count", 1, "IDs per request, 1..10000; 1 asks for single IDs, more for batches")
	conc := fs.Int("concurrency", benchDefaultConcurrency, fmt.Sprintf("concurrent requests (workers; HTTP connections), 1..%d", benchMaxConcurrency))
	dur := fs.Duration("duration", benchDefaultDuration, "how long to send requests, 100ms..1h")
	rate := fs.Int("rate", 0, fmt.Sprintf("requests per second in all, evenly spaced, 0..%d; 0: as fast as the workers go", benchMaxRate))
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	unique := fs.Bool("check-unique", false, fmt.Sprintf("keep every ID (up to %d) and check that none repeats", benchMaxUnique))
	pos, err := a.parseFlags(fs, benchUsage, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usageErrorf("takes no arguments, got %q", pos[0])
	}
	o := &benchOptions{mode: *mode, tag: *tag, count: *count, concurrency: *conc, duration: *dur, rate: *rate,
		quiet: *quiet, json: *asJSON, checkUnique: *unique, uniqueCap: benchMaxUnique}
	switch {
	case *grpcAddr != "" && *server != "":
		return nil, usageErrorf("--server and --grpc exclude each other")
	case *grpcAddr != "":
		host, port, err := net.SplitHostPort(*grpcAddr)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, usageErrorf("--grpc %q is not host:port", *grpcAddr)
		}
		o.grpc, o.target = true, *grpcAddr
	default:
		u, err := a.serverURL(*server)
		if err != nil {
			return nil, err
		}
		o.url, o.target = u, u.Redacted()
		if *cacert != "" && u.Scheme != "https" {
			return nil, usageErrorf("--cacert is for an https:// server or --grpc; %s is plain HTTP", o.target)
		}
	}
	if *cacert != "" {
		if o.tls, err = clientTLS(*cacert); err != nil {
			return nil, err
		}
	}
	if o.mode != "segment" && o.mode != "snowflake" {
		return nil, usageErrorf("--mode %q is not segment or snowflake", o.mode)
	}
	if err := leaf.ValidateTag(o.tag); err != nil {
		return nil, err
	}
	if err := leaf.ValidateCount(o.count); err != nil {
		return nil, err
	}
	if o.concurrency < 1 || o.concurrency > benchMaxConcurrency {
		return nil, usageErrorf("--concurrency %d: want 1..%d", o.concurrency, benchMaxConcurrency)
	}
	if o.duration < benchMinDuration || o.duration > benchMaxDuration {
		return nil, usageErrorf("--duration %v: want 100ms..1h", o.duration)
	}
	if o.rate < 0 || o.rate > benchMaxRate {
		return nil, usageErrorf("--rate %d: want 0..%d", o.rate, benchMaxRate)
	}
	return o, nil
}

// benchFailure is why one request did not count: kind groups failures in
// the summary ("http 503", "grpc Unavailable", "transport timeout", "bad
// body"), detail is an example message.
type benchFailure struct{ kind, detail string }

// benchCaller makes one request and appends the IDs it got to ids. Each
// worker has its own; a caller is not safe for concurrent use.
type benchCaller interface {
	call(ctx context.Context, ids []int64) ([]int64, *benchFailure)
}

// benchCallers returns a constructor of callers sharing one client (HTTP)
// or a few connections (gRPC), and a function that closes them.
func benchCallers(o *benchOptions) (newCaller func() benchCaller, closeAll func(), err error) {
	if o.grpc {
		return grpcBenchCallers(o)
	}
	return httpBenchCallers(o)
}

// httpBenchCallers uses fasthttp rather than net/http: its HostClient reuses
// request and response objects and their buffers, so a request allocates
// nothing, where net/http allocates a few KB per request (request, header
// maps, response, body reader). On a small machine where generator and
// server share the cores, the generator's CPU is taken from the server, so
// a cheaper client measures more of the server. MaxConns is the
// concurrency: each worker has a connection to itself, as wrk's do.
func httpBenchCallers(o *benchOptions) (func() benchCaller, func(), error) {
	isTLS := o.url.Scheme == "https"
	hc := &fasthttp.HostClient{
		Addr:      fasthttp.AddMissingPort(o.url.Host, isTLS),
		IsTLS:     isTLS,
		TLSConfig: o.tls,
		Name:      "leaf-bench",
		MaxConns:  o.concurrency,
		// Never retry behind our back: a failed request is a result.
		MaxIdemponentCallAttempts: 1,
		ReadTimeout:               benchRequestTimeout,
		WriteTimeout:              benchRequestTimeout,
		MaxResponseBodySize:       maxGetBody,
		MaxIdleConnDuration:       time.Minute,
	}
	kind := "segment"
	if o.mode == "snowflake" {
		kind = "snowflake"
	}
	u := o.url.JoinPath("api", kind, "get", o.tag)
	if o.count != 1 {
		u.RawQuery = "count=" + strconv.Itoa(o.count)
	}
	uri := u.String()
	newCaller := func() benchCaller {
		req := fasthttp.AcquireRequest()
		req.SetRequestURI(uri)
		req.Header.SetMethod(fasthttp.MethodGet)
		return &httpBenchCaller{hc: hc, req: req, resp: fasthttp.AcquireResponse()}
	}
	return newCaller, hc.CloseIdleConnections, nil
}

type httpBenchCaller struct {
	hc   *fasthttp.HostClient
	req  *fasthttp.Request
	resp *fasthttp.Response
}

func (c *httpBenchCaller) call(_ context.Context, ids []int64) ([]int64, *benchFailure) {
	if err := c.hc.Do(c.req, c.resp); err != nil {
		return ids, transportFailure(err)
	}
	body := c.resp.Body()
	if code := c.resp.StatusCode(); code != fasthttp.StatusOK {
		return ids, &benchFailure{kind: "http " + strconv.Itoa(code), detail: benchTruncate(strings.TrimSpace(string(body)), 200)}
	}
	ids, err := parseIDLines(body, ids)
	if err != nil {
		return ids, &benchFailure{kind: "bad body", detail: err.Error()}
	}
	return ids, nil
}

// transportFailure names a failed exchange by its cause.
func transportFailure(err error) *benchFailure {
	kind := "transport"
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = "transport timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "transport connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		kind = "transport connection reset"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		kind = "transport connection closed"
	}
	return &benchFailure{kind: kind, detail: benchTruncate(err.Error(), 200)}
}

// parseIDLines appends to ids the decimal IDs of body, one per line (Leaf's
// batch format; a single trailing newline is accepted). An ID must be in
// 1..2^63-1.
func parseIDLines(body []byte, ids []int64) ([]int64, error) {
	if len(body) > 0 && body[len(body)-1] == '\n' {
		body = body[:len(body)-1]
	}
	if len(body) == 0 {
		return ids, errors.New("empty body")
	}
	for line := 1; ; line++ {
		var id uint64
		i := 0
		for ; i < len(body) && body[i] != '\n'; i++ {
			d := body[i] - '0'
			if d > 9 || id > (math.MaxInt64-uint64(d))/10 {
				return ids, fmt.Errorf("line %d: not an ID: %q", line, benchTruncate(string(body[:min(len(body), 40)]), 40))
			}
			id = id*10 + uint64(d)
		}
		if i == 0 || id == 0 {
			return ids, fmt.Errorf("line %d: not an ID: %q", line, string(body[:i]))
		}
		ids = append(ids, int64(id))
		if i == len(body) {
			return ids, nil
		}
		body = body[i+1:]
	}
}

func grpcBenchCallers(o *benchOptions) (func() benchCaller, func(), error) {
	conns := make([]leafv1.LeafClient, 0, benchGRPCConns)
	var closers []*grpc.ClientConn
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	for range min(o.concurrency, benchGRPCConns) {
		// NewClient only parses the target; connecting is lazy, so an
		// unreachable server shows in the probe request.
		cc, err := grpc.NewClient(o.target, grpc.WithTransportCredentials(creds))
		if err != nil {
			closeAll()
			return nil, nil, usageErrorf("--grpc %q: %v", o.target, err)
		}
		closers = append(closers, cc)
		conns = append(conns, leafv1.NewLeafClient(cc))
	}
	n := 0
	newCaller := func() benchCaller {
		c := &grpcBenchCaller{client: conns[n%len(conns)], segment: o.mode == "segment", count: o.count}
		n++
		c.nextID = &leafv1.NextIDRequest{Tag: o.tag}
		c.nextIDs = &leafv1.NextIDsRequest{Tag: o.tag, Count: int32(o.count)}
		c.sfID = &leafv1.SnowflakeNextIDRequest{Key: o.tag}
		c.sfIDs = &leafv1.SnowflakeNextIDsRequest{Key: o.tag, Count: int32(o.count)}
		return c
	}
	return newCaller, closeAll, nil
}

type grpcBenchCaller struct {
	client  leafv1.LeafClient
	segment bool
	count   int
	// The requests never change; built once.
	nextID  *leafv1.NextIDRequest
	nextIDs *leafv1.NextIDsRequest
	sfID    *leafv1.SnowflakeNextIDRequest
	sfIDs   *leafv1.SnowflakeNextIDsRequest
}

func (c *grpcBenchCaller) call(ctx context.Context, ids []int64) ([]int64, *benchFailure) {
	ctx, cancel := context.WithTimeout(ctx, benchRequestTimeout)
	defer cancel()
	var err error
	switch {
	case c.segment && c.count == 1:
		var r *leafv1.NextIDResponse
		if r, err = c.client.NextID(ctx, c.nextID); err == nil {
			ids = append(ids, r.GetId())
		}
	case c.segment:
		var r *leafv1.NextIDsResponse
		if r, err = c.client.NextIDs(ctx, c.nextIDs); err == nil {
			ids = append(ids, r.GetIds()...)
		}
	case c.count == 1:
		var r *leafv1.SnowflakeNextIDResponse
		if r, err = c.client.SnowflakeNextID(ctx, c.sfID); err == nil {
			ids = append(ids, r.GetId())
		}
	default:
		var r *leafv1.SnowflakeNextIDsResponse
		if r, err = c.client.SnowflakeNextIDs(ctx, c.sfIDs); err == nil {
			ids = append(ids, r.GetIds()...)
		}
	}
	if err != nil {
		// A failure that is not a status (none is expected from the
		// generated client) converts to Unknown.
		s := status.Convert(err)
		return ids, &benchFailure{kind: "grpc " + s.Code().String(), detail: benchTruncate(s.Message(), 200)}
	}
	return ids, nil
}

// checkBenchIDs checks an answer against what every answer must be: count
// positive IDs, strictly increasing.
func checkBenchIDs(ids []int64, count int) *benchFailure {
	if len(ids) != count {
		return &benchFailure{kind: "wrong count", detail: fmt.Sprintf("%d IDs, asked for %d", len(ids), count)}
	}
	for i, id := range ids {
		if id <= 0 {
			return &benchFailure{kind: "bad ID", detail: fmt.Sprintf("ID %d", id)}
		}
		if i > 0 && id <= ids[i-1] {
			return &benchFailure{kind: "not increasing", detail: fmt.Sprintf("%d after %d", id, ids[i-1])}
		}
	}
	return nil
}

// benchWorker is one goroutine's share of the run. The counters are atomic
// only so the progress printer can read them; the worker is their one
// writer. The padding keeps them off the cache lines of the fields around
// them, including the tail of the worker allocated just before, which its
// own goroutine writes.
type benchWorker struct {
	_                     [64]byte
	requests, ids, errors atomic.Int64
	_                     [64]byte

	hist     histogram  // service time: from send to answer
	sched    *histogram // --rate: from the request's slot in the schedule to its answer
	failures map[string]*benchErrorKind
	seen     []int64 // --check-unique: the IDs kept
}

func (w *benchWorker) fail(f *benchFailure) {
	w.errors.Add(1)
	if w.failures == nil {
		w.failures = map[string]*benchErrorKind{}
	}
	k := w.failures[f.kind]
	if k == nil {
		k = &benchErrorKind{Kind: f.kind, Example: f.detail}
		w.failures[f.kind] = k
	}
	k.Count++
}

// keep keeps ids for the uniqueness check while the room shared by every
// worker lasts. The room is shared, not split per worker, so that no ID goes
// unchecked before the cap is reached, however unevenly the workers go.
func (w *benchWorker) keep(ids []int64, room *atomic.Int64) {
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

// runBench runs the workers until the duration passes or ctx ends, printing
// progress, and returns the merged summary. The probe's IDs are compared
// with the run's for uniqueness, but are not counted: neither in the IDs nor
// in the IDs checked.
func runBench(ctx context.Context, o *benchOptions, newCaller func() benchCaller, probe benchCaller, probeIDs []int64, progress io.Writer) *benchSummary {
	workers := make([]*benchWorker, o.concurrency)
	callers := make([]benchCaller, o.concurrency)
	var room atomic.Int64 // IDs --check-unique may still keep
	room.Store(o.uniqueCap)
	for i := range workers {
		workers[i] = &benchWorker{}
		if o.rate > 0 {
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
	var pace *benchPacer
	if o.rate > 0 {
		pace = &benchPacer{start: start, end: start.Add(o.duration), interval: time.Second / time.Duration(o.rate)}
	}
	timer := time.AfterFunc(o.duration, func() { stop.Store(true) })
	defer timer.Stop()
	interrupted := false
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func(c benchCaller) {
			defer wg.Done()
			ids := make([]int64, 0, o.count)
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
				var f *benchFailure
				ids, f = c.call(ctx, ids[:0])
				end := time.Now()
				if f == nil {
					f = checkBenchIDs(ids, o.count)
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
					if o.checkUnique {
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
			if o.quiet {
				continue
			}
			var req, ids, errs int64
			for _, w := range workers {
				req += w.requests.Load()
				ids += w.ids.Load()
				errs += w.errors.Load()
			}
			dt := now.Sub(last).Seconds()
			fmt.Fprintf(progress, "%6.1fs  %12.0f req/s  %14.0f IDs/s  %d errors\n",
				now.Sub(start).Seconds(), float64(req-lastReq)/dt, float64(ids-lastIDs)/dt, errs)
			lastReq, lastIDs, last = req, ids, now
		}
	}
	elapsed := time.Since(start)
	return summarize(o, workers, probeIDs, elapsed, interrupted)
}

// benchPacer spreads the requests of a --rate run evenly over time: slot n
// is due at start + n*interval, and each request takes the next free slot,
// whichever worker sends it. Taking a slot is one atomic add; a worker that
// is behind finds its slot due already and does not wait.
type benchPacer struct {
	start, end time.Time
	interval   time.Duration
	next       atomic.Int64
}

// wait takes the next slot and sleeps until it is due, on the worker's own
// timer (created on first use), and returns when it was due: latency counts
// from then. It returns false, without sleeping, when the slot falls after
// the end of the run, and when ctx ends first.
func (p *benchPacer) wait(ctx context.Context, t **time.Timer) (time.Time, bool) {
	due := p.start.Add(time.Duration(p.next.Add(1)-1) * p.interval)
	if !due.Before(p.end) {
		return due, false
	}
	d := time.Until(due)
	if d <= 0 {
		return due, true
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-(*t).C:
		return due, true
	case <-ctx.Done():
		return due, false
	}
}

// benchSummary is the result of a run, as printed with --json.
type benchSummary struct {
	Transport         string            `json:"transport"` // "http" or "grpc"
	Target            string            `json:"target"`
	Mode              string            `json:"mode"`
	Tag               string            `json:"tag"`
	Count             int               `json:"count"`
	Concurrency       int               `json:"concurrency"`
	Rate              int               `json:"rate,omitempty"`   // --rate, requests per second
	DurationSeconds   float64           `json:"duration_seconds"` // asked for
	ElapsedSeconds    float64           `json:"elapsed_seconds"`  // until the last request ended
	Interrupted       bool              `json:"interrupted,omitempty"`
	Requests          int64             `json:"requests"` // completed, failed ones included
	IDs               int64             `json:"ids"`      // in the answers of the successful requests: count × (requests - errors)
	Errors            int64             `json:"errors"`
	ErrorKinds        []*benchErrorKind `json:"error_kinds"` // most frequent first
	RequestsPerSecond float64           `json:"requests_per_second"`
	IDsPerSecond      float64           `json:"ids_per_second"`
	// LatencyUS is the latency of the successful requests: with --rate
	// from when each was due by the schedule (LatencyFrom "schedule"), so
	// that a stall counts for every request it held back; without, from
	// when each was sent ("send"), the same as ServiceTimeUS.
	LatencyUS     benchLatency `json:"latency_us"`
	LatencyFrom   string       `json:"latency_from"`
	ServiceTimeUS benchLatency `json:"service_time_us"` // from send to answer
	Unique        *benchUnique `json:"unique,omitempty"`

	hist    *histogram // what LatencyUS reports
	service *histogram
}

type benchErrorKind struct {
	Kind    string `json:"kind"`
	Count   int64  `json:"count"`
	Example string `json:"example"`
}

type benchLatency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// benchUnique is the result of --check-unique. Checked + Unchecked is the
// summary's IDs. The first request's IDs (the probe, before the run) are
// compared too but not counted in either.
type benchUnique struct {
	Checked    int64   `json:"checked"`    // the run's IDs kept and compared with every ID kept
	Unchecked  int64   `json:"unchecked"`  // the run's IDs past the memory cap
	Duplicates int64   `json:"duplicates"` // IDs checked equal to an earlier one
	Examples   []int64 `json:"examples,omitempty"`
}

func summarize(o *benchOptions, workers []*benchWorker, probeIDs []int64, elapsed time.Duration, interrupted bool) *benchSummary {
	s := &benchSummary{Transport: "http", Target: o.target, Mode: o.mode, Tag: o.tag, Count: o.count,
		Concurrency: o.concurrency, Rate: o.rate, DurationSeconds: o.duration.Seconds(), ElapsedSeconds: elapsed.Seconds(),
		Interrupted: interrupted, ErrorKinds: []*benchErrorKind{}, service: &histogram{}, LatencyFrom: "send"}
	s.hist = s.service
	if o.rate > 0 {
		s.hist, s.LatencyFrom = &histogram{}, "schedule"
	}
	if o.grpc {
		s.Transport = "grpc"
	}
	kinds := map[string]*benchErrorKind{}
	var seen []int64
	if o.checkUnique {
		seen = append(seen, probeIDs...)
	}
	for _, w := range workers {
		s.Requests += w.requests.Load()
		s.IDs += w.ids.Load()
		s.Errors += w.errors.Load()
		s.service.merge(&w.hist)
		if w.sched != nil {
			s.hist.merge(w.sched)
		}
		for _, k := range w.failures {
			if m := kinds[k.Kind]; m != nil {
				m.Count += k.Count
			} else {
				kinds[k.Kind] = &benchErrorKind{Kind: k.Kind, Count: k.Count, Example: k.Example}
			}
		}
		if o.checkUnique {
			seen = append(seen, w.seen...)
			w.seen = nil
		}
	}
	for _, k := range kinds {
		s.ErrorKinds = append(s.ErrorKinds, k)
	}
	slices.SortFunc(s.ErrorKinds, func(a, b *benchErrorKind) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	if secs := elapsed.Seconds(); secs > 0 {
		s.RequestsPerSecond = float64(s.Requests) / secs
		s.IDsPerSecond = float64(s.IDs) / secs
	}
	s.LatencyUS, s.ServiceTimeUS = s.hist.latency(), s.service.latency()
	if o.checkUnique {
		s.Unique = checkUnique(seen)
		// The probe's IDs, distinct and increasing (the probe passed
		// checkBenchIDs), are compared but not counted: every duplicate
		// is one of the run's IDs.
		s.Unique.Checked -= int64(len(probeIDs))
		s.Unique.Unchecked = s.IDs - s.Unique.Checked
	}
	return s
}

// latency reports the quantiles in microseconds.
func (h *histogram) latency() benchLatency {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return benchLatency{P50: us(h.quantile(0.5)), P90: us(h.quantile(0.9)),
		P99: us(h.quantile(0.99)), P999: us(h.quantile(0.999)), Max: us(h.max), Mean: h.mean() / 1e3}
}

// checkUnique sorts ids and counts the repeats.
func checkUnique(ids []int64) *benchUnique {
	slices.Sort(ids)
	u := &benchUnique{Checked: int64(len(ids))}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			u.Duplicates++
			if len(u.Examples) < 5 && (len(u.Examples) == 0 || u.Examples[len(u.Examples)-1] != ids[i]) {
				u.Examples = append(u.Examples, ids[i])
			}
		}
	}
	return u
}

func (s *benchSummary) writeText(w io.Writer, o *benchOptions) error {
	what := fmt.Sprintf("segment IDs of tag %q", s.Tag)
	if s.Mode == "snowflake" {
		what = "snowflake IDs"
	}
	via := "HTTP " + s.Target
	if o.grpc {
		via = "gRPC " + s.Target
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaf bench: %s, %d per request, %s, concurrency %d, %v", what, s.Count, via, s.Concurrency, o.duration)
	if s.Rate > 0 {
		fmt.Fprintf(&b, ", rate %d/s", s.Rate)
	}
	if s.Interrupted {
		b.WriteString(" (interrupted)")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  requests  %12d  %12.1f/s  in %.2fs\n", s.Requests, s.RequestsPerSecond, s.ElapsedSeconds)
	fmt.Fprintf(&b, "  IDs       %12d  %12.1f/s\n", s.IDs, s.IDsPerSecond)
	fmt.Fprintf(&b, "  errors    %12d\n", s.Errors)
	for _, k := range s.ErrorKinds {
		fmt.Fprintf(&b, "    %-28s %10d  e.g. %q\n", k.Kind, k.Count, k.Example)
	}
	h := s.hist
	if h.n > 0 {
		quantiles := func(name string, h *histogram) {
			fmt.Fprintf(&b, "  %s p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s\n", name,
				fmtLatency(h.quantile(0.5)), fmtLatency(h.quantile(0.9)), fmtLatency(h.quantile(0.99)),
				fmtLatency(h.quantile(0.999)), fmtLatency(h.max), fmtLatency(int64(h.mean())))
		}
		if s.LatencyFrom == "schedule" {
			quantiles("latency from schedule  ", h)
			quantiles("service time           ", s.service)
			b.WriteString("  latency distribution (successful requests, from schedule):\n")
		} else {
			quantiles("latency  ", h)
			b.WriteString("  latency distribution (successful requests):\n")
		}
		rows := h.coarse()
		var peak uint64
		for _, r := range rows {
			peak = max(peak, r.count)
		}
		var cum uint64
		for _, r := range rows {
			cum += r.count
			bar := int(math.Round(40 * float64(r.count) / float64(peak)))
			fmt.Fprintf(&b, "    <= %-8s %12d  %7.3f%%  %s\n", fmtLatency(r.le), r.count,
				100*float64(cum)/float64(h.n), strings.Repeat("#", bar))
		}
	}
	if u := s.Unique; u != nil {
		fmt.Fprintf(&b, "  unique    %12d IDs checked", u.Checked)
		if u.Unchecked > 0 {
			fmt.Fprintf(&b, " (%d more past the cap of %d not checked)", u.Unchecked, o.uniqueCap)
		}
		if u.Duplicates == 0 {
			b.WriteString(", no duplicates\n")
		} else {
			fmt.Fprintf(&b, ", %d DUPLICATES, e.g. %v\n", u.Duplicates, u.Examples)
		}
	} else {
		b.WriteString("  unique    not checked (--check-unique)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtLatency prints nanoseconds to three significant digits: 412µs, 1.23ms.
func fmtLatency(ns int64) string {
	d := time.Duration(ns)
	for unit := time.Duration(1); unit < time.Hour; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit).String()
		}
	}
	return d.Round(time.Second).String()
}

// histogram counts latencies (nanoseconds) in log-linear buckets, as
// HdrHistogram does: values below 2^histSubBits exactly, then each power of
// two split into 2^(histSubBits-1) equal buckets, so a bucket is at most
// 1/64 (1.6%) of its values wide at any magnitude, in a fixed array of
// ~2,000 counters (16 KB) from 1ns to histMax. Recording is a few shifts and
// an increment. Quantiles report the highest value of their bucket, capped
// by the largest value recorded, so they never understate.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64
	max    int64
	min    int64
}

const (
	histSubBits  = 7
	histHalf     = 1 << (histSubBits - 1)
	histMaxBits  = 36 // values up to 2^36-1 ns, ~68.7s; larger ones are clamped
	histMax      = 1<<histMaxBits - 1
	histBuckets  = (histMaxBits-histSubBits)*histHalf + 1<<histSubBits
	histExactMax = 1<<histSubBits - 1
)

// histIndex is the bucket of v (0 <= v <= histMax).
func histIndex(v int64) int {
	if v <= histExactMax {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits
	return shift*histHalf + int(v>>shift)
}

// histBounds is the range of values bucket i holds.
func histBounds(i int) (lo, hi int64) {
	if i <= histExactMax {
		return int64(i), int64(i)
	}
	shift := i/histHalf - 1
	lo = int64(i-shift*histHalf) << shift
	return lo, lo + 1<<shift - 1
}

func (h *histogram) record(v int64) {
	v = min(max(v, 0), histMax)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.counts[histIndex(v)]++
	h.n++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile is the value at or below which a fraction q of the recorded
// values lie (the ceil(q*n)-th smallest), to the bucket's precision; 0 if
// nothing was recorded.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	// The tolerance keeps a product like 0.99*100 that float arithmetic
	// puts a hair above 99 from rounding up to the next value.
	rank := uint64(math.Ceil(q*float64(h.n) - 1e-6))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			_, hi := histBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}

// coarseRow is one line of the printed distribution: how many values are at
// most le and above the previous row's le.
type coarseRow struct {
	le    int64
	count uint64
}

// coarse regroups the buckets on a 1-2-5 scale (1µs, 2µs, 5µs, 10µs...),
// from the first non-empty row to the last. A fine bucket goes to the row
// its highest value falls in, so a row may hold values up to 1.6% above its
// bound.
func (h *histogram) coarse() []coarseRow {
	var bounds []int64
	for decade := int64(1); decade <= histMax; decade *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*decade < histMax {
				bounds = append(bounds, m*decade)
			}
		}
	}
	bounds = append(bounds, histMax) // the clamped values
	rows := make([]coarseRow, len(bounds))
	for i := range rows {
		rows[i].le = bounds[i]
	}
	r := 0
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		_, hi := histBounds(i)
		hi = min(hi, h.max)
		for r < len(rows)-1 && hi > rows[r].le {
			r++
		}
		rows[r].count += c
	}
	first, last := -1, -1
	for i, row := range rows {
		if row.count > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	return rows[first : last+1]
}

// benchTruncate shortens an example message for the summary.
func benchTruncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
