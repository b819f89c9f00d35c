package leaftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

// createShaped creates a tag with a shape in st.
func createShaped(t *testing.T, st leaf.SegmentStore, a leaf.Alloc, shape leaf.TagShape) {
	t.Helper()
	sh, ok := st.(leaf.TagShaper)
	if !ok {
		t.Fatalf("store %T keeps no shapes", st)
	}
	if err := sh.CreateShapedTag(context.Background(), a, shape); err != nil {
		t.Fatalf("create tag %q as %v: %v", a.Tag, shape, err)
	}
}

// PeriodicSegment checks periodic tags on a store shared by three
// generators (three servers), on injected clocks: the hammer across a
// period boundary, and pruning.
func PeriodicSegment(t *testing.T, open Opener) {
	t.Run("Hammer", func(t *testing.T) { periodicHammer(t, open) })
	t.Run("Prune", func(t *testing.T) { periodicPrune(t, open) })
}

// shanghai is the zone of the periodic tests: its midnight is not UTC's.
func shanghai(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// periodID is an ID and the period it was issued in.
type periodID struct {
	key string
	id  int64
}

// periodicHammer runs concurrent clients on three generators sharing one
// store while the clock crosses two midnights in the tag's zone; one server's
// clock is 2s ahead, so around midnight it issues in the new day while the
// others still issue in the old one. Every (period, ID) pair must be
// unique, each period must start at the start value, IDs of a batch or a
// range belong to one period, and the period each answer names is the one
// the server's own clock was in.
func periodicHammer(t *testing.T, open Opener) {
	const (
		start   = 1000
		step    = 40
		clients = 6 // per server
	)
	loc := shanghai(t)
	tag := uniqueTag("daily")
	clk := testutil.NewClock(time.Date(2026, 11, 23, 23, 59, 50, 0, loc))
	offsets := []time.Duration{0, 0, 2 * time.Second}
	gens := make([]*segment.Generator, len(offsets))
	var st leaf.SegmentStore
	for i, off := range offsets {
		gens[i], st = startGenerator(t, open, segmentSettings(func(s *segment.Config) {
			s.Now = clk.Offset(off)
			s.MaxStep = 4 * step
			s.WaitTimeout = 30 * time.Second
		}))
		if i == 0 {
			createShaped(t, st, leaf.Alloc{Tag: tag, MaxID: start, Step: step},
				leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai"})
		}
	}
	days := []string{"20261123", "20261124", "20261125"}
	// Two midnights, 20s of clock around each: the third day evicts the
	// first from every server's memory while requests are in flight.
	jumpAt := time.Date(2026, 11, 24, 0, 0, 10, 0, loc)
	jumpTo := time.Date(2026, 11, 24, 23, 59, 50, 0, loc)
	end := time.Date(2026, 11, 25, 0, 0, 10, 0, loc)

	var (
		mu     sync.Mutex
		seen   = map[periodID]int{}
		issued atomic.Int64
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	record := func(g int, key string, ids ...int64) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			seen[periodID{key, id}]++
		}
		issued.Add(int64(len(ids)))
	}
	for gi, g := range gens {
		for c := range clients {
			wg.Go(func() {
				ctx := context.Background()
				for i := 0; !stop.Load(); i++ {
					before := clk.Offset(offsets[gi])()
					var (
						key string
						ids []int64
						err error
					)
					switch (c + i) % 3 {
					case 0:
						var id int64
						id, key, err = g.NextIDPeriod(ctx, tag)
						ids = []int64{id}
					case 1:
						ids, key, err = g.NextIDsPeriod(ctx, tag, 7, nil)
						if err == nil {
							if cerr := leaf.ValidateIDs(ids, 7); cerr != nil {
								t.Errorf("batch in period %s: %v", key, cerr)
							}
						}
					case 2:
						var s, e int64
						s, e, key, err = g.NextRangePeriod(ctx, tag, 5)
						for id := s; id < e; id++ {
							ids = append(ids, id)
						}
					}
					if err != nil {
						t.Errorf("server %d: %v", gi, err)
						return
					}
					after := clk.Offset(offsets[gi])()
					// The period named is the one the server's clock was in
					// at some moment of the request.
					if k0, k1 := tagshape.PeriodKey(leaf.PeriodDay, before.In(loc)), tagshape.PeriodKey(leaf.PeriodDay, after.In(loc)); key != k0 && key != k1 {
						t.Errorf("server %d: period %s for a request between %v and %v", gi, key, before, after)
						return
					}
					record(gi, key, ids...)
				}
			})
		}
	}
	// The clock moves on by progress, not by wall time: 250ms of clock
	// per 300 IDs issued, so that every period sees many reserves.
	for now := clk.Now(); now.Before(end) && !t.Failed(); now = clk.Now() {
		target := issued.Load() + 300
		for issued.Load() < target && !t.Failed() {
			time.Sleep(100 * time.Microsecond)
		}
		clk.Add(250 * time.Millisecond)
		if !clk.Now().Before(jumpAt) && clk.Now().Before(jumpTo) {
			clk.Set(jumpTo)
		}
	}
	stop.Store(true)
	wg.Wait()

	mins := map[string]int64{}
	counts := map[string]int{}
	for p, n := range seen {
		if n > 1 {
			t.Errorf("period %s ID %d issued %d times", p.key, p.id, n)
		}
		if !slices.Contains(days, p.key) {
			t.Errorf("ID %d in period %s, want one of %s", p.id, p.key, days)
		}
		if m, ok := mins[p.key]; !ok || p.id < m {
			mins[p.key] = p.id
		}
		counts[p.key]++
	}
	for _, key := range days {
		if counts[key] == 0 {
			t.Errorf("no IDs issued in period %s", key)
			continue
		}
		if mins[key] != start {
			t.Errorf("period %s starts at %d, want the start value %d", key, mins[key], start)
		}
		t.Logf("period %s: %d IDs from %d", key, counts[key], mins[key])
	}
	// The tag's own row holds the start value: never reserved from.
	if a, err := st.Alloc(context.Background(), tag); err != nil || a.MaxID != start {
		t.Errorf("the tag's row: %+v, %v; want max_id %d", a, err, start)
	}
}

// periodicPrune: pruning removes the periods more than keep back and no
// others; a pruned period is not restarted by a server whose clock is
// behind (it continues above the IDs issued in it), and the periods kept go
// on where they were.
func periodicPrune(t *testing.T, open Opener) {
	ctx := context.Background()
	loc := shanghai(t)
	tag := uniqueTag("prune")
	clk := testutil.NewClock(time.Date(2026, 11, 20, 12, 0, 0, 0, loc))
	late := testutil.NewClock(clk.Now())
	g, st := startGenerator(t, open, segmentSettings(func(s *segment.Config) { s.Now = clk.Now }))
	lateGen, _ := startGenerator(t, open, segmentSettings(func(s *segment.Config) { s.Now = late.Now }))
	createShaped(t, st, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}, leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai"})
	last := map[string]int64{}
	for day := range 5 { // 20261120 .. 20261124
		for range 3 {
			id, key, err := g.NextIDPeriod(ctx, tag)
			if err != nil {
				t.Fatal(err)
			}
			last[key] = id
		}
		if day < 4 {
			clk.Add(24 * time.Hour)
		}
	}
	ps := st.(leaf.PeriodStore)
	keys := func() []string {
		t.Helper()
		rows, err := ps.Periods(ctx, tag, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return periodKeys(rows)
	}
	if got := fmt.Sprint(keys()); got != "[20261124 20261123 20261122 20261121 20261120]" {
		t.Fatalf("periods before pruning: %s", got)
	}
	for _, bad := range []leaf.Prune{{Keep: 1}, {Keep: 0}, {Before: "20261124"}, {Before: "20261125"}, {Before: "202611"}, {Keep: 2, Before: "20261120"}} {
		_, err := g.PrunePeriods(ctx, tag, bad)
		if !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("PrunePeriods(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := g.PrunePeriods(ctx, "no-such-tag", leaf.Prune{Keep: 2}); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Errorf("PrunePeriods of a missing tag: %v, want ErrTagNotFound", err)
	}
	res, err := g.PrunePeriods(ctx, tag, leaf.Prune{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Before != "20261122" || fmt.Sprint(periodKeys(res.Removed)) != "[20261120 20261121]" {
		t.Errorf("keep 3 on 20261124 removed %v below %s, want 20261120 and 20261121 below 20261122", periodKeys(res.Removed), res.Before)
	}
	res, err = g.PrunePeriods(ctx, tag, leaf.Prune{Before: "20261123"})
	if err != nil || fmt.Sprint(periodKeys(res.Removed)) != "[20261122]" {
		t.Errorf("before 20261123 removed %v, %v; want 20261122", periodKeys(res.Removed), err)
	}
	if got := fmt.Sprint(keys()); got != "[20261124 20261123]" {
		t.Errorf("periods after pruning: %s", got)
	}
	// A server whose clock says 20261121 continues that pruned period
	// above its last ID instead of starting it again at 1.
	late.Set(time.Date(2026, 11, 21, 12, 0, 0, 0, loc))
	id, key, err := lateGen.NextIDPeriod(ctx, tag)
	if err != nil || key != "20261121" || id <= last["20261121"] {
		t.Errorf("a late server in pruned period 20261121: ID %d %s, %v; want above %d", id, key, err, last["20261121"])
	}
	// The periods kept go on where they were.
	id, key, err = g.NextIDPeriod(ctx, tag)
	if err != nil || key != "20261124" || id != last["20261124"]+1 {
		t.Errorf("after pruning: ID %d %s, %v; want %d in 20261124", id, key, err, last["20261124"]+1)
	}
}
