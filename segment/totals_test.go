package segment_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// TestTotalsNeverGoDown: the totals are the one source of the counters over
// all tags (metrics, the status summary and the monitor's history read
// them), so they must behave as counters while the generator drops idle
// tags and makes them again: read all along, no field ever goes down, and
// in the end Issued is exactly the IDs the callers got. It caught LoadSeconds
// going down by a rounding when a dropped buffer's float seconds were added
// to the others in another order (the load time is summed in integer
// nanoseconds since). The race it cannot reach reliably, a buffer dropped
// between the reads of the buffers in use and of the dropped ones' counters,
// is closed by reading both under one hold of the generator's lock.
func TestTotalsNeverGoDown(t *testing.T) {
	st, err := sqlite.Open(bg, testutil.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const tags = 8
	for i := range tags {
		if err := st.CreateTag(bg, leaf.Alloc{Tag: fmt.Sprint("t", i), MaxID: 1, Step: 50}); err != nil {
			t.Fatal(err)
		}
	}
	g := newGen(t, settings(st, func(s *segment.Config) { s.IdleTimeout = 20 * time.Millisecond }))

	var (
		got     atomic.Uint64 // IDs the callers were given
		stop    = make(chan struct{})
		workers sync.WaitGroup
	)
	for w := range tags {
		workers.Go(func() {
			tag := fmt.Sprint("t", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch _, err := g.NextID(bg, tag); {
				case errors.Is(err, leaf.ErrNotReady):
					// A range late on a busy machine: no ID given.
				case err != nil:
					t.Errorf("NextID(%s): %v", tag, err)
					return
				default:
					got.Add(1)
				}
				if i%200 == 199 {
					// Idle past IdleTimeout now and then: the sweep drops
					// the tag's state, and the next call makes it again.
					// The idleness is the load being simulated, and in
					// real time on purpose: on a bubble's clock, which
					// moves only when every goroutine is blocked, the
					// reads of Totals would wake mostly while every
					// worker pauses, seldom beside the calls and drops
					// they must stay monotonic across.
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}

	monotonic := func(prev, cur leaf.SegmentTotals) error {
		for _, f := range []struct {
			name      string
			prev, cur uint64
		}{
			{"Issued", prev.Issued, cur.Issued}, {"Loads", prev.Loads, cur.Loads},
			{"LoadErrors", prev.LoadErrors, cur.LoadErrors}, {"Waits", prev.Waits, cur.Waits},
			{"GivenBack", prev.GivenBack, cur.GivenBack}, {"Dropped", prev.Dropped, cur.Dropped},
		} {
			if f.cur < f.prev {
				return fmt.Errorf("%s went down from %d to %d", f.name, f.prev, f.cur)
			}
		}
		if cur.LoadSeconds < prev.LoadSeconds {
			return fmt.Errorf("LoadSeconds went down from %v to %v", prev.LoadSeconds, cur.LoadSeconds)
		}
		if len(cur.LoadLatency.Counts) != len(cur.LoadLatency.Bounds) || len(cur.LoadLatency.Bounds) == 0 {
			return fmt.Errorf("LoadLatency has %d bounds and %d counts, want every bound", len(cur.LoadLatency.Bounds), len(cur.LoadLatency.Counts))
		}
		for i := range prev.LoadLatency.Counts {
			if cur.LoadLatency.Counts[i] < prev.LoadLatency.Counts[i] {
				return fmt.Errorf("LoadLatency bucket %d went down from %d to %d", i, prev.LoadLatency.Counts[i], cur.LoadLatency.Counts[i])
			}
		}
		return nil
	}
	prev := g.Totals()
	reads := 0
	check := func() bool {
		cur := g.Totals()
		reads++
		if err := monotonic(prev, cur); err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		prev = cur
		return cur.Dropped >= 2*tags && cur.Rate > 0
	}
	// Until tags were dropped (and made again) a few times over, and the
	// rate over all tags was sampled.
	testutil.WaitFor(t, "tags dropped twice each and a rate over all tags", check)
	close(stop)
	workers.Wait()
	check()
	if tot := g.Totals(); tot.Issued != got.Load() {
		t.Errorf("Totals().Issued = %d, the callers got %d IDs", tot.Issued, got.Load())
	}
	t.Logf("%d reads; %+v", reads, prev)
}
