package leaftest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

// Hammer configures HammerSegment.
type Hammer struct {
	Instances  int   // generators, each on its own store connection pool (like servers)
	Goroutines int   // per instance
	Total      int   // IDs to draw in all
	Step       int   // the tag's step; the adaptive step is pinned to it to force many reloads
	Batch      int   // when > 1, every fourth call asks for a batch of this size
	Start      int64 // the tag's first ID; default 1
	// OpaqueBits, when set, makes the tag opaque under OpaqueKey (every
	// instance holds it): IDs are then checked unique, within the width,
	// and decoded back to distinct raw IDs, but not increasing.
	OpaqueBits int
	OpaqueKey  []byte
}

// HammerSegment draws h.Total IDs for one tag from h.Instances generators
// sharing one database, h.Goroutines goroutines each, and fails the test on
// any duplicate, any ID below the tag's start, or any ID not greater than
// every ID its instance had returned before the call began (per-instance
// strict increase, checked without serialising the callers).
func HammerSegment(t *testing.T, open func() (leaf.SegmentStore, error), h Hammer) {
	t.Helper()
	if h.Start == 0 {
		h.Start = 1
	}
	ctx := context.Background()
	tag := fmt.Sprintf("hammer-%d", time.Now().UnixNano())
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
			a := leaf.Alloc{Tag: tag, MaxID: h.Start, Step: h.Step}
			var err error
			if h.OpaqueBits != 0 {
				shaper, ok := st.(leaf.TagShaper)
				if !ok {
					t.Fatalf("store %T keeps no shapes", st)
				}
				err = shaper.CreateShapedTag(ctx, a, leaf.TagShape{OpaqueBits: h.OpaqueBits, KeyCheck: tagshape.KeyCheck(h.OpaqueKey)})
			} else {
				err = admin.CreateTag(ctx, a)
			}
			if err != nil {
				t.Fatalf("create tag: %v", err)
			}
		}
		g, err := segment.New(ctx, segmentSettings(func(s *segment.Config) {
			s.Store, s.MaxStep, s.WaitTimeout, s.GiveBack = st, h.Step, 30*time.Second, false
			s.OpaqueKey = h.OpaqueKey
		}))
		if err != nil {
			t.Fatalf("new generator %d: %v", i, err)
		}
		gens[i] = g
		t.Cleanup(func() { g.Close(context.Background()) })
	}

	var (
		drawn    atomic.Int64
		failures atomic.Int64
		mu       sync.Mutex
		all      = make([]int64, 0, h.Total+h.Batch)
		wg       sync.WaitGroup
	)
	maxSeen := make([]atomic.Int64, h.Instances)
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	for i, g := range gens {
		for w := range h.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []int64
				var buf []int64
				for call := 0; drawn.Load() < int64(h.Total) && failures.Load() == 0; call++ {
					before := maxSeen[i].Load()
					buf = buf[:0]
					var err error
					if h.Batch > 1 && call%4 == 3 {
						buf, err = g.NextIDs(ctx, tag, h.Batch, buf)
					} else {
						var id int64
						id, err = g.NextID(ctx, tag)
						buf = append(buf, id)
					}
					if err != nil {
						fail("instance %d goroutine %d: %v", i, w, err)
						return
					}
					if h.OpaqueBits != 0 {
						for _, id := range buf {
							if id < 1 || id > tagshape.MaxOpaque(h.OpaqueBits) {
								fail("instance %d: opaque ID %d outside 1..2^%d-1", i, id, h.OpaqueBits)
							}
						}
						mine = append(mine, buf...)
						drawn.Add(int64(len(buf)))
						continue
					}
					for j, id := range buf {
						if id < h.Start {
							fail("instance %d: ID %d below start %d", i, id, h.Start)
						}
						if id <= before {
							fail("instance %d: ID %d not above %d, returned earlier by the same instance", i, id, before)
						}
						if j > 0 && id <= buf[j-1] {
							fail("instance %d: batch not increasing: %d after %d", i, id, buf[j-1])
						}
					}
					last := buf[len(buf)-1]
					for {
						m := maxSeen[i].Load()
						if last <= m || maxSeen[i].CompareAndSwap(m, last) {
							break
						}
					}
					mine = append(mine, buf...)
					drawn.Add(int64(len(buf)))
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(all) < h.Total {
		t.Fatalf("drew %d IDs, want at least %d", len(all), h.Total)
	}
	testutil.CheckUnique(t, all)
	if h.OpaqueBits != 0 {
		// Every opaque ID decodes to a raw ID the row issued, and distinct
		// IDs to distinct raw ones: the permutation is the tag's, on every
		// instance.
		perm, err := tagshape.NewPerm(h.OpaqueKey, tag, h.OpaqueBits)
		if err != nil {
			t.Fatal(err)
		}
		raws := make([]int64, 0, len(all))
		for i, id := range all {
			raw, err := perm.Decode(id)
			if err != nil || raw < h.Start {
				t.Fatalf("opaque ID %d decodes to %d (%v), below the start %d", id, raw, err, h.Start)
			}
			if i < 20 { // and through the generator, which reads the row
				if d, err := gens[i%len(gens)].Decode(ctx, tag, strconv.FormatInt(id, 10)); err != nil || d.Raw != raw {
					t.Fatalf("generator decodes %d to %+v (%v), want raw %d", id, d, err, raw)
				}
			}
			raws = append(raws, raw)
		}
		testutil.CheckUnique(t, raws)
		if slices.Equal(raws, all) {
			t.Fatalf("opaque IDs are the raw ones")
		}
	}
	var loads uint64
	for _, g := range gens {
		for _, st := range g.Status() {
			if st.Tag == tag {
				loads += st.Loads
			}
		}
	}
	t.Logf("%d unique IDs from %d instances x %d goroutines, %d ranges of %d reserved, IDs in [%d, %d]",
		len(all), h.Instances, h.Goroutines, loads, h.Step, all[0], all[len(all)-1])
}
