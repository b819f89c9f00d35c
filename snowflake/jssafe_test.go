package snowflake_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/snowflake"
)

// jsSafeGenerator starts a generator of the js-safe layout as worker id.
func jsSafeGenerator(t testing.TB, id int64, port int, now func() time.Time) *snowflake.Generator {
	t.Helper()
	r, err := local.New(local.Config{WorkerID: id, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := settings(r, nil)
	s.Endpoint = ep(port)
	s.Layout = snowflake.JSSafeLayout
	if now != nil {
		s.Now = now
	}
	g, err := snowflake.New(context.Background(), s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// At the last millisecond of the js-safe layout's life, as the largest
// worker ID, the generator issues the millisecond's whole sequence, up to
// Number.MAX_SAFE_INTEGER itself, and once the clock reaches the end it
// issues nothing rather than an ID of 2^53 or more.
func TestJSSafeAtEndOfLife(t *testing.T) {
	l := snowflake.JSSafeLayout
	var clock atomic.Int64
	clock.Store(l.End() - 1)
	r, err := local.New(local.Config{WorkerID: l.MaxWorkerID(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := settings(r, nil)
	s.Layout = l
	s.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
	s.RandomStart = false // the whole sequence, 0..255, in the one millisecond
	s.Lifetime = 0        // the point is to be at the end
	g := start(t, s)
	if got := g.Status().Layout; got != snowflake.LayoutJSSafe {
		t.Errorf("Status().Layout = %q, want %q", got, snowflake.LayoutJSSafe)
	}

	ids, err := g.NextIDs(ctx(t), "", int(l.MaxSequence()+1), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id >= 1<<53 || (i > 0 && id <= ids[i-1]) {
			t.Fatalf("ID %d: %d after %d; want increasing IDs below 2^53", i, id, ids[max(i-1, 0)])
		}
		p, err := g.Decode(id)
		if err != nil || p.Timestamp != l.End()-1 || p.WorkerID != l.MaxWorkerID() || p.Sequence != int64(i) {
			t.Fatalf("ID %d decodes to %+v, %v", id, p, err)
		}
	}
	if last := ids[len(ids)-1]; last != snowflake.MaxJSSafeID {
		t.Fatalf("last ID of the layout's life %d, want Number.MAX_SAFE_INTEGER %d", last, int64(snowflake.MaxJSSafeID))
	}

	clock.Store(l.End())
	if id, err := g.NextID(ctx(t), ""); !errors.Is(err, leaf.ErrNotReady) {
		t.Fatalf("NextID at the layout's end = %d, %v; want ErrNotReady", id, err)
	}
}

// Many goroutines on two js-safe workers (the smallest and the largest
// worker ID), singly and in batches, at the clock's pace: every ID is
// unique, below 2^53, carries its worker ID, and each goroutine's IDs
// increase.
func TestJSSafeHammer(t *testing.T) {
	const goroutines = 8
	perWorker := 150_000 // about 0.6 s of a worker's sequence at 256 IDs/ms
	if testing.Short() {
		perWorker = 20_000
	}
	type result struct {
		worker int64
		ids    []int64
		err    error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	for i, worker := range []int64{0, snowflake.JSSafeLayout.MaxWorkerID()} {
		g := jsSafeGenerator(t, worker, i, nil)
		var left atomic.Int64
		left.Store(int64(perWorker))
		for n := range goroutines {
			wg.Go(func() {
				res := result{worker: worker}
				defer func() { mu.Lock(); results = append(results, res); mu.Unlock() }()
				for k := 0; ; k++ {
					// Batches of 1 to 300: within a millisecond, across the
					// end of one, longer than one.
					want := 1 + (k*37+n*11)%300
					if left.Add(-int64(want)) < 0 {
						return
					}
					var err error
					if want == 1 {
						var id int64
						if id, err = g.NextID(t.Context(), ""); err == nil {
							res.ids = append(res.ids, id)
						}
					} else {
						res.ids, err = g.NextIDs(t.Context(), "", want, res.ids)
					}
					if err != nil {
						res.err = err
						return
					}
				}
			})
		}
	}
	wg.Wait()

	seen := make(map[int64]struct{}, 2*perWorker)
	for _, res := range results {
		if res.err != nil {
			t.Fatalf("worker %d: %v", res.worker, res.err)
		}
		for i, id := range res.ids {
			if id <= 0 || id > snowflake.MaxJSSafeID {
				t.Fatalf("ID %d is not in 1..2^53-1", id)
			}
			if i > 0 && id <= res.ids[i-1] {
				t.Fatalf("worker %d: ID %d after %d", res.worker, id, res.ids[i-1])
			}
			if _, dup := seen[id]; dup {
				t.Fatalf("duplicate ID %d", id)
			}
			seen[id] = struct{}{}
			if p, err := snowflake.JSSafeLayout.Decode(id); err != nil || p.WorkerID != res.worker {
				t.Fatalf("ID %d decodes to %+v, %v; want worker %d", id, p, err, res.worker)
			}
		}
	}
	if len(seen) < 2*perWorker-2*goroutines*300 {
		t.Fatalf("%d IDs, want about %d", len(seen), 2*perWorker)
	}
	t.Logf("%d unique js-safe IDs", len(seen))
}
