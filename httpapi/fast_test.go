package httpapi

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf/internal/ratelimit"

	"github.com/leafgo/leaf"
)

// TestFastMatchesNetHTTP sends the same requests to the fast transport and
// to the handler under net/http, each over identical fake generators, and
// requires the same status, body and headers: the fast ID routes are a
// second implementation of leafGet and must not drift from it.
func TestFastMatchesNetHTTP(t *testing.T) {
	newCfg := func() Config {
		seg := newFakeGen("test", "other")
		seg.setFail("down", leaf.ErrNotReady)
		seg.rows["down"] = &leaf.Alloc{Tag: "down", MaxID: 1, Step: 1}
		return Config{Segment: seg, Tags: seg, Snowflake: newFakeSnowflake(), Version: "v-diff",
			Logger: slog.New(slog.DiscardHandler)}
	}
	netBase := serveNetHTTP(t, New(newCfg()))
	fastBase := serveFast(t, New(newCfg()), Limits{})
	long := strings.Repeat("x", leaf.MaxTagLen+1)
	requests := []struct{ method, target, body string }{
		{"GET", "/api/segment/get/test", ""},
		{"POST", "/api/segment/get/test", ""},
		{"HEAD", "/api/segment/get/test", ""},
		{"PUT", "/api/segment/get/test", ""},
		{"DELETE", "/api/snowflake/get/test", ""},
		{"GET", "/api/segment/get/test?count=3", ""},
		{"GET", "/api/segment/get/test?count=1", ""},
		{"HEAD", "/api/segment/get/test?count=2", ""},
		{"GET", "/api/segment/get/test?count=0", ""},
		{"GET", "/api/segment/get/test?count=10001", ""},
		{"GET", "/api/segment/get/test?count=abc", ""},
		{"GET", "/api/segment/get/test?count=", ""},
		{"GET", "/api/segment/get/test?count=2&count=5", ""},
		{"GET", "/api/segment/get/test?%63ount=2", ""},
		{"GET", "/api/segment/get/test?_=1700000000", ""},
		{"GET", "/api/segment/get/other", ""},
		{"GET", "/api/segment/get/nope", ""},
		{"GET", "/api/segment/get/down", ""},
		{"GET", "/api/segment/get/", ""},
		{"GET", "/api/segment/get/bad%20tag", ""},
		{"GET", "/api/segment/get/a/b", ""},
		{"GET", "/api/segment/get/" + long, ""},
		{"GET", "/api/segment/get/%E2%9C%93", ""},
		{"GET", "/api/segment/get/te%73t", ""},
		{"GET", "/api/segment/get/./test", ""},
		{"GET", "/api/segment/get/../get/test", ""},
		{"GET", "//api/segment/get/test", ""},
		{"GET", "/api//segment/get/test", ""},
		{"GET", "/api/segment/get/test.", ""},
		{"GET", "/api/segment/get/.test", ""},
		{"GET", "/api/segment/get/te.st?count=2", ""},
		{"GET", "/api/snowflake/get/a%2Fb", ""},
		{"GET", "/api/snowflake/get/any", ""},
		{"GET", "/api/snowflake/get/any?count=4", ""},
		{"HEAD", "/api/snowflake/get/any", ""},
		{"GET", "/api/snowflake/get/bad%20key", ""},
		{"GET", "/v2/segment/test", ""},
		{"HEAD", "/v2/segment/test", ""},
		{"HEAD", "/v2/segment/test/range?count=2", ""},
		{"HEAD", "/v2/snowflake/batch?count=2", ""},
		{"HEAD", "/api/segment/get/nope", ""},
		{"HEAD", "/api/segment/get/test?count=0", ""},
		{"HEAD", "/api/segment/get/down", ""},
		{"HEAD", "/v2/segment/nope", ""},
		{"POST", "/v2/segment/test/batch?count=2", ""},
		{"GET", "/v2/segment/test/range?count=5", ""},
		{"GET", "/v2/snowflake/decode/1", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=abc", ""},
		{"POST", "/v2/tags", `{"tag":"new","step":10}`},
		{"POST", "/v2/tags", `{"tag":"new","step":10}`},
		{"POST", "/v2/tags", `{bad json`},
		{"PATCH", "/v2/tags/new", `{"step":20}`},
		{"GET", "/v2/tags/new", ""},
		{"DELETE", "/v2/tags/new", ""},
		{"GET", "/v2/status", ""},
		{"GET", "/healthz", ""},
		{"HEAD", "/readyz", ""},
		{"GET", "/cache", ""},
		{"GET", "/db", ""},
		{"GET", "/nope", ""},
		{"GET", "/v2/nope", ""},
		{"GET", "/monitor/", ""},
		{"GET", "/api/segment/get/test", ""},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(base, method, target, body string) response {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, base+target, rd)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return stripRequestID(t, response{resp.StatusCode, resp.Header, string(b)})
	}
	headers := []string{"Content-Type", "Content-Length", "Cache-Control", "Allow", "Retry-After", "X-Content-Type-Options", "Location"}
	for _, rq := range requests {
		n := send(netBase, rq.method, rq.target, rq.body)
		f := send(fastBase, rq.method, rq.target, rq.body)
		if n.status != f.status || n.body != f.body {
			t.Errorf("%s %s: net/http %d %q, fast %d %q", rq.method, rq.target, n.status, n.body, f.status, f.body)
		}
		for _, h := range headers {
			if nv, fv := n.header.Get(h), f.header.Get(h); nv != fv {
				t.Errorf("%s %s: %s: net/http %q, fast %q", rq.method, rq.target, h, nv, fv)
			}
		}
	}
}

// rawConn is a client connection that writes raw bytes and reads responses.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, base string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t, c, bufio.NewReader(c)}
}

func (rc *rawConn) write(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

// read reads one response to a request with method.
func (rc *rawConn) read(method string) response {
	rc.t.Helper()
	resp, err := http.ReadResponse(rc.r, &http.Request{Method: method})
	if err != nil {
		rc.t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		rc.t.Fatalf("read body: %v", err)
	}
	return stripRequestID(rc.t, response{resp.StatusCode, resp.Header, string(b)})
}

// closed waits for the server to close the connection, reading whatever it
// sends first.
func (rc *rawConn) closed() {
	rc.t.Helper()
	_, err := io.Copy(io.Discard, rc.r)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		rc.t.Fatalf("connection not closed by the server: %v", err)
	}
}

// TestFastProtocol holds the fast transport to HTTP/1.1: keep-alive,
// pipelining, HEAD, size limits, slow and idle clients, malformed requests.
func TestFastProtocol(t *testing.T) {
	lim := Limits{ReadTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4096, MaxBodyBytes: 1024}
	base := serveFast(t, New(Config{Segment: newFakeGen("test"), Logger: slog.New(slog.DiscardHandler)}), lim)
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: leaf\r\n\r\n" }

	t.Run("pipelined", func(t *testing.T) {
		rc := dialRaw(t, base)
		// Four requests in one write; the answers come back in order on the
		// same connection. HEAD takes no ID, so it cannot state the length
		// of GET's body.
		rc.write(get("/api/segment/get/test") + "HEAD /api/segment/get/test HTTP/1.1\r\nHost: leaf\r\n\r\n" +
			get("/api/segment/get/test?count=2") + get("/healthz"))
		want := []struct {
			method, body, length string
		}{{"GET", "1", "1"}, {"HEAD", "", ""}, {"GET", "2\n3", "3"}, {"GET", "ok\n", "3"}}
		for i, w := range want {
			r := rc.read(w.method)
			if r.status != 200 || r.body != w.body || r.header.Get("Content-Length") != w.length {
				t.Errorf("response %d to %s: %d %q length %q, want 200 %q length %s", i, w.method, r.status, r.body, r.header.Get("Content-Length"), w.body, w.length)
			}
		}
	})
	t.Run("keep-alive", func(t *testing.T) {
		rc := dialRaw(t, base)
		for range 3 {
			rc.write(get("/api/segment/get/test"))
			if r := rc.read("GET"); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
		}
	})
	t.Run("connection close", func(t *testing.T) {
		rc := dialRaw(t, base)
		rc.write("GET /api/segment/get/test HTTP/1.1\r\nHost: leaf\r\nConnection: close\r\n\r\n")
		if r := rc.read("GET"); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		rc.closed()
	})
	t.Run("headers too large", func(t *testing.T) {
		rc := dialRaw(t, base)
		rc.write("GET /api/segment/get/test HTTP/1.1\r\nHost: leaf\r\nX-Big: " + strings.Repeat("a", 8192) + "\r\n\r\n")
		if r := rc.read("GET"); r.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d %q, want 431", r.status, r.body)
		}
		rc.closed()
	})
	t.Run("headers too large, client still sending", func(t *testing.T) {
		// The server answers after reading its limit, while the client is
		// still writing the rest: the answer must reach the client, not a
		// reset (the connection drains before it closes). POST, because Go's
		// client does not retry it on a fresh connection.
		for i := range 30 {
			req, err := http.NewRequest("POST", base+"/api/segment/get/"+strings.Repeat("x", 64<<10), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("request %d: %v", i, errors.Unwrap(err)) // not the 64 KiB URL
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("request %d: status %d, want 431", i, resp.StatusCode)
			}
		}
	})
	t.Run("body too large", func(t *testing.T) {
		rc := dialRaw(t, base)
		// The body is refused on its declared length, before it is sent.
		rc.write("POST /v2/tags HTTP/1.1\r\nHost: leaf\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
		if r := rc.read("POST"); r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d %q, want 413", r.status, r.body)
		}
		rc.closed()
	})
	t.Run("slowloris", func(t *testing.T) {
		rc := dialRaw(t, base)
		// Half a request, then nothing: the read timeout closes it.
		rc.write("GET /api/segment/get/test HTTP/1.1\r\nHost: le")
		rc.closed()
	})
	t.Run("idle new connection", func(t *testing.T) {
		dialRaw(t, base).closed()
	})
	t.Run("idle after a request", func(t *testing.T) {
		rc := dialRaw(t, base)
		rc.write(get("/healthz"))
		if r := rc.read("GET"); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		rc.closed()
	})
	t.Run("malformed", func(t *testing.T) {
		for _, raw := range []string{"NONSENSE\r\n\r\n", "GET\r\n\r\n", "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n"} {
			rc := dialRaw(t, base)
			rc.write(raw)
			if r := rc.read("GET"); r.status != http.StatusBadRequest {
				t.Errorf("%q: status %d %q, want 400", raw, r.status, r.body)
			}
			rc.closed()
		}
	})
	t.Run("bad paths", func(t *testing.T) {
		rc := dialRaw(t, base)
		for path, status := range map[string]int{"/nope": 404, "/api/segment/get/": 400, "/api/segment/get/no-such": 404, "/api/segment/get/a%00b": 400} {
			rc.write(get(path))
			if r := rc.read("GET"); r.status != status {
				t.Errorf("GET %s: %d %q, want %d", path, r.status, r.body, status)
			}
		}
	})
}

// TestFastHotPathAllocations: the fast ID routes allocate nothing of their
// own once a tag has been served, observed or not.
func TestFastHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	// A limit no test can reach: the limiter's bookkeeping runs on every
	// request, and every request is allowed.
	lim, err := ratelimit.New(ratelimit.Config{Rate: 1e9, Burst: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	limited := newBenchServer()
	limited.limiter = lim
	for name, s := range map[string]*Server{"unobserved": newBenchServer(), "observed": newObservedBenchServer(&countingObserver{}),
		"rate limited": limited} {
		h := NewFastServer(s, Limits{}).Handler
		for _, target := range []string{
			"/api/segment/get/leaf-segment-test",
			"/api/segment/get/leaf-segment-test?_=1700000000",
			"/api/snowflake/get/leaf-snowflake-test",
			"/api/segment/get/leaf-segment-test?count=100",
		} {
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			req.SetRequestURI(target)
			req.Header.SetHost("leaf")
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
			h(&ctx) // warm the key cache and the pools
			if allocs := testing.AllocsPerRun(1000, func() {
				ctx.Response.Reset()
				h(&ctx)
			}); allocs != 0 {
				t.Errorf("%s GET %s: %v allocations per request, want 0", name, target, allocs)
			}
			if ctx.Response.StatusCode() != 200 {
				t.Errorf("%s GET %s: status %d %s", name, target, ctx.Response.StatusCode(), ctx.Response.Body())
			}
		}
	}
}

// TestFastServerDefaults pins the limits docs/operating.md promises for leaf
// serve, which uses Limits{}: a request within 10s, idle connections closed
// after 2m, headers up to 4 KiB, bodies up to 1 MiB.
func TestFastServerDefaults(t *testing.T) {
	srv := NewFastServer(New(Config{}), Limits{})
	if srv.ReadTimeout != 10*time.Second || srv.WriteTimeout != 30*time.Second || srv.IdleTimeout != 2*time.Minute ||
		srv.ReadBufferSize != 4<<10 || srv.MaxRequestBodySize != 1<<20 {
		t.Errorf("defaults: read %v write %v idle %v headers %d body %d", srv.ReadTimeout, srv.WriteTimeout,
			srv.IdleTimeout, srv.ReadBufferSize, srv.MaxRequestBodySize)
	}
}
