package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// requestTimeout is each client request's deadline: above the server's own
// 1 s wait for a segment load, so a server that keeps its promise answers
// 503 before it, and short enough that a hung server shows up as timeouts.
const requestTimeout = 2 * time.Second

type mode int8

const (
	segmentMode mode = iota
	snowflakeMode
	// orderedMode asks for an ordered tag's IDs (segment routes): one
	// owner issues them, the other servers forward, and they strictly
	// increase in issue order across the cluster.
	orderedMode
	modes = 3
)

func (m mode) String() string { return [...]string{"segment", "snowflake", "ordered"}[m] }

// tagSpec is a segment tag the test creates. Steps are large enough for the
// buffers to outlast the database outage at the paced traffic below: a big
// tag takes ~33k IDs/s per server (50k while one server is down), a stored
// range of 500,000 lasts 10 s or more, and two are buffered a second after a
// (re)start; the adaptive step only grows from there. The first run of this
// test had 200,000, and buffers loaded 6 s before the outage ran dry just as
// the database came back.
//
// The ordered tag is created only in a run whose store is one database (an
// ordered tag's lease lives in one row). Its step is small: a few hundred
// IDs per second, through one owner, so that ranges end and batches span
// two of them; each new owner reserves ranges of its own.
type tagSpec struct {
	name    string
	step    int
	ordered bool
}

var tags = []tagSpec{
	{"chaos.big-a", 500_000, false},
	{"chaos.big-b", 500_000, false},
	{"chaos.small", 2_000, false}, // single IDs only: a few hundred per second per server
	{"chaos.ordered", 1_000, true},
}

// orderedTag is the index of the ordered tag in tags.
const orderedTag = 3

// tagMode is how a tag's IDs are counted and checked.
func (t tagSpec) mode() mode {
	if t.ordered {
		return orderedMode
	}
	return segmentMode
}

// workerSpec is one client goroutine: which IDs it asks for, how many at a
// time, and how fast. The rates keep the two cores for the servers: ~350k
// IDs/s in all, over 5 million a minute.
type workerSpec struct {
	name  string
	mode  mode
	tags  []int // indexes into tags; segment only
	count func(*rand.Rand) int
	rate  float64 // requests per second
}

func one(*rand.Rand) int      { return 1 }
func thousand(*rand.Rand) int { return 1000 }

// few is mostly single IDs (no count parameter) and small batches.
func few(r *rand.Rand) int {
	if r.IntN(10) < 7 {
		return 1
	}
	return 2 + r.IntN(19)
}

var workerSpecs = []workerSpec{
	{name: "segment-batch-1", mode: segmentMode, tags: []int{0, 1}, count: thousand, rate: 100},
	{name: "segment-batch-2", mode: segmentMode, tags: []int{1, 0}, count: thousand, rate: 100},
	{name: "segment-few", mode: segmentMode, tags: []int{0, 1, 2}, count: few, rate: 400},
	{name: "snowflake-batch", mode: snowflakeMode, count: thousand, rate: 150},
	{name: "snowflake-few", mode: snowflakeMode, count: few, rate: 400},
	{name: "snowflake-one", mode: snowflakeMode, count: one, rate: 300},
	// Sequential requests, each sent after the previous answer arrived,
	// to the servers in turn: every ID must be above every earlier one,
	// whichever server answered. Only in the run with an ordered tag.
	{name: "ordered-few", mode: orderedMode, tags: []int{orderedTag}, count: few, rate: 150},
}

// Snowflake layout (snowflake.LeafLayout): 41 bits of ms since the epoch,
// 10 of worker, 12 of sequence.
const (
	snowEpoch      = 1288834974657
	snowSeqBits    = 12
	snowWorkerBits = 10
)

// record is one request, kept for the windowed checks (the database outage,
// the clock step) and the error census.
type record struct {
	start, end time.Duration // since the run's start
	server     int8
	mode       mode
	status     int16 // HTTP status; statusTransport or statusBadBody otherwise
}

const (
	statusTransport = 0  // no HTTP answer: see failure.kind
	statusBadBody   = -1 // 200 with a body that is not the IDs asked for
)

// failure is a request that did not return IDs, with why.
type failure struct {
	record
	kind string // transport error kind, or the answer's message with digits folded
}

// violation is a broken guarantee seen while receiving: order, range, count.
type violation struct {
	at  time.Duration
	msg string
}

// worker is one client goroutine and everything it received.
type worker struct {
	workerSpec
	rng    *rand.Rand
	client *http.Client
	rr     int

	records    []record
	failures   []failure
	violations []violation
	segIDs     [][]int64 // per tag
	snowIDs    []int64
	lastSeg    [][]int64       // [server][tag]: the last ID this goroutine got there
	lastOrd    int64           // the last ordered ID this goroutine got, from any server
	lastOrdRec record          // the request that got it
	lastSnow   map[int64]int64 // worker ID → last ID this goroutine got from it
	snowFrom   map[int64]uint8 // worker ID → bit set of the servers seen issuing it

	body    bytes.Buffer
	scratch []int64
}

func newWorker(spec workerSpec, seed uint64, servers int) *worker {
	w := &worker{
		workerSpec: spec,
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		// A transport per goroutine: keep-alive connections of its own, as
		// separate clients would have.
		client: &http.Client{
			Timeout: requestTimeout,
			Transport: &http.Transport{
				DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
				MaxIdleConnsPerHost: 2,
				DisableCompression:  true,
			},
		},
		segIDs:   make([][]int64, len(tags)),
		lastSeg:  make([][]int64, servers),
		lastSnow: map[int64]int64{},
		snowFrom: map[int64]uint8{},
	}
	for i := range w.lastSeg {
		w.lastSeg[i] = make([]int64, len(tags))
	}
	return w
}

// run sends paced requests until ctx ends.
func (w *worker) run(ctx context.Context, r *run) {
	defer w.client.CloseIdleConnections()
	interval := time.Duration(float64(time.Second) / w.rate)
	next := time.Now()
	for {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		} else if ctx.Err() != nil {
			return
		}
		// After a stall (a request that timed out) the pace resumes instead
		// of bursting to catch up.
		next = next.Add(interval)
		if floor := time.Now().Add(-interval); next.Before(floor) {
			next = floor
		}
		w.once(ctx, r)
	}
}

// pick chooses the server: round robin over those up, and every tenth
// request the next in line even if it is down, so that the errors a client
// of a crashed server sees are part of the test too.
func (w *worker) pick(r *run) int {
	w.rr++
	n := len(r.servers)
	s := w.rr % n
	if w.rr%10 == 0 {
		return s
	}
	for i := range n {
		if c := (s + i) % n; r.servers[c].up.Load() {
			return c
		}
	}
	return s
}

func (w *worker) once(ctx context.Context, r *run) {
	srv := w.pick(r)
	n := w.count(w.rng)
	tag := -1
	var url string
	if w.mode != snowflakeMode {
		tag = w.tags[w.rng.IntN(len(w.tags))]
		url = "http://" + r.servers[srv].addr + "/api/segment/get/" + tags[tag].name
	} else {
		url = "http://" + r.servers[srv].addr + "/api/snowflake/get/chaos"
	}
	if n > 1 {
		url += "?count=" + strconv.Itoa(n)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		panic(err) // the URL is ours
	}
	rec := record{start: r.now(), server: int8(srv), mode: w.mode}
	resp, err := w.client.Do(req)
	if err == nil {
		w.body.Reset()
		_, err = w.body.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	rec.end = r.now()
	if err != nil {
		if ctx.Err() != nil {
			return // the load is over; not the server's doing
		}
		rec.status = statusTransport
		w.records = append(w.records, rec)
		w.failures = append(w.failures, failure{rec, transportKind(err)})
		return
	}
	rec.status = int16(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		w.records = append(w.records, rec)
		w.failures = append(w.failures, failure{rec, fold(w.body.String())})
		return
	}
	ids, perr := parseIDs(w.body.Bytes(), w.scratch[:0])
	w.scratch = ids
	if perr == nil && len(ids) != n {
		perr = fmt.Errorf("%d IDs, asked for %d", len(ids), n)
	}
	if perr != nil {
		rec.status = statusBadBody
		w.records = append(w.records, rec)
		w.failures = append(w.failures, failure{rec, perr.Error()})
		w.violate(rec.end, "server %d %s: 200 with a bad body: %v: %.80q", srv, w.mode, perr, w.body.String())
		return
	}
	w.records = append(w.records, rec)
	switch w.mode {
	case orderedMode:
		w.checkOrdered(rec, tag, ids)
	case segmentMode:
		if r.databases > 1 {
			// Ranges from different databases interleave: the next
			// answer may start below this one.
			w.lastSeg[srv][tag] = 0
		}
		w.checkSegment(rec.end, srv, tag, ids)
	default:
		w.checkSnowflake(rec.end, srv, ids)
	}
}

// checkSegment keeps the IDs and checks they increase per server and tag in
// the order this goroutine received them (SPEC §1.3).
func (w *worker) checkSegment(at time.Duration, srv, tag int, ids []int64) {
	last := w.lastSeg[srv][tag]
	for _, id := range ids {
		if id < 1 || id <= last {
			w.violate(at, "segment %s from server %d: ID %d after %d", tags[tag].name, srv, id, last)
		}
		last = id
	}
	w.lastSeg[srv][tag] = last
	w.segIDs[tag] = append(w.segIDs[tag], ids...)
}

// checkOrdered keeps the IDs of an ordered tag and checks that they
// strictly increase in the order this goroutine received them, across all
// servers: each request is sent after the previous answer arrived, so any
// ID at or below an earlier one is an order violation (docs/ordered-tags.md),
// within an answer or between two.
func (w *worker) checkOrdered(rec record, tag int, ids []int64) {
	last := w.lastOrd
	for i, id := range ids {
		if id < 1 || id <= last {
			prev := fmt.Sprintf("from leaf-%d, request %.3fs–%.3fs", w.lastOrdRec.server, w.lastOrdRec.start.Seconds(), w.lastOrdRec.end.Seconds())
			if i > 0 {
				prev = "earlier in the same answer"
			}
			w.violate(rec.end, "ordered %s: ID %d (#%d of %d) from leaf-%d, request %.3fs–%.3fs, after %d (%s)",
				tags[tag].name, id, i+1, len(ids), rec.server, rec.start.Seconds(), rec.end.Seconds(), last, prev)
		}
		last = id
	}
	w.lastOrd = last
	w.lastOrdRec = rec
	w.segIDs[tag] = append(w.segIDs[tag], ids...)
}

// checkSnowflake keeps the IDs and checks they increase per worker ID in the
// order this goroutine received them, and that their time is plausible.
func (w *worker) checkSnowflake(at time.Duration, srv int, ids []int64) {
	lo := time.Now().Add(-time.Minute).UnixMilli()
	hi := time.Now().Add(time.Minute).UnixMilli()
	for _, id := range ids {
		wid := id >> snowSeqBits & (1<<snowWorkerBits - 1)
		ms := id>>(snowSeqBits+snowWorkerBits) + snowEpoch
		if id < 1 || ms < lo || ms > hi {
			w.violate(at, "snowflake from server %d: ID %d has time %s", srv, id, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		}
		if last, ok := w.lastSnow[wid]; ok && id <= last {
			w.violate(at, "snowflake worker %d (server %d): ID %d after %d", wid, srv, id, last)
		}
		w.lastSnow[wid] = id
		w.snowFrom[wid] |= 1 << srv
	}
	w.snowIDs = append(w.snowIDs, ids...)
}

// maxViolations keeps a broken run's report readable; the count stays exact.
const maxViolations = 20

func (w *worker) violate(at time.Duration, format string, args ...any) {
	v := violation{at: at}
	if len(w.violations) < maxViolations {
		v.msg = fmt.Sprintf(w.name+": "+format, args...)
	}
	w.violations = append(w.violations, v)
}

// parseIDs reads one decimal ID per line, appending to dst.
func parseIDs(b []byte, dst []int64) ([]int64, error) {
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return dst, errors.New("empty body")
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 || len(line) > 19 {
			return dst, fmt.Errorf("line %q is not an ID", line)
		}
		var id int64
		for _, c := range line {
			if c < '0' || c > '9' {
				return dst, fmt.Errorf("line %q is not an ID", line)
			}
			id = id*10 + int64(c-'0')
		}
		if id < 0 { // overflowed: 19 digits past MaxInt64
			return dst, fmt.Errorf("line %q is not a 64-bit ID", line)
		}
		dst = append(dst, id)
	}
	return dst, nil
}

// transportKind names a request's failure without an HTTP answer.
func transportKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other: " + fold(err.Error())
}

var digits = regexp.MustCompile(`[0-9]+`)

// fold makes a message a census key: first line, numbers replaced, so that
// "behind by 2998ms" and "behind by 3000ms" count together.
func fold(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = digits.ReplaceAllString(s, "N")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
