package leaftest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

// segmentSettings is segment.DefaultConfig with a quiet logger (unless
// -v) and tweak applied; the helpers that open the store set Store.
func segmentSettings(tweak func(*segment.Config)) segment.Config {
	s := segment.DefaultConfig()
	s.Logger = quietLogger()
	if tweak != nil {
		tweak(&s)
	}
	return s
}

// startGenerator opens a store and a generator on it, closed at cleanup.
func startGenerator(t *testing.T, open Opener, s segment.Config) (*segment.Generator, leaf.SegmentStore) {
	t.Helper()
	st, err := open()
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	s.Store = st
	g, err := segment.New(context.Background(), s)
	if err != nil {
		t.Fatalf("new generator: %v", err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	return g, st
}

func createTag(t *testing.T, st leaf.SegmentStore, a leaf.Alloc) {
	t.Helper()
	admin, ok := st.(leaf.SegmentAdmin)
	if !ok {
		t.Fatalf("store %T has no admin", st)
	}
	if err := admin.CreateTag(context.Background(), a); err != nil {
		t.Fatalf("create tag %q: %v", a.Tag, err)
	}
}

// drawWhileClosing draws IDs from g with several goroutines until g is closed
// under them, and returns every ID it got.
func drawWhileClosing(t *testing.T, g *segment.Generator, tag string, close func()) []int64 {
	t.Helper()
	var (
		mu  sync.Mutex
		all []int64
		wg  sync.WaitGroup
	)
	// started is done once every goroutine has drawn 100 IDs or given up.
	var started sync.WaitGroup
	for range 16 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			once := sync.OnceFunc(started.Done)
			defer once()
			defer func() { mu.Lock(); all = append(all, mine...); mu.Unlock() }()
			for i := 0; ; i++ {
				id, err := g.NextID(context.Background(), tag)
				if errors.Is(err, leaf.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("NextID: %v", err)
					return
				}
				mine = append(mine, id)
				if i == 100 {
					once()
				}
			}
		}()
	}
	started.Wait()
	close()
	wg.Wait()
	return all
}

// RestartSegment checks restarts on a real store: after a graceful shutdown
// (with give-back) and after a crash (no give-back), every new ID is greater
// than every ID issued before, including IDs issued while the shutdown was
// under way; after give-back the next ID follows the last one issued.
func RestartSegment(t *testing.T, open Opener) {
	const step = 500
	for _, tc := range []struct {
		name  string
		crash bool
	}{{"graceful", false}, {"crash", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tag := fmt.Sprintf("restart-%d", time.Now().UnixNano())
			// A generous wait: a loaded CI machine must not turn a slow
			// reserve into an error here.
			settings := segmentSettings(func(s *segment.Config) {
				s.MaxStep, s.GiveBack, s.WaitTimeout = step, !tc.crash, 30*time.Second
			})
			a, st := startGenerator(t, open, settings)
			createTag(t, st, leaf.Alloc{Tag: tag, MaxID: 1, Step: step})
			before := drawWhileClosing(t, a, tag, func() {
				if err := a.Close(context.Background()); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			slices.Sort(before)
			for i := 1; i < len(before); i++ {
				if before[i] == before[i-1] {
					t.Fatalf("duplicate ID %d before the restart", before[i])
				}
			}
			last := before[len(before)-1]

			b, _ := startGenerator(t, open, settings)
			first, err := b.NextID(context.Background(), tag)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d IDs before the restart, last %d; first after %d", len(before), last, first)
			if first <= last {
				t.Fatalf("first ID after restart %d is not above the last before, %d", first, last)
			}
			if tc.crash {
				// Leaf's behaviour: the rest of the current and the prefetched range are skipped.
				if first > last+2*step {
					t.Fatalf("first ID after crash %d skips more than two ranges past %d", first, last)
				}
				return
			}
			if first != last+1 {
				t.Fatalf("first ID after a graceful restart %d, want %d (the unused tail given back)", first, last+1)
			}
		})
	}
}

// Proxy is a switchable network path to the store (see internal/testutil.Proxy).
type Proxy interface {
	Down()  // connections cut and refused
	Stall() // connections open, no bytes pass: the store hangs
	Up()
}

// OutageSegment checks store outages on a real store reached through p, both
// a store that refuses connections and one that stops answering: issuing
// continues from the buffers, the generator reports degraded, a request
// fails with ErrNotReady only once both buffers are empty, and issuing
// resumes when the store returns.
func OutageSegment(t *testing.T, open Opener, p Proxy) {
	t.Run("refused", func(t *testing.T) { outage(t, open, p, p.Down) })
	t.Run("hung", func(t *testing.T) { outage(t, open, p, p.Stall) })
}

func outage(t *testing.T, open Opener, p Proxy, fail func()) {
	const step = 1000
	tag := fmt.Sprintf("outage-%d", time.Now().UnixNano())
	g, st := startGenerator(t, open, segmentSettings(func(s *segment.Config) {
		s.MaxStep = step
		s.HealthInterval = 20 * time.Millisecond
		s.StoreTimeout = time.Second
		s.RetryBackoff = 10 * time.Millisecond
		s.MaxRetryBackoff = 100 * time.Millisecond
	}))
	createTag(t, st, leaf.Alloc{Tag: tag, MaxID: 1, Step: step})
	ctx := context.Background()
	var last int64
	draw := func(n int) {
		t.Helper()
		for range n {
			id, err := g.NextID(ctx, tag)
			if err != nil {
				t.Fatalf("NextID after %d: %v", last, err)
			}
			if id <= last {
				t.Fatalf("ID %d after %d", id, last)
			}
			last = id
		}
	}
	draw(200)
	testutil.WaitFor(t, "next range loaded", func() bool {
		s := statusOf(g, tag)
		return s.NextReady
	})
	fail()
	testutil.WaitFor(t, "degraded", func() bool { return len(g.Degraded()) > 0 })
	t.Logf("degraded: %q", g.Degraded())
	draw(2*step - 200) // the rest of both buffers
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := g.NextID(short, tag)
	cancel()
	if !errors.Is(err, leaf.ErrNotReady) {
		t.Fatalf("with both buffers empty and the store down: %v, want ErrNotReady", err)
	}
	p.Up()
	long, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, err := g.NextID(long, tag)
	if err != nil {
		t.Fatalf("after the store returned: %v", err)
	}
	if id <= last {
		t.Fatalf("ID %d after the outage is not above %d", id, last)
	}
	testutil.WaitFor(t, "healthy again", func() bool { return len(g.Degraded()) == 0 })
}

func statusOf(g *segment.Generator, tag string) leaf.SegmentStatus {
	for _, s := range g.Status() {
		if s.Tag == tag {
			return s
		}
	}
	return leaf.SegmentStatus{}
}
