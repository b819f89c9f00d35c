package leaftest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/segment"
)

// IdleHammer configures HammerIdle.
type IdleHammer struct {
	Instances  int           // generators, each on its own store connection pool; default 2
	Goroutines int           // per instance; default 12
	Tags       int           // default 4
	Step       int           // each tag's step, and the cap of the adaptive step; default 20
	Idle       time.Duration // the generators' IdleTimeout; default 5ms
	Duration   time.Duration // how long to draw; default 1s
	// GiveBack makes the idle sweep give the tail of a dropped tag's range
	// back (segment.Config.GiveBack); without it the range is abandoned.
	GiveBack bool
}

// HammerIdle issues IDs for a few tags from several generators sharing one
// database while their states are dropped as idle and made again: each
// instance's goroutines use a window of the tags that moves every few
// IdleTimeouts, so the others idle and are dropped (their tails given back,
// or abandoned), while now and then a stray request for any tag races the
// sweep. Every ID must be unique per tag, and each instance's IDs of a tag
// must rise across calls, as without drops.
func HammerIdle(t *testing.T, open Opener, h IdleHammer) {
	t.Helper()
	if h.Instances == 0 {
		h.Instances = 2
	}
	if h.Goroutines == 0 {
		h.Goroutines = 12
	}
	if h.Tags == 0 {
		h.Tags = 4
	}
	if h.Step == 0 {
		h.Step = 20
	}
	if h.Idle == 0 {
		h.Idle = 5 * time.Millisecond
	}
	if h.Duration == 0 {
		h.Duration = time.Second
	}
	ctx := context.Background()
	tags := make([]string, h.Tags)
	for i := range tags {
		tags[i] = fmt.Sprintf("idle-%d-%d", time.Now().UnixNano(), i)
	}
	gens := make([]*segment.Generator, h.Instances)
	for i := range gens {
		st, err := open()
		if err != nil {
			t.Fatalf("open store %d: %v", i, err)
		}
		t.Cleanup(func() { st.Close() })
		if i == 0 {
			admin, ok := st.(leaf.SegmentAdmin)
			if !ok {
				t.Fatalf("store %T has no admin", st)
			}
			for _, tag := range tags {
				if err := admin.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: h.Step}); err != nil {
					t.Fatalf("create tag: %v", err)
				}
			}
		}
		set := segmentSettings(func(s *segment.Config) {
			s.Store, s.MaxStep, s.WaitTimeout, s.IdleTimeout, s.GiveBack = st, h.Step, 30*time.Second, h.Idle, h.GiveBack
		})
		g, err := segment.New(ctx, set)
		if err != nil {
			t.Fatalf("new generator %d: %v", i, err)
		}
		gens[i] = g
		t.Cleanup(func() { g.Close(context.Background()) })
	}

	var (
		failures atomic.Int64
		mu       sync.Mutex
		all      = make([][]int64, h.Tags)
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	// maxSeen[i][k]: the highest ID instance i returned for tag k.
	maxSeen := make([][]atomic.Int64, h.Instances)
	for i := range maxSeen {
		maxSeen[i] = make([]atomic.Int64, h.Tags)
	}
	start := time.Now()
	deadline := start.Add(h.Duration)
	window := 4 * h.Idle
	for i, g := range gens {
		for w := range h.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				mine := make([][]int64, h.Tags)
				var buf []int64
				// Strays are rare enough (about 10 per second per goroutine)
				// that the tags outside the window do go idle.
				stray := time.Now()
				for now := time.Now(); now.Before(deadline) && failures.Load() == 0; now = time.Now() {
					// Two neighbouring tags per window; the rest idle.
					epoch := int(now.Sub(start) / window)
					k := (epoch + i + rng.IntN(2)) % h.Tags
					if now.After(stray) {
						k = rng.IntN(h.Tags) // a stray request, maybe for a dropped tag
						stray = now.Add(time.Duration(rng.Int64N(int64(40 * h.Idle))))
					}
					tag := tags[k]
					before := maxSeen[i][k].Load()
					buf = buf[:0]
					var err error
					switch rng.IntN(4) {
					case 0:
						buf, err = g.NextIDs(ctx, tag, 7, buf)
					case 1:
						var lo, hi int64
						if lo, hi, err = g.NextRange(ctx, tag, 5); err == nil {
							for id := lo; id < hi; id++ {
								buf = append(buf, id)
							}
						}
					default:
						var id int64
						id, err = g.NextID(ctx, tag)
						buf = append(buf, id)
					}
					if err != nil {
						fail("instance %d goroutine %d tag %d: %v", i, w, k, err)
						return
					}
					for j, id := range buf {
						if id < 1 || id <= before || (j > 0 && id <= buf[j-1]) {
							fail("instance %d tag %d: ID %d not above %d, returned earlier by the instance (batch %v)", i, k, id, before, buf)
						}
					}
					last := buf[len(buf)-1]
					for {
						m := maxSeen[i][k].Load()
						if last <= m || maxSeen[i][k].CompareAndSwap(m, last) {
							break
						}
					}
					mine[k] = append(mine[k], buf...)
					if rng.IntN(32) == 0 {
						time.Sleep(time.Duration(rng.Int64N(int64(2 * h.Idle))))
					}
				}
				mu.Lock()
				for k := range mine {
					all[k] = append(all[k], mine[k]...)
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total, dups := 0, 0
	for k, ids := range all {
		slices.Sort(ids)
		for j := 1; j < len(ids); j++ {
			if ids[j] == ids[j-1] {
				if dups < 10 {
					t.Errorf("tag %d: duplicate ID %d", k, ids[j])
				}
				dups++
			}
		}
		total += len(ids)
	}
	if dups > 0 {
		t.Fatalf("%d duplicate IDs among %d", dups, total)
	}
	var dropped, givenBack uint64
	for i, g := range gens {
		tot := g.Totals()
		if tot.Dropped == 0 {
			t.Errorf("instance %d dropped no idle tag state: the test did not test drops", i)
		}
		dropped += tot.Dropped
		givenBack += tot.GivenBack
	}
	if h.GiveBack && givenBack == 0 {
		t.Errorf("no IDs given back by the idle sweeps: the test did not test give-backs")
	}
	t.Logf("%d unique IDs over %d tags from %d instances x %d goroutines; %d tag states dropped as idle, %d IDs given back",
		total, h.Tags, h.Instances, h.Goroutines, dropped, givenBack)
}
