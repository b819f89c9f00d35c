package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
)

// fuzzToken is the admin token of the fuzzed servers, so that the fuzzer can
// find what a header does to the admin routes.
const fuzzToken = "fuzz-admin-token-0123456789"

// newFuzzServer returns a Server over fresh fakes. Every execution of a fuzz
// target builds its own, so that an input's outcome never depends on the
// inputs run before it and a crasher file replays exactly. degraded makes
// /readyz?strict=1 answer 503; the tag "down" fails with ErrNotReady (503).
func newFuzzServer(degraded bool) (*Server, *fakeGen, *fakeSnowflake) {
	g := newFakeGen("test", "down")
	g.setFail("down", leaf.ErrNotReady)
	sf := newFakeSnowflake()
	if degraded {
		g.setDegraded("fuzz")
		sf.setDegraded("snowflake fuzz")
	}
	s := New(Config{Segment: g, Tags: g, Snowflake: sf, Logger: slog.New(slog.DiscardHandler), AdminToken: fuzzToken, Version: "fuzz"})
	return s, g, sf
}

// parseHeaderLines reads the fuzzer's headers, "Name: value" lines.
func parseHeaderLines(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k != "" {
			h.Add(k, strings.TrimSpace(v))
		}
	}
	return h
}

// authorized is checkAdmin's rule written out again: the first
// Authorization header is "Bearer <token>", any case of Bearer, the token
// trimmed.
func authorized(h http.Header) bool {
	scheme, token, ok := strings.Cut(h.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) == fuzzToken
}

// routeStyle is the error style the package doc promises for a request: the
// Leaf ID prefixes (matched on the raw path, ahead of the mux) and every
// other text route answer one line of text, /decodeSnowflakeId
// {"errorMsg"}, /v2 {"error","code"}. Other paths are matched by the mux
// after cleaning (it redirects an unclean path, except for CONNECT).
func routeStyle(method, p string) errorStyle {
	if strings.HasPrefix(p, segmentGetPrefix) || strings.HasPrefix(p, snowflakeGetPrefix) {
		return textStyle
	}
	if method != http.MethodConnect {
		p = path.Clean(p)
	}
	switch {
	case p == "/decodeSnowflakeId":
		return leafJSONStyle
	case p == "/v2" || strings.HasPrefix(p, "/v2/"):
		return jsonStyle
	}
	return textStyle
}

// isAdminPath reports whether a cleaned path is an admin route.
func isAdminPath(p string) bool {
	return p == "/v2/tags" || strings.HasPrefix(p, "/v2/tags/") || p == "/cache" || p == "/db"
}

// checkErrorBody checks a 4xx or 5xx answer: a message, in style when style
// is known (>= 0), with the headers the error table promises. For HEAD the
// body is not sent, but its length is. readyz is set for /readyz, whose 503
// (?strict=1, degraded) is its report, several lines and no Retry-After.
func checkErrorBody(t *testing.T, what string, style int, head, readyz bool, code int, h http.Header, body string) {
	t.Helper()
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: %d without Cache-Control: no-store: %v", what, code, h)
	}
	switch code {
	case http.StatusUnauthorized:
		if h.Get("Www-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", what)
		}
	case http.StatusMethodNotAllowed:
		if h.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", what)
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if h.Get("Retry-After") == "" && !(readyz && code == http.StatusServiceUnavailable) {
			t.Errorf("%s: %d without Retry-After", what, code)
		}
	}
	// Every routed error answer carries its request ID; a request refused
	// unread (style -1) is counted, not logged, and has none.
	if style >= 0 && !readyz && len(h.Get(requestIDHeader)) != 16 {
		t.Errorf("%s: %d without a request ID: %s %q", what, code, requestIDHeader, h.Get(requestIDHeader))
	}
	if head {
		if n, err := strconv.Atoi(h.Get("Content-Length")); err != nil || n == 0 || body != "" {
			t.Errorf("%s: HEAD %d: Content-Length %q and a body of %d bytes; want the message's length and no body", what, code, h.Get("Content-Length"), len(body))
		}
		return
	}
	ct := h.Get("Content-Type")
	switch {
	case ct == textPlain[0] && (style < 0 || errorStyle(style) == textStyle):
		line, rest, ok := strings.Cut(body, "\n")
		if !ok || line == "" || rest != "" && !(readyz && line == "degraded") {
			t.Errorf("%s: %d %q: want one line of text", what, code, body)
		}
	case ct == appJSON[0] && (style < 0 || errorStyle(style) != textStyle):
		var m map[string]string
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Errorf("%s: %d %q: not a JSON object of strings: %v", what, code, body, err)
			return
		}
		ok := m["error"] != "" && m["code"] != "" && m["request_id"] == h.Get(requestIDHeader) && len(m) == 3
		if style == int(leafJSONStyle) || style < 0 && m["errorMsg"] != "" {
			ok = m["errorMsg"] != "" && len(m) == 1
		}
		if !ok {
			t.Errorf("%s: %d %q: want {\"error\",\"code\",\"request_id\"} on /v2 (request_id as in %s), {\"errorMsg\"} on /decodeSnowflakeId",
				what, code, body, requestIDHeader)
		}
	default:
		t.Errorf("%s: %d %q with Content-Type %q: not the error style of the route (%d)", what, code, body, ct, style)
	}
}

// FuzzServeHTTP sends arbitrary methods, paths, queries, headers and bodies
// straight to the handler.
//
// Properties: no panic; no 500, and 503 only with Retry-After or from
// /readyz?strict=1 (the fakes are degraded); every error answer is a
// message in the style of its route with the headers of its status; every
// answer carries Cache-Control: no-store; no generator is handed an invalid
// tag, count or key; an admin route answers 2xx only to the admin token.
func FuzzServeHTTP(f *testing.F) {
	const auth = "Authorization: Bearer " + fuzzToken
	seeds := []struct{ method, path, query, headers, body string }{
		{"GET", "/api/segment/get/test", "", "", ""},
		{"GET", "/api/segment/get/test", "count=3", "", ""},
		{"HEAD", "/api/segment/get/a b", "count=%zz", "", ""},
		{"POST", "/v2/tags", "", auth + "\nContent-Type: application/json", `{"tag":"x","start":5}`},
		{"POST", "/v2/tags", "", "", `{"tag":"x","start":5}`},
		{"PATCH", "/v2/tags/test", "", auth, `{"step":10}`},
		{"PATCH", "/v2/tags/test", "", "Authorization: bearer  " + fuzzToken + " ", `{"step":10}`},
		{"DELETE", "/v2/tags/test", "", auth, ""},
		{"DELETE", "/v2/tags/test", "", "Authorization: Basic Zm9vOmJhcg==", ""},
		{"GET", "/v2/tags", "", "Authorization: Bearer wrong", ""},
		{"GET", "/v2/status", "", "Authorization: Bearer wrong", ""},
		{"GET", "/v2/status", "", "", ""},
		{"GET", "/cache", "", auth, ""},
		{"GET", "/v2/segment/test/range", "count=10", "", ""},
		{"GET", "/v2/segment/test/batch", "count=-1", "", ""},
		{"GET", "/v2/segment/down", "", "", ""},
		{"GET", "/readyz", "strict=1", "", ""},
		{"HEAD", "/readyz", "strict=true", "", ""},
		{"BREW", "/cache", "", "", ""},
		{"GET", "/db", ";;;&&&==", auth, ""},
		{"GET", "//..//./v2/status", "", "", ""},
		{"GET", "/api/snowflake/get/test", "", "", ""},
		{"POST", "/api/snowflake/get/test", "count=3", "", ""},
		{"HEAD", "/api/snowflake/get/", "count=0", "", ""},
		{"PUT", "/api/snowflake/get/a%2Fb", "", "", ""},
		{"GET", "/decodeSnowflakeId", "snowflakeId=1263177670456266794", "", ""},
		{"POST", "/decodeSnowflakeId", "snowflakeId=-5&snowflakeId=abc", "", ""},
		{"GET", "/decodeSnowflakeId", "snowflakeId=99999999999999999999", "", ""},
		{"GET", "/v2/snowflake", "", "", ""},
		{"POST", "/v2/snowflake/batch", "count=10000", "", ""},
		{"GET", "/v2/snowflake/decode/9223372036854775807", "", "", ""},
		{"GET", "/v2/snowflake/decode/%2D1", "", "", ""},
		{"CONNECT", "/v2/../cache", "", "", ""},
		{"GET", "/monitor/", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.headers, s.body)
	}
	f.Fuzz(func(t *testing.T, method, p, query, headers, body string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			method = "GET"
		}
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		s, g, sf := newFuzzServer(true)
		segCalls, snowCalls := idCallsOf(g), callsOf(sf)
		r := &http.Request{
			Method:     method,
			URL:        &url.URL{Path: p, RawQuery: query},
			Header:     parseHeaderLines(headers),
			Body:       io.NopCloser(strings.NewReader(body)),
			Host:       "fuzz",
			RemoteAddr: "127.0.0.1:40000",
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		what := method + " " + strconv.Quote(p) + " ? " + strconv.Quote(query)
		code := w.Code
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s = %d without Cache-Control: no-store", what, code)
		}
		switch {
		case code == http.StatusInternalServerError, code >= 500 && code != http.StatusServiceUnavailable:
			t.Errorf("%s = %d %q", what, code, w.Body.String())
		case code >= 400:
			checkErrorBody(t, what, int(routeStyle(method, p)), method == http.MethodHead, path.Clean(p) == "/readyz", code, w.Header(), w.Body.String())
		case code >= 200 && code < 300 && method != http.MethodConnect && isAdminPath(path.Clean(p)) && !authorized(r.Header):
			t.Errorf("%s with headers %q = %d: an admin route answered without the token", what, headers, code)
		}
		if method == http.MethodHead && (idCallsOf(g) != segCalls || callsOf(sf) != snowCalls) {
			t.Errorf("%s = %d: HEAD reached an ID method of a generator", what, code)
		}
		if n := g.invalidCalls(); n != 0 {
			t.Errorf("%s: the generator got %d calls with invalid input", what, n)
		}
		if _, n := sf.counts(); n != 0 {
			t.Errorf("%s: the snowflake generator got %d calls with invalid input", what, n)
		}
	})
}

// halfClosedConn is the server's end of a connection whose client has sent
// its bytes and shut down its writing side: reads return them, then io.EOF;
// writes are collected. fasthttp.Server.ServeConn runs the server's whole
// connection loop on it (parsing, limits, pipelining, keep-alive, the error
// handler) on the calling goroutine, so that a fuzz execution is
// deterministic and an incomplete request ends at once instead of waiting
// out ReadTimeout.
type halfClosedConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

var fuzzClientAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

func (c *halfClosedConn) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *halfClosedConn) Write(p []byte) (int, error) { return c.out.Write(p) }
func (c *halfClosedConn) Close() error                { return nil }
func (c *halfClosedConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
}
func (c *halfClosedConn) RemoteAddr() net.Addr             { return fuzzClientAddr }
func (c *halfClosedConn) SetDeadline(time.Time) error      { return nil }
func (c *halfClosedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *halfClosedConn) SetWriteDeadline(time.Time) error { return nil }

// rawRequest assembles the fuzzer's parts into request bytes, each header
// line ended with CRLF. Nothing is escaped or checked: CR, LF and spaces in
// the parts make other requests, or none.
func rawRequest(method, target, headers string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString(method + " " + target + " HTTP/1.1\r\n")
	if headers != "" {
		for _, line := range strings.Split(headers, "\n") {
			b.WriteString(line + "\r\n")
		}
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// parsedRequest is a request as fasthttp's parser reads it from the raw
// bytes: the server's reading, since it uses the same parser.
type parsedRequest struct {
	method, uri string
	header      http.Header
	body        []byte
}

// parseRaw reads the requests of raw with fasthttp's parser, up to the
// first it cannot read; all reports whether every byte was consumed.
func parseRaw(raw []byte) (reqs []parsedRequest, all bool) {
	br := bufio.NewReaderSize(bytes.NewReader(raw), 4096)
	for {
		var req fasthttp.Request
		err := req.Read(br)
		if err == nil && req.MayContinue() {
			err = req.ContinueReadBody(br, 1<<20)
		}
		if err != nil {
			return reqs, false
		}
		pr := parsedRequest{method: string(req.Header.Method()), uri: string(req.Header.RequestURI()),
			header: http.Header{}, body: bytes.Clone(req.Body())}
		for k, v := range req.Header.All() {
			pr.header.Add(string(k), string(v))
		}
		reqs = append(reqs, pr)
		if req.Header.ConnectionClose() {
			return reqs, br.Buffered() == 0
		}
		if _, err := br.Peek(1); err == io.EOF {
			return reqs, true
		}
	}
}

type fuzzResponse struct {
	code   int
	header http.Header
	body   string
}

// readResponses reads every response of out, the server's bytes, to the
// requests reqs (fewer responses when the server closed early; one more, an
// error, for a request it could not parse). Interim 1xx answers are skipped.
func readResponses(t *testing.T, out []byte, reqs []parsedRequest) []fuzzResponse {
	t.Helper()
	var resps []fuzzResponse
	for len(out) > 0 {
		var resp *http.Response
		var body []byte
		var err error
		// The method tells whether a body follows. An answer past the
		// parsed requests is to one fasthttp could not read, whose method
		// is unknown: either reading is allowed.
		methods := []string{"GET", "HEAD"}
		if i := len(resps); i < len(reqs) {
			methods = []string{reqs[i].method}
		}
		rest := out
		for _, m := range methods {
			rd := bytes.NewReader(out)
			br := bufio.NewReader(rd)
			resp, err = http.ReadResponse(br, &http.Request{Method: m})
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				rest = out[len(out)-br.Buffered()-rd.Len():]
				break
			}
		}
		if err != nil {
			t.Fatalf("malformed response %d: %v\nin %q", len(resps), err, out)
		}
		out = rest
		if resp.StatusCode < 200 {
			continue
		}
		resps = append(resps, fuzzResponse{resp.StatusCode, resp.Header, string(body)})
	}
	return resps
}

// FuzzFastServer sends raw HTTP/1.1 bytes to the server leaf serve runs,
// NewFastServer with its default limits.
//
// Properties: no panic; the server writes only well-formed responses, at
// most one per request plus one for a request it cannot parse, and then
// closes; never 500, 5xx only 503 with Retry-After; every 4xx carries a
// one-line message; GET or POST /api/segment/get/test[?count=N] alone on a
// connection, with a plain Host, answers the fresh fake's IDs in decimal;
// and when net/http's
// parser reads the same single request the same way, the net/http handler
// answers it with the same status (and, for 200, the same body).
func FuzzFastServer(f *testing.F) {
	seeds := []struct{ method, target, headers, body string }{
		{"GET", "/api/segment/get/test", "Host: leaf", ""},
		// What real clients send: curl, Java's HttpURLConnection (Leaf's
		// users), Go's net/http.
		{"GET", "/api/segment/get/test", "Host: 127.0.0.1:8080\nUser-Agent: curl/8.5.0\nAccept: */*", ""},
		{"GET", "/api/snowflake/get/test", "User-Agent: Java/1.8.0_392\nHost: 10.0.0.5:8080\nAccept: text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2\nConnection: keep-alive", ""},
		{"POST", "/v2/segment/test/range?count=10000", "Host: leaf:8080\nUser-Agent: Go-http-client/1.1\nContent-Length: 0\nAccept-Encoding: gzip", ""},
		{"POST", "/api/segment/get/test?count=3", "Host: leaf\nContent-Length: 0", ""},
		{"HEAD", "/api/segment/get/test", "Host: leaf", ""},
		{"GET", "/api/segment/get/down", "Host: leaf", ""},
		{"GET", "/api/segment/get/nope", "Host: leaf", ""},
		{"GET", "/api/segment/get/a%2Fb", "Host: leaf", ""},
		{"GET", "/api/segment/get/../get/test", "Host: leaf", ""},
		{"GET", "/api/snowflake/get/any?count=2&_=1700000000", "Host: leaf", ""},
		{"DELETE", "/api/snowflake/get/any", "Host: leaf", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=1263177670456266794", "Host: leaf", ""},
		{"GET", "/v2/snowflake/decode/abc", "Host: leaf", ""},
		{"POST", "/v2/tags", "Host: leaf\nAuthorization: Bearer " + fuzzToken + "\nContent-Type: application/json\nContent-Length: 24", `{"tag":"new","step":10}` + "\n"},
		{"POST", "/v2/tags", "Host: leaf\nTransfer-Encoding: chunked", "5\r\n{\"tag\r\n0\r\n\r\n"},
		{"PUT", "/v2/tags/test", "Host: leaf\nExpect: 100-continue\nContent-Length: 2", "{}"},
		{"GET", "/healthz", "Host: leaf\nConnection: close", ""},
		{"GET", "/readyz?strict=1", "Host: leaf", ""},
		{"GET", "/api/segment/get/test", "Host: leaf", "GET /healthz HTTP/1.1\r\nHost: leaf\r\n\r\n"},
		{"GET", "/api/segment/get/test", "Host: leaf\nX-Big: " + strings.Repeat("a", 5000), ""},
		{"POST", "/v2/tags", "Host: leaf\nContent-Length: 2000000", ""},
		{"NONSENSE", "", "", ""},
		{"GET", "/healthz", "Bad Header", ""},
		{"GET", "http://leaf/api/segment/get/test", "Host: other", ""},
		{"GET", "*", "Host: leaf", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.headers, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target, headers string, body []byte) {
		raw := rawRequest(method, target, headers, body)
		s, _, _ := newFuzzServer(false)
		conn := &halfClosedConn{in: bytes.NewReader(raw)}
		// An error only says the connection ended on a bad request, which
		// the responses show.
		_ = NewFastServer(s, Limits{}).ServeConn(conn)
		reqs, all := parseRaw(raw)
		resps := readResponses(t, conn.out.Bytes(), reqs)
		if len(resps) > len(reqs)+1 {
			t.Fatalf("%d responses to %d requests in %q", len(resps), len(reqs), raw)
		}
		for i, r := range resps {
			what := "response " + strconv.Itoa(i) + " to " + strconv.Quote(string(raw))
			head := i < len(reqs) && reqs[i].method == http.MethodHead
			switch {
			case r.code == http.StatusInternalServerError, r.code >= 500 && r.code != http.StatusServiceUnavailable:
				t.Errorf("%s: %d %q", what, r.code, r.body)
			case r.code >= 400:
				// A request the server refuses before routing it (its
				// Host) is answered in text, whatever its route.
				style, readyz := -1, false
				if i < len(reqs) && plainHost(reqs[i].header) {
					if u, err := url.ParseRequestURI(reqs[i].uri); err == nil {
						style, readyz = int(routeStyle(reqs[i].method, u.Path)), path.Clean(u.Path) == "/readyz"
					}
				}
				checkErrorBody(t, what, style, head, readyz, r.code, r.header, r.body)
			}
		}

		// A lone, well-formed request for the fresh fake's IDs.
		if len(reqs) == 1 && all && len(raw) < 3500 && (reqs[0].method == "GET" || reqs[0].method == "POST") && plainHost(reqs[0].header) {
			if n, ok := segmentTestCount(reqs[0].uri); ok {
				want := make([]string, n)
				for i := range want {
					want[i] = strconv.Itoa(i + 1)
				}
				if len(resps) != 1 || resps[0].code != 200 || resps[0].body != strings.Join(want, "\n") {
					t.Fatalf("%q: got %+v, want 200 %q", raw, resps, strings.Join(want, "\n"))
				}
			}
		}

		// The same single request through net/http, when its parser reads
		// it as fasthttp's did.
		if len(reqs) != 1 || !all || len(resps) != 1 || len(raw) >= 3500 {
			return
		}
		nr, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		nbody, err := io.ReadAll(nr.Body)
		if err != nil || nr.Method != reqs[0].method || nr.RequestURI != reqs[0].uri || !bytes.Equal(nbody, reqs[0].body) ||
			!sameHeader(nr.Header, reqs[0].header, "Authorization") || !plainHost(reqs[0].header) {
			return
		}
		nr.Body = io.NopCloser(bytes.NewReader(nbody))
		nr.RemoteAddr = fuzzClientAddr.String()
		ns, _, _ := newFuzzServer(false)
		w := httptest.NewRecorder()
		ns.ServeHTTP(w, nr)
		if w.Code != resps[0].code || w.Code == 200 && nr.Method != http.MethodHead && w.Body.String() != resps[0].body {
			t.Fatalf("%q: net/http %d %q, fasthttp %d %q", raw, w.Code, w.Body.String(), resps[0].code, resps[0].body)
		}
	})
}

// segmentTestCount reports whether uri asks for IDs of the tag "test" in
// the plain form a client sends, and how many.
func segmentTestCount(uri string) (n int, ok bool) {
	p, q, hasQuery := strings.Cut(uri, "?")
	if p != segmentGetPrefix+"test" {
		return 0, false
	}
	if !hasQuery {
		return 1, true
	}
	c, found := strings.CutPrefix(q, "count=")
	if !found || strings.ContainsAny(c, "&%+") {
		return 0, false
	}
	n, err := leaf.ParseCount(c)
	return n, err == nil
}

// plainHost reports whether a request has one Host header, of bytes both
// servers accept. Each checks Host before any handler runs, with rules of
// its own (fasthttp refuses "#", net/http a missing Host): a request either
// refuses is not one they read the same way.
func plainHost(h http.Header) bool {
	v := h.Values("Host")
	return len(v) == 1 && plainHostRE.MatchString(v[0])
}

// plainHostRE is a name or an IP address, with a port or not.
var plainHostRE = regexp.MustCompile(`^(?:[A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// sameHeader reports whether two readings of a request agree on header k.
func sameHeader(a, b http.Header, k string) bool {
	av, bv := a.Values(k), b.Values(k)
	if len(av) != len(bv) {
		return false
	}
	for i := range av {
		if av[i] != bv[i] {
			return false
		}
	}
	return true
}

// FuzzDecodeRoutes sends arbitrary text as the ID of both decode routes,
// /decodeSnowflakeId?snowflakeId= and /v2/snowflake/decode/{id}, escaped as
// a client would and, on the Leaf route, raw as well.
//
// Properties: 200 exactly when the text is a decimal int64 that the
// generator's layout decodes, with the parts it decodes to (and the two
// routes agreeing); otherwise 400 with a message (404 for an ID holding a
// slash, which is another path), never another status.
func FuzzDecodeRoutes(f *testing.F) {
	for _, s := range []string{"1263177670456266794", "1256557484213448722", "1", "0", "-1", "+1", "007",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "99999999999999999999",
		"", "abc", "1e3", "0x10", " 1", "1 ", "1%00", "%zz", "1&snowflakeId=2", "1#frag", "/", "..", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, _, sf := newFuzzServer(false)
		id, perr := strconv.ParseInt(in, 10, 64)
		want, derr := sf.Decode(id)
		ok := perr == nil && derr == nil
		get := func(u *url.URL) (int, string) {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, &http.Request{Method: "GET", URL: u, Header: http.Header{}, Body: http.NoBody, Host: "fuzz"})
			return w.Code, w.Body.String()
		}

		code, body := get(&url.URL{Path: "/decodeSnowflakeId", RawQuery: "snowflakeId=" + url.QueryEscape(in)})
		var leafAnswer struct{ WorkerID, SequenceID, Timestamp, ErrorMsg string }
		if err := json.Unmarshal([]byte(body), &leafAnswer); err != nil {
			t.Fatalf("/decodeSnowflakeId %q = %d %q: not JSON: %v", in, code, body, err)
		}
		switch {
		case ok && code == 200:
			if leafAnswer.WorkerID != strconv.FormatInt(want.WorkerID, 10) || leafAnswer.SequenceID != strconv.FormatInt(want.Sequence, 10) ||
				!strings.HasPrefix(leafAnswer.Timestamp, strconv.FormatInt(want.Timestamp, 10)+"(") {
				t.Fatalf("/decodeSnowflakeId %q = %q, want the parts %+v", in, body, want)
			}
		case !ok && code == 400:
			if leafAnswer.ErrorMsg == "" {
				t.Fatalf("/decodeSnowflakeId %q = 400 %q without errorMsg", in, body)
			}
		default:
			t.Fatalf("/decodeSnowflakeId %q = %d %q; decodable: %v (%v, %v)", in, code, body, ok, perr, derr)
		}

		// Unescaped, the text may end the parameter early ("1&x") or hold
		// escapes of its own: whatever it is, the answer is 200 or 400.
		if code, body := get(&url.URL{Path: "/decodeSnowflakeId", RawQuery: "snowflakeId=" + in}); code != 200 && code != 400 || body == "" {
			t.Fatalf("/decodeSnowflakeId?snowflakeId=%s = %d %q, want 200 or 400", in, code, body)
		}

		if in == "" || in == "." || in == ".." {
			return // no {id} segment, or one the mux cleans away: other routes
		}
		code, body = get(&url.URL{Path: "/v2/snowflake/decode/" + in, RawPath: "/v2/snowflake/decode/" + url.PathEscape(in)})
		var v2 struct {
			ID          int64  `json:"id"`
			IDStr       string `json:"id_str"`
			TimestampMs int64  `json:"timestamp_ms"`
			WorkerID    int64  `json:"worker_id"`
			Sequence    int64  `json:"sequence"`
			Error, Code string
		}
		if err := json.Unmarshal([]byte(body), &v2); err != nil {
			t.Fatalf("/v2/snowflake/decode/%q = %d %q: not JSON: %v", in, code, body, err)
		}
		switch {
		case ok && code == 200:
			if v2.ID != id || v2.IDStr != strconv.FormatInt(id, 10) || v2.TimestampMs != want.Timestamp || v2.WorkerID != want.WorkerID || v2.Sequence != want.Sequence {
				t.Fatalf("/v2/snowflake/decode/%q = %q, want the parts %+v", in, body, want)
			}
		case !ok && code == 400:
			if v2.Error == "" || v2.Code != "invalid_argument" {
				t.Fatalf("/v2/snowflake/decode/%q = 400 %q: want an error and code invalid_argument", in, body)
			}
		case code == 404 && strings.Contains(in, "/") && v2.Code == "not_found" && v2.Error != "":
			// An escaped slash makes another path, which the mux may not
			// route to {id} (it does not when the segment is only "/").
		default:
			t.Fatalf("/v2/snowflake/decode/%q = %d %q; decodable: %v", in, code, body, ok)
		}
	})
}
