package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/deadline"
	"github.com/leafgo/leaf/internal/testutil"
)

// testServer serves gen (nil: segment mode disabled) on loopback and returns
// its base URL and the log it writes. A fake that holds the rows as well,
// as fakeGen does, is also the store the rows are read from (Config.Tags).
func testServer(t *testing.T, gen SegmentGenerator) (string, *testutil.LogBuffer) {
	t.Helper()
	var cfg Config
	if gen != nil {
		cfg.Segment = gen
		cfg.Tags, _ = gen.(TagReader)
	}
	return testServerConfig(t, cfg)
}

// testServerConfig serves New(cfg) on loopback, with a logger and a version
// of its own, and returns its base URL and the log it writes.
func testServerConfig(t *testing.T, cfg Config) (string, *testutil.LogBuffer) {
	t.Helper()
	logs := &testutil.LogBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Version = "v1.2.3-test"
	return serveFast(t, New(cfg), Limits{}), logs
}

// serveFast serves s as leaf serve does, through NewFastServer, on
// loopback, and returns its base URL.
func serveFast(t testing.TB, s *Server, lim Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewFastServer(s, lim)
	done := make(chan struct{})
	// As leaf serve does: coarse deadlines, enforced every 50ms.
	go func() { defer close(done); _ = srv.Serve(deadline.Wrap(ln, 50*time.Millisecond)) }()
	t.Cleanup(func() {
		testutil.ShutdownFast(srv)
		<-done
	})
	return "http://" + ln.Addr().String()
}

// serveNetHTTP serves s with net/http, as an embedding application would.
func serveNetHTTP(t *testing.T, s *Server) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// checkLeafAnswer checks an answer of a Leaf text route: the status, the
// exact body (or, when contain is set, a body holding it), the headers, and
// the error format of a failure.
func checkLeafAnswer(t *testing.T, r response, method string, status int, body, contain string, header map[string]string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (body %q)", r.status, status, r.body)
	}
	if contain == "" && r.body != body {
		t.Errorf("body = %q, want %q", r.body, body)
	}
	if contain != "" && !strings.Contains(r.body, contain) {
		t.Errorf("body = %q, want it to contain %q", r.body, contain)
	}
	if r.status != 200 && method != "HEAD" {
		checkTextError(t, r)
	}
	for k, v := range header {
		if got := r.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

// do sends one request. target is appended to base as is, so that it may hold
// escapes (%2F) the client sends unchanged.
func do(t *testing.T, method, base, target, body string) response {
	t.Helper()
	return doHeader(t, method, base, target, body, nil)
}

// doHeader is do with request headers.
func doHeader(t *testing.T, method, base, target, body string, header http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+target, rd)
	if err != nil {
		t.Fatalf("NewRequest %s %s: %v", method, target, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %.200s: %v", method, target, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %.200s: read body: %v", method, target, err)
	}
	return stripRequestID(t, response{resp.StatusCode, resp.Header, string(b)})
}

// requestIDMember matches the request_id member of a /v2 error body.
var requestIDMember = regexp.MustCompile(`,"request_id":"([0-9a-f]{16})"`)

// stripRequestID checks that a /v2 error body's request_id is the one in
// the X-Request-Id header, and takes it out of the body, so that tests can
// compare bodies whole (request IDs are random).
func stripRequestID(t *testing.T, r response) response {
	t.Helper()
	m := requestIDMember.FindStringSubmatch(r.body)
	if m == nil {
		return r
	}
	if got := r.header.Get(requestIDHeader); got != m[1] {
		t.Errorf("body's request_id %s, header %s %q", m[1], requestIDHeader, got)
	}
	r.body = strings.Replace(r.body, m[0], "", 1)
	return r
}

// brokenGen breaks the generator's contract: IDs without errors that are no
// IDs. The transport must answer 500, never 200 with them.
type brokenGen struct{ *fakeGen }

func (brokenGen) NextID(context.Context, string) (int64, error) { return 0, nil }
func (brokenGen) NextIDs(_ context.Context, _ string, n int, dst []int64) ([]int64, error) {
	return append(dst, 5, 4), nil
}
func (brokenGen) NextRange(context.Context, string, int) (int64, int64, error) { return 10, 10, nil }
func (brokenGen) NextIDPeriod(context.Context, string) (int64, string, error)  { return 0, "", nil }
func (brokenGen) NextIDsPeriod(_ context.Context, _ string, n int, dst []int64) ([]int64, string, error) {
	return append(dst, 5, 4), "", nil
}
func (brokenGen) Take(context.Context, string, int, leaf.RangeUse) (leaf.IDRange, error) {
	return leaf.IDRange{Start: 10, End: 10}, nil
}

func TestLeafSegmentGet(t *testing.T) {
	long := strings.Repeat("a", leaf.MaxTagLen+1)
	maxLen := strings.Repeat("b", leaf.MaxTagLen)
	tests := []struct {
		name    string
		method  string
		target  string
		setup   func(g *fakeGen)
		status  int
		body    string // exact body; "" with a 200 means empty
		contain string // substring of the body, for error messages
		header  map[string]string
	}{
		{name: "single", method: "GET", target: "/api/segment/get/test", status: 200, body: "1",
			header: map[string]string{"Content-Type": "text/plain; charset=utf-8", "Content-Length": "1", "Cache-Control": "no-store"}},
		{name: "post", method: "POST", target: "/api/segment/get/test", status: 200, body: "1"},
		// HEAD takes no ID (see headID), so it cannot state GET's length.
		{name: "head", method: "HEAD", target: "/api/segment/get/test", status: 200, body: "",
			header: map[string]string{"Content-Length": "", "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}},
		{name: "later IDs", method: "GET", target: "/api/segment/get/test",
			setup: func(g *fakeGen) { g.next["test"] = 1234567890123 }, status: 200, body: "1234567890123"},
		{name: "max length tag", method: "GET", target: "/api/segment/get/" + maxLen,
			setup: func(g *fakeGen) { g.rows[maxLen] = &leaf.Alloc{Tag: maxLen, MaxID: 7}; g.next[maxLen] = 7 }, status: 200, body: "7"},
		{name: "dot kept", method: "GET", target: "/api/segment/get/order.v1",
			setup: func(g *fakeGen) {
				g.rows["order.v1"] = &leaf.Alloc{Tag: "order.v1", MaxID: 42}
				g.next["order.v1"] = 42
			}, status: 200, body: "42"},
		{name: "other query ignored", method: "GET", target: "/api/segment/get/test?_=1700000000&x", status: 200, body: "1"},
		{name: "batch", method: "GET", target: "/api/segment/get/test?count=3", status: 200, body: "1\n2\n3",
			header: map[string]string{"Content-Length": "5"}},
		{name: "batch head", method: "HEAD", target: "/api/segment/get/test?count=3", status: 200, body: "",
			header: map[string]string{"Content-Length": ""}},
		{name: "batch of one", method: "POST", target: "/api/segment/get/test?count=1", status: 200, body: "1"},
		{name: "batch escaped count", method: "GET", target: "/api/segment/get/test?a=b&count=%32", status: 200, body: "1\n2"},
		{name: "batch first count wins", method: "GET", target: "/api/segment/get/test?count=2&count=x", status: 200, body: "1\n2"},
		{name: "count 0", method: "GET", target: "/api/segment/get/test?count=0", status: 400, contain: "invalid count: 0"},
		{name: "count 10001", method: "GET", target: "/api/segment/get/test?count=10001", status: 400, contain: "invalid count: 10001"},
		{name: "count -1", method: "GET", target: "/api/segment/get/test?count=-1", status: 400, contain: "invalid count"},
		{name: "count not a number", method: "GET", target: "/api/segment/get/test?count=ten", status: 400, contain: `invalid count: "ten" is not a whole number`},
		{name: "count empty", method: "GET", target: "/api/segment/get/test?count=", status: 400, contain: "invalid count"},
		{name: "count bare", method: "GET", target: "/api/segment/get/test?count", status: 400, contain: "invalid count"},
		{name: "count huge", method: "GET", target: "/api/segment/get/test?count=99999999999999999999999", status: 400, contain: "invalid count"},
		{name: "count bad escape", method: "GET", target: "/api/segment/get/test?count=%zz", status: 400, contain: "invalid count"},
		{name: "empty key", method: "GET", target: "/api/segment/get/", status: 400, contain: "invalid tag: empty"},
		{name: "tag too long", method: "GET", target: "/api/segment/get/" + long, status: 400, contain: "invalid tag: 129 bytes"},
		{name: "tag with %20", method: "GET", target: "/api/segment/get/a%20b", status: 400, contain: "invalid tag"},
		{name: "tag with %2F", method: "GET", target: "/api/segment/get/a%2Fb", status: 400, contain: "invalid tag"},
		{name: "tag with slash", method: "GET", target: "/api/segment/get/a/b", status: 400, contain: "invalid tag"},
		{name: "tag with %00", method: "GET", target: "/api/segment/get/a%00b", status: 400, contain: "invalid tag"},
		{name: "tag with %0A", method: "GET", target: "/api/segment/get/a%0Ab", status: 400, contain: "invalid tag"},
		{name: "tag with UTF-8", method: "GET", target: "/api/segment/get/%E8%AE%A2%E5%8D%95", status: 400, contain: "invalid tag"},
		{name: "invalid tag before count", method: "GET", target: "/api/segment/get/a%20b?count=0", status: 400, contain: "invalid tag"},
		{name: "unknown tag", method: "GET", target: "/api/segment/get/nope", status: 404, contain: "tag not found"},
		{name: "unknown tag batch", method: "GET", target: "/api/segment/get/nope?count=2", status: 404, contain: "tag not found"},
		{name: "not ready", method: "GET", target: "/api/segment/get/test",
			setup: func(g *fakeGen) { g.fail["test"] = leaf.ErrNotReady }, status: 503, contain: "not ready",
			header: map[string]string{"Retry-After": "1"}},
		{name: "deadline", method: "GET", target: "/api/segment/get/test?count=5",
			setup: func(g *fakeGen) { g.fail["test"] = context.DeadlineExceeded }, status: 503, contain: "timed out",
			header: map[string]string{"Retry-After": "1"}},
		{name: "closed", method: "GET", target: "/api/segment/get/test",
			setup: func(g *fakeGen) { g.fail["test"] = leaf.ErrClosed }, status: 503, contain: "shutting down"},
		{name: "bug", method: "GET", target: "/api/segment/get/test",
			setup: func(g *fakeGen) { g.fail["test"] = errors.New("disk on fire") }, status: 500, body: "internal server error\n"},
		// HEAD does not issue, so a failing generator does not fail it.
		{name: "bug head", method: "HEAD", target: "/api/segment/get/test",
			setup: func(g *fakeGen) { g.fail["test"] = errors.New("disk on fire") }, status: 200, body: ""},
		{name: "unknown tag head", method: "HEAD", target: "/api/segment/get/nope", status: 404, body: "",
			header: map[string]string{"Content-Length": strconv.Itoa(len(`tag "nope": tag not found` + "\n"))}},
		{name: "put", method: "PUT", target: "/api/segment/get/test", status: 405, contain: "method PUT not allowed",
			header: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "delete", method: "DELETE", target: "/api/segment/get/test", status: 405, contain: "method DELETE not allowed",
			header: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "no slash", method: "GET", target: "/api/segment/get", status: 404, contain: "no route for /api/segment/get"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGen("test")
			if tt.setup != nil {
				tt.setup(g)
			}
			base, _ := testServer(t, g)
			r := do(t, tt.method, base, tt.target, "")
			checkLeafAnswer(t, r, tt.method, tt.status, tt.body, tt.contain, tt.header)
			if n := g.invalidCalls(); n != 0 {
				t.Errorf("the generator got %d calls with invalid input", n)
			}
		})
	}
}

// checkTextError checks the shape of an error on a text route: one line.
func checkTextError(t *testing.T, r response) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("error Content-Type = %q", ct)
	}
	if !strings.HasSuffix(r.body, "\n") || strings.Count(r.body, "\n") != 1 {
		t.Errorf("error body %q is not one line", r.body)
	}
	if (r.status == 503) != (r.header.Get("Retry-After") == "1") {
		t.Errorf("status %d with Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
}

func TestInternalErrorIsLogged(t *testing.T) {
	g := newFakeGen("test")
	g.fail["test"] = errors.New("disk on fire")
	base, logs := testServer(t, g)
	do(t, "GET", base, "/api/segment/get/test", "")
	if !strings.Contains(logs.String(), "disk on fire") || !strings.Contains(logs.String(), "/api/segment/get/test") {
		t.Errorf("log = %q, want the error and the path", logs.String())
	}
	// Expected errors are not logged: a client hammering an unknown tag must
	// not flood the log.
	before := logs.String()
	do(t, "GET", base, "/api/segment/get/nope", "")
	do(t, "GET", base, "/api/segment/get/a%20b", "")
	if logs.String() != before {
		t.Errorf("expected errors were logged: %q", strings.TrimPrefix(logs.String(), before))
	}
}

func TestBrokenGeneratorNeverAnswers200(t *testing.T) {
	base, _ := testServer(t, brokenGen{newFakeGen("test")})
	for _, target := range []string{
		"/api/segment/get/test", "/api/segment/get/test?count=2",
		"/v2/segment/test", "/v2/segment/test/batch?count=2", "/v2/segment/test/range?count=2",
	} {
		if r := do(t, "GET", base, target, ""); r.status != 500 {
			t.Errorf("GET %s = %d %q, want 500", target, r.status, r.body)
		}
	}
}

func TestSegmentDisabled(t *testing.T) {
	base, _ := testServer(t, nil)
	for _, target := range []string{"/api/segment/get/test", "/api/segment/get/test?count=2", "/cache", "/db"} {
		r := do(t, "GET", base, target, "")
		if r.status != 404 || r.body != "segment mode is disabled\n" {
			t.Errorf("GET %s = %d %q, want 404 segment mode is disabled", target, r.status, r.body)
		}
	}
	for _, rq := range []struct{ method, target, body string }{
		{"GET", "/v2/segment/test", ""},
		{"POST", "/v2/segment/test/batch?count=2", ""},
		{"GET", "/v2/segment/test/range?count=2", ""},
		{"GET", "/v2/tags", ""},
		{"GET", "/v2/tags/test", ""},
		{"POST", "/v2/tags", `{"tag":"x"}`},
		{"PATCH", "/v2/tags/test", `{"step":5}`},
		{"DELETE", "/v2/tags/test", ""},
	} {
		r := do(t, rq.method, base, rq.target, rq.body)
		e := jsonError(t, r)
		if r.status != 404 || e.Code != "segment_disabled" || e.Error != "segment mode is disabled" {
			t.Errorf("%s %s = %d %q, want 404 segment_disabled", rq.method, rq.target, r.status, r.body)
		}
	}
}

func TestConcurrentIDsAreUnique(t *testing.T) {
	base, _ := testServer(t, newFakeGen("test"))
	const workers, each = 8, 50
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				target := "/api/segment/get/test"
				if i%2 == 1 {
					target = "/v2/segment/test"
				}
				req, _ := http.NewRequest("GET", base+target, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				id := string(b)
				if i%2 == 1 {
					var v struct {
						IDStr string `json:"id_str"`
					}
					if err := json.Unmarshal(b, &v); err != nil {
						t.Errorf("worker %d: %q: %v", w, b, err)
						return
					}
					id = v.IDStr
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %s issued twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Errorf("got %d distinct IDs, want %d", len(seen), workers*each)
	}
}

func TestNotFound(t *testing.T) {
	base, _ := testServer(t, newFakeGen("test"))
	for _, target := range []string{"/nope", "/index.html", "/api/segment", "/api/snowflake/get", "/decodeSnowflakeId/", "/cache/", "/healthz/x", "/V2/status"} {
		r := do(t, "GET", base, target, "")
		if r.status != 404 || !strings.HasPrefix(r.body, "no route for ") {
			t.Errorf("GET %s = %d %q, want 404 no route", target, r.status, r.body)
		}
		checkTextError(t, r)
	}
	for _, target := range []string{"/v2/", "/v2/nope", "/v2/segment/", "/v2/segment/a/b/c", "/v2/segment/test/batches"} {
		r := do(t, "GET", base, target, "")
		if e := jsonError(t, r); r.status != 404 || e.Code != "not_found" {
			t.Errorf("GET %s = %d %q, want 404 not_found", target, r.status, r.body)
		}
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name     string
		gen      bool
		degraded []string
		target   string
		method   string
		status   int
		body     string
	}{
		{name: "healthz", gen: true, target: "/healthz", status: 200, body: "ok\n"},
		{name: "healthz degraded", gen: true, degraded: []string{"store unreachable"}, target: "/healthz", status: 200, body: "ok\n"},
		{name: "healthz disabled", target: "/healthz", status: 200, body: "ok\n"},
		{name: "healthz head", gen: true, method: "HEAD", target: "/healthz", status: 200, body: ""},
		{name: "readyz", gen: true, target: "/readyz", status: 200, body: "ok\n"},
		{name: "readyz strict healthy", gen: true, target: "/readyz?strict=1", status: 200, body: "ok\n"},
		{name: "readyz disabled", target: "/readyz", status: 200, body: "ok\n"},
		{name: "readyz degraded", gen: true, degraded: []string{"store unreachable: dial tcp: refused", "tag a: load failed"},
			target: "/readyz", status: 200, body: "degraded\nstore unreachable\ntag a: load failed\n"},
		{name: "readyz degraded strict", gen: true, degraded: []string{"store unreachable"},
			target: "/readyz?strict=1", status: 503, body: "degraded\nstore unreachable\n"},
		{name: "readyz degraded strict=true", gen: true, degraded: []string{"x"}, target: "/readyz?strict=true", status: 503, body: "degraded\nx\n"},
		{name: "readyz degraded strict=0", gen: true, degraded: []string{"x"}, target: "/readyz?strict=0", status: 200, body: "degraded\nx\n"},
		{name: "readyz reason with newline", gen: true, degraded: []string{"line1\nline2"}, target: "/readyz", status: 200, body: "degraded\nline1 line2\n"},
		{name: "healthz post", gen: true, method: "POST", target: "/healthz", status: 405, body: "method POST not allowed; use GET, HEAD\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gen SegmentGenerator
			if tt.gen {
				g := newFakeGen("test")
				g.setDegraded(tt.degraded...)
				gen = g
			}
			base, _ := testServer(t, gen)
			method := tt.method
			if method == "" {
				method = "GET"
			}
			r := do(t, method, base, tt.target, "")
			if r.status != tt.status || r.body != tt.body {
				t.Errorf("%s %s = %d %q, want %d %q", method, tt.target, r.status, r.body, tt.status, tt.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

func TestPages(t *testing.T) {
	g := newFakeGen("alpha", "beta")
	g.next["beta"] = 777
	base, _ := testServer(t, g)

	r := do(t, "GET", base, "/cache", "")
	if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/cache = %d %s", r.status, r.header.Get("Content-Type"))
	}
	for _, want := range []string{
		"<th class=\"l\">name</th><th>init</th><th>next</th><th>pos</th><th>value0</th><th>max0</th><th>step0</th><th>value1</th><th>max1</th><th>step1</th>",
		`<tr><td class="l">alpha</td><td>true</td><td>true</td><td>0</td><td>1</td><td>1001</td><td>1000</td><td>1001</td><td>3001</td><td>2000</td></tr>`,
		`<td class="l">beta</td><td>true</td><td>true</td><td>0</td><td>777</td>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/cache lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "http://") || strings.Contains(r.body, "https://") {
		t.Errorf("/cache refers to an external resource")
	}

	r = do(t, "POST", base, "/db", "")
	if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/db = %d %s", r.status, r.header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<th class="l">tag</th><th>max</th><th>step</th><th class="l">update</th>`,
		`<tr><td class="l">alpha</td><td>1</td><td>1000</td><td class="l">2024-05-01 12:00:00 UTC</td></tr>`,
		`<tr><td class="l">beta</td><td>1</td><td>1000</td>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/db lacks %q:\n%s", want, r.body)
		}
	}

	if r := do(t, "HEAD", base, "/db", ""); r.status != 200 || r.body != "" || r.header.Get("Content-Length") == "" {
		t.Errorf("HEAD /db = %d %q Content-Length %q", r.status, r.body, r.header.Get("Content-Length"))
	}
	if r := do(t, "PUT", base, "/cache", ""); r.status != 405 || r.header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("PUT /cache = %d Allow %q", r.status, r.header.Get("Allow"))
	}

	g.setFail("*", leaf.ErrNotReady)
	if r := do(t, "GET", base, "/db", ""); r.status != 503 || r.header.Get("Retry-After") != "1" {
		t.Errorf("/db with the store down = %d %q", r.status, r.body)
	}
}

// escapingGen reports a tag a real generator never would, to prove the pages
// escape what they show.
type escapingGen struct{ *fakeGen }

func (escapingGen) Status() []leaf.SegmentStatus {
	return []leaf.SegmentStatus{{Tag: `<script>alert("x")</script>`}}
}

func (escapingGen) Allocs(context.Context) ([]leaf.Alloc, error) {
	return []leaf.Alloc{{Tag: `<img src=x onerror=alert(1)>`}}, nil
}

func (g escapingGen) AllocsPage(ctx context.Context, _, _ string, _ int) ([]leaf.Alloc, error) {
	return g.Allocs(ctx)
}

func TestPagesEscape(t *testing.T) {
	base, _ := testServer(t, escapingGen{newFakeGen()})
	for _, target := range []string{"/cache", "/db"} {
		r := do(t, "GET", base, target, "")
		if r.status != 200 || strings.Contains(r.body, "<script>") || strings.Contains(r.body, "<img") ||
			!strings.Contains(r.body, "&lt;") {
			t.Errorf("%s does not escape its data:\n%s", target, r.body)
		}
	}
	base, _ = testServer(t, newFakeGen())
	for _, target := range []string{"/cache", "/db"} {
		if r := do(t, "GET", base, target, ""); r.status != 200 || !strings.Contains(r.body, "<td class=\"l\" colspan=") {
			t.Errorf("%s with no tags = %d:\n%s", target, r.status, r.body)
		}
	}
}

// TestOddInput sends requests no client should, over real HTTP: nothing may
// panic or answer 500.
func TestOddInput(t *testing.T) {
	g := newFakeGen("test")
	base, logs := testServer(t, g)
	targets := []string{
		"/api/segment/get/" + strings.Repeat("x", 64<<10),
		"/api/segment/get/test?" + strings.Repeat("count=1&", 4000),
		"/api/segment/get/test?count=1;x=2",
		"/api/segment/get/test?%zz=%zz&count=2",
		"/api/segment/get/test?=&&&=&count=%2B1",
		"/api/segment/get/..",
		"/api/segment/get/../../cache",
		"/api/segment/get/%2e%2e",
		"/api/segment/get/%ff%fe",
		"/api/segment/get//test",
		"/v2/segment/" + strings.Repeat("%41", 1000),
		"/v2/segment/test/batch?count=1e3",
		"/v2/segment/test/range?count=0x10",
		"/v2/segment/%2e%2e/batch?count=2",
		"/v2/tags/%2Fetc%2Fpasswd",
		"/v2//status",
		"/cache?x=%",
		"/readyz?strict=%",
		"/" + strings.Repeat("/", 1000),
		"/%00",
	}
	for _, target := range targets {
		for _, method := range []string{"GET", "POST", "HEAD", "OPTIONS", "PATCH", "DELETE"} {
			r := do(t, method, base, target, "")
			if r.status >= 500 {
				t.Errorf("%s %.80s = %d %q", method, target, r.status, r.body)
			}
		}
	}
	if n := g.invalidCalls(); n != 0 {
		t.Errorf("the generator got %d calls with invalid input", n)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("odd input was logged as an internal error:\n%s", logs.String())
	}
}

func TestQueryValue(t *testing.T) {
	tests := []struct {
		raw, value string
		ok         bool
	}{
		{"", "", false},
		{"count=5", "5", true},
		{"a=1&count=5", "5", true},
		{"count=5&count=6", "5", true},
		{"counts=5", "", false},
		{"xcount=5", "", false},
		{"count", "", true},
		{"count=", "", true},
		{"c%6Funt=7", "7", true},
		{"count=%37", "7", true},
		{"count=+7", " 7", true},
		{"count=%zz", "%zz", true},
		{"%zz=1&count=2", "2", true},
		{"&&count=3&&", "3", true},
	}
	for _, tt := range tests {
		v, ok := queryValue(tt.raw, "count")
		if v != tt.value || ok != tt.ok {
			t.Errorf("queryValue(%q) = %q, %v; want %q, %v", tt.raw, v, ok, tt.value, tt.ok)
		}
	}
}
