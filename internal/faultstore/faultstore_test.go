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
		hasPager:       is[AllocPager](x),
		hasShapeLister: is[ShapeLister](x),
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
// still refuses an invalid tag as the store does, and comes back.
func TestDown(t *testing.T) {
	ctx := t.Context()
	inner := open(t)
	st, f := Wrap(inner)
	adm := st.(leaf.SegmentAdmin)
	if err := adm.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	f.SetDown(ErrInjected)
	calls := map[string]error{
		"Reserve":   func() error { _, err := st.Reserve(ctx, "t", 0); return err }(),
		"Alloc":     func() error { _, err := st.Alloc(ctx, "t"); return err }(),
		"Tags":      func() error { _, err := st.Tags(ctx); return err }(),
		"Ping":      st.Ping(ctx),
		"CreateTag": adm.CreateTag(ctx, leaf.Alloc{Tag: "u", MaxID: 1, Step: 10}),
		"SetStep":   adm.SetStep(ctx, "t", 20),
		"TagsVersion": func() error {
			_, err := st.(leaf.SegmentVersioner).TagsVersion(ctx)
			return err
		}(),
		"RenewTags": func() error {
			_, err := st.(leaf.OrderedStore).RenewTags(ctx, "me", nil, time.Second)
			return err
		}(),
	}
	for name, err := range calls {
		if !errors.Is(err, ErrInjected) {
			t.Errorf("%s while down: %v, want the injected cause", name, err)
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
	f.SetDown(nil)
	if r, err := st.Reserve(ctx, "t", 0); err != nil || r.MaxID != 21 {
		t.Errorf("Reserve after coming back = %+v, %v; want max_id 21", r, err)
	}
	if n := f.Reserves(); n != 2 {
		t.Errorf("Reserves() = %d, want 2: the failed ones do not count", n)
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
	f.SetDelay(0)
	if a, _ := inner.Alloc(ctx, "t"); a.MaxID != 1 {
		t.Errorf("max_id after delayed reserves gave up = %d, want 1", a.MaxID)
	}
	if n := f.Reserves(); n != 0 {
		t.Errorf("Reserves() = %d, want 0", n)
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
	if _, err := st.(AllocPager).AllocsPage(ctx, "", "", 10); err != nil {
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
