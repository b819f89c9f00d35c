package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/faultstore"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

func TestNewValidates(t *testing.T) {
	for _, eps := range [][]string{
		{"http://127.0.0.1:8080"},
		{"https://leaf.example/"},
		{"http://[::1]:8080/leaf", "http://127.0.0.1:8080"},
	} {
		if _, err := client.New(eps); err != nil {
			t.Errorf("New(%q): %v", eps, err)
		}
	}
	bad := []struct {
		eps  []string
		want string
	}{
		{nil, "no endpoints"},
		{[]string{}, "no endpoints"},
		{[]string{""}, "empty"},
		{[]string{" http://127.0.0.1:8080"}, "spaces"},
		{[]string{"127.0.0.1:8080"}, "not a URL"},
		{[]string{"localhost:8080"}, "scheme"},
		{[]string{"ftp://127.0.0.1:21"}, "scheme"},
		{[]string{"http://"}, "no host"},
		{[]string{"http:127.0.0.1"}, "no host"},
		{[]string{"http://127.0.0.1:0"}, "port"},
		{[]string{"http://127.0.0.1:99999"}, "port"},
		{[]string{"http://u:p@127.0.0.1:8080"}, "user info"},
		{[]string{"http://127.0.0.1:8080/?x=1"}, "query"},
		{[]string{"http://127.0.0.1:8080/#x"}, "fragment"},
		{[]string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/"}, "twice"},
	}
	for _, tc := range bad {
		_, err := client.New(tc.eps)
		if !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want ErrInvalidArgument mentioning %q", tc.eps, err, tc.want)
		}
	}
	ok := []string{"http://127.0.0.1:8080"}
	for name, o := range map[string]client.Option{
		"WithTimeout(0)":           client.WithTimeout(0),
		"WithAttempts(0)":          client.WithAttempts(0),
		"WithCooldown(-1)":         client.WithCooldown(-1),
		"WithHTTPClient(nil)":      client.WithHTTPClient(nil),
		"WithLogger(nil)":          client.WithLogger(nil),
		"WithTimeout(-1s)":         client.WithTimeout(-time.Second),
		"WithAttempts(-3)":         client.WithAttempts(-3),
		"WithHeader(\"\", x)":      client.WithHeader("", "x"),
		"WithHeader(\"a b\", x)":   client.WithHeader("a b", "x"),
		"WithHeader(\"Accept\")":   client.WithHeader("accept", "text/plain"),
		"WithHeader(X, \"a\\nb\")": client.WithHeader("X-A", "a\nb"),
	} {
		if _, err := client.New(ok, o); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("New with %s = %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestWithHeader: the headers given are sent on every request, beside the
// client's own Accept.
func TestWithHeader(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"tag":"t","start":1,"end":3,"start_str":"1","end_str":"3","count":2}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New([]string{srv.URL}, client.WithHeader("leaf-forward", "1"),
		client.WithHeader("Authorization", "Bearer s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if start, end, err := c.NextRange(t.Context(), "t", 2); err != nil || start != 1 || end != 3 {
			t.Fatalf("NextRange = %d, %d, %v", start, end, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, h := range got {
		if h.Get("Leaf-Forward") != "1" || h.Get("Authorization") != "Bearer s3cret" || h.Get("Accept") != "application/json" {
			t.Errorf("request %d headers %v, want Leaf-Forward, Authorization and Accept", i, h)
		}
	}
	if len(got) != 2 {
		t.Errorf("%d requests, want 2", len(got))
	}
}

func TestSegmentCalls(t *testing.T) {
	s := segmentServer(t, "test")
	c := newClient(t, []string{s.URL})
	ctx := testutil.Context(t, time.Minute)

	id, err := c.NextID(ctx, "test")
	if err != nil || id != 1 {
		t.Fatalf("NextID = %d, %v; want 1", id, err)
	}
	ids, err := c.NextIDs(ctx, "test", 5)
	if err != nil || len(ids) != 5 || ids[0] != 2 || ids[4] != 6 {
		t.Fatalf("NextIDs(5) = %v, %v; want 2..6", ids, err)
	}
	start, end, err := c.NextRange(ctx, "test", 100)
	if err != nil || start != 7 || end != 107 {
		t.Fatalf("Range(100) = [%d, %d), %v; want [7, 107)", start, end, err)
	}
	// The server's segment (step 1000) has 894 IDs left: a range never spans
	// two segments, so this one is short.
	start, end, err = c.NextRange(ctx, "test", 5000)
	if err != nil || start != 107 || end != 1001 {
		t.Fatalf("Range(5000) = [%d, %d), %v; want the short [107, 1001)", start, end, err)
	}
	start, end, err = c.NextRange(ctx, "test", leaf.MaxBatch)
	if err != nil || start != 1001 || end <= start || end-start > leaf.MaxBatch {
		t.Fatalf("Range(max) = [%d, %d), %v; want from 1001", start, end, err)
	}
	ids, err = c.NextIDs(ctx, "test", leaf.MaxBatch)
	if err != nil || len(ids) != leaf.MaxBatch || ids[0] != end {
		t.Fatalf("NextIDs(max): %d IDs from %v, %v; want %d from %d", len(ids), ids[:min(1, len(ids))], err, leaf.MaxBatch, end)
	}
}

func TestSnowflakeCalls(t *testing.T) {
	g := startSnowflake(t)
	s := serve(t, httpapi.Config{Snowflake: g})
	c := newClient(t, []string{s.URL})
	ctx := testutil.Context(t, time.Minute)

	id, err := c.SnowflakeID(ctx)
	if err != nil || id < 1 {
		t.Fatalf("SnowflakeID = %d, %v", id, err)
	}
	ids, err := c.SnowflakeIDs(ctx, 1000)
	if err != nil || len(ids) != 1000 || ids[0] <= id {
		t.Fatalf("SnowflakeIDs(1000): %d IDs, %v; want 1000 after %d", len(ids), err, id)
	}
	want, _ := g.Decode(ids[999])
	p, err := c.Decode(ctx, ids[999])
	if err != nil || p != want || p.WorkerID != g.Status().WorkerID {
		t.Fatalf("Decode = %+v, %v; want %+v", p, err, want)
	}
	if p.Timestamp < time.Now().Add(-time.Minute).UnixMilli() {
		t.Errorf("decoded timestamp %d is not recent", p.Timestamp)
	}

	// A real 400 from the server: not retried.
	before := s.hits.Load()
	_, err = c.Decode(ctx, 0)
	var se *client.Error
	if !errors.Is(err, leaf.ErrInvalidArgument) || !errors.As(err, &se) || se.StatusCode != 400 || se.Code != "invalid_argument" {
		t.Fatalf("Decode(0) = %v, want a 400 invalid_argument", err)
	}
	if n := s.hits.Load() - before; n != 1 {
		t.Errorf("Decode(0) sent %d requests, want 1", n)
	}
	// Segment mode is off on this server.
	if _, err := c.NextID(ctx, "test"); !errors.Is(err, client.ErrModeDisabled) {
		t.Errorf("NextID on a snowflake-only server = %v, want ErrModeDisabled", err)
	}
}

func TestRealServerErrors(t *testing.T) {
	s := segmentServer(t, "test")
	c := newClient(t, []string{s.URL})
	ctx := testutil.Context(t, time.Minute)

	_, err := c.NextID(ctx, "nope")
	var se *client.Error
	if !errors.Is(err, leaf.ErrTagNotFound) || !errors.As(err, &se) ||
		se.StatusCode != 404 || se.Code != "tag_not_found" || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("NextID(unknown) = %v, want 404 tag_not_found naming the tag", err)
	}
	if _, _, err := c.NextRange(ctx, "nope", 10); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Errorf("Range(unknown) = %v, want ErrTagNotFound", err)
	}
	if _, err := c.SnowflakeID(ctx); !errors.Is(err, client.ErrModeDisabled) {
		t.Errorf("SnowflakeID on a segment-only server = %v, want ErrModeDisabled", err)
	}

	// Refused before any request.
	before := s.hits.Load()
	for name, err := range map[string]error{
		"NextID bad tag":   second(c.NextID(ctx, "a/b")),
		"NextIDs bad tag":  second(c.NextIDs(ctx, "", 1)),
		"Range bad tag":    third(c.NextRange(ctx, strings.Repeat("x", 129), 1)),
		"Buffered bad tag": second(c.Buffered("a b")),
	} {
		if !errors.Is(err, leaf.ErrInvalidTag) {
			t.Errorf("%s = %v, want ErrInvalidTag", name, err)
		}
	}
	for name, err := range map[string]error{
		"NextIDs 0":          second(c.NextIDs(ctx, "test", 0)),
		"NextIDs 10001":      second(c.NextIDs(ctx, "test", leaf.MaxBatch+1)),
		"Range 0":            third(c.NextRange(ctx, "test", 0)),
		"SnowflakeIDs -1":    second(c.SnowflakeIDs(ctx, -1)),
		"SnowflakeIDs 10001": second(c.SnowflakeIDs(ctx, leaf.MaxBatch+1)),
	} {
		if !errors.Is(err, leaf.ErrInvalidCount) {
			t.Errorf("%s = %v, want ErrInvalidCount", name, err)
		}
	}
	if n := s.hits.Load() - before; n != 0 {
		t.Errorf("invalid calls sent %d requests, want none", n)
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

// sentinels are every error the mapping may produce.
var sentinels = []error{
	leaf.ErrInvalidTag, leaf.ErrInvalidCount, leaf.ErrInvalidArgument, leaf.ErrTagNotFound,
	leaf.ErrTagExists, leaf.ErrNotReady, leaf.ErrClockBackwards, leaf.ErrWorkerIDsExhausted,
	leaf.ErrWorkerLost, leaf.ErrClosed, client.ErrModeDisabled,
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		status  int
		body    string
		want    error // nil: no sentinel
		code    string
		msg     string
		retried bool
	}{
		{400, `{"error":"invalid tag: empty","code":"invalid_tag"}`, leaf.ErrInvalidTag, "invalid_tag", "invalid tag: empty", false},
		{400, `{"error":"invalid count: 0, want 1..10000","code":"invalid_count"}`, leaf.ErrInvalidCount, "invalid_count", "invalid count: 0, want 1..10000", false},
		{400, `{"error":"invalid argument: ID 0","code":"invalid_argument"}`, leaf.ErrInvalidArgument, "invalid_argument", "invalid argument: ID 0", false},
		{404, `{"error":"tag \"x\": tag not found","code":"tag_not_found"}`, leaf.ErrTagNotFound, "tag_not_found", `tag "x": tag not found`, false},
		{409, `{"error":"tag already exists","code":"tag_exists"}`, leaf.ErrTagExists, "tag_exists", "tag already exists", false},
		{404, `{"error":"segment mode is disabled","code":"segment_disabled"}`, client.ErrModeDisabled, "segment_disabled", "segment mode is disabled", false},
		{404, `{"error":"no route for /v2/x","code":"not_found"}`, nil, "not_found", "no route for /v2/x", false},
		{400, "bad request\n", leaf.ErrInvalidArgument, "", "bad request", false},
		{503, `{"error":"tag \"x\": no IDs buffered: not ready","code":"not_ready"}`, leaf.ErrNotReady, "not_ready", `tag "x": no IDs buffered: not ready`, true},
		{503, `{"error":"clock moved backwards by 9ms","code":"clock_backwards"}`, leaf.ErrClockBackwards, "clock_backwards", "clock moved backwards by 9ms", true},
		{503, `{"error":"worker ID lost","code":"worker_lost"}`, leaf.ErrWorkerLost, "worker_lost", "worker ID lost", true},
		{503, `{"error":"worker IDs exhausted","code":"worker_ids_exhausted"}`, leaf.ErrWorkerIDsExhausted, "worker_ids_exhausted", "worker IDs exhausted", true},
		{503, `{"error":"closed","code":"closed"}`, leaf.ErrClosed, "closed", "closed", true},
		{503, `{"error":"context deadline exceeded","code":"timeout"}`, leaf.ErrNotReady, "timeout", "context deadline exceeded", true},
		{503, "overloaded\nsecond line", leaf.ErrNotReady, "", "overloaded", true},
		{500, `{"error":"internal server error","code":"internal"}`, nil, "internal", "internal server error", true},
		{502, "<html>Bad Gateway</html>", nil, "", "<html>Bad Gateway</html>", true},
	}
	for _, tc := range tests {
		t.Run(tc.code+"_"+http.StatusText(tc.status), func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			a, b := serveHandler(t, h), serveHandler(t, h)
			c := newClient(t, []string{a.URL, b.URL}, client.WithAttempts(2))
			_, err := c.NextID(testutil.Context(t, time.Minute), "x")
			if err == nil {
				t.Fatal("NextID succeeded")
			}
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
				}
			}
			var se *client.Error
			if !errors.As(err, &se) {
				t.Fatalf("%v is not a *client.Error", err)
			}
			if se.StatusCode != tc.status || se.Code != tc.code || se.Message != tc.msg || se.RetryAfter != time.Second {
				t.Errorf("Error = %+v, want status %d, code %q, message %q, Retry-After 1s", se, tc.status, tc.code, tc.msg)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%q does not carry the server's message %q", err, tc.msg)
			}
			want := int64(1)
			if tc.retried {
				want = 2
			}
			if n := a.hits.Load() + b.hits.Load(); n != want {
				t.Errorf("%d requests sent, want %d", n, want)
			}
		})
	}
}

// notReadyServer answers 503 not_ready on every ID route: its store is down
// and it has no IDs buffered.
func notReadyServer(t *testing.T) *server {
	st, faults := faultstore.Wrap(newStore(t, 1000, "test"))
	faults.SetDown(errors.New("database unreachable"))
	g := startSegment(t, st, func(s *segment.Config) { s.WaitTimeout = 20 * time.Millisecond })
	return serve(t, httpapi.Config{Segment: g})
}

func TestNotReadyFailsOver(t *testing.T) {
	down, up := notReadyServer(t), segmentServer(t, "test")
	ctx := testutil.Context(t, time.Minute)

	// Alone, the failing server's answer comes back as it is: its message,
	// which names the condition, not the cause (the store's error stays in
	// the server's log).
	c := newClient(t, []string{down.URL}, client.WithAttempts(1))
	_, err := c.NextID(ctx, "test")
	var se *client.Error
	if !errors.Is(err, leaf.ErrNotReady) || !errors.As(err, &se) || se.StatusCode != 503 ||
		se.RetryAfter != time.Second || !strings.Contains(err.Error(), "no IDs can be issued right now") ||
		strings.Contains(err.Error(), "database unreachable") {
		t.Fatalf("NextID = %v, want 503 not_ready with Retry-After and the server's message, not its cause", err)
	}

	// With a healthy server too, the call fails over.
	c = newClient(t, []string{down.URL, up.URL})
	before := down.hits.Load()
	if id, err := c.NextID(ctx, "test"); err != nil || id != 1 {
		t.Fatalf("NextID = %d, %v; want 1 from the healthy server", id, err)
	}
	if n := down.hits.Load() - before; n != 1 {
		t.Fatalf("the failing server got %d requests, want 1", n)
	}
	// It is cooling down: the next calls, whoever's turn it is, skip it.
	for range 5 {
		if _, err := c.NextID(ctx, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := down.hits.Load() - before; n != 1 {
		t.Errorf("the cooling server got %d requests, want 1", n)
	}

	// Every server failing: the pause for Retry-After would outlast the
	// caller's deadline, so the call answers at once.
	c = newClient(t, []string{down.URL})
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = c.NextID(short, "test")
	if took := time.Since(began); !errors.Is(err, leaf.ErrNotReady) || took > 400*time.Millisecond {
		t.Errorf("NextID = %v after %s, want ErrNotReady at once", err, took)
	}

	// Without a deadline, the retry comes after the server's Retry-After.
	c = newClient(t, []string{down.URL}, client.WithAttempts(2))
	before = down.hits.Load()
	began = time.Now()
	_, err = c.NextID(ctx, "test")
	if took := time.Since(began); !errors.Is(err, leaf.ErrNotReady) || took < time.Second || took > 5*time.Second {
		t.Errorf("NextID = %v after %s, want ErrNotReady after about 1s", err, took)
	}
	if n := down.hits.Load() - before; n != 2 {
		t.Errorf("%d requests sent, want 2", n)
	}
}

// TestRetryPauseJitter: once every server has failed, a call pauses for a
// random time below 50ms (full jitter), not 50ms flat: calls that failed
// together do not retry together. The pauses asked for are recorded, not
// timed: on a busy machine a sleep's length says nothing of what was asked.
func TestRetryPauseJitter(t *testing.T) {
	failing := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError) // no Retry-After
	}))
	c := newClient(t, []string{failing.URL}, client.WithAttempts(2))
	pauses := client.RecordPauses(c)
	ctx := testutil.Context(t, time.Minute)
	const calls = 20
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			_, err := c.NextID(ctx, "test")
			var se *client.Error
			if !errors.As(err, &se) || se.StatusCode != 500 {
				t.Errorf("NextID = %v, want the 500", err)
			}
		})
	}
	wg.Wait()
	if n := failing.hits.Load(); n != 2*calls {
		t.Errorf("%d requests for %d calls of 2 attempts", n, calls)
	}
	got := pauses()
	if len(got) != calls {
		t.Fatalf("%d pauses for %d calls of one retry round each: %v", len(got), calls, got)
	}
	slices.Sort(got)
	// Full jitter below the first round's bound: all under 50ms, and not
	// one value (20 draws from [0, 50ms) are all equal with a chance of
	// nil).
	if got[calls-1] >= 50*time.Millisecond || got[0] == got[calls-1] {
		t.Errorf("pauses %v, want %d random ones below 50ms", got, calls)
	}
}

func TestFailoverConnectionRefused(t *testing.T) {
	up := segmentServer(t, "test")
	logs := &countingHandler{}
	c, err := client.New([]string{refusedURL(t), up.URL}, client.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, time.Minute)
	for i := range 10 {
		id, err := c.NextID(ctx, "test")
		if err != nil || id != int64(i+1) {
			t.Fatalf("NextID #%d = %d, %v", i, id, err)
		}
	}
	if msgs := logs.messages(); len(msgs) != 1 || !strings.Contains(msgs[0], "server failed") {
		t.Errorf("warnings = %q, want one: the dead server went to cool down once", msgs)
	}
}

func TestAttemptTimeout(t *testing.T) {
	hang, up := hangingServer(t), segmentServer(t, "test")
	ctx := testutil.Context(t, time.Minute)
	const timeout = 200 * time.Millisecond

	// The first call's turn is the hanging server: it gives up on it after
	// the per-attempt timeout and gets the ID from the next.
	c := newClient(t, []string{hang.URL, up.URL}, client.WithTimeout(timeout))
	began := time.Now()
	id, err := c.NextID(ctx, "test")
	took := time.Since(began)
	if err != nil || id != 1 {
		t.Fatalf("NextID = %d, %v", id, err)
	}
	if took < timeout || took > timeout+time.Second {
		t.Errorf("NextID took %s, want about %s", took, timeout)
	}
	// The hanging server now cools down: the next call goes straight on.
	began = time.Now()
	if _, err := c.NextID(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= timeout {
		t.Errorf("second NextID took %s: it waited for the hanging server again", took)
	}
	if n := hang.hits.Load(); n != 1 {
		t.Errorf("the hanging server got %d requests, want 1", n)
	}

	// Alone, the hanging server costs one timeout and a deadline error.
	c = newClient(t, []string{hang.URL}, client.WithTimeout(timeout), client.WithAttempts(1))
	began = time.Now()
	_, err = c.NextID(ctx, "test")
	took = time.Since(began)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NextID = %v, want a deadline error", err)
	}
	if took < timeout || took > timeout+time.Second {
		t.Errorf("NextID took %s, want about %s", took, timeout)
	}

	// The caller's deadline, shorter than the attempt's, wins and ends the
	// call: no retry.
	c = newClient(t, []string{hang.URL, up.URL}, client.WithTimeout(10*time.Second))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	before := up.hits.Load()
	began = time.Now()
	_, err = c.NextID(short, "test")
	if took := time.Since(began); !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Errorf("NextID = %v after %s, want the caller's deadline after 100ms", err, took)
	}
	if n := up.hits.Load() - before; n != 0 {
		t.Errorf("the call went on to another server after the caller's deadline (%d requests)", n)
	}
	// A cancelled context sends nothing.
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := c.NextID(done, "test"); !errors.Is(err, context.Canceled) {
		t.Errorf("NextID(cancelled) = %v", err)
	}
}

func TestBadAnswerRetried(t *testing.T) {
	garbage := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"tag":"test","id":-5}`))
	}))
	up := segmentServer(t, "test")
	c := newClient(t, []string{garbage.URL, up.URL})
	if id, err := c.NextID(testutil.Context(t, time.Minute), "test"); err != nil || id != 1 {
		t.Fatalf("NextID = %d, %v; want 1 from the sane server", id, err)
	}
	c = newClient(t, []string{garbage.URL}, client.WithAttempts(1))
	if _, err := c.NextID(testutil.Context(t, time.Minute), "test"); err == nil || !strings.Contains(err.Error(), "bad answer") {
		t.Errorf("NextID = %v, want a bad answer error", err)
	}
}

func TestRoundRobin(t *testing.T) {
	servers := []*server{segmentServer(t, "test"), segmentServer(t, "test"), segmentServer(t, "test")}
	c := newClient(t, []string{servers[0].URL, servers[1].URL, servers[2].URL})
	for range 30 {
		if _, err := c.NextID(testutil.Context(t, time.Minute), "test"); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range servers {
		if n := s.hits.Load(); n != 10 {
			t.Errorf("server %d got %d requests, want 10", i, n)
		}
	}
}

func TestLostAnswerSkipsIDs(t *testing.T) {
	// Two servers in front of one generator. The first issues the range,
	// then drops the connection instead of answering: the IDs it issued are
	// lost to the client, which gets the next range from the second server.
	// The retry skips IDs; it never gets the lost ones again.
	g := startSegment(t, newStore(t, 1000, "test"), nil)
	api := httpapi.New(httpapi.Config{Segment: g, Logger: testutil.Logger()})
	lost := make(chan string, 10)
	dropping := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		lost <- rec.Body.String()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	answering := serve(t, httpapi.Config{Segment: g})
	c := newClient(t, []string{dropping.URL, answering.URL})
	start, end, err := c.NextRange(testutil.Context(t, time.Minute), "test", 100)
	if err != nil || start != 101 || end != 201 {
		t.Fatalf("Range = [%d, %d), %v; want [101, 201) after the lost [1, 101)", start, end, err)
	}
	if body := <-lost; !strings.Contains(body, `"start":1,"end":101`) {
		t.Errorf("the dropped answer was %q", body)
	}
}
