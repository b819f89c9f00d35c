package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// headTargets are the ID routes, each with the Content-Type its GET answers.
var headTargets = []struct{ target, contentType string }{
	{"/api/segment/get/test", textPlain[0]},
	{"/api/segment/get/test?count=5", textPlain[0]},
	{"/api/snowflake/get/any", textPlain[0]},
	{"/api/snowflake/get/any?count=3", textPlain[0]},
	{"/v2/segment/test", appJSON[0]},
	{"/v2/segment/test/batch?count=4", appJSON[0]},
	{"/v2/segment/test/range?count=6", appJSON[0]},
	{"/v2/snowflake", appJSON[0]},
	{"/v2/snowflake/batch?count=2", appJSON[0]},
}

// TestHeadIssuesNothing: HEAD on every ID route, on both transports, answers
// GET's status and headers, and the generators see no ID call: the next GET
// gets the ID right after the previous GET's.
func TestHeadIssuesNothing(t *testing.T) {
	for _, transport := range []string{"fast", "net/http"} {
		t.Run(transport, func(t *testing.T) {
			seg, snow := newFakeGen("test"), newFakeSnowflake()
			s := New(Config{Segment: seg, Snowflake: snow, Logger: slog.New(slog.DiscardHandler)})
			base := serveNetHTTP(t, s)
			if transport == "fast" {
				base = serveFast(t, s, Limits{})
			}
			if r := do(t, "GET", base, "/api/segment/get/test", ""); r.status != 200 || r.body != "1" {
				t.Fatalf("first GET: %d %q", r.status, r.body)
			}
			sfFirst := do(t, "GET", base, "/api/snowflake/get/any", "")
			segCalls, snowCalls := idCallsOf(seg), callsOf(snow)

			for range 20 {
				for _, h := range headTargets {
					r := do(t, "HEAD", base, h.target, "")
					if r.status != 200 || r.body != "" {
						t.Fatalf("HEAD %s: %d %q, want 200 and no body", h.target, r.status, r.body)
					}
					if ct := r.header.Get("Content-Type"); ct != h.contentType {
						t.Errorf("HEAD %s: Content-Type %q, want GET's %q", h.target, ct, h.contentType)
					}
					if cc := r.header.Get("Cache-Control"); cc != "no-store" {
						t.Errorf("HEAD %s: Cache-Control %q", h.target, cc)
					}
					// The length of GET's body depends on the ID: a HEAD
					// that issues none cannot state it.
					if cl, ok := r.header["Content-Length"]; ok {
						t.Errorf("HEAD %s: Content-Length %q, want none", h.target, cl)
					}
				}
			}
			if idCallsOf(seg) != segCalls || callsOf(snow) != snowCalls {
				t.Errorf("HEAD reached the generators: segment calls %d -> %d, snowflake %d -> %d",
					segCalls, idCallsOf(seg), snowCalls, callsOf(snow))
			}
			if r := do(t, "GET", base, "/api/segment/get/test", ""); r.status != 200 || r.body != "2" {
				t.Errorf("GET after the HEADs: %d %q, want 2, the ID after the previous GET's", r.status, r.body)
			}
			first, _ := strconv.ParseInt(sfFirst.body, 10, 64)
			next := do(t, "GET", base, "/api/snowflake/get/any", "")
			if id, _ := strconv.ParseInt(next.body, 10, 64); id != first+1 {
				t.Errorf("snowflake GET after the HEADs: %q, want %d (the fake's next after %d)", next.body, first+1, first)
			}
		})
	}
}

func callsOf(f *fakeSnowflake) int {
	calls, _ := f.counts()
	return calls
}

func idCallsOf(g *fakeGen) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.idCalls
}

// TestHeadErrors: HEAD validates as GET does and answers GET's error status,
// still without issuing.
func TestHeadErrors(t *testing.T) {
	seg, snow := newFakeGen("test"), newFakeSnowflake()
	// A tag the generator does not hold, which the store fails to look up
	// with an error that wraps no sentinel: the fake's GET answers it 500,
	// the real generator's 503; HEAD, which only looks the tag up, 503.
	seg.setFail("down", errors.New("connection refused"))
	s := New(Config{Segment: seg, Snowflake: snow, Logger: slog.New(slog.DiscardHandler)})
	off := New(Config{Logger: slog.New(slog.DiscardHandler)})
	tests := []struct {
		srv    *Server
		target string
		status int
	}{
		{s, "/api/segment/get/nope", http.StatusNotFound},
		{s, "/api/segment/get/nope?count=2", http.StatusNotFound},
		{s, "/v2/segment/nope", http.StatusNotFound},
		{s, "/v2/segment/nope/range?count=2", http.StatusNotFound},
		{s, "/api/segment/get/bad%20tag", http.StatusBadRequest},
		{s, "/api/segment/get/test?count=0", http.StatusBadRequest},
		{s, "/api/snowflake/get/any?count=10001", http.StatusBadRequest},
		{s, "/v2/segment/test/batch", http.StatusBadRequest},
		{s, "/v2/snowflake/batch?count=x", http.StatusBadRequest},
		// The store cannot say whether the tag exists: not ready, not a bug.
		{s, "/api/segment/get/down", http.StatusServiceUnavailable},
		{s, "/v2/segment/down", http.StatusServiceUnavailable},
		{off, "/api/segment/get/test", http.StatusNotFound},
		{off, "/api/snowflake/get/any", http.StatusNotFound},
		{off, "/v2/snowflake", http.StatusNotFound},
	}
	for _, transport := range []string{"fast", "net/http"} {
		bases := map[*Server]string{}
		for _, srv := range []*Server{s, off} {
			bases[srv] = serveNetHTTP(t, srv)
			if transport == "fast" {
				bases[srv] = serveFast(t, srv, Limits{})
			}
		}
		for _, tt := range tests {
			head := do(t, "HEAD", bases[tt.srv], tt.target, "")
			if head.status != tt.status || head.body != "" {
				t.Errorf("%s HEAD %s: %d %q, want %d and no body", transport, tt.target, head.status, head.body, tt.status)
			}
			if tt.status == http.StatusServiceUnavailable {
				if head.header.Get("Retry-After") == "" {
					t.Errorf("%s HEAD %s: 503 without Retry-After", transport, tt.target)
				}
				continue
			}
			get := do(t, "GET", bases[tt.srv], tt.target, "")
			if get.status != tt.status {
				t.Errorf("%s GET %s: %d, want %d", transport, tt.target, get.status, tt.status)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "Retry-After", "Cache-Control"} {
				if hv, gv := head.header.Get(h), get.header.Get(h); hv != gv {
					t.Errorf("%s %s: %s: HEAD %q, GET %q", transport, tt.target, h, hv, gv)
				}
			}
		}
	}
	if n := seg.invalidCalls(); n != 0 {
		t.Errorf("the generator got %d calls with invalid input", n)
	}
	if idCallsOf(seg) != 0 || callsOf(snow) != 0 {
		t.Errorf("ID calls: segment %d, snowflake %d; none of these requests may issue", idCallsOf(seg), callsOf(snow))
	}
}

// TestHeadRealGenerator: against the real segment generator, HEADs and GETs
// at once; the GETs' IDs are unique and, since HEAD takes none, exactly the
// first IDs of the tag; the generator counts only the GETs.
func TestHeadRealGenerator(t *testing.T) {
	ctx := context.Background()
	store := testutil.Store(t)
	if err := store.CreateTag(ctx, leaf.Alloc{Tag: "test", MaxID: 1, Step: 100000}); err != nil {
		t.Fatal(err)
	}
	set := segment.DefaultConfig()
	set.Store, set.Logger = store, slog.New(slog.DiscardHandler)
	gen, err := segment.New(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gen.Close(ctx) })
	base := serveFast(t, New(Config{Segment: gen, Logger: slog.New(slog.DiscardHandler)}), Limits{})

	const workers, each = 4, 50
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[int64]bool{}
	)
	for w := range 2 * workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if w%2 == 0 {
					for _, target := range []string{"/api/segment/get/test", "/v2/segment/test/range?count=7"} {
						if status, _, err := send("HEAD", base+target); err != nil || status != 200 {
							t.Errorf("HEAD %s: %d, %v", target, status, err)
						}
					}
					continue
				}
				target := "/api/segment/get/test"
				if i%2 == 1 {
					target += "?count=3"
				}
				status, body, err := send("GET", base+target)
				if err != nil || status != 200 {
					t.Errorf("GET %s: %d %q, %v", target, status, body, err)
					return
				}
				mu.Lock()
				for _, f := range strings.Split(body, "\n") {
					id, err := strconv.ParseInt(f, 10, 64)
					if err != nil || ids[id] {
						t.Errorf("GET %s: %q: ID %q unparsable or issued twice", target, body, f)
					}
					ids[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	want := workers * (each/2 + each/2*3)
	if len(ids) != want {
		t.Fatalf("%d IDs, want %d", len(ids), want)
	}
	for id := int64(1); id <= int64(want); id++ {
		if !ids[id] {
			t.Fatalf("ID %d was not served: the IDs are not the tag's first %d, something else took some", id, want)
		}
	}
	for _, st := range gen.Status() {
		if st.Tag == "test" && st.Issued != uint64(want) {
			t.Errorf("the generator issued %d IDs, the GETs got %d", st.Issued, want)
		}
	}
	if r := do(t, "HEAD", base, "/api/segment/get/nope", ""); r.status != 404 {
		t.Errorf("HEAD for a tag the store does not have: %d, want 404", r.status)
	}
}

// send is one request from any goroutine (do may call t.Fatal).
func send(method, url string) (status int, body string, err error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
