package snowflake

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// fakeSource is a grant source the test drives: it publishes the grants the
// test sets, and extends the limit as onExtend says.
type fakeSource struct {
	g        atomic.Pointer[grant]
	extends  atomic.Int64
	onExtend func(ctx context.Context) error // nil: refuse
}

func (f *fakeSource) current() *grant { return f.g.Load() }

func (f *fakeSource) extend(ctx context.Context) error {
	f.extends.Add(1)
	if f.onExtend == nil {
		return errors.New("no extension")
	}
	return f.onExtend(ctx)
}

// manualClock reads a time the test sets.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) SetMs(ms int64) { c.ns.Store(ms * int64(time.Millisecond)) }
func (c *manualClock) Ms() int64      { return c.Now().UnixMilli() }

func testIssuer(src grantSource, now func() time.Time) *issuer {
	s := DefaultConfig()
	s.Now = now
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return newIssuer(s, src)
}

func decode(t *testing.T, id int64) leaf.SnowflakeParts {
	t.Helper()
	p, err := LeafLayout.Decode(id)
	if err != nil {
		t.Fatalf("Decode(%d): %v", id, err)
	}
	return p
}

// The issuer stamps only what the grant allows: its worker ID, no
// millisecond at or after its limit or its lease's end, none before its
// floor, nothing at all once it stops; where the limit blocks it asks the
// source for more, and where the source cannot, answers ErrNotReady.
func TestIssuerObeysGrant(t *testing.T) {
	const base = int64(1_700_000_000_000)
	leaseEnd := time.UnixMilli(base + 10)
	for _, tc := range []struct {
		name    string
		gr      grant
		clockMs int64
		want    error // nil: an ID is issued
		extends int64 // calls to extend expected
		atLeast int64 // the ID's millisecond is at least this
	}{
		{name: "within the limit", gr: grant{worker: 5, limit: base + 10}, clockMs: base, atLeast: base},
		{name: "at the limit", gr: grant{worker: 5, limit: base + 10}, clockMs: base + 10, want: leaf.ErrNotReady, extends: 1},
		{name: "before the lease's end", gr: grant{worker: 5, limit: base + 100, leased: true, leaseEnd: leaseEnd}, clockMs: base + 9, atLeast: base + 9},
		{name: "at the lease's end", gr: grant{worker: 5, limit: base + 100, leased: true, leaseEnd: leaseEnd}, clockMs: base + 10, want: leaf.ErrNotReady, extends: 1},
		{name: "lost", gr: grant{worker: 5, limit: base + 100, stop: errLost}, clockMs: base, want: leaf.ErrWorkerLost},
		{name: "closed", gr: grant{worker: 5, limit: base + 100, stop: errClosed}, clockMs: base, want: leaf.ErrClosed},
		// The claim's mark is 100ms ahead, more than MaxBackwards: refused
		// as a clock behind the last ID is.
		{name: "floor ahead", gr: grant{worker: 5, floor: base + 100, limit: base + 1000}, clockMs: base, want: leaf.ErrClockBackwards},
		{name: "floor reached", gr: grant{worker: 5, floor: base + 100, limit: base + 1000}, clockMs: base + 100, atLeast: base + 100},
		{name: "past the layout's end", gr: grant{worker: 5, limit: LeafLayout.End()}, clockMs: LeafLayout.End(), want: leaf.ErrNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock manualClock
			clock.SetMs(tc.clockMs)
			src := &fakeSource{}
			src.g.Store(&tc.gr)
			is := testIssuer(src, clock.Now)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			id, err := is.nextID(ctx)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("nextID = %d, %v; want %v", id, err, tc.want)
				}
			} else if err != nil {
				t.Fatalf("nextID: %v", err)
			} else if p := decode(t, id); p.WorkerID != tc.gr.worker || p.Timestamp < tc.atLeast || p.Timestamp >= tc.gr.limit {
				t.Fatalf("ID %d = %+v; want worker %d, time in [%d, %d)", id, p, tc.gr.worker, tc.atLeast, tc.gr.limit)
			}
			if n := src.extends.Load(); n != tc.extends {
				t.Errorf("extend called %d times, want %d", n, tc.extends)
			}
		})
	}
}

// An extension that moves the limit lets the request that asked for it go
// on; the ID is below the new limit.
func TestIssuerExtends(t *testing.T) {
	var clock manualClock
	clock.SetMs(1_700_000_000_000)
	src := &fakeSource{}
	src.g.Store(&grant{worker: 1, limit: clock.Ms()})
	src.onExtend = func(context.Context) error {
		src.g.Store(&grant{worker: 1, limit: clock.Ms() + 1})
		return nil
	}
	is := testIssuer(src, clock.Now)
	ids, err := is.fill(t.Context(), nil, 3, nil)
	if err != nil || len(ids) != 3 {
		t.Fatalf("fill = %v, %v", ids, err)
	}
	if src.extends.Load() != 1 {
		t.Errorf("extend called %d times, want 1", src.extends.Load())
	}
	for _, id := range ids {
		if p := decode(t, id); p.Timestamp != clock.Ms() {
			t.Errorf("ID %d at %d, want %d", id, p.Timestamp, clock.Ms())
		}
	}
}

// A clock that steps back further than MaxBackwards is refused until it
// passes the last ID again; no ID repeats, and each is above the last.
func TestIssuerRollback(t *testing.T) {
	var clock manualClock
	base := int64(1_700_000_000_000)
	clock.SetMs(base)
	src := &fakeSource{}
	src.g.Store(&grant{worker: 2, limit: base + 1000})
	is := testIssuer(src, clock.Now)
	var last int64
	for _, step := range []struct {
		ms     int64
		refuse bool
	}{{base, false}, {base + 20, false}, {base + 10, true}, {base - 500, true}, {base + 20, false}, {base + 21, false}} {
		clock.SetMs(step.ms)
		id, err := is.nextID(t.Context())
		if step.refuse {
			if !errors.Is(err, leaf.ErrClockBackwards) {
				t.Fatalf("clock at %d after %d: %v, want ErrClockBackwards", step.ms, decode(t, last).Timestamp, err)
			}
			continue
		}
		if err != nil || id <= last {
			t.Fatalf("clock at %d: ID %d (%v) after %d", step.ms, id, err, last)
		}
		last = id
	}
	if d := is.degraded(); d != "" {
		t.Errorf("degraded %q once the clock is back", d)
	}
}

// Hammer: 8 goroutines draw single IDs and batches from one issuer while
// the grant's limit stays at most two milliseconds ahead of the clock, so
// that the grant changes under them all the time and most milliseconds end
// in an extension. Every ID is unique, each goroutine's strictly increase,
// and once a stop grant is published lastMs is final: no ID drawn is later.
func TestIssuerHammer(t *testing.T) {
	src := &fakeSource{}
	src.g.Store(&grant{worker: 9, limit: time.Now().UnixMilli() + 2})
	var mu sync.Mutex // serialises the grants published
	publish := func(limit int64) {
		mu.Lock()
		defer mu.Unlock()
		if cur := src.current(); cur.stop == nil {
			src.g.Store(&grant{worker: 9, limit: max(cur.limit, limit)})
		}
	}
	src.onExtend = func(context.Context) error {
		publish(time.Now().UnixMilli() + 2)
		if src.current().stop != nil {
			return src.current().stop
		}
		return nil
	}
	is := testIssuer(src, time.Now)

	const goroutines, per = 8, 25_000
	results := make([][]int64, goroutines)
	var notReady atomic.Int64
	var wg sync.WaitGroup
	for k := range goroutines {
		wg.Go(func() {
			ids := make([]int64, 0, per)
			for len(ids) < per {
				var err error
				if len(ids)%3 == 0 {
					ids, err = is.fill(t.Context(), ids, len(ids)+min(50, per-len(ids)), nil)
				} else {
					var id int64
					if id, err = is.nextID(t.Context()); err == nil {
						ids = append(ids, id)
					}
				}
				if errors.Is(err, leaf.ErrNotReady) {
					// The extension fell behind the clock three times in a
					// row (a goroutine descheduled): the documented answer.
					notReady.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("goroutine %d: %v", k, err)
					return
				}
			}
			results[k] = ids
		})
	}
	wg.Wait()
	seen := make(map[int64]bool, goroutines*per)
	for k, ids := range results {
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("goroutine %d: ID %d after %d", k, id, ids[i-1])
			}
			if seen[id] {
				t.Fatalf("duplicate ID %d", id)
			}
			seen[id] = true
		}
	}

	// The stop barrier, with issuers running.
	var after [4][]int64
	var drawing sync.WaitGroup
	drawing.Add(len(after))
	for k := range after {
		wg.Go(func() {
			for {
				if len(after[k]) == 100 {
					drawing.Done()
				}
				id, err := is.nextID(t.Context())
				if err != nil {
					if !errors.Is(err, leaf.ErrClosed) {
						t.Errorf("after stop: %v", err)
					}
					return
				}
				after[k] = append(after[k], id)
			}
		})
	}
	drawing.Wait()
	mu.Lock()
	src.g.Store(&grant{worker: 9, stop: errClosed})
	mu.Unlock()
	final := is.lastMs()
	wg.Wait()
	for _, ids := range after {
		for _, id := range ids {
			if p := decode(t, id); p.Timestamp > final {
				t.Fatalf("ID %d stamped %d, after lastMs %d returned", id, p.Timestamp, final)
			}
		}
	}
	t.Logf("%d unique IDs, %d extensions, %d answers ErrNotReady", len(seen), src.extends.Load(), notReady.Load())
}
