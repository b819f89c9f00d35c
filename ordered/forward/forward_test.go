package forward_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/ordered/forward"
)

// These tests run the forwarder against real owners: httpapi servers on
// loopback, whose generator is an in-memory ordered sequence. The real
// segment generator's takeovers are tested with it in generator_test.go
// and end to end in cmd/leaf.

const tag = "orders"

// ownerGen is an owner's generator: an ordered sequence behind Take by
// leaf.ByForwarder, the only method a forwarded request reaches.
type ownerGen struct {
	httpapi.SegmentGenerator // nil: only the methods below are called

	mu       sync.Mutex
	next     int64
	maxRange int64         // at most this many IDs a call; 0: no limit
	counts   []int         // the count asked by each call
	err      error         // answer this instead of IDs
	arrived  chan struct{} // if set, told of each call
	gate     chan struct{} // if set, each call waits for it to close
}

func newOwnerGen() *ownerGen { return &ownerGen{next: 1} }

func (g *ownerGen) Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error) {
	if use != leaf.ByForwarder {
		return leaf.IDRange{}, fmt.Errorf("ownerGen: a forwarded request took a range by use %d", use)
	}
	if g.arrived != nil {
		g.arrived <- struct{}{}
	}
	if g.gate != nil {
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts = append(g.counts, n)
	if g.err != nil {
		return leaf.IDRange{}, g.err
	}
	k := int64(n)
	if g.maxRange > 0 {
		k = min(k, g.maxRange)
	}
	s := g.next
	g.next += k
	return leaf.IDRange{Start: s, End: s + k}, nil
}

func (g *ownerGen) SetOrdered(context.Context, string, bool) error { return nil }

func (g *ownerGen) callCounts() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.counts)
}

// startOwner serves gen as leaf serve does, on a loopback port, and
// returns its base URL.
func startOwner(t *testing.T, gen httpapi.SegmentGenerator, token string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.Config{Segment: gen, AdminToken: token, Logger: testutil.Logger()}
	if og, ok := gen.(httpapi.OrderedGenerator); ok {
		cfg.Ordered = og // it serves the forwarded requests
	}
	srv := httpapi.NewFastServer(httpapi.New(cfg), httpapi.Limits{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { testutil.ShutdownFast(srv) })
	return "http://" + ln.Addr().String()
}

// localGen is the forwarding server's generator: it names the owner, or
// serves from its own sequence once it owns the tag.
type localGen struct {
	mu    sync.Mutex
	noe   []*leaf.NotOwnerError // the answers of the next calls, the last one repeated; nil: it owns the tag
	next  int64
	calls int
}

func (g *localGen) answer() *leaf.NotOwnerError {
	g.calls++
	if len(g.noe) == 0 {
		return nil
	}
	noe := g.noe[0]
	if len(g.noe) > 1 {
		g.noe = g.noe[1:]
	}
	if noe == nil {
		return nil
	}
	c := *noe // each answer its own error, as the generator's
	return &c
}

func (g *localGen) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	ids, p, err := g.NextIDsPeriod(ctx, tag, 1, nil)
	if err != nil {
		return 0, "", err
	}
	return ids[0], p, nil
}

func (g *localGen) NextIDsPeriod(_ context.Context, _ string, n int, dst []int64) ([]int64, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if noe := g.answer(); noe != nil {
		return nil, "", fmt.Errorf("local: %w", noe)
	}
	for range n {
		g.next++
		dst = append(dst, g.next)
	}
	return dst, "", nil
}

func (g *localGen) callCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// watcher records the tags whose forward failed (forward.OwnerWatcher).
type watcher struct {
	mu   sync.Mutex
	tags []string
}

func (w *watcher) OwnerUnreachable(tag string) {
	w.mu.Lock()
	w.tags = append(w.tags, tag)
	w.mu.Unlock()
}

func (w *watcher) heard() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.tags)
}

func newForwarder(t *testing.T, s forward.Config) *forward.Forwarder {
	t.Helper()
	s.Logger = testutil.Logger()
	f, err := forward.New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func ownedBy(url string) *localGen {
	return &localGen{noe: []*leaf.NotOwnerError{{Tag: tag, Owner: url + "#owner", URL: url}}}
}

// TestForwardHammer: many goroutines asking through the forwarder, single
// IDs and batches, from an owner whose ranges are short (so that batches
// span calls): every ID unique, and every request that starts after
// another's answer arrived gets larger IDs.
func TestForwardHammer(t *testing.T) {
	t.Parallel()
	owner := newOwnerGen()
	owner.maxRange = 7
	url := startOwner(t, owner, "")
	f := newForwarder(t, forward.Config{Local: ownedBy(url), Wait: 10 * time.Second})
	ctx := testutil.Context(t, time.Minute)

	const workers, each = 16, 150
	answers := testutil.AskConcurrently(t, workers, each, func(int) ([]int64, error) {
		if n := rand.IntN(4); n > 0 {
			return f.NextIDs(ctx, tag, n, nil)
		}
		id, err := f.NextID(ctx, tag)
		return []int64{id}, err
	})
	n := testutil.CheckOrdered(t, answers)
	st := f.Stats()
	if st.Forwarded != workers*each || st.Failures != 0 {
		t.Errorf("stats %+v, want %d requests forwarded and no failure", st, workers*each)
	}
	t.Logf("%d IDs, %d requests in %d calls", n, st.Forwarded, st.Calls)
}

// TestForwardBatches: the requests that queue while a call is in flight go
// to the owner together, in one call asking for the sum of their counts,
// and get IDs in the order they queued.
func TestForwardBatches(t *testing.T) {
	t.Parallel()
	owner := newOwnerGen()
	owner.arrived, owner.gate = make(chan struct{}, 10), make(chan struct{})
	url := startOwner(t, owner, "")
	f := newForwarder(t, forward.Config{Local: ownedBy(url), Wait: time.Minute})
	ctx := testutil.Context(t, time.Minute)

	type result struct {
		ids []int64
		err error
	}
	results := make([]chan result, 10)
	ask := func(i, n int) {
		results[i] = make(chan result, 1)
		go func() {
			ids, err := f.NextIDs(ctx, tag, n, nil)
			results[i] <- result{ids, err}
		}()
	}
	ask(0, 1)
	<-owner.arrived // the first call is in flight, held by the gate
	// The others queue one after the other behind it.
	for i := 1; i < 10; i++ {
		ask(i, i)
		testutil.WaitFor(t, "request "+strconv.Itoa(i+1)+" to queue", func() bool { return f.Waiting(tag) == i+1 })
	}
	close(owner.gate)
	var last int64
	for i, c := range results {
		r := <-c
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		if len(r.ids) != max(i, 1) || r.ids[0] <= last {
			t.Fatalf("request %d got %v after %d: want %d IDs above, in queue order", i, r.ids, last, max(i, 1))
		}
		last = r.ids[len(r.ids)-1]
	}
	if got, want := owner.callCounts(), []int{1, 45}; !slices.Equal(got, want) {
		t.Errorf("the owner was asked for %v, want %v: one call for the first request, one for the nine queued", got, want)
	}
}

func TestForwardFailures(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t, time.Minute)

	t.Run("owner unreachable", func(t *testing.T) {
		t.Parallel()
		url := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePort(t))
		local := ownedBy(url)
		w := &watcher{}
		f := newForwarder(t, forward.Config{Local: local, Watcher: w, Wait: 100 * time.Millisecond})
		_, err := f.NextID(ctx, tag)
		if !errors.Is(err, leaf.ErrOwnerUnreachable) {
			t.Fatalf("err = %v, want ErrOwnerUnreachable", err)
		}
		if local.callCount() < 2 {
			t.Errorf("the generator was asked %d times: the owner is asked again after each failure", local.callCount())
		}
		// Every failed call was told, so that the generator reads the
		// lease again rather than name the dead owner from its cache.
		if got := w.heard(); len(got) < local.callCount()-1 || slices.IndexFunc(got, func(s string) bool { return s != tag }) >= 0 {
			t.Errorf("the watcher heard %q after %d asks, want %q after each failed call", got, local.callCount(), tag)
		}
	})

	t.Run("owner hangs", func(t *testing.T) {
		t.Parallel()
		owner := newOwnerGen()
		owner.gate = make(chan struct{})
		url := startOwner(t, owner, "")
		// After startOwner's: cleanups run last first, and the server's
		// shutdown waits for the calls the gate holds.
		t.Cleanup(func() { close(owner.gate) })
		f := newForwarder(t, forward.Config{Local: ownedBy(url), Wait: 200 * time.Millisecond})
		// Contexts that cannot end, as the HTTP routes' (no timer: the
		// queue releases them), and one that can: each request ends
		// within its wait, the one queued behind the call in flight too.
		errs := make(chan error, 3)
		for _, c := range []context.Context{context.Background(), context.Background(), ctx} {
			go func() {
				_, err := f.NextIDs(c, tag, 2, nil)
				errs <- err
			}()
		}
		for range 3 {
			if err := <-errs; !errors.Is(err, leaf.ErrOwnerUnreachable) {
				t.Errorf("err = %v, want ErrOwnerUnreachable", err)
			}
		}
	})

	t.Run("no owner, takeover beyond the wait", func(t *testing.T) {
		t.Parallel()
		local := &localGen{noe: []*leaf.NotOwnerError{{Tag: tag, Retry: time.Hour}}}
		f := newForwarder(t, forward.Config{Local: local, Wait: time.Second})
		_, err := f.NextID(ctx, tag)
		var noe *leaf.NotOwnerError
		if !errors.As(err, &noe) || noe.URL != "" || noe.Retry != time.Hour {
			t.Fatalf("err = %v, want the generator's NotOwnerError", err)
		}
		if n := local.callCount(); n != 1 {
			t.Errorf("the generator was asked %d times, want 1: waiting cannot help", n)
		}
	})

	t.Run("no owner, then this server takes over", func(t *testing.T) {
		t.Parallel()
		local := &localGen{noe: []*leaf.NotOwnerError{{Tag: tag, Retry: 10 * time.Millisecond}, nil}, next: 100}
		f := newForwarder(t, forward.Config{Local: local, Wait: 10 * time.Second})
		id, err := f.NextID(ctx, tag)
		if err != nil || id != 101 {
			t.Fatalf("NextID = %d, %v; want 101 from this server, the new owner", id, err)
		}
	})

	t.Run("owner moved", func(t *testing.T) {
		t.Parallel()
		b := newOwnerGen()
		b.next = 500
		urlB := startOwner(t, b, "")
		a := newOwnerGen()
		a.err = &leaf.NotOwnerError{Tag: tag, Owner: urlB + "#b", URL: urlB}
		urlA := startOwner(t, a, "")
		local := &localGen{noe: []*leaf.NotOwnerError{{Tag: tag, Owner: urlA + "#a", URL: urlA}, {Tag: tag, Owner: urlB + "#b", URL: urlB}}}
		f := newForwarder(t, forward.Config{Local: local, Wait: 10 * time.Second})
		ids, err := f.NextIDs(ctx, tag, 3, nil)
		if err != nil || !slices.Equal(ids, []int64{500, 501, 502}) {
			t.Fatalf("NextIDs = %v, %v; want [500 501 502] from the new owner", ids, err)
		}
		if len(a.callCounts()) != 1 {
			t.Errorf("the old owner was asked %d times, want once", len(a.callCounts()))
		}
	})

	t.Run("a previous process of this server", func(t *testing.T) {
		t.Parallel()
		self := "http://127.0.0.1:1#new"
		local := &localGen{noe: []*leaf.NotOwnerError{{Tag: tag, Owner: "http://127.0.0.1:1#old", URL: "http://127.0.0.1:1"}, nil}, next: 7}
		f := newForwarder(t, forward.Config{Local: local, Self: self, Wait: 10 * time.Second})
		id, err := f.NextID(ctx, tag)
		if err != nil || id != 8 {
			t.Fatalf("NextID = %d, %v; want 8, once the old lease is gone", id, err)
		}
	})

	t.Run("tag gone at the owner", func(t *testing.T) {
		t.Parallel()
		owner := newOwnerGen()
		owner.err = fmt.Errorf("owner: %w", leaf.ErrTagNotFound)
		url := startOwner(t, owner, "")
		f := newForwarder(t, forward.Config{Local: ownedBy(url), Wait: 10 * time.Second})
		if _, err := f.NextID(ctx, tag); !errors.Is(err, leaf.ErrTagNotFound) {
			t.Fatalf("err = %v, want ErrTagNotFound", err)
		}
		if n := len(owner.callCounts()); n != 1 {
			t.Errorf("the owner was asked %d times, want 1: no retry helps", n)
		}
	})

	t.Run("owner redirects", func(t *testing.T) {
		t.Parallel()
		// A server that answers a forwarded request with a redirect is not
		// serving it: the IDs of the server it points at would come from
		// a sequence the generator never named. The forwarder follows no
		// redirect; the call fails and the generator is asked again.
		target := newOwnerGen()
		targetURL := startOwner(t, target, "")
		var redirects atomic.Int32
		owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			redirects.Add(1)
			http.Redirect(w, r, targetURL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}))
		t.Cleanup(owner.Close)
		f := newForwarder(t, forward.Config{Local: ownedBy(owner.URL), Wait: 300 * time.Millisecond})
		if _, err := f.NextID(ctx, tag); !errors.Is(err, leaf.ErrOwnerUnreachable) || !strings.Contains(err.Error(), "307") {
			t.Fatalf("err = %v, want ErrOwnerUnreachable naming the 307", err)
		}
		if redirects.Load() == 0 || len(target.callCounts()) != 0 {
			t.Errorf("%d redirects answered, %d calls reached their target; want some, and none", redirects.Load(), len(target.callCounts()))
		}
	})

	t.Run("queue full", func(t *testing.T) {
		t.Parallel()
		owner := newOwnerGen()
		owner.arrived, owner.gate = make(chan struct{}, 1), make(chan struct{})
		url := startOwner(t, owner, "")
		f := newForwarder(t, forward.Config{Local: ownedBy(url), Wait: time.Minute, MaxQueue: 1})
		first := make(chan error, 1)
		go func() {
			_, err := f.NextID(ctx, tag)
			first <- err
		}()
		<-owner.arrived
		if _, err := f.NextID(ctx, tag); !errors.Is(err, leaf.ErrOwnerBusy) {
			t.Errorf("second request: err = %v, want ErrOwnerBusy", err)
		}
		close(owner.gate)
		if err := <-first; err != nil {
			t.Errorf("first request: %v", err)
		}
	})
}

// TestForwardToken: with an admin token, the owner serves only forwarded
// requests that carry it.
func TestForwardToken(t *testing.T) {
	t.Parallel()
	const token = "forward-test-token-0123456789"
	url := startOwner(t, newOwnerGen(), token)
	ctx := testutil.Context(t, time.Minute)

	f := newForwarder(t, forward.Config{Local: ownedBy(url), Token: token, Wait: 10 * time.Second})
	if _, err := f.NextID(ctx, tag); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	// The forwarder retries the owner until its wait runs out, then says
	// why the calls failed: the last call cut short by the deadline (on a
	// busy machine, the whole suite running) says only that time ran out,
	// and the refusal before it is what the caller is told. 2s leaves the
	// first call room for a slow first connection.
	f = newForwarder(t, forward.Config{Local: ownedBy(url), Token: "another-token-0123456789", Wait: 2 * time.Second})
	_, err := f.NextID(ctx, tag)
	if !errors.Is(err, leaf.ErrOwnerUnreachable) || !strings.Contains(err.Error(), "admin tokens differ") {
		t.Fatalf("with another token: err = %v, want ErrOwnerUnreachable saying the tokens differ", err)
	}
}

// TestForwardTellsWhy: when the wait runs out during a call, the caller is
// told why the calls before it failed (here the owner's refusal of the
// token), not that the last one was cut short.
func TestForwardTellsWhy(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid admin token","code":"unauthorized"}`))
			return
		}
		select { // every later call hangs past the request's wait
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(owner.Close)
	f := newForwarder(t, forward.Config{Local: ownedBy(owner.URL), Token: "a-token-0123456789", Wait: time.Second})
	_, err := f.NextID(testutil.Context(t, time.Minute), tag)
	if calls.Load() < 2 {
		t.Fatalf("the owner was called %d times, want a retry after the refusal", calls.Load())
	}
	if !errors.Is(err, leaf.ErrOwnerUnreachable) || !strings.Contains(err.Error(), "admin tokens differ") {
		t.Fatalf("err = %v, want ErrOwnerUnreachable saying the tokens differ", err)
	}
}

// TestForwardKeepsNothingIdle: a tag's queue goes once its requests are
// answered, and the pools of owners unused for a while go when new owners
// come: neither grows with the tags or the owners seen over a process's
// life.
func TestForwardKeepsNothingIdle(t *testing.T) {
	t.Parallel()
	url := startOwner(t, newOwnerGen(), "")
	f := newForwarder(t, forward.Config{Local: ownedBy(url), Wait: 10 * time.Second})
	ctx := testutil.Context(t, time.Minute)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if _, err := f.NextIDs(ctx, fmt.Sprintf("tag-%d", i%10), 3, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// The last fly goroutine drops its queue just after its answers.
	testutil.WaitFor(t, "every queue to go once its requests were answered", func() bool { return f.Queues() == 0 })

	for i := range forward.KeptOwners - 1 {
		if err := f.UseOwner(fmt.Sprintf("http://127.0.0.%d:8080", i+2)); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Owners(); got != forward.KeptOwners {
		t.Fatalf("%d owners, want %d", got, forward.KeptOwners)
	}
	// All in use lately: a new owner is added to them.
	if err := f.UseOwner("http://10.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	if got := f.Owners(); got != forward.KeptOwners+1 {
		t.Fatalf("%d owners, want %d", got, forward.KeptOwners+1)
	}
	// Idle past OwnerIdle but for one: the next new owner replaces them.
	f.AgeOwners(forward.OwnerIdle + time.Second)
	if err := f.UseOwner(url); err != nil {
		t.Fatal(err)
	}
	if err := f.UseOwner("http://10.0.0.2:8080"); err != nil {
		t.Fatal(err)
	}
	if got := f.Owners(); got != 2 {
		t.Errorf("%d owners after the idle ones went, want 2", got)
	}
	if _, err := f.NextID(ctx, tag); err != nil {
		t.Errorf("forwarding after the pools were pruned: %v", err)
	}
}
