package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/leaftest"
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

func TestBufferedOptions(t *testing.T) {
	c := newClient(t, []string{"http://127.0.0.1:1"})
	for name, tc := range map[string]struct {
		o    client.BufferOption
		want error
	}{
		"WithRangeSize(0)":        {client.WithRangeSize(0), leaf.ErrInvalidCount},
		"WithRangeSize(10001)":    {client.WithRangeSize(leaf.MaxBatch + 1), leaf.ErrInvalidCount},
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
}

// draw takes n IDs from b one at a time.
func draw(t testing.TB, b *client.Buffered, n int) []int64 {
	t.Helper()
	ctx := ctxFor(t)
	ids := make([]int64, n)
	for i := range ids {
		id, err := b.Next(ctx)
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
	b := newBuffered(t, newClient(t, []string{s.URL}), "test", client.WithRangeSize(100))
	// One client, one server: the leases follow each other, so one caller
	// sees every ID in order.
	if ids := draw(t, b, 1000); !contiguous(ids, 1) {
		t.Fatalf("IDs %v... are not 1..1000", ids[:20])
	}
	st := b.Stats()
	if st.Leases < 10 || st.Leases > 12 || st.LeasedIDs != 100*st.Leases || st.RangeSize != 100 {
		t.Errorf("Stats = %+v, want 10-12 leases of 100", st)
	}
	ids, err := b.NextIDs(ctxFor(t), 250)
	if err != nil || len(ids) != 250 || !contiguous(ids, 1001) {
		t.Fatalf("NextIDs(250) = %d IDs, %v; want 1001..1250", len(ids), err)
	}
	if _, err := b.NextIDs(ctxFor(t), 0); !errors.Is(err, leaf.ErrInvalidCount) {
		t.Errorf("NextIDs(0) = %v, want ErrInvalidCount", err)
	}
}

func TestBufferedShortRanges(t *testing.T) {
	// Server segments of 150 IDs: leases of 100 are cut at each segment's
	// end (100, 50, 100, 50, ... until the adaptive step grows).
	st := newStore(t, 150, "test")
	s := serve(t, httpapi.Config{Segment: startSegment(t, st, nil)})
	b := newBuffered(t, newClient(t, []string{s.URL}), "test", client.WithRangeSize(100))
	if ids := draw(t, b, 2000); !contiguous(ids, 1) {
		t.Fatalf("IDs are not 1..2000")
	}
	if st := b.Stats(); st.LeasedIDs >= 100*st.Leases {
		t.Errorf("Stats = %+v: no lease was short", st)
	}
}

func TestBufferedAdaptive(t *testing.T) {
	s := segmentServer(t, "test")
	b := newBuffered(t, newClient(t, []string{s.URL}), "test",
		client.WithRangeSize(10), client.WithAdaptiveRange(time.Hour))
	// Every lease is used up within the hour: the size doubles from 10 to
	// the cap.
	if ids := draw(t, b, 60_000); !contiguous(ids, 1) {
		t.Fatal("IDs are not contiguous")
	}
	st := b.Stats()
	if st.RangeSize != leaf.MaxBatch || st.Leases > 20 {
		t.Errorf("Stats = %+v, want the size grown to %d in few leases", st, leaf.MaxBatch)
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
			ctx := ctxFor(t)
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
	id, err := b.Next(ctx)
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
	g := startSegment(t, st, func(s *segment.Settings) { s.NegativeTTL = time.Millisecond })
	s := serve(t, httpapi.Config{Segment: g})
	b := newBuffered(t, newClient(t, []string{s.URL}), "later")
	// The refusal comes back at once, not after the wait timeout.
	began := time.Now()
	if _, err := b.Next(ctxFor(t)); !errors.Is(err, leaf.ErrTagNotFound) || time.Since(began) > time.Second {
		t.Fatalf("Next = %v after %s, want ErrTagNotFound at once", err, time.Since(began))
	}
	// Once the tag exists, the next call leases.
	if err := st.CreateTag(context.Background(), leaf.Alloc{Tag: "later", MaxID: 1, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past the server's negative cache
	if id, err := b.Next(ctxFor(t)); err != nil || id != 1 {
		t.Fatalf("Next = %d, %v; want 1", id, err)
	}
}

func TestBufferedNotReady(t *testing.T) {
	down := notReadyServer(t)
	// One attempt per lease request: the loader fails (and retries) fast.
	b := newBuffered(t, newClient(t, []string{down.URL}, client.WithAttempts(1)), "test",
		client.WithWaitTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(ctxFor(t), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := b.Next(ctx)
	if took := time.Since(began); !errors.Is(err, leaf.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("Next = %v after %s, want ErrNotReady at the deadline", err, took)
	}
	// Without a deadline, WithWaitTimeout bounds the wait; by now the
	// loader has failed and the error carries the server's answer (its
	// message, not the cause, which stays in the server's log).
	began = time.Now()
	_, err = b.Next(context.Background())
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
	pauses := make([][]time.Duration, bufs)
	var wg sync.WaitGroup
	for i := range bufs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var logs leaftest.LogBuffer
			c := newClient(t, []string{down.URL}, client.WithAttempts(1),
				client.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			b := newBuffered(t, c, "test")
			deadline := time.Now().Add(5 * time.Second)
			for len(pauses[i]) < lines && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				pauses[i] = pauses[i][:0]
				for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
					var rec struct {
						Msg     string
						RetryIn time.Duration `json:"retry_in"`
					}
					if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "leaf client: leasing IDs failed; retrying" {
						pauses[i] = append(pauses[i], rec.RetryIn)
					}
				}
			}
			b.Close()
		}()
	}
	wg.Wait()
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
	if _, err := b.Next(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Next(ctxFor(t)); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
	if _, err := b.NextIDs(ctxFor(t), 3); !errors.Is(err, leaf.ErrClosed) {
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
		_, err := b.Next(ctxFor(t))
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
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
