package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/ordered/forward"
)

// orderedFake is fakeGen with ordered tags: Take by ByForwarder serves the
// tags in ordered, or answers notOwner; SetOrdered records.
type orderedFake struct {
	*fakeGen
	mu       sync.Mutex
	ordered  map[string]bool
	notOwner *leaf.NotOwnerError // the answer of a forwarded range when set
}

var _ OrderedGenerator = (*orderedFake)(nil)

func newOrderedFake(tags ...string) *orderedFake {
	return &orderedFake{fakeGen: newFakeGen(tags...), ordered: map[string]bool{}}
}

func (g *orderedFake) Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error) {
	if use != leaf.ByForwarder {
		return g.fakeGen.Take(ctx, tag, n, use)
	}
	g.mu.Lock()
	noe := g.notOwner
	g.mu.Unlock()
	if noe != nil {
		return leaf.IDRange{}, noe
	}
	g.fakeGen.mu.Lock()
	defer g.fakeGen.mu.Unlock()
	start := g.take(tag, n) // whatever setFail says: that is NextRange's answer
	return leaf.IDRange{Start: start, End: start + int64(n)}, nil
}

func (g *orderedFake) SetOrdered(ctx context.Context, tag string, ordered bool) error {
	if _, err := g.Alloc(ctx, tag); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ordered[tag] = ordered
	return nil
}

func (g *orderedFake) isOrdered(tag string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ordered[tag]
}

// noFollow sends one request without following a redirect.
func noFollow(t *testing.T, method, url string, header http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return stripRequestID(t, response{resp.StatusCode, resp.Header, string(b)})
}

// TestOrderedAnswers: how the ID routes answer what the generator says of
// an ordered tag, on both transports.
func TestOrderedAnswers(t *testing.T) {
	const owner = "http://10.0.0.9:8080"
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			g := newOrderedFake("owned", "unowned", "ord")
			g.setFail("owned", &leaf.NotOwnerError{Tag: "owned", Owner: owner + "#n1", URL: owner})
			g.setFail("unowned", &leaf.NotOwnerError{Tag: "unowned", Retry: 2500 * time.Millisecond})
			g.setFail("ord", leaf.ErrOrderedTag)
			base := tr.serve(t, New(Config{Segment: g, Ordered: g}))
			for _, tt := range []struct {
				target   string
				status   int
				location string // the redirect's
				retry    string // Retry-After
				body     string // a part of it
			}{
				// Redirect mode: the generator names the owner.
				{"/api/segment/get/owned", 307, owner + "/api/segment/get/owned", "", "tag owned is ordered and owned by " + owner},
				{"/api/segment/get/owned?count=3", 307, owner + "/api/segment/get/owned?count=3", "", "owned by"},
				{"/v2/segment/owned", 307, owner + "/v2/segment/owned", "", `"code":"not_owner"`},
				{"/v2/segment/owned/batch?count=2", 307, owner + "/v2/segment/owned/batch?count=2", "", `"code":"not_owner"`},
				// No live owner: when a server takes over.
				{"/api/segment/get/unowned", 503, "", "3", "no live server owns it; a server takes it over in 2.5s"},
				{"/v2/segment/unowned/batch?count=2", 503, "", "3", `"code":"no_owner"`},
				// A range of an ordered tag: refused.
				{"/v2/segment/ord/range?count=10", 409, "", "", `"tag ord: the tag is ordered: its IDs are issued one by one`},
			} {
				r := noFollow(t, "GET", base+tt.target, nil)
				if r.status != tt.status || r.header.Get("Location") != tt.location || r.header.Get("Retry-After") != tt.retry ||
					!strings.Contains(r.body, tt.body) {
					t.Errorf("GET %s = %d Location %q Retry-After %q %q; want %d %q %q containing %q", tt.target,
						r.status, r.header.Get("Location"), r.header.Get("Retry-After"), r.body, tt.status, tt.location, tt.retry, tt.body)
				}
				// A redirect names the owner for clients to go to it.
				if want := map[bool]string{true: owner}[tt.status == 307]; r.header.Get(forward.OwnerHeader) != want {
					t.Errorf("GET %s: %s %q, want %q", tt.target, forward.OwnerHeader, r.header.Get(forward.OwnerHeader), want)
				}
			}
		})
	}
}

// TestForwardedRange: a request carrying Leaf-Forward is served from the
// ordered sequence, never redirected, refused by a server that does not
// own the tag, guarded by the admin token and, with one, not rate limited.
func TestForwardedRange(t *testing.T) {
	const token = "ordered-test-admin-token"
	fwd := http.Header{forward.Header: {"1"}, "Authorization": {"Bearer " + token}}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			g := newOrderedFake("ord")
			g.setFail("ord", leaf.ErrOrderedTag) // NextRange's answer for an ordered tag
			lim := &stingyLimiter{allow: 0, wait: time.Second, seen: map[netip.Addr]int{}}
			base := tr.serve(t, New(Config{Segment: g, Ordered: g, AdminToken: token, Limiter: lim}))

			r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", fwd)
			if r.status != 200 || !strings.Contains(r.body, `"start":1,"end":6`) {
				t.Errorf("forwarded range = %d %q; want 200 [1, 6), unlimited", r.status, r.body)
			}
			if r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", nil); r.status != 429 {
				t.Errorf("a client's range = %d %q; want 429: clients are limited", r.status, r.body)
			}
			if r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", http.Header{forward.Header: {"1"}}); r.status != 401 {
				t.Errorf("forwarded without the token = %d %q; want 401", r.status, r.body)
			}
			if r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=0", fwd); r.status != 400 {
				t.Errorf("forwarded count=0 = %d %q; want 400", r.status, r.body)
			}

			// Not the owner: refused, never sent on.
			g.mu.Lock()
			g.notOwner = &leaf.NotOwnerError{Tag: "ord", Owner: "http://10.0.0.9:8080#n", URL: "http://10.0.0.9:8080"}
			g.mu.Unlock()
			r = noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", fwd)
			if r.status != 409 || r.header.Get("Location") != "" || !strings.Contains(r.body, `"code":"not_owner"`) {
				t.Errorf("forwarded to a server that is not the owner = %d Location %q %q; want 409 not_owner, no redirect",
					r.status, r.header.Get("Location"), r.body)
			}
			g.mu.Lock()
			g.notOwner = &leaf.NotOwnerError{Tag: "ord", Retry: time.Second}
			g.mu.Unlock()
			if r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", fwd); r.status != 503 || !strings.Contains(r.body, `"code":"no_owner"`) {
				t.Errorf("forwarded with no owner = %d %q; want 503 no_owner", r.status, r.body)
			}
		})
	}
	// Without a token anyone can send the header: a forward then goes
	// through the rate limit like any client's request.
	for _, tr := range transports {
		t.Run(tr.name+" without a token", func(t *testing.T) {
			g := newOrderedFake("ord")
			lim := &stingyLimiter{allow: 0, wait: time.Second, seen: map[netip.Addr]int{}}
			base := tr.serve(t, New(Config{Segment: g, Ordered: g, Limiter: lim}))
			if r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", http.Header{forward.Header: {"1"}}); r.status != 429 {
				t.Errorf("forwarded without a token configured = %d %q; want 429: the header must not bypass the limit", r.status, r.body)
			}
		})
	}
	t.Run("generator without ordered tags", func(t *testing.T) {
		base := serveFast(t, New(Config{Segment: newFakeGen("ord")}), Limits{})
		r := noFollow(t, "GET", base+"/v2/segment/ord/range?count=5", http.Header{forward.Header: {"1"}})
		if r.status != 409 || !strings.Contains(r.body, `"code":"not_owner"`) {
			t.Errorf("forwarded = %d %q; want 409 not_owner", r.status, r.body)
		}
	})
}

// TestOrderedAdmin: tags are made ordered at creation and switched with
// PATCH, through the generator; a generator without ordered tags refuses.
func TestOrderedAdmin(t *testing.T) {
	g := newOrderedFake("existing")
	base := serveFast(t, New(Config{Segment: g, Ordered: g, Tags: g}), Limits{})
	r := do(t, "POST", base, "/v2/tags", `{"tag":"seq","ordered":true}`)
	if r.status != 201 || !strings.Contains(r.body, `"ordered":true`) || !g.isOrdered("seq") {
		t.Errorf("create ordered = %d %q, ordered %v; want 201 with \"ordered\":true", r.status, r.body, g.isOrdered("seq"))
	}
	r = do(t, "PATCH", base, "/v2/tags/existing", `{"ordered":true}`)
	if r.status != 200 || !g.isOrdered("existing") {
		t.Errorf("PATCH ordered = %d %q, ordered %v", r.status, r.body, g.isOrdered("existing"))
	}
	r = do(t, "PATCH", base, "/v2/tags/existing", `{"ordered":false,"step":50}`)
	if r.status != 200 || g.isOrdered("existing") || !strings.Contains(r.body, `"step":50`) {
		t.Errorf("PATCH plain with a step = %d %q, ordered %v", r.status, r.body, g.isOrdered("existing"))
	}
	if r := do(t, "PATCH", base, "/v2/tags/missing", `{"ordered":true}`); r.status != 404 {
		t.Errorf("PATCH a missing tag = %d %q; want 404", r.status, r.body)
	}

	plain := newFakeGen("existing")
	base = serveFast(t, New(Config{Segment: plain, Tags: plain}), Limits{})
	for _, req := range []struct{ method, target, body string }{
		{"POST", "/v2/tags", `{"tag":"seq","ordered":true}`},
		{"PATCH", "/v2/tags/existing", `{"ordered":true}`},
	} {
		if r := do(t, req.method, base, req.target, req.body); r.status != 400 || !strings.Contains(r.body, "not supported") {
			t.Errorf("%s %s on a generator without ordered tags = %d %q; want 400", req.method, req.target, r.status, r.body)
		}
	}
	if _, err := plain.Alloc(t.Context(), "seq"); err == nil {
		t.Error("the refused ordered tag was created")
	}
}
