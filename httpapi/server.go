// Package httpapi is leaf's HTTP transport: the routes of Meituan's Java Leaf
// (so existing clients work unchanged), the native JSON API under /v2, tag
// administration, and the health probes.
//
// The package parses and validates requests, calls a generator, and maps the
// generator's errors to status codes through one table (see errors.go). It
// holds no ID logic: everything it serves comes from the generators, down to
// the snowflake layout that /decodeSnowflakeId takes IDs apart with, except
// the rows of leaf_alloc, which /v2/tags and /db read from the store
// (Config.Tags); tags are created, changed and deleted through the segment
// generator. How the values of package leaf look in JSON is this package's
// own (present.go).
//
// Routes (every response carries Cache-Control: no-store, because an ID served
// twice from a cache is a duplicate ID):
//
//	Leaf-compatible, text/plain, GET, POST and HEAD:
//	  /api/segment/get/{key}              one ID, decimal, no trailing newline
//	  /api/segment/get/{key}?count=N      N IDs (1..10000), one per line, no trailing newline
//	  /api/snowflake/get/{key}            one snowflake ID, as above; key is checked, then ignored
//	  /api/snowflake/get/{key}?count=N    N snowflake IDs, as above
//	  /cache                              HTML: a page of the tags' two buffers  (admin, paged)
//	  /db                                 HTML: a page of the rows of leaf_alloc (admin, paged)
//	Leaf-compatible, application/json, GET, POST and HEAD:
//	  /decodeSnowflakeId?snowflakeId=N    {"workerId":"5","sequenceId":"42","timestamp":"1590000000000(2020-05-21 02:40:00.000)"}
//	Native JSON (/v2), application/json:
//	  GET|POST /v2/segment/{tag}               {"tag","id","id_str"[,"period"]}
//	  GET|POST /v2/segment/{tag}/batch?count=N {"tag","ids","ids_str"[,"period"]}
//	  GET|POST /v2/segment/{tag}/range?count=N {"tag","start","end","start_str","end_str","count"[,"period"]}, [start,end)
//	  GET|POST /v2/snowflake                   {"id","id_str"}
//	  GET|POST /v2/snowflake/batch?count=N     {"ids","ids_str"}
//	  GET    /v2/snowflake/decode/{id}         {"id","id_str","timestamp_ms","time","worker_id","sequence"}
//	  GET    /v2/tags                          {"tags":[...],"next":"t"} (admin, paged)
//	  POST   /v2/tags                          create, 201             (admin)
//	  GET    /v2/tags/{tag}                    one row                 (admin)
//	  PATCH  /v2/tags/{tag}                    {"step":N}              (admin)
//	  DELETE /v2/tags/{tag}                    204                     (admin)
//	  GET    /v2/tags/{tag}/periods            a periodic tag's periods, newest first (admin, paged by ?before=KEY)
//	  GET    /v2/tags/{tag}/decode?id=X        an opaque (or formatted) ID mapped back to its raw sequence (admin)
//	  DELETE /v2/tags/{tag}/periods?keep=N     prune old periods (or ?before=KEY) (admin)
//	  GET    /v2/status[?detail=0]             version, degraded reasons; causes, buffers and worker (admin, paged)
//	  GET    /v2/status/summary[?top=N]        bounded: aggregates, the N busiest and the degraded tags (admin)
//	  GET    /v2/status/history[?since=N]      the last 10 minutes' samples, from sample N on (admin; with Config.History)
//	Operations, text/plain:
//	  GET /healthz                        "ok": the process is alive
//	  GET /readyz[?strict=1]              "ok", or "degraded" and one reason per line, without its cause
//	  GET /metrics                        Prometheus exposition (when Config.Metrics is set)
//	Monitor page, text/html:
//	  GET /monitor/                       live view of the busiest and degraded tags, a search, the rows and the worker
//	  GET /                               redirects to /monitor/
//	API description, application/json:
//	  GET /openapi.json                   OpenAPI 3.1 description of every route (openapi.json, embedded)
//
// Routes marked paged answer a page of at most ?limit=N tags (1..1000,
// default 500), those beginning with ?prefix=P and sorting after the cursor
// ?after=T, the last tag of the previous page: tags created or deleted
// between two requests move no other tag across pages. The answer names
// the next page's cursor ("next" in JSON, a "next page" link in HTML),
// and leaves it out on the last page. /v2/tags and /db list the store's
// rows in its order of biz_tag; /cache and /v2/status the tags the
// generator holds, in byte order. /v2/status/summary, which the monitor
// page polls, is bounded whatever the number of tags.
//
// Routes marked admin require Config.AdminToken as a bearer token when one is
// set (401 otherwise; /v2/status then answers without the detail). The ID
// routes (/api/*/get/, /v2/segment/, /v2/snowflake and their batches) are
// rate limited per client by Config.Limiter when one is set (429).
//
// A periodic tag (created with a period: day, month or year, in a time
// zone) restarts at its start value each period. Its /v2 answers name the
// period ("period":"20261124"), which the ID alone does not: the Leaf text
// routes answer the plain number, which repeats across periods.
//
// GET routes also answer HEAD (same status and headers, no body); on the ID
// routes HEAD checks the tag and count but takes no ID, so a 200 carries no
// Content-Length (the length of an ID not issued is unknown). A known path
// with another method answers 405 with an Allow header; an unknown path 404.
// Errors are one line of text on the text routes,
// {"error":"...","code":"...","request_id":"..."} on /v2, and
// {"errorMsg":"..."} on /decodeSnowflakeId. A mode that is not configured
// answers 404 on its routes ("segment mode is disabled", "snowflake mode is
// disabled"), where Leaf answers 200 with the ID 0.
//
// An error's message is written for the client (apierr.Message):
// what is wrong with its request, or the condition ("not ready: no IDs can
// be issued right now"), never the cause, which may hold a driver's text, a
// host and port or a Go type. Every error answer carries a request ID in an
// X-Request-Id header; a 5xx's cause is logged with it. The same goes for
// /readyz and the /v2/status summary, which show the generators' degraded
// reasons without their causes. Requests the fast transport refuses unread
// are counted, not logged (badrequests.go).
//
// Server is an http.Handler, for embedding in any net/http server.
// NewFastServer serves it the way leaf serve does: fasthttp answers the two
// Leaf ID routes itself, with the same validation, errors and bytes (see
// fast.go), and hands every other route to the handler, on the same port.
//
// Tag names are checked with leaf.ValidateTag before a generator sees them.
// Unlike Leaf under Spring MVC, a key is never cut at its last dot: the key of
// /api/segment/get/order.v1 is "order.v1", not "order". The snowflake
// generator ignores the key, as Leaf's does, but it is checked all the same,
// so that one rule holds for every {key} and a key that reaches a log or a
// metric label is always a plain tag.
//
// /decodeSnowflakeId differs from Leaf on bad input. Leaf answers 200 with
// {"errorMsg":"snowflake Id反解析发生异常!"} to an ID it cannot parse, a body
// a client can mistake for a decoded ID; here a missing, non-numeric,
// out-of-range or undecodable snowflakeId answers 400 with
// {"errorMsg":"<what is wrong>"}. The key stays errorMsg so that Leaf clients
// that look for it still find it. The ID is read from the query string only,
// where Leaf under Spring would also take it from a form body on POST: no
// known client sends one, and a body parser is one more thing to attack. The
// timestamp's time is in the server's local time zone, like Leaf's
// SimpleDateFormat; /v2/snowflake/decode/{id} gives it in UTC.
package httpapi

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi/monitor"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/reqlog"
)

// SegmentGenerator is what the segment routes need from the segment
// generator; *segment.Generator satisfies it. Errors wrap the sentinels of
// package leaf.
type SegmentGenerator interface {
	// NextIDPeriod issues one ID for tag, NextIDsPeriod appends n strictly
	// increasing IDs for tag to dst, and Take leases the contiguous IDs
	// [Start, End), 1 <= End-Start <= n (the range may be shorter than n:
	// it never spans two segments) for a client (leaf.ByClient) or, of an
	// ordered tag this server owns, for a server that forwards its
	// requests (leaf.ByForwarder); each names the period of a periodic
	// tag's IDs (its key: yyyymmdd, yyyymm or yyyy), "" for a plain tag.
	// The IDs of one answer belong to one period. The Leaf routes, which
	// name no period, take them without it (periodless).
	NextIDPeriod(ctx context.Context, tag string) (int64, string, error)
	NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error)
	Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error)
	// TagShape is the tag's shape (the zero shape for a plain tag), which
	// the /v2 routes format IDs with: called for every /v2 segment
	// request, it must answer from memory once the tag was served, and must
	// not let made-up names reach the store one for one (see Known).
	TagShape(ctx context.Context, tag string) (leaf.TagShape, error)
	// Status describes the buffers of every tag in use, sorted by tag.
	Status() []leaf.SegmentStatus
	// Busiest is Status of the n busiest tags in use (leaf.Busier) and of
	// those named in also that are in use, sorted by tag, at a cost that
	// follows n and also rather than the tags in use.
	Busiest(n int, also ...string) []leaf.SegmentStatus
	// Totals are the counters over every tag since start, which never go
	// down, and the numbers of tags known and in use.
	Totals() leaf.SegmentTotals
	// Known tells, without issuing, whether tag would be served: nil, or
	// ErrTagNotFound (at once for a name beyond the store-lookup budget),
	// or ErrNotReady. Unknown names never reach the store one for one.
	Known(ctx context.Context, tag string) error
	// Degraded lists human-readable reasons the generator is degraded (store
	// unreachable, ...); empty when healthy. A reason is a summary a client
	// may see, then its cause after ": ", "; " or " (" (see clientReasons);
	// a tag's reasons lead with "tag NAME: ".
	Degraded() []string
	// CreateShapedTag inserts a row, a.MaxID the first ID to issue, with a
	// shape (leaf.TagShape; the zero shape for a plain tag), fixed from
	// then on. Tags are changed through the generator, which serves a
	// created tag at once and drops a deleted one's buffers.
	CreateShapedTag(ctx context.Context, a leaf.Alloc, shape leaf.TagShape) error
	// SetStep changes a tag's stored step.
	SetStep(ctx context.Context, tag string, step int) error
	// DeleteTag removes a tag's row.
	DeleteTag(ctx context.Context, tag string) error
	// PrunePeriods removes a periodic tag's old periods, never the current
	// one nor the one before; errors wrap leaf.ErrInvalidArgument for a
	// bad request or a tag without a period.
	PrunePeriods(ctx context.Context, tag string, pr leaf.Prune) (leaf.PruneResult, error)
	// Decode maps an ID tag issued (a number, or a formatted tag's
	// formatted ID) back to its raw sequence, through an opaque tag's
	// permutation. Errors wrap leaf.ErrInvalidArgument for an ID the tag
	// cannot have issued, leaf.ErrNotReady for an opaque tag whose key
	// this server lacks.
	Decode(ctx context.Context, tag, id string) (leaf.DecodedID, error)
}

// TagReader reads the rows of leaf_alloc for tag administration and /db.
// They are read from the store itself, which every store of this module
// satisfies: the generator has nothing to add to a read, and holds only the
// tags in use. Errors wrap the sentinels of package leaf.
type TagReader interface {
	leaf.AllocPager
	// Alloc reads one row; leaf.ErrTagNotFound if there is none.
	Alloc(ctx context.Context, tag string) (leaf.Alloc, error)
	leaf.ShapeLister
	// Periods lists at most limit of a periodic tag's periods with keys
	// below before ("": all), newest first (leaf.PeriodStore).
	Periods(ctx context.Context, tag, before string, limit int) ([]leaf.PeriodAlloc, error)
	// CountPeriods counts a periodic tag's periods.
	CountPeriods(ctx context.Context, tag string) (int, error)
}

// SnowflakeGenerator is what the snowflake routes need from the snowflake
// generator; *snowflake.Generator satisfies it. Errors wrap the sentinels of
// package leaf.
type SnowflakeGenerator interface {
	// NextID issues one ID. The key is ignored, as in Leaf.
	leaf.Generator
	// NextIDs appends n strictly increasing IDs to dst. The key is ignored.
	leaf.BatchGenerator
	// Decode takes an ID apart with the generator's layout. The error wraps
	// leaf.ErrInvalidArgument for an ID the layout cannot have produced (not
	// positive, worker or time out of range).
	Decode(id int64) (leaf.SnowflakeParts, error)
	// Status describes the worker: its ID, registry, heartbeats, clock.
	Status() leaf.WorkerStatus
	// Degraded lists human-readable reasons the generator is degraded; empty
	// when healthy. Like the segment generator's, each reason names its
	// generator and is worded summary, then cause ("snowflake heartbeat
	// failing: ..."): /readyz shows the summaries, after the segment
	// generator's.
	Degraded() []string
}

// Config configures a Server. The zero value serves only the health probes
// and answers 404 "segment mode is disabled" or "snowflake mode is disabled"
// on the ID routes.
type Config struct {
	// Segment issues segment IDs and manages tags. Nil disables segment mode:
	// its routes answer 404.
	Segment SegmentGenerator
	// Ordered, when set with Segment, are its ordered tags: it serves
	// the requests other servers forward for the tags it owns, and makes
	// tags ordered or plain.
	Ordered OrderedGenerator
	// Forward, when set with Segment, issues the IDs of the ID routes
	// instead: Segment's, or at the owner of an ordered tag another server
	// owns (ordered/forward's Forwarder). Unset, such a request is
	// redirected to the owner.
	Forward Forwarder
	// Tags reads the store's rows, for /v2/tags, /v2/tags/{tag} and /db:
	// the segment store Segment runs on. Nil, with Segment set, turns
	// those routes off: they answer 404 "tag administration is disabled".
	Tags TagReader
	// Snowflake issues and decodes snowflake IDs. Nil disables snowflake mode:
	// its routes answer 404, decoding included, since the layout belongs to
	// the generator.
	Snowflake SnowflakeGenerator
	// Logger receives the causes of failed requests (5xx), with the
	// request ID their answer carries, at most ten lines per ten seconds,
	// and a summary of the requests the fast transport refuses unread, at
	// most one line a minute. Nil means slog.Default(). Nothing is logged
	// per successful request.
	Logger *slog.Logger
	// Version is reported by /v2/status.
	Version string
	// Metrics serves GET /metrics; nil answers 404 there.
	Metrics http.Handler
	// Observer, if set, is told the route, status and duration of every
	// request; if it is also a BadRequestObserver, it counts the requests
	// the fast transport refuses before any route sees them.
	Observer RequestObserver
	// AdminToken, when set, is the bearer token that tag administration,
	// /cache, /db and the detail of /v2/status and its summary require. Without it
	// /v2/status answers its summary only (version, modes, degraded
	// reasons); with a wrong one, 401.
	AdminToken string
	// Limiter, when set, limits the ID routes per client address: over the
	// limit a request is answered 429 with Retry-After. Decoding, status and
	// administration are not limited.
	Limiter ClientLimiter
	// Databases, when set, reports the databases of a segment store spread
	// over several: /v2/status, its summary, /cache and /db show them to
	// the admin. Nil for a store of one database. It is called once per
	// request of those routes, never on the ID routes.
	Databases func() []DatabaseStatus
	// History, when set, serves GET /v2/status/history, the monitor page's
	// charts; nil answers 404 there.
	History HistorySource
}

// RequestObserver records answered requests; metrics.Metrics satisfies it.
// It is called once per request, on the hot path: it must be cheap and safe
// for concurrent use.
type RequestObserver interface {
	// ObserveRequest records one request. route is the route's pattern
	// ("/api/segment/get/{key}", "/v2/tags/{tag}"), never the raw path, so
	// that its values are bounded.
	ObserveRequest(route string, status int, d time.Duration)
}

// BadRequestObserver counts requests refused before any route saw them (a
// garbage request line, headers or a body over the limits, a failed TLS
// handshake); metrics.Metrics satisfies it. reason is one of a small fixed
// set (see badRequestReasons), so that its values are bounded.
type BadRequestObserver interface {
	ObserveBadRequest(reason string)
}

// Server is the HTTP handler. It is safe for concurrent use.
type Server struct {
	seg  SegmentGenerator
	ord  OrderedGenerator // nil: no ordered tags
	via  Forwarder        // cfg.Forward; nil: seg issues every ID
	tags TagReader        // nil when tag administration is off
	snow SnowflakeGenerator
	// segIDs and snowIDs are seg and snow as the shared ID-route code takes
	// them, converted once here rather than on every request; nil when the
	// mode is off.
	segIDs  idSource
	snowIDs idSource
	log     *slog.Logger
	version string
	obs     RequestObserver
	mux     *http.ServeMux // every route except the hot ID routes, see ServeHTTP
	keys    keyCache       // the fast transport's interned ID-route keys
	limiter ClientLimiter
	history HistorySource
	dbs     func() []DatabaseStatus // nil: a store of one database
	// tokenHash is the SHA-256 of the admin token, when hasToken.
	tokenHash [sha256.Size]byte
	hasToken  bool
	// errLog bounds the lines logged for failed requests (answerFor).
	errLog *reqlog.Budget
	// bad counts and summarises the requests the fast transport refuses
	// before any route sees them.
	bad *badRequests
	// table lists every path served and the methods it allows (Routes).
	table []Route
}

// Route is one path the server serves: a ServeMux pattern without its
// method ("/v2/tags/{tag}"), and the methods it allows, as the Allow header
// of a 405 there lists them ("GET, HEAD").
type Route struct {
	Pattern string
	Allow   string
}

// Routes lists every path the server serves, in the order registered:
// what openapi.json must describe (the e2e module's openapi tests hold the
// two equal, both ways).
func (s *Server) Routes() []Route { return slices.Clone(s.table) }

// idSource is what the ID routes need from either generator, so that the
// segment and snowflake routes share one implementation.
type idSource interface {
	leaf.Generator
	leaf.BatchGenerator
}

// periodless is the segment IDs as the Leaf ID routes take them: without
// their period, through the forwarder when there is one (nextIDVia).
type periodless struct{ s *Server }

func (p periodless) NextID(ctx context.Context, tag string) (int64, error) {
	id, _, _, err := p.s.nextIDVia(ctx, tag)
	return id, err
}

func (p periodless) NextIDs(ctx context.Context, tag string, n int, dst []int64) ([]int64, error) {
	ids, _, _, err := p.s.nextIDsVia(ctx, tag, n, dst)
	return ids, err
}

// DefaultConfig returns the defaults a zero field of Config takes. The
// other fields are what the server serves: a nil one turns its routes
// off, and New refuses nothing.
func DefaultConfig() Config { return Config{Logger: slog.Default()} }

// New builds a Server from cfg.
func New(cfg Config) *Server {
	s := &Server{
		seg:     cfg.Segment,
		ord:     cfg.Ordered,
		snow:    cfg.Snowflake,
		log:     cfg.Logger,
		version: cfg.Version,
		obs:     cfg.Observer,
		mux:     http.NewServeMux(),
		limiter: cfg.Limiter,
		history: cfg.History,
		dbs:     cfg.Databases,
		errLog:  errLogBudget(),
	}
	if cfg.AdminToken != "" {
		s.tokenHash, s.hasToken = sha256.Sum256([]byte(cfg.AdminToken)), true
	}
	if s.log == nil {
		s.log = DefaultConfig().Logger
	}
	s.bad = newBadRequests(s.log, cfg.Observer)
	// Assigned only when set: a nil generator must stay a nil idSource.
	if s.seg != nil {
		s.segIDs = periodless{s}
		s.tags = cfg.Tags
		s.via = cfg.Forward
	}
	if s.snow != nil {
		s.snowIDs = s.snow
	}
	s.routes(cfg.Metrics)
	return s
}

// Path prefixes served in ServeHTTP ahead of the mux, and their route names
// for the observer.
const (
	segmentGetPrefix   = "/api/segment/get/"
	snowflakeGetPrefix = "/api/snowflake/get/"
	segmentGetRoute    = segmentGetPrefix + "{key}"
	snowflakeGetRoute  = snowflakeGetPrefix + "{key}"
)

// ServeHTTP dispatches a request.
//
// The Leaf ID routes are matched here by prefix, ahead of the ServeMux: they
// are the product's hot path, and the mux costs a read lock shared by every
// core plus an allocation for the path wildcard on every request. Everything
// else goes through the mux, where Go's patterns keep the route table
// readable.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// IDs must never be served from a cache (a cached ID is a duplicate), and
	// neither should errors: 404 is cacheable by default, and a tag created a
	// moment later must be found.
	w.Header()["Cache-Control"] = noStore
	var start time.Time
	if s.obs != nil {
		start = time.Now()
	}
	if key, ok := strings.CutPrefix(r.URL.Path, segmentGetPrefix); ok {
		status := s.leafGet(w, r, s.segIDs, apierr.ErrSegmentDisabled, key)
		if s.obs != nil {
			s.obs.ObserveRequest(segmentGetRoute, status, time.Since(start))
		}
		return
	}
	if key, ok := strings.CutPrefix(r.URL.Path, snowflakeGetPrefix); ok {
		status := s.leafGet(w, r, s.snowIDs, apierr.ErrSnowflakeDisabled, key)
		if s.obs != nil {
			s.obs.ObserveRequest(snowflakeGetRoute, status, time.Since(start))
		}
		return
	}
	if r.RequestURI == "*" {
		// The asterisk form (RFC 9112 §3.2.4) names no route, and the mux
		// would answer it a bare 400, without the message every error has.
		status := s.writeError(w, r, textStyle, apierr.Client(leaf.ErrInvalidArgument, "the request target * names no resource"))
		if s.obs != nil {
			s.obs.ObserveRequest("*", status, time.Since(start))
		}
		return
	}
	if s.obs == nil {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := recorders.Get().(*statusRecorder)
	rec.ResponseWriter, rec.status = w, 0
	s.mux.ServeHTTP(rec, r)
	// The mux has set r.Pattern to the route it chose, "METHOD /path" or
	// "/path"; the method is left out of the label, the status tells enough.
	_, route, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		route = r.Pattern
	}
	s.obs.ObserveRequest(route, rec.code(), time.Since(start))
	rec.ResponseWriter = nil
	recorders.Put(rec)
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

var recorders = sync.Pool{New: func() any { return new(statusRecorder) }}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// code is the status answered: 200 when the handler wrote nothing at all.
func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// methods maps an HTTP method to the handler of one path. GET implies HEAD,
// as in http.ServeMux.
type methods map[string]http.HandlerFunc

// routes registers every route served by the mux. A known path with a method
// it does not answer gets 405 and an Allow header, in the error style of its
// family (text or JSON), rather than the mux's own default.
func (s *Server) routes(metrics http.Handler) {
	// Leaf-compatible pages answer GET and POST (and HEAD), as Leaf answers
	// any method; we stop at the safe ones plus POST, which Leaf clients use.
	// They show every tag and row, as /v2/status and /v2/tags do: admin.
	cache, db := s.admin(textStyle, s.cachePage), s.admin(textStyle, s.dbPage)
	s.handle("/cache", textStyle, methods{"GET": cache, "POST": cache})
	s.handle("/db", textStyle, methods{"GET": db, "POST": db})
	s.handle("/decodeSnowflakeId", leafJSONStyle, methods{"GET": s.leafDecode, "POST": s.leafDecode})

	// Native JSON API. IDs are issued on GET and POST alike: GET for curl and
	// browsers, POST for clients that want to be sure no proxy replays it.
	ids := func(h v2Handler) methods {
		f := s.v2(s.limited(h))
		return methods{"GET": f, "POST": f}
	}
	s.handle("/v2/segment/{tag}", jsonStyle, ids(s.v2SegmentID))
	s.handle("/v2/segment/{tag}/batch", jsonStyle, ids(s.v2SegmentBatch))
	// The range route limits its clients itself: another server's
	// forwarded batch is not limited (ordered.go).
	rangeRoute := s.v2(s.v2SegmentRangeRoute)
	s.handle("/v2/segment/{tag}/range", jsonStyle, methods{"GET": rangeRoute, "POST": rangeRoute})
	s.handle("/v2/snowflake", jsonStyle, ids(s.v2SnowflakeID))
	s.handle("/v2/snowflake/batch", jsonStyle, ids(s.v2SnowflakeBatch))
	// Decoding issues nothing, so it is a GET only.
	s.handle("/v2/snowflake/decode/{id}", jsonStyle, methods{"GET": s.v2(s.v2SnowflakeDecode)})
	s.handle("/v2/status", jsonStyle, methods{"GET": s.v2(s.v2Status)})
	s.handle("/v2/status/summary", jsonStyle, methods{"GET": s.v2(s.v2StatusSummary)})
	if s.history != nil {
		s.handle("/v2/status/history", jsonStyle, methods{"GET": s.v2(s.v2StatusHistory)})
	}

	// Tag administration: every handler passes through s.admin.
	admin := func(h v2Handler) http.HandlerFunc { return s.admin(jsonStyle, s.v2(h)) }
	s.handle("/v2/tags", jsonStyle, methods{
		"GET":  admin(s.v2ListTags),
		"POST": admin(s.v2CreateTag),
	})
	s.handle("/v2/tags/{tag}", jsonStyle, methods{
		"GET":    admin(s.v2GetTag),
		"PATCH":  admin(s.v2PatchTag),
		"DELETE": admin(s.v2DeleteTag),
	})
	s.handle("/v2/tags/{tag}/decode", jsonStyle, methods{
		"GET": admin(s.v2DecodeID),
	})
	s.handle("/v2/tags/{tag}/periods", jsonStyle, methods{
		"GET":    admin(s.v2ListPeriods),
		"DELETE": admin(s.v2PrunePeriods),
	})

	s.handle("/openapi.json", textStyle, methods{"GET": s.openAPI})
	s.handle("/healthz", textStyle, methods{"GET": s.healthz})
	s.handle("/readyz", textStyle, methods{"GET": s.readyz})
	if metrics != nil {
		s.handle("/metrics", textStyle, methods{"GET": metrics.ServeHTTP})
	}

	// The monitor page; the bare root leads to it, so that a browser pointed
	// at the server finds something.
	s.handle(monitor.Prefix, textStyle, methods{"GET": monitor.Handler().ServeHTTP})
	s.handle("/{$}", textStyle, methods{"GET": http.RedirectHandler(monitor.Prefix, http.StatusFound).ServeHTTP})
	// The Leaf ID routes are matched ahead of the mux (ServeHTTP, fast.go).
	s.table = append(s.table, Route{segmentGetRoute, allowLeaf[0]}, Route{snowflakeGetRoute, allowLeaf[0]})

	// Everything else: 404 in the style of the family the path belongs to.
	s.mux.Handle("/v2/", s.notFound(jsonStyle))
	s.mux.Handle("/", s.notFound(textStyle))
}

// handle registers the handlers of one path, one per method, and a 405 for
// every other method. The method-less pattern is less specific than the
// method ones, so the mux only falls back to it for an unlisted method.
func (s *Server) handle(path string, style errorStyle, m methods) {
	allow := make([]string, 0, len(m)+1)
	for method, h := range m {
		s.mux.Handle(method+" "+path, h)
		allow = append(allow, method)
		if method == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	slices.Sort(allow)
	s.mux.Handle(path, s.methodNotAllowed(style, []string{strings.Join(allow, ", ")}))
	s.table = append(s.table, Route{path, strings.Join(allow, ", ")})
}

// v2Handler is a /v2 route: it writes its answer, or returns the error to
// answer instead (in JSON, through the one error table).
type v2Handler func(w http.ResponseWriter, r *http.Request) error

func (s *Server) v2(h v2Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, jsonStyle, err)
		}
	}
}

// Header values are pre-built and assigned to the header map directly, so
// setting a header costs neither canonicalising the key nor allocating the
// slice. They are shared by all responses and must never be modified in place
// (http.Header's Add appends, and a full slice is copied, not mutated).
var (
	noStore   = []string{"no-store"}
	textPlain = []string{"text/plain; charset=utf-8"}
	textHTML  = []string{"text/html; charset=utf-8"}
	appJSON   = []string{"application/json"}
	noSniff   = []string{"nosniff"}
	retry1s   = []string{"1"}
	allowLeaf = []string{"GET, HEAD, POST"}
)

// contentLengths[n] is the Content-Length header value for an n-byte body,
// pre-built for the sizes of single-ID responses (text and JSON).
var contentLengths = func() [][]string {
	t := make([][]string, 512)
	for n := range t {
		t[n] = []string{strconv.Itoa(n)}
	}
	return t
}()

// writeBody writes a complete response with an explicit Content-Length, so
// that HEAD carries the same headers as GET; for HEAD the body is not written.
func writeBody(w http.ResponseWriter, r *http.Request, status int, contentType []string, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentType
	if len(body) < len(contentLengths) {
		h["Content-Length"] = contentLengths[len(body)]
	} else {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	if status != http.StatusOK {
		w.WriteHeader(status)
	}
	if r.Method != http.MethodHead {
		// A failed write means the client has gone; there is no one to tell.
		_, _ = w.Write(body)
	}
}
