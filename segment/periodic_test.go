package segment_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
	"github.com/leafgo/leaf/tagshape"
)

// daily is the shape of the periodic tests' tag.
var daily = leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai"}

func shanghai(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func newPeriodicStore(t *testing.T, a leaf.Alloc) *sqlite.Store {
	t.Helper()
	st := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10})
	if err := st.CreateShapedTag(bg, a, daily); err != nil {
		t.Fatal(err)
	}
	return st
}

func nextPeriod(t *testing.T, g *segment.Generator, tag string) (int64, string) {
	t.Helper()
	id, key, err := g.NextIDPeriod(bg, tag)
	if err != nil {
		t.Fatalf("NextIDPeriod(%q): %v", tag, err)
	}
	return id, key
}

func periodRows(t *testing.T, st leaf.PeriodStore, tag string) map[string]int64 {
	t.Helper()
	rows, err := st.Periods(bg, tag, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Key] = r.MaxID
	}
	return out
}

// A periodic tag restarts at its start value in each period of its zone,
// every answer names the period, and the tag's row is never reserved from.
// The generator holds two periods at most; Close gives each its unused IDs
// back.
func TestPeriodicTag(t *testing.T) {
	loc := shanghai(t)
	st := newPeriodicStore(t, leaf.Alloc{Tag: "orders", MaxID: 100, Step: 10})
	clk := testutil.NewClock(time.Date(2026, 11, 23, 23, 59, 58, 0, loc))
	g, err := segment.New(bg, settings(st, func(s *segment.Config) { s.Now = clk.Now }))
	if err != nil {
		t.Fatal(err)
	}
	if id, key := nextPeriod(t, g, "orders"); id != 100 || key != "20261123" {
		t.Fatalf("first ID %d %q, want 100 in 20261123", id, key)
	}
	if id := next(t, g, "orders"); id != 101 {
		t.Errorf("NextID = %d, want 101", id)
	}
	ids, key, err := g.NextIDsPeriod(bg, "orders", 3, nil)
	if err != nil || !slices.Equal(ids, []int64{102, 103, 104}) || key != "20261123" {
		t.Errorf("NextIDsPeriod = %v %q, %v", ids, key, err)
	}
	s, e, key, err := g.NextRangePeriod(bg, "orders", 2)
	if err != nil || s != 105 || e != 107 || key != "20261123" {
		t.Errorf("NextRangePeriod = [%d, %d) %q, %v", s, e, key, err)
	}
	if _, key := nextPeriod(t, g, "plain"); key != "" {
		t.Errorf("a plain tag's period %q, want none", key)
	}
	// 00:00 in Shanghai is 16:00 UTC: a new period, from the start value.
	clk.Set(time.Date(2026, 11, 24, 0, 0, 0, 0, loc))
	if id, key := nextPeriod(t, g, "orders"); id != 100 || key != "20261124" {
		t.Errorf("first ID of the new day %d %q, want 100 in 20261124", id, key)
	}
	// A batch larger than a range stays in one period.
	ids, key, err = g.NextIDsPeriod(bg, "orders", 25, nil)
	if err != nil || key != "20261124" || leaf.ValidateIDs(ids, 25) != nil || ids[0] != 101 {
		t.Errorf("NextIDsPeriod(25) = %v %q, %v", ids, key, err)
	}
	if got := testutil.StatusOf(g, "orders"); got.Period != "20261124" || got.Issued != 33 {
		t.Errorf("status: period %q, issued %d; want 20261124, 33", got.Period, got.Issued)
	}
	// A clock stepped back finds the day before still held.
	clk.Set(time.Date(2026, 11, 23, 23, 59, 59, 0, loc))
	if id, key := nextPeriod(t, g, "orders"); id != 107 || key != "20261123" {
		t.Errorf("back in the day before: %d %q, want 107 in 20261123", id, key)
	}
	// A third day evicts the oldest.
	clk.Set(time.Date(2026, 11, 25, 9, 0, 0, 0, loc))
	if id, key := nextPeriod(t, g, "orders"); id != 100 || key != "20261125" {
		t.Errorf("third day: %d %q", id, key)
	}
	if g.TagCount() != 2 {
		t.Errorf("TagCount %d, want 2: periods are not tags", g.TagCount())
	}
	if a, err := st.Alloc(bg, "orders"); err != nil || a.MaxID != 100 {
		t.Errorf("the tag's row %+v, %v: it holds the start value", a, err)
	}
	if err := g.Close(bg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.NextIDPeriod(bg, "orders"); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("NextIDPeriod after Close: %v, want ErrClosed", err)
	}
	clk.Add(48 * time.Hour) // a period this server holds no buffer for
	if _, _, err := g.NextIDPeriod(bg, "orders"); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("NextIDPeriod after Close, in a new period: %v, want ErrClosed", err)
	}
	if _, err := g.NextIDs(bg, "orders", 2, nil); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("NextIDs after Close: %v, want ErrClosed", err)
	}
	// Each period got its unused IDs back.
	want := map[string]int64{"20261123": 108, "20261124": 126, "20261125": 101}
	if got := periodRows(t, st, "orders"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("period rows after Close %v, want %v", got, want)
	}
	if tot := g.Totals(); tot.Issued != 36 || tot.GivenBack == 0 {
		t.Errorf("Totals %+v: want 36 issued and some given back", tot)
	}
}

// The sweep gives an evicted period's IDs back while the tag is in use, and
// drops the whole tag once idle; the counters do not go down.
func TestPeriodicSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loc := shanghai(t)
		st := newPeriodicStore(t, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 100})
		clk := testutil.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, loc))
		g := newGen(t, settings(st, func(s *segment.Config) { s.Now = clk.Now; s.IdleTimeout = 50 * time.Millisecond }))
		for day := range 3 {
			for range 5 {
				nextPeriod(t, g, "orders")
			}
			if day < 2 {
				clk.Add(24 * time.Hour)
			}
		}
		synctest.Wait()
		// The sweep runs every 25ms; the first day was evicted at once.
		for range 4 {
			time.Sleep(10 * time.Millisecond)
			nextPeriod(t, g, "orders")
		}
		synctest.Wait()
		if got := periodRows(t, st, "orders")["20261123"]; got != 6 {
			t.Errorf("evicted day's row at %d, want 6: its unused IDs given back", got)
		}
		issued := g.Totals().Issued
		time.Sleep(200 * time.Millisecond) // idle: every period, then the tag, dropped
		synctest.Wait()
		if s := testutil.StatusOf(g, "orders"); s.Tag != "" {
			t.Errorf("orders still has state after 200ms idle: %+v", s)
		}
		tot := g.Totals()
		if tot.Issued != issued || tot.Dropped != 1 {
			t.Errorf("Totals after the drop %+v, want %d issued, 1 dropped", tot, issued)
		}
		if got := periodRows(t, st, "orders"); got["20261124"] != 6 || got["20261125"] != 10 {
			t.Errorf("period rows after the drop %v, want 20261124 at 6, 20261125 at 10", got)
		}
		if id, key := nextPeriod(t, g, "orders"); id != 10 || key != "20261125" {
			t.Errorf("after the drop: %d %q, want 10 in 20261125", id, key)
		}
	})
}

// Deleting a periodic tag takes its periods; the generator drops it.
func TestPeriodicDelete(t *testing.T) {
	loc := shanghai(t)
	st := newPeriodicStore(t, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 10})
	clk := testutil.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, loc))
	g := newGen(t, settings(st, func(s *segment.Config) { s.Now = clk.Now }))
	g2 := newGen(t, settings(st, func(s *segment.Config) { s.Now = clk.Now }))
	nextPeriod(t, g, "orders")
	nextPeriod(t, g2, "orders")
	if err := g.DeleteTag(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.NextIDPeriod(bg, "orders"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Errorf("after delete: %v, want ErrTagNotFound", err)
	}
	if n, err := st.CountPeriods(bg, "orders"); err != nil || n != 0 {
		t.Errorf("periods after delete: %d, %v", n, err)
	}
	// The other server issues what it holds, then finds the tag gone.
	clk.Add(24 * time.Hour)
	if _, _, err := g2.NextIDPeriod(bg, "orders"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Errorf("another server in a new period: %v, want ErrTagNotFound", err)
	}
	// Created again with its shape, each period continues.
	if err := g.CreateShapedTag(bg, leaf.Alloc{Tag: "orders", Step: 10}, daily); err != nil {
		t.Fatal(err)
	}
	clk.Add(-24 * time.Hour)
	if id, key := nextPeriod(t, g, "orders"); id != 21 || key != "20261123" {
		t.Errorf("created again: %d %q, want 21 in 20261123", id, key)
	}
	var se *leaf.ShapeError
	if err := g.DeleteTag(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := g.CreateTag(bg, leaf.Alloc{Tag: "orders", Step: 10}); !errors.As(err, &se) {
		t.Errorf("created again plain: %v, want a ShapeError", err)
	}
}

// The hot path of a periodic tag compares the instant with its period's
// span: every instant in the span must have the period's date in the zone,
// where clock changes fall at or across midnight too; and in zones whose
// changes keep clear of midnight the span is the whole period.
func TestPeriodSpan(t *testing.T) {
	zones := []struct {
		name   string
		always bool // every period has a span, the whole period (no clock change at midnight)
	}{
		{"UTC", true},
		{"Asia/Shanghai", true},
		{"America/New_York", true},
		{"Australia/Lord_Howe", true}, // 30-minute changes at 2am
		{"America/Sao_Paulo", false},  // changed at midnight until 2019
		{"America/Havana", false},     // changes at midnight
		{"Asia/Tehran", false},        // changed at midnight until 2022
		{"Pacific/Apia", false},       // skipped 2011-12-30
	}
	for _, z := range zones {
		loc, err := time.LoadLocation(z.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []leaf.Period{leaf.PeriodDay, leaf.PeriodMonth, leaf.PeriodYear} {
			shape := leaf.TagShape{Period: kind, TimeZone: z.name}
			key := func(at time.Time) string { return tagshape.PeriodKey(kind, at.In(loc)) }
			spans, without := 0, 0
			for at := time.Date(2010, 6, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2024; at = at.Add(23*time.Hour + 17*time.Minute) {
				from, until, ok, err := segment.PeriodSpan(shape, at)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					without++
					continue
				}
				spans++
				if z.always && (at.Before(from) || !at.Before(until)) {
					t.Fatalf("%s %s: %v is outside its period's span [%v, %v)", z.name, kind, at, from, until)
				}
				want := key(at)
				step := until.Sub(from) / 7
				for _, probe := range []time.Time{from, from.Add(step), from.Add(3 * step), until.Add(-step), until.Add(-1)} {
					if got := key(probe); got != want {
						t.Fatalf("%s %s: %v in the span [%v, %v) of %s is in period %s", z.name, kind, probe, from, until, want, got)
					}
				}
				// Where midnight falls in a clock change, the span may be
				// shorter than the period (time.Date picks one side of the
				// change), and the rest takes the path that compares dates.
				if z.always && (key(from.Add(-1)) == want || key(until) == want) {
					t.Fatalf("%s %s: the span [%v, %v) of %s does not reach the period's edges", z.name, kind, from, until, want)
				}
			}
			if z.always && without > 0 {
				t.Errorf("%s %s: %d instants' periods have no span: the hot path compares dates there", z.name, kind, without)
			}
			if spans == 0 {
				t.Errorf("%s %s: no span at all", z.name, kind)
			}
		}
	}
}

// BenchmarkNextIDPeriodic is BenchmarkNextID for a daily tag: the hot path
// adds one comparison of the clock with the period's span.
func BenchmarkNextIDPeriodic(b *testing.B) {
	st := testutil.Store(b)
	if err := st.CreateShapedTag(bg, leaf.Alloc{Tag: "t", MaxID: 1, Step: leaf.MaxStep}, daily); err != nil {
		b.Fatal(err)
	}
	g, err := segment.New(bg, settings(st, func(s *segment.Config) { s.Logger = testutil.Logger() }))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close(bg) })
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := g.NextIDPeriod(bg, "t"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPeriodicOrderedRange: a forwarding server's range of a periodic tag
// is refused before anything is taken (its IDs need their period's key),
// whether the tag's kind is already known or found by this very request,
// and the tag's next ID follows the last one issued: nothing was lost. A
// batch takes all its IDs from one period.
func TestPeriodicOrderedRange(t *testing.T) {
	st := newPeriodicStore(t, leaf.Alloc{Tag: "orders", MaxID: 100, Step: 10})
	clk := testutil.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, shanghai(t)))
	g := newGen(t, settings(st, func(s *segment.Config) { s.Now = clk.Now }))
	for i, want := range []int64{100, 101} {
		// The first request finds the kind; the second knows it.
		if _, err := g.Take(bg, "orders", 5, leaf.ByForwarder); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Fatalf("Take by ByForwarder #%d of a periodic tag: %v, want ErrInvalidArgument", i, err)
		}
		if id, key := nextPeriod(t, g, "orders"); id != want || key != "20261123" {
			t.Fatalf("after refusal #%d: %d %q, want %d in 20261123", i, id, key, want)
		}
	}
	ids, key, err := g.NextIDsPeriod(bg, "orders", 15, nil)
	if err != nil || key != "20261123" || len(ids) != 15 || ids[0] != 102 || ids[14] != 116 {
		t.Fatalf("NextIDsPeriod = %v %q %v, want 102..116 in 20261123", ids, key, err)
	}
}
