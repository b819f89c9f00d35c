package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/ordered/forward"
)

// The fast transport: the Leaf ID routes served by fasthttp, everything else
// by the same net/http handler as ever, through fasthttp's adaptor, on one
// port.
//
// Why: on a small machine the ID work costs well under a microsecond and the
// server's speed is its request path; net/http allocates a request, a
// response and their headers for every request, fasthttp reuses them per
// connection. The admin, status, page and metrics routes are not hot and keep
// the readable ServeMux; only the two Leaf ID prefixes are duplicated here,
// with the same validation, error table and response bytes as leafGet
// (TestFastMatchesNetHTTP compares the two answer by answer).

// Limits bounds the fast server's connections. The zero value of a field
// means its default.
type Limits struct {
	// ReadTimeout bounds reading one request, headers and body, from its
	// first byte. Default 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing for this
	// long, and a new connection that sends nothing at all. Default 2m.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers: a request with
	// more is answered 431. Default 4 KiB, fasthttp's own: ample for an ID
	// request, and a smaller read buffer per connection measurably helps.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request body: a larger one is answered 413
	// before any handler runs. Default 1 MiB; the /v2 routes, the only ones
	// that read a body, refuse over 64 KiB themselves, with a JSON error.
	MaxBodyBytes int
	// MaxConns bounds concurrent connections. Default 64k.
	MaxConns int
}

// DefaultLimits returns the limits a zero (or negative) field of Limits
// takes.
func DefaultLimits() Limits {
	return Limits{ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 4 << 10, MaxBodyBytes: 1 << 20, MaxConns: 64 << 10}
}

func (l *Limits) applyDefaults() {
	d := DefaultLimits()
	def := func(v *time.Duration, dv time.Duration) {
		if *v <= 0 {
			*v = dv
		}
	}
	def(&l.ReadTimeout, d.ReadTimeout)
	def(&l.WriteTimeout, d.WriteTimeout)
	def(&l.IdleTimeout, d.IdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
}

// NewFastServer returns a fasthttp server answering every route of s: the
// Leaf ID routes natively, the rest through s.ServeHTTP.
func NewFastServer(s *Server, lim Limits) *fasthttp.Server {
	lim.applyDefaults()
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			path, query, plain := splitURI(ctx)
			switch {
			case !plain:
				// Escapes, dot or empty segments: net/http's reading of
				// the path, whatever it is, is the one to follow.
				s.serveAdapted(ctx)
			case hasPrefix(path, segmentGetPrefix):
				s.fastLeafGet(ctx, s.segIDs, apierr.ErrSegmentDisabled, path[len(segmentGetPrefix):], query, segmentGetRoute)
			case hasPrefix(path, snowflakeGetPrefix):
				s.fastLeafGet(ctx, s.snowIDs, apierr.ErrSnowflakeDisabled, path[len(snowflakeGetPrefix):], query, snowflakeGetRoute)
			case hasPrefix(path, v2SegmentPrefix) && len(ctx.Request.Header.Peek(forward.Header)) > 0 && s.fastForwardedRange(ctx, path, query):
				// Another server's forwarded batch of an ordered tag:
				// served here, on the owner's hot path (ordered.go).
			default:
				s.serveAdapted(ctx)
			}
		},
		ErrorHandler:          s.fastProtocolError,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		ReadTimeout:           lim.ReadTimeout,
		WriteTimeout:          lim.WriteTimeout,
		IdleTimeout:           lim.IdleTimeout,
		ReadBufferSize:        lim.MaxHeaderBytes,
		MaxRequestBodySize:    lim.MaxBodyBytes,
		Concurrency:           lim.MaxConns,
		CloseOnShutdown:       true,
		Logger:                fastLogger{s},
	}
}

// splitURI splits the request line's target into path and raw query as it
// stands, which spares the hot path fasthttp's URI parsing. plain reports
// whether the path means the same unescaped and cleaned: if not (escapes,
// dot or empty segments, an absolute URI), the request goes to the net/http
// handler, so that the two transports never read a path differently.
func splitURI(ctx *fasthttp.RequestCtx) (path, query []byte, plain bool) {
	raw := ctx.Request.Header.RequestURI()
	path = raw
	if i := bytes.IndexByte(raw, '?'); i >= 0 {
		path, query = raw[:i], raw[i+1:]
	}
	return path, query, plainPath(path)
}

// plainPath reports whether p starts with '/', holds only tag bytes and
// '/', and has no empty or dot segment.
func plainPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c == '/' || c == '.' {
			if p[i-1] == '/' {
				return false
			}
			continue
		}
		if !leaf.IsTagByte(c) {
			return false
		}
	}
	return true
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// b2s views b as a string without copying. The string must not outlive the
// request: fasthttp reuses b for the connection's next request.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// fastLeafGet is leafGet on fasthttp; see leafGet for the behaviour.
func (s *Server) fastLeafGet(ctx *fasthttp.RequestCtx, gen idSource, disabled error, rawKey, query []byte, route string) {
	status := s.fastLeafAnswer(ctx, gen, disabled, rawKey, query)
	if s.obs != nil {
		// ctx.Time is when fasthttp began the request; it has read the
		// clock for it already.
		s.obs.ObserveRequest(route, status, time.Since(ctx.Time()))
	}
}

// fastLeafAnswer is answerLeafID on fasthttp; it returns the status.
func (s *Server) fastLeafAnswer(ctx *fasthttp.RequestCtx, gen idSource, disabled error, rawKey, query []byte) int {
	h := &ctx.Response.Header
	h.SetCanonical(cacheControlKey, noStoreValue)
	// Views of fasthttp's buffers, but for the key: the generator may keep
	// it (see serveAdapted). A key served before costs no allocation.
	req := leafRequest{method: fastMethod(ctx), key: s.keys.intern(rawKey), query: b2s(query)}
	if s.limiter != nil {
		// RemoteIP is a view of the connection's address: no allocation.
		req.client, _ = netip.AddrFromSlice(ctx.RemoteIP())
	}
	bp := batchBufs.Get().(*[]byte)
	defer batchBufs.Put(bp)
	// Not fasthttp's RequestCtx: see requestContext.
	body, err := s.answerLeafID(requestContext, req, gen, disabled, (*bp)[:0])
	if err != nil {
		if leafAllow(err) {
			h.Set("Allow", allowLeaf[0])
		}
		return s.fastError(ctx, err)
	}
	s.keys.remember(req.key)
	h.SetContentTypeBytes(textPlainBytes)
	// For HEAD, no body: fasthttp then sends no Content-Length (see headID).
	ctx.Response.SetBody(body) // copied into the response's own buffer
	*bp = body
	return fasthttp.StatusOK
}

// fastMethod is the request's method: a constant for the Leaf routes' own,
// which costs no allocation, a copy for any other.
func fastMethod(ctx *fasthttp.RequestCtx) string {
	switch {
	case ctx.IsGet():
		return http.MethodGet
	case ctx.IsPost():
		return http.MethodPost
	case ctx.IsHead():
		return http.MethodHead
	}
	return string(ctx.Method())
}

// Header keys and values as fasthttp takes them without copying or
// canonicalising them on every request.
var (
	textPlainBytes  = []byte(textPlain[0])
	cacheControlKey = []byte("Cache-Control")
	noStoreValue    = []byte(noStore[0])
)

// fastError answers err as writeError does on the text routes and returns
// the status.
func (s *Server) fastError(ctx *fasthttp.RequestCtx, err error) int {
	// Views, not copies: answerFor only logs and quotes them, before it
	// returns.
	path := b2s(ctx.Path())
	k, msg, id := s.answerFor(ctx, b2s(ctx.Method()), path, leafKey(path), err)
	h := &ctx.Response.Header
	h.Set("X-Content-Type-Options", noSniff[0])
	h.Set(requestIDHeader, id)
	if owner := ownerRedirect(err); owner != "" && len(ctx.Request.Header.Peek(forward.Header)) == 0 {
		k.HTTP = fasthttp.StatusTemporaryRedirect
		h.Set("Location", owner+string(ctx.RequestURI()))
		h.Set(forward.OwnerHeader, owner)
	}
	if k.HTTP == fasthttp.StatusServiceUnavailable || k.HTTP == fasthttp.StatusTooManyRequests {
		h.Set("Retry-After", retryAfter(err))
	}
	h.SetContentTypeBytes(textPlainBytes)
	ctx.SetStatusCode(k.HTTP)
	ctx.Response.SetBodyString(msg + "\n")
	return k.HTTP
}

// fastProtocolError answers a request fasthttp could not parse: too large,
// malformed, too slow, or no request at all (a failed TLS handshake). It is
// counted, not logged (see badRequests), and observed under the unmatched
// route like any request no route serves.
func (s *Server) fastProtocolError(ctx *fasthttp.RequestCtx, err error) {
	reason, status, msg := protocolError(ctx, err)
	s.bad.add(reason, err.Error())
	if s.obs != nil && reason != badTLSHandshake {
		// fasthttp does not say when a request it could not read began:
		// the connection's start, or the previous request's on a
		// keep-alive connection, is the earliest it can have, so the
		// duration observed is an upper bound.
		start := ctx.ConnTime()
		if t := ctx.Time(); t.After(start) {
			start = t
		}
		s.obs.ObserveRequest(unmatchedRoute, status, time.Since(start))
	}
	ctx.Response.Header.Set("Cache-Control", noStore[0])
	ctx.Response.Header.SetContentTypeBytes(textPlainBytes)
	ctx.SetStatusCode(status)
	ctx.Response.SetBodyString(msg + "\n")
	// fasthttp writes the error handler's answer as it stands, body and
	// all, even to HEAD (a request it parsed, then refused for its Host).
	ctx.Response.SkipBody = ctx.IsHead()
	ctx.SetConnectionClose()
	// The rest of the request is unread: the connection must drain before
	// it closes, or the client may see a reset instead of this answer.
	if l, ok := ctx.Conn().(interface{ Linger() }); ok {
		l.Linger()
	}
}

// keyCache interns the keys of the Leaf ID routes. A key read from the
// request is a view of fasthttp's buffer, valid only during the request, and
// a generator may keep the key it is given (a new tag's buffer, the
// not-found cache): it gets a real string. Known keys are found without
// allocating; a key is remembered once it has been served, up to a bound, so
// random names cannot grow the cache.
type keyCache struct {
	m  atomic.Pointer[map[string]string]
	mu sync.Mutex
}

const maxCachedKeys = 4096

// intern returns the key as a string the caller may keep (answerLeafID
// validates it).
func (c *keyCache) intern(b []byte) string {
	if m := c.m.Load(); m != nil {
		if k, ok := (*m)[string(b)]; ok { // no allocation for a map lookup
			return k
		}
	}
	return string(b)
}

// remember adds a served key to the cache.
func (c *keyCache) remember(k string) {
	if m := c.m.Load(); m != nil {
		if _, ok := (*m)[k]; ok || len(*m) >= maxCachedKeys {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	next := make(map[string]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[k] = k
	c.m.Store(&next)
}

func lenOf(m *map[string]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// fastLogger sends fasthttp's own messages (accept errors and the like) to
// the server's logger, but for those any client can cause one per
// connection, which are counted instead (see badRequests).
type fastLogger struct{ s *Server }

func (l fastLogger) Printf(format string, args ...any) {
	switch {
	case strings.HasPrefix(format, "error when serving connection"):
		// A request fastProtocolError has answered and counted, or a
		// client gone mid-answer.
		return
	case strings.HasPrefix(format, "The incoming connection cannot be served"):
		l.s.bad.add(badTooManyConns, fmt.Sprintf(format, args...))
		return
	}
	l.s.log.Warn("fasthttp: " + fmt.Sprintf(format, args...))
}

// serveAdapted answers a request with the net/http handler. fasthttp's own
// adaptor is not used: it hands the handler strings that are views of
// fasthttp's buffers, and a handler may keep them (the segment generator
// keeps a tag it has not seen in its maps, where the bytes would change under
// it with the connection's next request). Every string here is a copy. The
// handler runs on this goroutine: no route streams or hijacks.
func (s *Server) serveAdapted(ctx *fasthttp.RequestCtx) {
	uri := string(ctx.RequestURI())
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		s.fastProtocolError(ctx, err)
		return
	}
	r := &http.Request{
		Method:     string(ctx.Method()),
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header),
		Host:       string(ctx.Host()),
		RequestURI: uri,
		RemoteAddr: ctx.RemoteAddr().String(),
		TLS:        ctx.TLSConnectionState(),
	}
	if !ctx.Request.Header.IsHTTP11() {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	for k, v := range ctx.Request.Header.All() {
		r.Header.Add(string(k), string(v))
	}
	body := ctx.PostBody()
	r.ContentLength = int64(len(body))
	r.Body = io.NopCloser(bytes.NewReader(bytes.Clone(body)))
	w := &adaptedWriter{ctx: ctx, h: make(http.Header)}
	s.ServeHTTP(w, r.WithContext(requestContext))
	w.finish()
}

// requestContext is the context of every request on the fast transport.
// fasthttp's RequestCtx is a context.Context too, done when the server shuts
// down, but its Done reads a field that Shutdown later resets without
// synchronisation: a goroutine that a derived context or a driver starts
// (context.WithTimeout's propagation, SQLite's interrupt watcher) may read it
// after the request has ended, a data race the race detector reports. Nothing
// is lost: fasthttp never signals a client going away, and every wait on the
// request path is bounded (segment.wait_timeout, the snowflake generator's
// budgets, the stores' timeouts), so shutdown drains requests without
// cancelling them.
var requestContext = context.Background()

// adaptedWriter is the net/http ResponseWriter of serveAdapted: headers and
// status are kept until the handler returns, the body goes straight into the
// fasthttp response.
type adaptedWriter struct {
	ctx    *fasthttp.RequestCtx
	h      http.Header
	status int
}

func (w *adaptedWriter) Header() http.Header { return w.h }

func (w *adaptedWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *adaptedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.ctx.Response.AppendBody(p)
	return len(p), nil
}

func (w *adaptedWriter) finish() {
	resp := &w.ctx.Response
	resp.SetStatusCode(cmp.Or(w.status, http.StatusOK))
	for k, vv := range w.h {
		switch k {
		case "Content-Length":
			// fasthttp counts the body itself; only a HEAD answer, which
			// has none, states the GET answer's length.
			if n, err := strconv.Atoi(vv[0]); err == nil && w.ctx.IsHead() {
				resp.Header.SetContentLength(n)
				resp.SkipBody = true
			}
		case "Content-Type":
			resp.Header.SetContentType(vv[0])
		default:
			for _, v := range vv {
				resp.Header.Add(k, v)
			}
		}
	}
}
