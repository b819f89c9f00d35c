package faultstore

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/sqlite"
)

func open(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// interfaces reports which optional interfaces x implements, as the bits
// of a combination.
func interfaces(x leaf.SegmentStore) int {
	m := 0
	for bit, ok := range map[int]bool{
		hasAdmin:       is[leaf.SegmentAdmin](x),
		hasVersioner:   is[leaf.SegmentVersioner](x),
		hasShaper:      is[leaf.TagShaper](x),
		hasPeriods:     is[leaf.PeriodStore](x),
		hasOrdered:     is[leaf.OrderedStore](x),
		hasDegraded:    is[leaf.DegradedStore](x),
		hasPager:       is[leaf.AllocPager](x),
		hasShapeLister: is[leaf.ShapeLister](x),
	} {
		if ok {
			m |= bit
		}
	}
	return m
}

func is[I any](x any) bool { _, ok := x.(I); return ok }

// Every combination of optional interfaces comes out of Wrap as it went
// in: none added (a generator would take a wrapped plain store for one
// that keeps shapes), none lost. The stores going in are themselves cut
// down from a SQLite store, which has them all.
func TestWrapKeepsInterfaces(t *testing.T) {
	st := open(t)
	if got := interfaces(st); got != nCombos-1 {
		t.Fatalf("the SQLite store implements %08b; the test needs it to implement every optional interface", got)
	}
	full := wrapWith(st, &Faults{})
	if got := interfaces(full); got != nCombos-1 {
		t.Errorf("Wrap(SQLite store) implements %08b, want all", got)
	}
	var all pieces
	switch w := full.(type) {
	case combo255:
		all = pieces{w.base, w.admin, w.versioner, w.shaper, w.periods, w.ordered, w.degraded, w.pager, w.shapeLister}
	default:
		t.Fatalf("Wrap(SQLite store) is a %T", full)
	}
	for m := range nCombos {
		inner := combos[m](all)
		if got := interfaces(inner); got != m {
			t.Fatalf("combination %08b implements %08b", m, got)
		}
		if got := interfaces(wrapWith(inner, &Faults{})); got != m {
			t.Errorf("Wrap of a store implementing %08b implements %08b", m, got)
		}
	}
}

// A store taken down fails every call with the cause, changes nothing,
// still refuses an invalid tag as the store does, and comes back: every
// call works again.
func TestDown(t *testing.T) {
	ctx := t.Context()
	inner := open(t)
	st, f := Wrap(inner)
	adm := st.(leaf.SegmentAdmin)
	os := st.(leaf.OrderedStore)
	if err := adm.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	type call struct {
		name string
		call func() error
	}
	// In an order that works once the store is back.
	calls := []call{
		{"Reserve", func() error { _, err := st.Reserve(ctx, "t", 0); return err }},
		{"GiveBack", func() error { _, err := st.GiveBack(ctx, "t", 1, 11); return err }},
		{"Tags", func() error { _, err := st.Tags(ctx); return err }},
		{"Allocs", func() error { _, err := st.Allocs(ctx); return err }},
		{"Alloc", func() error { _, err := st.Alloc(ctx, "t"); return err }},
		{"Ping", func() error { return st.Ping(ctx) }},
		{"TagsVersion", func() error { _, err := st.(leaf.SegmentVersioner).TagsVersion(ctx); return err }},
		{"CreateTag", func() error { return adm.CreateTag(ctx, leaf.Alloc{Tag: "u", MaxID: 1, Step: 1}) }},
		{"SetStep", func() error { return adm.SetStep(ctx, "t", 5) }},
		{"SetOrdered", func() error { return os.SetOrdered(ctx, "u", true) }},
		{"TagLease", func() error { _, _, err := os.TagLease(ctx, "u"); return err }},
		{"AcquireTag", func() error { _, err := os.AcquireTag(ctx, "u", "x#1", time.Minute, leaf.TagLease{}); return err }},
		{"RenewTag", func() error { _, err := os.RenewTag(ctx, "u", "x#1", 1, time.Minute); return err }},
		{"RenewTags", func() error {
			_, err := os.RenewTags(ctx, "x#1", []leaf.TagToken{{Tag: "u", Token: 1}}, time.Minute)
			return err
		}},
		{"ReserveOwned", func() error { _, err := os.ReserveOwned(ctx, "u", "x#1", 1, 0); return err }},
		{"ReleaseTag", func() error { _, err := os.ReleaseTag(ctx, "u", "x#1", 1); return err }},
		{"OrderedTags", func() error { _, err := os.OrderedTags(ctx, "", 0); return err }},
		{"OrderedTagsIn", func() error { _, err := os.OrderedTagsIn(ctx, []string{"u"}); return err }},
		{"DeleteTag", func() error { return adm.DeleteTag(ctx, "t") }},
	}
	f.SetDown(ErrInjected)
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, ErrInjected) {
			t.Errorf("%s while down: %v, want the injected cause", c.name, err)
		}
	}
	if _, err := st.Reserve(ctx, "bad tag", 0); !errors.Is(err, leaf.ErrInvalidTag) {
		t.Errorf("Reserve of an invalid tag while down: %v, want the store's ErrInvalidTag", err)
	}
	if a, err := inner.Alloc(ctx, "t"); err != nil || a.MaxID != 11 || a.Step != 10 {
		t.Errorf("row after calls while down = %+v, %v; want max_id 11 step 10", a, err)
	}
	if tags, _ := inner.Tags(ctx); !slices.Equal(tags, []string{"t"}) {
		t.Errorf("tags after a create while down = %q", tags)
	}
	if n := f.Reserves(); n != 1 {
		t.Errorf("Reserves() = %d while down, want 1: the failed ones do not count", n)
	}
	f.SetDown(nil)
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Errorf("%s after SetDown(nil): %v", c.name, err)
		}
	}
	if n := f.Reserves(); n != 3 {
		t.Errorf("Reserves() = %d, want 3 (Reserve and ReserveOwned once back)", n)
	}
}

// A delay slows reserves, not reads, and gives way to the context.
func TestDelay(t *testing.T) {
	ctx := t.Context()
	inner := open(t)
	st, f := Wrap(inner)
	if err := inner.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	f.SetDelay(time.Hour)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	for name, call := range map[string]func() error{
		"Reserve":       func() error { _, err := st.Reserve(short, "t", 0); return err },
		"ReservePeriod": func() error { _, err := st.(leaf.PeriodStore).ReservePeriod(short, "t", "2026", 0); return err },
		"ReserveOwned":  func() error { _, err := st.(leaf.OrderedStore).ReserveOwned(short, "t", "me", 1, 0); return err },
	} {
		if err := call(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("delayed %s: %v, want the context's deadline", name, err)
		}
	}
	if _, err := st.Alloc(ctx, "t"); err != nil {
		t.Errorf("Alloc under a reserve delay: %v", err)
	}
	if a, _ := inner.Alloc(ctx, "t"); a.MaxID != 1 {
		t.Errorf("max_id after delayed reserves gave up = %d, want 1", a.MaxID)
	}
	if n := f.Reserves(); n != 0 {
		t.Errorf("Reserves() = %d, want 0", n)
	}
	// A delay the context outlasts is waited out, then the reserve runs.
	f.SetDelay(30 * time.Millisecond)
	began := time.Now()
	if r, err := st.Reserve(ctx, "t", 0); err != nil || r.MaxID != 11 {
		t.Errorf("Reserve after a 30ms delay = %+v, %v; want max_id 11", r, err)
	}
	if d := time.Since(began); d < 30*time.Millisecond {
		t.Errorf("Reserve took %v with a 30ms delay", d)
	}
	if n := f.Reserves(); n != 1 {
		t.Errorf("Reserves() = %d, want 1", n)
	}
}

// A hook sees every call by name and tag, can stall one until released,
// and can fail one.
func TestHook(t *testing.T) {
	ctx := t.Context()
	inner := open(t)
	st, f := Wrap(inner)
	if err := inner.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		seen    []Call
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	f.SetHook(func(ctx context.Context, c Call) error {
		mu.Lock()
		seen = append(seen, c)
		mu.Unlock()
		switch c.Method {
		case "Reserve":
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case "SetStep":
			return ErrInjected
		}
		return nil
	})
	done := make(chan error)
	go func() {
		_, err := st.Reserve(ctx, "t", 0)
		done <- err
	}()
	<-entered
	if a, _ := inner.Alloc(ctx, "t"); a.MaxID != 1 {
		t.Errorf("max_id while the reserve stalls = %d, want 1", a.MaxID)
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("released Reserve: %v", err)
	}
	if err := st.(leaf.SegmentAdmin).SetStep(ctx, "t", 5); !errors.Is(err, ErrInjected) {
		t.Errorf("SetStep failed by the hook: %v", err)
	}
	if _, err := st.(leaf.PeriodStore).Periods(ctx, "t", "", 10); err != nil {
		t.Errorf("Periods: %v", err)
	}
	if _, err := st.(leaf.AllocPager).AllocsPage(ctx, "", "", 10); err != nil {
		t.Errorf("AllocsPage: %v", err)
	}
	want := []Call{{"Reserve", "t"}, {"SetStep", "t"}, {"Periods", "t"}, {"AllocsPage", ""}}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Errorf("hook saw %v, want %v", seen, want)
	}
	if a, _ := inner.Alloc(ctx, "t"); a.MaxID != 11 || a.Step != 10 {
		t.Errorf("row = %+v, want max_id 11, step 10 (the failed SetStep changed nothing)", a)
	}
}
