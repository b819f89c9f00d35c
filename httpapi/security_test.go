package httpapi

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "test-admin-token-0123456789"

// transports serves a Server both ways: as leaf serve does and embedded in
// net/http. Authentication and limits must hold on both.
var transports = []struct {
	name  string
	serve func(*testing.T, *Server) string
}{
	{"fast", func(t *testing.T, s *Server) string { return serveFast(t, s, Limits{}) }},
	{"net/http", serveNetHTTP},
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

func TestAdminToken(t *testing.T) {
	routes := []struct {
		method, target, body string
		ok                   int // the status with the token
		style                errorStyle
	}{
		{"GET", "/v2/tags", "", 200, jsonStyle},
		{"GET", "/v2/tags/test", "", 200, jsonStyle},
		{"PATCH", "/v2/tags/test", `{"step":50}`, 200, jsonStyle},
		{"POST", "/v2/tags", `{"tag":"new-tag"}`, 201, jsonStyle},
		{"DELETE", "/v2/tags/gone", "", 204, jsonStyle},
		{"GET", "/cache", "", 200, textStyle},
		{"POST", "/cache", "", 200, textStyle},
		{"GET", "/db", "", 200, textStyle},
		{"HEAD", "/db", "", 200, textStyle},
	}
	refusals := []struct {
		name   string
		header http.Header
		msg    string
	}{
		{"no header", nil, "admin token required: send Authorization: Bearer <token>"},
		{"wrong token", bearer("test-admin-token-0123456780"), "invalid admin token"},
		{"prefix of the token", bearer(testToken[:20]), "invalid admin token"},
		{"token and more", bearer(testToken + "x"), "invalid admin token"},
		// The client sends "Bearer": no space, no token.
		{"empty bearer", http.Header{"Authorization": {"Bearer "}}, "Authorization must be Bearer <token>"},
		{"blank token", http.Header{"Authorization": {"Bearer   x"}}, "invalid admin token"},
		{"basic", http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, "Authorization must be Bearer <token>"},
		{"bare token", http.Header{"Authorization": {testToken}}, "Authorization must be Bearer <token>"},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			g := newFakeGen("test", "gone")
			base := tr.serve(t, New(Config{Segment: g, Tags: g, Snowflake: newFakeSnowflake(), AdminToken: testToken}))
			for _, rt := range routes {
				for _, rf := range refusals {
					r := doHeader(t, rt.method, base, rt.target, rt.body, rf.header)
					if r.status != 401 || r.header.Get("WWW-Authenticate") != `Bearer realm="leaf"` {
						t.Errorf("%s %s, %s: %d %q, WWW-Authenticate %q; want 401 with the Bearer challenge",
							rt.method, rt.target, rf.name, r.status, r.body, r.header.Get("WWW-Authenticate"))
						continue
					}
					if rt.method == "HEAD" {
						continue
					}
					want := rf.msg + "\n"
					if rt.style == jsonStyle {
						want = `{"error":"` + strings.ReplaceAll(strings.ReplaceAll(rf.msg, "<", `\u003c`), ">", `\u003e`) + `","code":"unauthorized"}` + "\n"
					}
					if r.body != want {
						t.Errorf("%s %s, %s: body %q, want %q", rt.method, rt.target, rf.name, r.body, want)
					}
				}
			}
			// Nothing the refused requests asked for happened.
			if _, err := g.Alloc(t.Context(), "new-tag"); err == nil {
				t.Error("an unauthenticated POST /v2/tags created the tag")
			}
			if _, err := g.Alloc(t.Context(), "gone"); err != nil {
				t.Errorf("an unauthenticated DELETE removed the tag: %v", err)
			}
			if a, err := g.Alloc(t.Context(), "test"); err != nil || a.Step == 50 {
				t.Errorf("an unauthenticated PATCH changed the step: %+v, %v", a, err)
			}
			for _, rt := range routes {
				for _, h := range []http.Header{bearer(testToken), {"Authorization": {"bearer  " + testToken + " "}}} {
					r := doHeader(t, rt.method, base, rt.target, rt.body, h)
					if r.status != rt.ok && !(rt.method == "POST" && rt.target == "/v2/tags" && r.status == 409) &&
						!(rt.method == "DELETE" && r.status == 404) {
						t.Errorf("%s %s with the token: %d %q, want %d", rt.method, rt.target, r.status, r.body, rt.ok)
					}
				}
			}
			// The ID routes and the probes need no token.
			for _, target := range []string{"/api/segment/get/test", "/v2/segment/test", "/api/snowflake/get/x", "/v2/snowflake", "/healthz", "/readyz"} {
				if r := do(t, "GET", base, target, ""); r.status != 200 {
					t.Errorf("GET %s without a token: %d %q", target, r.status, r.body)
				}
			}
		})
	}
}

func TestStatusDetailNeedsToken(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			g := newFakeGen("a")
			g.setDegraded("store unreachable")
			base := tr.serve(t, New(Config{Segment: g, Snowflake: newFakeSnowflake(), AdminToken: testToken, Version: "v9"}))

			r := do(t, "GET", base, "/v2/status", "")
			want := `{"version":"v9","detail":false,"segment":{"enabled":true,"degraded":["store unreachable"],"tags":[]}}` + "\n"
			if r.status != 200 || r.body != want {
				t.Errorf("without a token: %d %s, want the summary %s", r.status, r.body, want)
			}
			r = doHeader(t, "GET", base, "/v2/status", "", bearer(testToken))
			var st statusResponse
			if err := json.Unmarshal([]byte(r.body), &st); err != nil || r.status != 200 || !st.Detail ||
				len(st.Segment.Tags) != 1 || st.Snowflake == nil {
				t.Errorf("with the token: %d %s (%v), want the detail", r.status, r.body, err)
			}
			r = doHeader(t, "GET", base, "/v2/status", "", bearer("not-the-token-at-all"))
			if r.status != 401 || !strings.Contains(r.body, `"code":"unauthorized"`) {
				t.Errorf("with a wrong token: %d %s, want 401", r.status, r.body)
			}
		})
	}
}

// stingyLimiter allows each client `allow` requests, then refuses with a
// fixed wait, and records whom it was asked about.
type stingyLimiter struct {
	allow int
	wait  time.Duration
	mu    sync.Mutex
	seen  map[netip.Addr]int
}

func (l *stingyLimiter) Allow(c netip.Addr) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[c]++
	if l.seen[c] > l.allow {
		return false, l.wait
	}
	return true, 0
}

func TestRateLimit(t *testing.T) {
	routes := []struct {
		target string
		style  errorStyle
	}{
		{"/api/segment/get/test", textStyle},
		{"/api/segment/get/test?count=5", textStyle},
		{"/api/snowflake/get/x", textStyle},
		{"/api/snowflake/get/x?count=5", textStyle},
		{"/v2/segment/test", jsonStyle},
		{"/v2/segment/test/batch?count=5", jsonStyle},
		{"/v2/segment/test/range?count=5", jsonStyle},
		{"/v2/snowflake", jsonStyle},
		{"/v2/snowflake/batch?count=5", jsonStyle},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			lim := &stingyLimiter{allow: 2, wait: 2100 * time.Millisecond, seen: map[netip.Addr]int{}}
			g := newFakeGen("test")
			base := tr.serve(t, New(Config{Segment: g, Snowflake: newFakeSnowflake(), Limiter: lim}))
			for i := 0; i < 2; i++ {
				if r := do(t, "GET", base, routes[0].target, ""); r.status != 200 {
					t.Fatalf("request %d: %d %q", i, r.status, r.body)
				}
			}
			issued := g.take("test", 0)
			for _, rt := range routes {
				r := do(t, "GET", base, rt.target, "")
				msg := "rate limit exceeded for this client; retry after 3s"
				want := msg + "\n"
				if rt.style == jsonStyle {
					want = `{"error":"` + msg + `","code":"rate_limited"}` + "\n"
				}
				if r.status != 429 || r.body != want || r.header.Get("Retry-After") != "3" {
					t.Errorf("GET %s over the limit: %d %q Retry-After %q; want 429 %q Retry-After 3",
						rt.target, r.status, r.body, r.header.Get("Retry-After"), want)
				}
			}
			if got := g.take("test", 0); got != issued {
				t.Errorf("refused requests took IDs: the counter moved from %d to %d", issued, got)
			}
			// Not limited: bad requests (answered before the limit), decoding,
			// status, administration, probes.
			for _, target := range []string{"/api/segment/get/bad%20tag", "/api/segment/get/test?count=0", "/v2/snowflake/decode/1",
				"/decodeSnowflakeId?snowflakeId=1", "/v2/status", "/v2/tags", "/healthz", "/readyz", "/cache"} {
				if r := do(t, "GET", base, target, ""); r.status == 429 {
					t.Errorf("GET %s was rate limited", target)
				}
			}
			lim.mu.Lock()
			defer lim.mu.Unlock()
			if len(lim.seen) != 1 || lim.seen[netip.MustParseAddr("127.0.0.1")] != 2+len(routes) {
				t.Errorf("limiter asked about %v, want 127.0.0.1 exactly %d times", lim.seen, 2+len(routes))
			}
		})
	}
}
