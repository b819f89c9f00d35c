package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// newBuffered returns a Buffered closed at cleanup.
func newBuffered(t testing.TB, c *client.Client, tag string, opts ...client.BufferOption) *client.Buffered {
	t.Helper()
	b, err := c.Buffered(tag, opts...)
	if err != nil {
		t.Fatalf("Buffered(%q): %v", tag, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// settled waits until b has no lease in flight, and returns its stats then:
// a lease in flight has its ranges counted and not yet itself.
func settled(t *testing.T, b *client.Buffered) client.BufferedStats {
	t.Helper()
	var st client.BufferedStats
	testutil.WaitFor(t, "the lease in flight to arrive", func() bool {
		st = b.Stats()
		return !st.Loading
	})
	return st
}

func TestBufferedOptions(t *testing.T) {
	c := newClient(t, []string{"http://127.0.0.1:1"})
	for name, tc := range map[string]struct {
		o    client.BufferOption
		want error
	}{
		"WithRangeSize(0)":        {client.WithRangeSize(0), leaf.ErrInvalidCount},
		"WithRangeSize(too many)": {client.WithRangeSize(client.MaxRangeSize + 1), leaf.ErrInvalidCount},
		"WithMaxRangeSize(0)":     {client.WithMaxRangeSize(0), leaf.ErrInvalidCount},
		"WithMaxRangeSize(many)":  {client.WithMaxRangeSize(client.MaxRangeSize + 1), leaf.ErrInvalidCount},
		"WithPrefetch(0)":         {client.WithPrefetch(0), leaf.ErrInvalidArgument},
		"WithPrefetch(1.5)":       {client.WithPrefetch(1.5), leaf.ErrInvalidArgument},
		"WithPrefetch(NaN)":       {client.WithPrefetch(math.NaN()), leaf.ErrInvalidArgument},
		"WithWaitTimeout(0)":      {client.WithWaitTimeout(0), leaf.ErrInvalidArgument},
		"WithAdaptiveRange(-1s)":  {client.WithAdaptiveRange(-time.Second), leaf.ErrInvalidArgument},
		"WithAdaptiveRange(zero)": {client.WithAdaptiveRange(0), leaf.ErrInvalidArgument},
	} {
		if _, err := c.Buffered("test", tc.o); !errors.Is(err, tc.want) {
			t.Errorf("Buffered with %s = %v, want %v", name, err, tc.want)
		}
	}
	// A cap below the range size set is a contradiction; below the default
	// range size it lowers the range size.
	if _, err := c.Buffered("test", client.WithRangeSize(500), client.WithMaxRangeSize(100)); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("Buffered with WithRangeSize(500) and WithMaxRangeSize(100) = %v, want ErrInvalidArgument", err)
	}
	b := newBuffered(t, c, "test", client.WithMaxRangeSize(100))
	if st := b.Stats(); st.RangeSize != 100 {
		t.Errorf("WithMaxRangeSize(100) alone: range size %d, want 100", st.RangeSize)
	}
}

// draw takes n IDs from b one at a time.
func draw(t testing.TB, b *client.Buffered, n int) []int64 {
	t.Helper()
	ctx := testutil.Context(t, time.Minute)
	ids := make([]int64, n)
	for i := range ids {
		id, err := b.NextID(ctx)
		if err != nil {
			t.Fatalf("Next #%d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// contiguous reports whether ids are first, first+1, ...
func contiguous(ids []int64, first int64) bool {
	for i, id := range ids {
		if id != first+int64(i) {
			return false
		}
	}
	return true
}

func TestBufferedSequential(t *testing.T) {
	s := segmentServer(t, "test")
	b := newBuffered(t, newClient(t, []string{s.URL}), "test", client.WithRangeSize(100), client.WithMaxRangeSize(100))
	// One client, one server: the leases follow each other, so one caller
	// sees every ID in order. The lease size is fixed at 100.
	if ids := draw(t, b, 1000); !contiguous(ids, 1) {
		t.Fatalf("IDs %v... are not 1..1000", ids[:20])
	}
	// A lease counts in Leases once its load has returned, but its IDs
	// count (and can be issued) as soon as its range arrives: the lease in
	// flight may be in LeasedIDs and not yet in Leases.
	st := b.Stats()
	if n := st.LeasedIDs / 100; st.LeasedIDs%100 != 0 || n < 10 || n > 12 || st.Leases != n && st.Leases != n-1 || st.RangeSize != 100 {
		t.Errorf("Stats = %+v, want 10-12 leases of 100", st)
	}
	ids, err := b.NextIDs(testutil.Context(t, time.Minute), 250)
	if err != nil || len(ids) != 250 || !contiguous(ids, 1001) {
		t.Fatalf("NextIDs(250) = %d IDs, %v; want 1001..1250", len(ids), err)
	}
	if _, err := b.NextIDs(testutil.Context(t, time.Minute), 0); !errors.Is(err, leaf.ErrInvalidCount) {
		t.Errorf("NextIDs(0) = %v, want ErrInvalidCount", err)
	}
}

func TestBufferedShortRanges(t *testing.T) {
	// Server segments of 150 IDs: a range of 100 asked for is cut at each
	// segment's end (100, 50, 100, 50, ... until the adaptive step grows),
	// and the lease asks again for the rest.
	st := newStore(t, 150, "test")
	s := serve(t, httpapi.Config{Segment: startSegment(t, st, nil)})
	b := newBuffered(t, newClient(t, []string{s.URL}), "test", client.WithRangeSize(100), client.WithMaxRangeSize(100))
	if ids := draw(t, b, 2000); !contiguous(ids, 1) {
		t.Fatalf("IDs are not 1..2000")
	}
	if st := settled(t, b); st.Ranges <= st.Leases || st.LeasedIDs != 100*st.Leases {
		t.Errorf("Stats = %+v: want leases of 100 IDs, some in two ranges", st)
	}
}

// TestBufferedAdaptive: while leases would last less than the lifetime, the
// next lease is what would last it at the rate seen, at least twice the
// last, past leaf.MaxBatch (leases of several ranges) up to the cap; the
// size halves back to the range size when the rate drops.
func TestBufferedAdaptive(t *testing.T) {
	// Server segments of a million: the ranges come whole.
	s := serve(t, httpapi.Config{Segment: startSegment(t, newStore(t, 1_000_000, "test"), nil)})
	b := newBuffered(t, newClient(t, []string{s.URL}), "test",
		client.WithRangeSize(5000), client.WithMaxRangeSize(40_000), client.WithAdaptiveRange(time.Hour))
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		// tick is how far the clock moves at each reading: 0 while the
		// rate is high (every lease lasts no time at all), a thousand hours
		// for an idle client.
		tick time.Duration
	)
	client.SetClock(b, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(tick)
		return now
	})
	// sizes draws until the Buffered has loaded leases more leases, and
	// returns the lease size before and those it saw asked for, in order,
	// without repeats.
	var all []int64
	sizes := func(leases uint64) []int {
		t.Helper()
		seen := []int{b.Stats().RangeSize}
		until := b.Stats().Leases + leases
		for b.Stats().Leases < until {
			ids, err := b.NextIDs(testutil.Context(t, time.Minute), 1000)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ids...)
			if n := b.Stats().RangeSize; len(seen) == 0 || seen[len(seen)-1] != n {
				seen = append(seen, n)
			}
		}
		return seen
	}
	// No time passes: the rate is beyond measure, and the next lease the cap.
	if got := sizes(3); !slices.Equal(got, []int{5000, 40_000}) {
		t.Errorf("lease sizes while busy: %v, want 5000 then the cap 40000", got)
	}
	if st := settled(t, b); st.Ranges < st.Leases || st.LeasedIDs <= uint64(leaf.MaxBatch)*st.Leases/2 {
		t.Errorf("Stats = %+v, want leases past a batch, a range or more each", st)
	}
	mu.Lock()
	tick = 1000 * time.Hour
	mu.Unlock()
	if got := sizes(4); !slices.Equal(got, []int{40_000, 20_000, 10_000, 5000}) {
		t.Errorf("lease sizes once idle: %v, want halving from 40000 to the range size 5000", got)
	}
	if got := sizes(2); !slices.Equal(got, []int{5000}) {
		t.Errorf("lease sizes idle at the floor: %v, want 5000", got)
	}
	// Ten minutes a lease, with leases meant to last an hour: each lease
	// would last the hour at six times its size, so the size grows by
	// more than doubling where the IDs issued since the last lease allow
	// it, up to the cap.
	mu.Lock()
	tick = 10 * time.Minute
	mu.Unlock()
	got := sizes(5)
	jumped := false
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("lease sizes growing: %v, want increasing", got)
		}
		jumped = jumped || got[i] > 2*got[i-1]
	}
	if !jumped || got[len(got)-1] != 40_000 {
		t.Errorf("lease sizes growing: %v, want one more than doubling, and the cap 40000 at last", got)
	}
	// One server, its ranges in order within each lease: every ID in turn.
	if !contiguous(all, 1) {
		t.Errorf("the %d IDs drawn are not 1..%d", len(all), len(all))
	}
}

// TestBufferedNextDoesNotAllocate: Next takes an ID with one atomic add and
// no allocation while the current lease lasts.
func TestBufferedNextDoesNotAllocate(t *testing.T) {
	s := serve(t, httpapi.Config{Segment: startSegment(t, newStore(t, 1_000_000, "test"), nil)})
	b := newBuffered(t, newClient(t, []string{s.URL}), "test",
		client.WithRangeSize(100_000), client.WithMaxRangeSize(100_000))
	// Past the prefetch mark and with the next lease in: nothing loads
	// while AllocsPerRun counts, which would count the loader's allocations.
	for b.Stats().Leases < 2 {
		draw(t, b, 1000)
	}
	before := b.Stats()
	if n := testing.AllocsPerRun(10_000, func() { _, _ = b.NextID(t.Context()) }); n != 0 {
		t.Fatalf("Next allocates %.1f times per call while the lease lasts", n)
	}
	if st := b.Stats(); st.Leases != before.Leases || st.Waits != before.Waits || st.Issued != before.Issued+10_001 {
		t.Fatalf("Stats = %+v, before %+v: a lease was loaded, or a call waited, while counting", st, before)
	}
}

// hammer draws per IDs from b on each of goroutines goroutines, mixing Next
// and NextIDs, and returns each goroutine's IDs.
func hammer(t *testing.T, b *client.Buffered, goroutines, per int) [][]int64 {
	t.Helper()
	out := make([][]int64, goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			ctx := testutil.Context(t, time.Minute)
			ids := make([]int64, 0, per)
			for len(ids) < per {
				var err error
				if ids, err = drawMixed(ctx, b, ids, per, 1000, 37); err != nil {
					errs <- err
					return
				}
			}
			out[g] = ids
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// drawMixed appends b's next IDs to ids: a batch of up to batchMax (never past
// per in all) every batchEvery IDs, else one.
func drawMixed(ctx context.Context, b *client.Buffered, ids []int64, per, batchEvery, batchMax int) ([]int64, error) {
	if len(ids)%batchEvery == batchEvery-1 {
		batch, err := b.NextIDs(ctx, min(batchMax, per-len(ids)))
		return append(ids, batch...), err
	}
	id, err := b.NextID(ctx)
	if err != nil {
		return ids, err
	}
	return append(ids, id), nil
}

// checkUnique fails the test on a duplicate or non-positive ID among all
// of ids, and returns how many there are.
func checkUnique(t *testing.T, ids [][]int64) int {
	t.Helper()
	n := 0
	for _, s := range ids {
		n += len(s)
	}
	all := make([]int64, 0, n)
	for _, s := range ids {
		all = append(all, s...)
	}
	slices.Sort(all)
	for i, id := range all {
		if id < 1 {
			t.Fatalf("ID %d is not positive", id)
		}
		if i > 0 && id == all[i-1] {
			t.Fatalf("duplicate ID %d", id)
		}
	}
	return n
}

func TestBufferedConcurrentOneServer(t *testing.T) {
	per := 50_000
	if testing.Short() {
		per = 10_000
	}
	s := segmentServer(t, "test")
	// Small leases: many switches under contention.
	b := newBuffered(t, newClient(t, []string{s.URL}), "test", client.WithRangeSize(97))
	ids := hammer(t, b, 8, per)
	n := checkUnique(t, ids)
	// One server: each goroutine sees its IDs increase.
	for g, s := range ids {
		for i := 1; i < len(s); i++ {
			if s[i] <= s[i-1] {
				t.Fatalf("goroutine %d: ID %d after %d", g, s[i], s[i-1])
			}
		}
	}
	t.Logf("%d unique IDs; %+v", n, b.Stats())
}

func TestBufferedTinyLeases(t *testing.T) {
	// Leases of 1..3 IDs: nearly every call switches or waits, which is
	// where an ID could be handed out twice.
	per := 2_000
	if testing.Short() {
		per = 500
	}
	s := segmentServer(t, "test")
	for _, size := range []int{1, 3} {
		b := newBuffered(t, newClient(t, []string{s.URL}), "test",
			client.WithRangeSize(size), client.WithPrefetch(1))
		checkUnique(t, hammer(t, b, 8, per))
	}
}

func TestBufferedUnknownTag(t *testing.T) {
	st := newStore(t, 1000)
	g := startSegment(t, st, func(s *segment.Config) { s.NegativeTTL = time.Millisecond })
	s := serve(t, httpapi.Config{Segment: g})
	b := newBuffered(t, newClient(t, []string{s.URL}), "later")
	// The refusal comes back at once, not after the wait timeout.
	began := time.Now()
	if _, err := b.NextID(testutil.Context(t, time.Minute)); !errors.Is(err, leaf.ErrTagNotFound) || time.Since(began) > time.Second {
		t.Fatalf("Next = %v after %s, want ErrTagNotFound at once", err, time.Since(began))
	}
	// Once the tag exists, the next call leases.
	if err := st.CreateTag(context.Background(), leaf.Alloc{Tag: "later", MaxID: 1, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	// The server answers "not found" from its negative cache for 1ms more;
	// the refusals meanwhile come back at once as well.
	for {
		id, err := b.NextID(testutil.Context(t, time.Minute))
		if errors.Is(err, leaf.ErrTagNotFound) {
			continue
		}
		if err != nil || id != 1 {
			t.Fatalf("Next = %d, %v; want 1", id, err)
		}
		break
	}
}

func TestBufferedNotReady(t *testing.T) {
	down := notReadyServer(t)
	// One attempt per lease request: the loader fails (and retries) fast.
	b := newBuffered(t, newClient(t, []string{down.URL}, client.WithAttempts(1)), "test",
		client.WithWaitTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(testutil.Context(t, time.Minute), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := b.NextID(ctx)
	if took := time.Since(began); !errors.Is(err, leaf.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("Next = %v after %s, want ErrNotReady at the deadline", err, took)
	}
	// Without a deadline, WithWaitTimeout bounds the wait; by now the
	// loader has failed and the error carries the server's answer (its
	// message, not the cause, which stays in the server's log).
	began = time.Now()
	_, err = b.NextID(context.Background())
	if took := time.Since(began); !errors.Is(err, leaf.ErrNotReady) || took < 250*time.Millisecond || took > 2*time.Second ||
		!strings.Contains(err.Error(), "no IDs can be issued right now") {
		t.Fatalf("Next = %v after %s, want ErrNotReady with the server's message after the wait timeout", err, took)
	}
	if st := b.Stats(); st.LoadErrors == 0 || st.Leases != 0 {
		t.Errorf("Stats = %+v, want load errors and no lease", st)
	}
}

// TestBufferedRetryJitter: a Buffered whose leases fail retries after
// pauses drawn below 50ms, 100ms, 200ms (full jitter), not after exactly
// those: Buffereds that failed together do not retry together.
func TestBufferedRetryJitter(t *testing.T) {
	down := notReadyServer(t)
	const bufs, lines = 5, 3
	// The Buffereds lease in the background, all at once; the test reads
	// the retries each logs.
	logs := make([]*testutil.LogBuffer, bufs)
	buffered := make([]*client.Buffered, bufs)
	for i := range bufs {
		logs[i] = &testutil.LogBuffer{}
		c := newClient(t, []string{down.URL}, client.WithAttempts(1),
			client.WithLogger(slog.New(slog.NewJSONHandler(logs[i], nil))))
		buffered[i] = newBuffered(t, c, "test")
	}
	pauses := make([][]time.Duration, bufs)
	testutil.WaitFor(t, fmt.Sprintf("every Buffered to log %d retries", lines), func() bool {
		done := true
		for i := range bufs {
			pauses[i] = pauses[i][:0]
			for _, line := range strings.Split(strings.TrimSpace(logs[i].String()), "\n") {
				var rec struct {
					Msg     string
					RetryIn time.Duration `json:"retry_in"`
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "leaf client: leasing IDs failed; retrying" {
					pauses[i] = append(pauses[i], rec.RetryIn)
				}
			}
			done = done && len(pauses[i]) >= lines
		}
		return done
	})
	for _, b := range buffered {
		b.Close()
	}
	firsts := map[time.Duration]bool{}
	for i, p := range pauses {
		if len(p) < lines {
			t.Fatalf("Buffered %d logged %d retries, want %d", i, len(p), lines)
		}
		bound := 50 * time.Millisecond
		for k, d := range p[:lines] {
			if d < 0 || d >= bound {
				t.Errorf("Buffered %d: pause %d is %s, want in [0, %s): %v", i, k, d, bound, p)
			}
			bound *= 2
		}
		firsts[p[0]] = true
	}
	if len(firsts) < 2 {
		t.Errorf("the first pauses of %d Buffereds are all equal: %v", bufs, pauses)
	}
}

func TestBufferedClose(t *testing.T) {
	s := segmentServer(t, "test")
	b := newBuffered(t, newClient(t, []string{s.URL}), "test")
	if _, err := b.NextID(testutil.Context(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.NextID(testutil.Context(t, time.Minute)); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
	if _, err := b.NextIDs(testutil.Context(t, time.Minute), 3); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("NextIDs after Close = %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// Close wakes a caller waiting for a lease from a server that hangs,
	// and stops the loader stuck on it.
	hang := hangingServer(t)
	b = newBuffered(t, newClient(t, []string{hang.URL}, client.WithTimeout(time.Minute)), "test")
	got := make(chan error, 1)
	go func() {
		_, err := b.NextID(testutil.Context(t, time.Minute))
		got <- err
	}()
	// A waiter is counted under the lock that also takes its wake-up
	// channel: once counted, Close must wake it.
	for b.Stats().Waits == 0 {
		runtime.Gosched()
	}
	began := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("waiting Next = %v, want ErrClosed", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Close took %s", took)
	}
}

// A lease asks for up to leaf.MaxRange IDs in one request, and gets one
// range when the server's segment holds it. A server from before longer
// ranges refuses a count above leaf.MaxBatch (as the shim in front of a real
// one does here): the Buffered asks in ranges of leaf.MaxBatch from then on.
func TestBufferedLongRanges(t *testing.T) {
	for _, old := range []bool{false, true} {
		store := newStore(t, 500_000, "test")
		var refusedLong atomic.Int32
		real := httpapi.New(httpapi.Config{Segment: startSegment(t, store, nil), Logger: testutil.Logger()})
		s := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n, _ := strconv.Atoi(r.URL.Query().Get("count")); old && n > leaf.MaxBatch {
				refusedLong.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":"invalid count: %d, want 1..%d","code":"invalid_count"}`, n, leaf.MaxBatch)
				return
			}
			real.ServeHTTP(w, r)
		}))
		b := newBuffered(t, newClient(t, []string{s.URL}), "test", client.WithRangeSize(200_000), client.WithMaxRangeSize(200_000))
		testutil.CheckUnique(t, draw(t, b, 300_000))
		st := settled(t, b)
		switch {
		case !old && st.Ranges > 3*st.Leases:
			t.Errorf("Stats = %+v: want leases of one or two ranges (a segment's end cuts one)", st)
		case old && (refusedLong.Load() != 1 || st.Ranges < 20*st.Leases):
			t.Errorf("old server: %d long ranges refused, Stats = %+v; want 1 refusal, then ranges of %d", refusedLong.Load(), st, leaf.MaxBatch)
		}
	}
}
