package doublebuf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf/internal/doublebuf"
)

var errNotReady = errors.New("not ready")

// source is a loader handing out consecutive ranges of size IDs from 1, one
// range per lease unless parts says otherwise, counting its calls. Tests
// program it: fail makes the next calls fail, down every call while set,
// gate (if set) holds each range until it can receive, entered (if set)
// hears of each range about to be asked for.
type source struct {
	mu      sync.Mutex
	next    int64
	size    int64
	parts   int
	calls   int
	fail    []error       // errors for the next calls, in turn
	down    error         // while set, every call fails with it
	gate    chan struct{} // if set, each call waits for a receive
	entered chan struct{} // if set, each call sends here first
	at      []time.Time   // when each call began
}

func newSource(size int64) *source { return &source{next: 1, size: size, parts: 1} }

func (s *source) load(ctx context.Context, deliver func(doublebuf.Range) error) error {
	s.mu.Lock()
	s.calls++
	s.at = append(s.at, time.Now())
	gate, entered, parts := s.gate, s.entered, s.parts
	s.mu.Unlock()
	for i := range parts {
		if entered != nil {
			entered <- struct{}{}
		}
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		s.mu.Lock()
		if s.down != nil {
			s.mu.Unlock()
			return s.down
		}
		if i == 0 && len(s.fail) > 0 {
			err := s.fail[0]
			s.fail = s.fail[1:]
			s.mu.Unlock()
			return err
		}
		r := doublebuf.Range{Start: s.next, End: s.next + s.size, Step: int(s.size)}
		s.next += s.size
		s.mu.Unlock()
		if err := deliver(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *source) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// config is a Config on src: prefetch at 10%, quick retries, a 1s wait
// budget that caps deadlines.
func config(src *source) doublebuf.Config {
	return doublebuf.Config{
		Load:            src.load,
		Prefetch:        0.1,
		RetryBackoff:    10 * time.Millisecond,
		MaxRetryBackoff: 40 * time.Millisecond,
		WaitTimeout:     time.Second,
		NotReady: func(loadErr, cause error) error {
			return fmt.Errorf("%w (load error: %v; cause: %w)", errNotReady, loadErr, cause)
		},
	}
}

// newBuffer makes a Buffer stopped (and its loads waited for) at cleanup.
func newBuffer(t *testing.T, cfg doublebuf.Config) *doublebuf.Buffer {
	t.Helper()
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Context, cfg.Group = ctx, &wg
	b := doublebuf.New(cfg)
	t.Cleanup(func() {
		b.Stop(errors.New("test over"))
		cancel()
		wg.Wait()
	})
	return b
}

func take(t *testing.T, b *doublebuf.Buffer, n int64) (int64, int64) {
	t.Helper()
	s, e, err := b.Take(context.Background(), n, nil)
	if err != nil {
		t.Fatalf("Take(%d): %v", n, err)
	}
	return s, e
}

// next takes one ID: Next, or Take when Next has none at hand.
func next(t *testing.T, b *doublebuf.Buffer) int64 {
	t.Helper()
	if id, got := b.Next(); got != doublebuf.None {
		if got == doublebuf.PrefetchDue {
			b.Prefetch()
		}
		return id
	}
	s, _ := take(t, b, 1)
	return s
}

// TestHammer: many goroutines take single IDs and runs from tiny leases of
// several ranges, while loads fail now and then; every ID is handed out
// once, each goroutine's IDs increase (the source's ranges do), and Stats
// counts every ID handed out.
func TestHammer(t *testing.T) {
	const goroutines = 32
	per := 20_000
	if testing.Short() {
		per = 5_000
	}
	src := newSource(7)
	src.parts = 3
	var flaky atomic.Int64
	cfg := config(src)
	cfg.RetryBackoff, cfg.MaxRetryBackoff = time.Microsecond, time.Microsecond
	cfg.WaitTimeout = time.Minute
	cfg.Load = func(ctx context.Context, deliver func(doublebuf.Range) error) error {
		if flaky.Add(1)%5 == 0 {
			return errors.New("flaky source")
		}
		return src.load(ctx, deliver)
	}
	b := newBuffer(t, cfg)
	got := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ids := make([]int64, 0, per)
			var until time.Time
			for len(ids) < per {
				if rand.IntN(10) == 0 {
					s, e, err := b.Take(context.Background(), int64(min(1+rand.IntN(20), per-len(ids))), &until)
					if err != nil {
						t.Error(err)
						return
					}
					for id := s; id < e; id++ {
						ids = append(ids, id)
					}
					continue
				}
				id, got := b.Next()
				if got == doublebuf.PrefetchDue {
					b.Prefetch()
				}
				if got == doublebuf.None {
					s, _, err := b.Take(context.Background(), 1, &until)
					if err != nil {
						t.Error(err)
						return
					}
					id = s
				}
				ids = append(ids, id)
			}
			got[g] = ids
		})
	}
	wg.Wait()
	all := make([]int64, 0, goroutines*per)
	for g, ids := range got {
		if !slices.IsSorted(ids) {
			t.Errorf("goroutine %d: IDs go back", g)
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
	st := b.Stats()
	if st.Issued != uint64(len(all)) || st.LoadErrors == 0 || st.Waits == 0 {
		t.Errorf("Stats = %+v; want Issued %d, and the test to have waited and seen load errors", st, len(all))
	}
}

// TestPrefetchAtMark: the take of the ID at the prefetch mark, and no
// earlier one, starts the load of the next lease; the mark lies in the
// right range of a lease of several.
func TestPrefetchAtMark(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size        int64
		parts       int
		prefetch    float64
		mark        int64 // the ID whose take starts the second load
		takeRunUpTo bool  // reach the mark with a run ending on it
	}{
		{"10% of 100", 100, 1, 0.1, 11, false},
		{"run over the mark", 100, 1, 0.1, 11, true},
		{"0 loads at once", 100, 1, 0, 1, false},
		{"1 loads at the last ID", 100, 1, 1, 100, false},
		{"50% of three ranges of 10", 10, 3, 0.5, 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := newSource(tc.size)
				src.parts = tc.parts
				cfg := config(src)
				cfg.Prefetch = tc.prefetch
				b := newBuffer(t, cfg)
				if tc.mark > 1 {
					if tc.takeRunUpTo {
						take(t, b, 1)
						for id := int64(2); id < tc.mark; id++ {
							next(t, b)
						}
					} else {
						for id := int64(1); id < tc.mark; id++ {
							if got := next(t, b); got != id {
								t.Fatalf("ID %d, want %d", got, id)
							}
						}
					}
					synctest.Wait()
					if n := src.Calls(); n != 1 {
						t.Fatalf("%d loads before the mark, want 1", n)
					}
				}
				if tc.takeRunUpTo {
					s, e := take(t, b, 5) // [mark, mark+5)
					if s != tc.mark || e != tc.mark+5 {
						t.Fatalf("Take(5) = [%d, %d), want [%d, %d)", s, e, tc.mark, tc.mark+5)
					}
				} else if got := next(t, b); got != tc.mark {
					t.Fatalf("ID %d, want the mark %d", got, tc.mark)
				}
				synctest.Wait()
				st := b.Stats()
				// (At the last ID the lease is used up: the next becomes
				// current as it lands.)
				if n := src.Calls(); n != 2 || st.Loads != 2 || st.Leased != uint64(2*tc.size*int64(tc.parts)) || st.Ranges != uint64(2*tc.parts) || st.Loading {
					t.Fatalf("after the mark: %d loads, stats %+v; want the next lease loaded", n, st)
				}
				// No third load before the second lease's own mark.
				for range 10 {
					next(t, b)
				}
				synctest.Wait()
				if n := src.Calls(); n != 2 {
					t.Fatalf("%d loads, want 2", n)
				}
			})
		})
	}
}

// TestOneLoadInFlight: callers that find no IDs queue behind one load and
// are all woken, and served, when it lands.
func TestOneLoadInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(1000)
		src.gate = make(chan struct{})
		b := newBuffer(t, config(src))
		const waiters = 50
		ids := make(chan int64, waiters)
		for range waiters {
			go func() {
				s, _, err := b.Take(context.Background(), 1, nil)
				if err != nil {
					t.Error(err)
				}
				ids <- s
			}()
		}
		synctest.Wait() // all of them wait
		if st := b.Stats(); src.Calls() != 1 || st.Waits != waiters || !st.Loading {
			t.Fatalf("%d loads, stats %+v; want one load in flight and %d waits", src.Calls(), st, waiters)
		}
		src.gate <- struct{}{}
		seen := map[int64]bool{}
		for range waiters {
			id := <-ids
			if seen[id] || id < 1 || id > waiters {
				t.Fatalf("ID %d: duplicate or out of [1, %d]", id, waiters)
			}
			seen[id] = true
		}
	})
}

// TestRetryBackoff: a failing load is retried after pauses drawn below a
// bound that doubles from RetryBackoff to MaxRetryBackoff; Retrying hears
// of each; a waiter gives up at WaitTimeout with the load's error, and the
// load succeeds once the source is back.
func TestRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(100)
		boom := errors.New("source down")
		src.down = boom
		cfg := config(src)
		var (
			mu     sync.Mutex
			pauses []time.Duration
		)
		cfg.Retrying = func(err error, d time.Duration) {
			if !errors.Is(err, boom) {
				t.Errorf("Retrying(%v)", err)
			}
			mu.Lock()
			pauses = append(pauses, d)
			mu.Unlock()
		}
		cfg.WaitTimeout = 200 * time.Millisecond
		b := newBuffer(t, cfg)
		began := time.Now()
		_, _, err := b.Take(context.Background(), 1, nil)
		if !errors.Is(err, errNotReady) || !errors.Is(err, context.DeadlineExceeded) || time.Since(began) != cfg.WaitTimeout {
			t.Fatalf("Take = %v after %s, want not ready at the %s wait timeout", err, time.Since(began), cfg.WaitTimeout)
		}
		if !strings.Contains(err.Error(), "source down") {
			t.Errorf("error %q does not carry the load's error", err)
		}
		src.mu.Lock()
		src.down = nil
		src.mu.Unlock()
		if id := next(t, b); id != 1 {
			t.Fatalf("ID %d after the source recovered, want 1", id)
		}
		mu.Lock()
		defer mu.Unlock()
		bound := cfg.RetryBackoff
		for i, p := range pauses {
			if p < 0 || p >= bound {
				t.Errorf("pause %d: %s, want in [0, %s)", i, p, bound)
			}
			if gap := src.at[i+1].Sub(src.at[i]); gap != p {
				t.Errorf("retry %d came %s after the failure, want the %s pause", i+1, gap, p)
			}
			bound = min(2*bound, cfg.MaxRetryBackoff)
		}
		// 200ms of pauses below 10, 20, then 40ms: at least five.
		if st := b.Stats(); len(pauses) < 5 || st.LoadErrors != uint64(len(pauses)) || st.LastErr != nil || st.Loads != 1 {
			t.Errorf("%d pauses, stats %+v; want a failure per pause, then one load", len(pauses), st)
		}
	})
}

// TestWaitBudget: with CallerDeadlineWins a context's deadline, however
// far, is waited for and WaitTimeout bounds only contexts without one;
// without it the first of the two ends the wait. The budget is shared by
// the takes of one request.
func TestWaitBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wins     bool
		deadline time.Duration // 0: none
		want     time.Duration
		cause    error
	}{
		{"capped, no deadline", false, 0, time.Second, context.DeadlineExceeded},
		{"capped, far deadline", false, time.Hour, time.Second, context.DeadlineExceeded},
		{"capped, near deadline", false, 100 * time.Millisecond, 100 * time.Millisecond, context.DeadlineExceeded},
		{"caller's, no deadline", true, 0, time.Second, context.DeadlineExceeded},
		{"caller's, far deadline", true, time.Hour, time.Hour, context.DeadlineExceeded},
		{"caller's, near deadline", true, 100 * time.Millisecond, 100 * time.Millisecond, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := newSource(100)
				src.gate = make(chan struct{}) // the load hangs
				cfg := config(src)
				cfg.CallerDeadlineWins = tc.wins
				b := newBuffer(t, cfg)
				ctx := context.Background()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				began := time.Now()
				_, _, err := b.Take(ctx, 1, nil)
				if took := time.Since(began); took != tc.want || !errors.Is(err, errNotReady) || !errors.Is(err, tc.cause) {
					t.Fatalf("Take = %v after %s, want not ready (%v) after %s", err, took, tc.cause, tc.want)
				}
			})
		})
	}
	t.Run("shared by a request's takes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := newSource(10)
			src.gate = make(chan struct{})
			b := newBuffer(t, config(src))
			go func() {
				time.Sleep(600 * time.Millisecond)
				src.gate <- struct{}{} // one lease, after 600ms
			}()
			var until time.Time
			began := time.Now()
			n := 0
			for {
				s, e, err := b.Take(context.Background(), 100, &until)
				if err != nil {
					if !errors.Is(err, errNotReady) {
						t.Fatal(err)
					}
					break
				}
				n += int(e - s)
			}
			// 600ms for the first lease, then the second never comes: the
			// request ends at the 1s budget, not 1s after its second wait.
			if took := time.Since(began); n != 10 || took != time.Second {
				t.Fatalf("took %d IDs and answered after %s, want 10 IDs and 1s", n, took)
			}
		})
	})
}

// TestPermanentError: a load error the Config calls permanent ends the
// load: the callers that waited get it at once, and the next take that
// finds no IDs loads again.
func TestPermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(100)
		gone := errors.New("no such tag")
		src.fail = []error{gone}
		cfg := config(src)
		cfg.Permanent = func(err error) bool { return errors.Is(err, gone) }
		b := newBuffer(t, cfg)
		began := time.Now()
		if _, _, err := b.Take(context.Background(), 1, nil); !errors.Is(err, gone) || time.Since(began) != 0 {
			t.Fatalf("Take = %v after %s, want the permanent error at once", err, time.Since(began))
		}
		if st := b.Stats(); st.Loading || st.LoadErrors != 1 {
			t.Fatalf("stats %+v, want the load ended after one error", st)
		}
		if id := next(t, b); id != 1 || src.Calls() != 2 {
			t.Fatalf("ID %d after %d loads, want 1 after a second load", id, src.Calls())
		}
	})
}

// TestStop: Stop freezes the current range (what was handed out is exactly
// what Stats counts), wakes waiters with its error, keeps a lease that
// lands afterwards without handing it out, and starts no load.
func TestStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(10)
		b := newBuffer(t, config(src))
		for range 10 {
			next(t, b) // the first lease; the second loads at 2
		}
		// The second lease's load runs in its own goroutine: let it land
		// before the gate is set, or it would hang instead of the third.
		synctest.Wait()
		src.mu.Lock()
		src.gate = make(chan struct{})
		src.mu.Unlock()
		for range 5 {
			next(t, b) // 11..15; the third lease's load hangs at 12
		}
		waited := make(chan error)
		go func() {
			for {
				if _, _, err := b.Take(context.Background(), 10, nil); err != nil {
					waited <- err
					return
				}
			}
		}()
		synctest.Wait() // the goroutine took 16..20 and waits
		stop := errors.New("closed")
		b.Stop(stop)
		if err := <-waited; !errors.Is(err, stop) {
			t.Fatalf("waiting take = %v, want the stop error", err)
		}
		src.gate <- struct{}{} // the third lease lands after the stop
		synctest.Wait()
		if _, got := b.Next(); got != doublebuf.None {
			t.Fatal("Next handed out an ID after Stop")
		}
		if _, _, err := b.Take(context.Background(), 1, nil); !errors.Is(err, stop) {
			t.Fatalf("Take after Stop = %v, want the stop error", err)
		}
		st := b.Stats()
		cur, nxt := st.Leases[st.Pos], st.Leases[1-st.Pos]
		if st.Issued != 20 || cur.Start != 11 || cur.Issued != 10 || cur.Left != 0 || cur.Next != cur.End ||
			!nxt.Held || nxt.Start != 21 || nxt.Issued != 0 || st.Loads != 3 || st.Loading || !st.Stopped {
			t.Fatalf("stats after Stop %+v", st)
		}
		b.Stop(errors.New("again")) // the first error stays
		if _, _, err := b.Take(context.Background(), 1, nil); !errors.Is(err, stop) {
			t.Fatalf("Take after a second Stop = %v, want the first stop error", err)
		}
		if src.Calls() != 3 {
			t.Fatalf("%d loads, want no load after Stop", src.Calls())
		}
	})
}

// TestStopIf: the condition sees the statistics, and the stop happens only
// when it holds.
func TestStopIf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBuffer(t, config(newSource(100)))
		next(t, b)
		synctest.Wait()
		if b.StopIf(errors.New("idle"), func(st doublebuf.Stats) bool { return st.Issued == 0 }) {
			t.Fatal("stopped although the condition did not hold")
		}
		if id := next(t, b); id != 2 {
			t.Fatalf("ID %d, want 2", id)
		}
		if !b.StopIf(errors.New("idle"), func(st doublebuf.Stats) bool { return st.Issued == 2 && !st.Loading }) {
			t.Fatal("did not stop although the condition held")
		}
		if _, got := b.Next(); got != doublebuf.None {
			t.Fatal("Next handed out an ID after StopIf")
		}
	})
}

// TestOverflowGuard: a range that ends at the largest int64 is handed out
// to its end, and then, however many adds wrap the counter past it, nothing
// more: no negative or repeated ID.
func TestOverflowGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		// The second load (the prefetch the first Take starts) waits for
		// the test: until it delivers, the wrapped counter must give
		// nothing; afterwards Next moves on to its range, as it should.
		release := make(chan struct{})
		cfg := config(nil)
		cfg.Load = func(ctx context.Context, deliver func(doublebuf.Range) error) error {
			if calls.Add(1) == 1 {
				return deliver(doublebuf.Range{Start: math.MaxInt64 - 5, End: math.MaxInt64})
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return deliver(doublebuf.Range{Start: 1, End: 3})
		}
		b := newBuffer(t, cfg)
		s, e := take(t, b, 3)
		if s != math.MaxInt64-5 || e != math.MaxInt64-2 {
			t.Fatalf("Take(3) = [%d, %d)", s, e)
		}
		// This add runs past the largest int64: the run ends at the range's
		// end, not at the wrapped sum.
		s, e = take(t, b, math.MaxInt64/2)
		if s != math.MaxInt64-2 || e != math.MaxInt64 {
			t.Fatalf("Take(MaxInt64/2) = [%d, %d), want [%d, %d)", s, e, int64(math.MaxInt64-2), int64(math.MaxInt64))
		}
		// The counter now wraps to negative values: still nothing.
		for range 3 {
			if id, got := b.Next(); got != doublebuf.None {
				t.Fatalf("Next = %d past the end", id)
			}
		}
		// The next lease is handed out as usual.
		close(release)
		synctest.Wait()
		if got := []int64{next(t, b), next(t, b)}; !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("IDs %v after the wrap, want [1 2]", got)
		}
		if st := b.Stats(); st.Issued != 7 {
			t.Fatalf("Issued %d, want 7", st.Issued)
		}
	})
}

// TestInvalidRanges: deliver refuses a range that is empty, negative or
// overlaps one of the same lease; a load that delivered nothing failed and
// is retried, one that delivered a valid range first keeps it.
func TestInvalidRanges(t *testing.T) {
	for _, tc := range []struct {
		bad  []doublebuf.Range
		kept int64 // IDs of the first load kept
	}{
		{nil, 0},
		{[]doublebuf.Range{{Start: 5, End: 5}}, 0},
		{[]doublebuf.Range{{Start: -3, End: 5}}, 0},
		{[]doublebuf.Range{{Start: 1, End: 10}, {Start: 9, End: 20}}, 9},
	} {
		t.Run(fmt.Sprint(tc.bad), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int64
				refused := 0
				cfg := config(nil)
				cfg.Load = func(_ context.Context, deliver func(doublebuf.Range) error) error {
					if calls.Add(1) == 1 {
						for _, r := range tc.bad {
							if err := deliver(r); err != nil {
								refused++
								return err
							}
						}
						return nil
					}
					return deliver(doublebuf.Range{Start: 100, End: 200})
				}
				b := newBuffer(t, cfg)
				want := int64(100)
				if tc.kept > 0 {
					want = 1
				}
				if id := next(t, b); id != want {
					t.Fatalf("ID %d, want %d", id, want)
				}
				st := b.Stats()
				cur := st.Leases[st.Pos]
				if tc.kept > 0 && (refused != 1 || st.LoadErrors != 0 || cur.Start != 1 || cur.End-cur.Start != tc.kept) ||
					tc.kept == 0 && (st.LoadErrors != 1 || st.Loads != 1 || st.Leased != 100 || refused != min(len(tc.bad), 1)) {
					t.Fatalf("stats %+v, %d refused", st, refused)
				}
			})
		})
	}
}

// TestRangesHandedOutAsTheyArrive: a lease of several ranges is handed out
// range by range as they arrive, in that order: a caller that ran out waits
// for the next range, not for the whole lease; and the prefetch mark,
// placed once the lease is complete, starts the next load at once if takes
// passed it meanwhile.
func TestRangesHandedOutAsTheyArrive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(10)
		src.parts = 3
		src.gate = make(chan struct{})
		b := newBuffer(t, config(src))
		got := make(chan []int64)
		go func() {
			var ids []int64
			for range 25 {
				ids = append(ids, next(t, b))
			}
			got <- ids
		}()
		src.gate <- struct{}{} // [1, 11)
		synctest.Wait()
		if st := b.Stats(); st.Issued != 10 || st.Loads != 0 || !st.Loading {
			t.Fatalf("after the first range: %+v, want its 10 IDs handed out while the lease loads", st)
		}
		src.gate <- struct{}{} // [11, 21)
		src.gate <- struct{}{} // [21, 31): the lease is complete
		ids := <-got
		for i, id := range ids {
			if id != int64(i+1) {
				t.Fatalf("IDs %v, want 1..25 in order", ids)
			}
		}
		// 10% of 30 is ID 4, long passed: the next load started when the
		// lease completed.
		synctest.Wait()
		if n := src.Calls(); n != 2 {
			t.Fatalf("%d loads, want the second started at completion", n)
		}
	})
}

// TestNextDoesNotAllocate: the hot path is one atomic add.
func TestNextDoesNotAllocate(t *testing.T) {
	b := newBuffer(t, config(newSource(1_000_000)))
	next(t, b)
	for b.Stats().Loads < 2 { // past the mark: the next lease is in
		for range 200_000 {
			next(t, b)
		}
	}
	if n := testing.AllocsPerRun(10_000, func() { b.Next() }); n != 0 {
		t.Fatalf("Next allocates %.1f times per call", n)
	}
}

func BenchmarkNext(b *testing.B) {
	buf := doublebuf.New(config(newSource(1 << 40)))
	defer buf.Stop(errors.New("done"))
	b.ReportAllocs()
	for b.Loop() {
		_, got := buf.Next()
		if got == doublebuf.PrefetchDue {
			buf.Prefetch()
		}
		if got == doublebuf.None {
			if _, _, err := buf.Take(context.Background(), 1, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}
