// Package metrics exposes leaf's Prometheus metrics.
//
// The domain metrics (IDs issued, segment buffers and loads, the snowflake
// worker's clock and lease) are not counted by Prometheus instruments: the
// generators already keep those numbers for /cache and /v2/status, so a
// custom collector reads their Status() and Totals() at scrape time and
// turns them into const metrics (the totals over all tags are the
// generator's own, which never go down: the collector keeps no state). The ID fast path (one atomic add per segment ID) thus never
// touches Prometheus, the exported values cannot drift from what the monitor
// page shows, and a deleted tag's series vanish at the next scrape instead
// of lingering in a vector.
//
// The one instrument fed on the request path is the HTTP latency histogram;
// ObserveRequest resolves its label pair once and then reuses the child, so
// a request costs a map lookup and the histogram's atomic adds, with no
// allocation. The other, leaf_http_bad_requests_total, counts the requests
// the HTTP transport refuses before any route sees them (ObserveBadRequest).
//
// Labels are bounded. The segment series are totals over all tags, plus
// per-tag series for a bounded set only: the busiest Config.TopTags, up to
// Config.DegradedTags degraded ones, the operator's Config.Tags and the tag
// soonest dry, chosen afresh at every scrape, so a table of 100,000 tags
// costs what one of 100 does. Routes are the HTTP layer's route patterns,
// never raw paths.
package metrics

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leafgo/leaf"
)

// SegmentSource is what the collector reads from the segment generator
// (*segment.Generator satisfies it).
type SegmentSource interface {
	// Status reports the tags in use; it is called once per scrape.
	Status() []leaf.SegmentStatus
	// Totals are the counters over every tag since start, which never go
	// down, and the names known (those not in Status are unloaded).
	Totals() leaf.SegmentTotals
	// Degraded lists why the mode is unhealthy; empty means healthy.
	Degraded() []string
}

// WorkerSource is what the collector reads from the snowflake generator
// (*snowflake.Generator satisfies it).
type WorkerSource interface {
	// Status reports the worker; it is called once per scrape.
	Status() leaf.WorkerStatus
	// Degraded lists why the mode is unhealthy; empty means healthy.
	Degraded() []string
}

// Config configures New. The zero value exports only the build, Go runtime,
// process and HTTP metrics.
type Config struct {
	// Segment is the segment generator; nil when the mode is off. Pass a nil
	// interface, not a typed nil pointer: a nil *segment.Generator stored in
	// the interface is not == nil. New treats one as off anyway, because the
	// alternative is a panic on every scrape.
	Segment SegmentSource
	// Snowflake is the snowflake generator; nil when the mode is off. The
	// same caution about typed nil pointers applies.
	Snowflake WorkerSource
	// Version is the server's version, exported as leaf_build_info's
	// version label. Empty becomes "unknown".
	Version string
	// Now is the clock for the snowflake high-water lead and lease
	// remaining. Default: time.Now.
	Now func() time.Time

	// The segment series over all tags are always exported; per-tag series
	// only for the union of three bounded sets and the tag soonest dry, so
	// that a table of 100,000 tags costs no more series than one of 100. A
	// tag that leaves the set simply stops being exported at the next
	// scrape.
	//
	// TopTags is how many of the busiest tags (by IDs per second, then IDs
	// issued, then name) get per-tag series. 0: none.
	TopTags int
	// DegradedTags caps how many degraded tags (the last load failed, or
	// the buffered IDs last less than LowBuffer) get per-tag series, the
	// most urgent first, so that a store outage across every tag does not
	// explode the scrape. 0: none.
	DegradedTags int
	// Tags always get per-tag series while the generator knows them.
	Tags []string
	// LowBuffer is segment.Config.LowBuffer: a tag whose buffered IDs
	// last less than this at its current rate counts as degraded. 0 turns
	// the check off.
	LowBuffer time.Duration
	// Databases, when set with Segment, reports the databases of a segment
	// store spread over several (package multidb), called once per
	// scrape: one series per database and metric, at most
	// leaf.MaxStripes. Nil for a store of one database.
	Databases func() []Database
	// Store, when set with Segment, reports the failover fence and the
	// retries of a store on a server database (mysql, postgres), called
	// once per scrape. Nil for SQLite and a store over several databases.
	Store func() StoreStats
	// Forwarded, when set with Segment, reports what this server passed to
	// the owners of ordered tags it does not own (ordered/forward),
	// called once per scrape. Nil where nothing is forwarded.
	Forwarded func() Forwarded
}

// DefaultConfig returns a server's defaults: a zero Version or Now takes
// its default in New, but TopTags and DegradedTags are taken as set (0:
// none), so start from this.
func DefaultConfig() Config {
	return Config{Version: "unknown", Now: time.Now, TopTags: 20, DegradedTags: 100}
}

// Validate reports what a caller most likely got wrong: a negative count
// or LowBuffer, or a tag in Tags that is not a tag name. New does not fail
// a server over its metrics: the per-tag selection takes a negative count
// as none and a negative LowBuffer as off, as it takes 0, and a bad name
// in Tags matches no tag.
func (c Config) Validate() error {
	switch {
	case c.TopTags < 0:
		return fmt.Errorf("metrics: %w: TopTags %d is negative; 0 exports none", leaf.ErrInvalidArgument, c.TopTags)
	case c.DegradedTags < 0:
		return fmt.Errorf("metrics: %w: DegradedTags %d is negative; 0 exports none", leaf.ErrInvalidArgument, c.DegradedTags)
	case c.LowBuffer < 0:
		return fmt.Errorf("metrics: %w: LowBuffer %s is negative; 0 turns the check off", leaf.ErrInvalidArgument, c.LowBuffer)
	}
	for _, t := range c.Tags {
		if err := leaf.ValidateTag(t); err != nil {
			return fmt.Errorf("metrics: %w: Tags: %w", leaf.ErrInvalidArgument, err)
		}
	}
	return nil
}

// StoreStats is the leaf_segment_store_* series' values.
type StoreStats struct {
	Fencing bool  // a failover is being fenced
	Fences  int64 // fences seen since start
	Gap     int64 // IDs the last fence skipped, summed over the tags
	Retries int64 // reserve attempts run again
}

// Forwarded counts a server's forwarding of ordered tags' requests since
// start: the calls it made to owners, the requests those calls answered
// (a call answers a whole batch) and the calls that failed.
type Forwarded struct {
	Calls, Requests, Failures uint64
}

// Database is one database of a segment store spread over several, as the
// leaf_segment_database_* series export it.
type Database struct {
	Index int  // its place in segment.dsn, the db label
	Up    bool // false while the store skips it
	// Reserves and Failures count this server's reserve calls on it since
	// start that succeeded and that failed.
	Reserves, Failures uint64
	// HighestID is the exclusive end, as an ID, of the highest range this
	// server reserved from it; 0 before the first.
	HighestID int64
}

// requestBuckets are the upper bounds, in seconds, of
// leaf_http_request_duration_seconds. An ID request is served from memory
// in microseconds, so the low end is finer than Prometheus's defaults; the
// high end covers requests that waited for a segment load.
var requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// maxCachedObservers bounds the observer cache. Routes are patterns and
// status codes a handful, so real use stays far below it; the bound only
// keeps a caller that wrongly passes raw paths from growing the cache (and
// the copy made on each miss) without limit.
const maxCachedObservers = 4096

// Metrics owns a registry holding leaf's metrics. It is safe for concurrent
// use.
type Metrics struct {
	reg         *prometheus.Registry
	handler     http.Handler
	requests    *prometheus.HistogramVec
	badRequests *prometheus.CounterVec

	// observers caches requests' children by (route, status) so the hot
	// path skips hashing label values. It is replaced on a miss, never
	// mutated, so readers need no lock.
	observers atomic.Pointer[map[observerKey]prometheus.Observer]
	mu        sync.Mutex // serialises the replacement of observers
}

type observerKey struct {
	route  string
	status int
}

// New builds the registry: the leaf collector reading cfg's sources, the
// HTTP latency histogram, and the Go runtime and process collectors.
func New(cfg Config) *Metrics {
	if isNil(cfg.Segment) {
		cfg.Segment = nil
	}
	if isNil(cfg.Snowflake) {
		cfg.Snowflake = nil
	}
	d := DefaultConfig()
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	if cfg.Version == "" {
		cfg.Version = d.Version
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaf_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route pattern and status code.",
			Buckets: requestBuckets,
		}, []string{"route", "code"}),
		badRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaf_http_bad_requests_total",
			Help: "Requests refused before any route saw them (garbage, over the size limits, too slow, a failed TLS handshake, over the connection limit), by reason. They are not logged one by one.",
		}, []string{"reason"}),
	}
	m.observers.Store(&map[observerKey]prometheus.Observer{})
	m.reg.MustRegister(
		newCollector(cfg),
		m.requests,
		m.badRequests,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// One bad series (say, a duplicate tag) should not cost the
		// operator the whole scrape.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
	return m
}

// isNil reports whether v is nil or an interface holding a nil pointer, the
// classic mistake when a disabled generator's variable is passed through.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Handler serves the registry in the Prometheus exposition formats. It
// serves this registry only, not prometheus.DefaultRegisterer, so two
// servers in one process (as in tests) do not collide.
func (m *Metrics) Handler() http.Handler { return m.handler }

// ObserveRequest records one served request. route must be the route
// pattern (e.g. "/api/segment/get/{tag}"), never the raw path, or the label
// set grows with every tag and typo a client sends. It does not allocate
// once the (route, status) pair has been seen.
func (m *Metrics) ObserveRequest(route string, status int, d time.Duration) {
	k := observerKey{route, status}
	o, ok := (*m.observers.Load())[k]
	if !ok {
		o = m.observer(k)
	}
	o.Observe(d.Seconds())
}

// ObserveBadRequest counts one request refused before any route saw it.
// reason must come from a small fixed set (httpapi's: "malformed",
// "headers_too_large", "body_too_large", "timeout", "incomplete",
// "tls_handshake", "too_many_connections"), never from the request. It is
// not on the hot path: it hashes the label on every call.
func (m *Metrics) ObserveBadRequest(reason string) {
	m.badRequests.WithLabelValues(reason).Inc()
}

// observer resolves k's child on a cache miss and publishes a copy of the
// cache that includes it.
func (m *Metrics) observer(k observerKey) prometheus.Observer {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.observers.Load()
	if o, ok := old[k]; ok {
		return o // another goroutine resolved it first
	}
	o, err := m.requests.GetMetricWithLabelValues(k.route, strconv.Itoa(k.status))
	if err != nil {
		// Only a route that is not valid UTF-8 gets here; dropping the
		// observation beats panicking inside a request.
		return prometheus.ObserverFunc(func(float64) {})
	}
	if len(old) >= maxCachedObservers {
		return o
	}
	next := maps.Clone(old)
	next[k] = o
	m.observers.Store(&next)
	return o
}
