package leaftest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// The shape and period subtests of TestSegmentStore: leaf.TagShaper and
// leaf.PeriodStore.

func (storeSuite) shaper(t *testing.T, st leaf.SegmentStore) leaf.TagShaper {
	t.Helper()
	sh, ok := st.(leaf.TagShaper)
	if !ok {
		t.Skipf("%T keeps no tag shapes", st)
	}
	return sh
}

func (storeSuite) periods(t *testing.T, st leaf.SegmentStore) leaf.PeriodStore {
	t.Helper()
	ps, ok := st.(leaf.PeriodStore)
	if !ok {
		t.Skipf("%T keeps no periods", st)
	}
	return ps
}

func (s storeSuite) wantShape(t *testing.T, sh leaf.TagShaper, tag string, want leaf.TagShape) {
	t.Helper()
	got, err := sh.TagShape(t.Context(), tag)
	if err != nil || got != want {
		t.Errorf("TagShape(%s) = %v, %v; want %v", tag, got, err, want)
	}
}

// shape: a shape is stored in its Canonical spelling with the tag, read by
// every instance, and outlives the tag: created again, a tag keeps the
// shape it was deleted with or is refused with a *leaf.ShapeError. A
// refused create leaves no row and does not move the change counter.
func (s storeSuite) shape(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	sh := s.shaper(t, st)
	st2, _ := s.open(t, open)
	sh2 := s.shaper(t, st2)
	daily := leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai", Format: leaf.IDFormat{Prefix: "ORD-", Width: 6}}
	opaque := leaf.TagShape{Format: leaf.IDFormat{Prefix: "INV", Width: 8, Radix: leaf.Radix36}, OpaqueBits: 40, KeyCheck: "k1"}
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "orders", Step: 10}, daily); err != nil {
		t.Fatal(err)
	}
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "invoices", MaxID: 100, Step: 10}, opaque); err != nil {
		t.Fatal(err)
	}
	s.create(t, adm, "plain", 0, 10)
	// Radix 10 and UTC are kept as their Canonical spelling.
	spelt := leaf.TagShape{Period: leaf.PeriodMonth, TimeZone: "UTC", Format: leaf.IDFormat{Width: 4, Radix: leaf.Radix10}}
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "utc", Step: 10}, spelt); err != nil {
		t.Fatal(err)
	}
	for _, x := range []leaf.TagShaper{sh, sh2} {
		s.wantShape(t, x, "orders", daily)
		s.wantShape(t, x, "invoices", opaque)
		s.wantShape(t, x, "plain", leaf.TagShape{})
		s.wantShape(t, x, "never-created", leaf.TagShape{})
		s.wantShape(t, x, "utc", spelt.Canonical())
	}
	if a := s.alloc(t, st2, "invoices"); a.MaxID != 100 || a.Step != 10 {
		t.Errorf("a shaped tag's row: %+v, want max_id 100, step 10", a)
	}
	if got := s.tags(t, st); !slices.Equal(got, []string{"invoices", "orders", "plain", "utc"}) {
		t.Errorf("Tags = %q", got)
	}
	if sl, ok := st.(leaf.ShapeLister); ok {
		got, err := sl.TagShapes(ctx, []string{"plain", "orders", "invoices", "never-created"})
		want := map[string]leaf.TagShape{"orders": daily, "invoices": opaque}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("TagShapes = %v, %v; want %v", got, err, want)
		}
		_, err = sl.TagShapes(ctx, []string{"ok", "bad tag"})
		s.wantErr(t, "TagShapes with an invalid tag", err, leaf.ErrInvalidTag)
	}
	_, err := sh.TagShape(ctx, "bad tag")
	s.wantErr(t, "TagShape of an invalid tag", err, leaf.ErrInvalidTag)
	s.wantErr(t, "CreateShapedTag of an existing tag", sh2.CreateShapedTag(ctx, leaf.Alloc{Tag: "orders", Step: 10}, daily), leaf.ErrTagExists)

	for _, tag := range []string{"orders", "plain", "utc", "invoices"} {
		if err := adm.DeleteTag(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	s.wantShape(t, sh2, "orders", daily) // the shape outlives its tag
	version := func() int64 { return 0 }
	if _, ok := st.(leaf.SegmentVersioner); ok {
		version = s.versioner(t, st)
	}
	v := version()
	for _, tc := range []struct {
		tag   string
		shape leaf.TagShape
		ok    bool
	}{
		{"orders", leaf.TagShape{}, false},
		{"orders", leaf.TagShape{Period: leaf.PeriodDay}, false},
		{"orders", leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Tokyo", Format: daily.Format}, false},
		{"plain", leaf.TagShape{OpaqueBits: 32}, false},
		{"invoices", leaf.TagShape{Format: opaque.Format, OpaqueBits: 40, KeyCheck: "k2"}, false},
		{"orders", daily, true},
		{"utc", spelt, true},
		{"plain", leaf.TagShape{}, true},
		{"invoices", opaque, true},
	} {
		err := sh2.CreateShapedTag(ctx, leaf.Alloc{Tag: tc.tag, Step: 10}, tc.shape)
		var se *leaf.ShapeError
		switch {
		case tc.ok && err != nil:
			t.Errorf("create %s as %v again: %v", tc.tag, tc.shape, err)
		case !tc.ok && (!errors.As(err, &se) || !errors.Is(err, leaf.ErrTagTombstoned)):
			t.Errorf("create %s as %v again = %v, want a *leaf.ShapeError", tc.tag, tc.shape, err)
		case !tc.ok:
			if _, err := st.Alloc(ctx, tc.tag); !errors.Is(err, leaf.ErrTagNotFound) {
				t.Errorf("a create refused for its shape left a row for %s: %v", tc.tag, err)
			}
			if got := version(); got != v {
				t.Errorf("a create refused for its shape moved the change counter from %d to %d", v, got)
			}
		}
		v = version()
	}
	// Created again without a start, invoices continues above its tombstone.
	if a := s.alloc(t, st, "invoices"); a.MaxID != 100 {
		t.Errorf("invoices created again starts at %d, want its tombstone 100", a.MaxID)
	}
}

// shapeInvalid: shapes and names the stores must refuse before any SQL.
func (s storeSuite) shapeInvalid(t *testing.T, open Opener) {
	ctx := t.Context()
	st, _ := s.open(t, open)
	sh := s.shaper(t, st)
	daily := leaf.TagShape{Period: leaf.PeriodDay}
	for _, tc := range []struct {
		name  string
		tag   string
		shape leaf.TagShape
		want  error
	}{
		{"BadPeriod", "t", leaf.TagShape{Period: "week"}, leaf.ErrInvalidArgument},
		{"BadZone", "t", leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Mars/Olympus"}, leaf.ErrInvalidArgument},
		{"ZoneWithoutPeriod", "t", leaf.TagShape{TimeZone: "Asia/Tokyo"}, leaf.ErrInvalidArgument},
		{"BadRadix", "t", leaf.TagShape{Format: leaf.IDFormat{Radix: 16}}, leaf.ErrInvalidArgument},
		{"FewOpaqueBits", "t", leaf.TagShape{OpaqueBits: 8}, leaf.ErrInvalidArgument},
		{"PeriodicNameTooLong", strings.Repeat("p", leaf.MaxPeriodicTagLen+1), daily, leaf.ErrInvalidTag},
		{"InvalidTag", "a#b", daily, leaf.ErrInvalidTag},
	} {
		err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: tc.tag, Step: 10}, tc.shape)
		s.wantErr(t, "CreateShapedTag "+tc.name, err, tc.want)
	}
	if tags := s.tags(t, st); len(tags) != 0 {
		t.Errorf("refused creates left tags %q", tags)
	}
	// The longest periodic name is accepted, and its period rows fit.
	long := strings.Repeat("p", leaf.MaxPeriodicTagLen)
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: long, Step: 10}, daily); err != nil {
		t.Fatalf("CreateShapedTag of a %d-byte periodic tag: %v", len(long), err)
	}
	if ps, ok := st.(leaf.PeriodStore); ok {
		if _, err := ps.ReservePeriod(ctx, long, "20261124", 0); err != nil {
			t.Errorf("ReservePeriod of a %d-byte periodic tag: %v", len(long), err)
		}
	}
}

// shapeConcurrent races creators of one deleted tag with different shapes:
// exactly one wins, and the shape stored is the winner's.
func (s storeSuite) shapeConcurrent(t *testing.T, open Opener) {
	ctx := t.Context()
	var shapers []leaf.TagShaper
	for range 3 {
		st, _ := s.open(t, open)
		shapers = append(shapers, s.shaper(t, st))
	}
	shapes := []leaf.TagShape{
		{Period: leaf.PeriodDay},
		{Period: leaf.PeriodMonth},
		{Format: leaf.IDFormat{Width: 9}},
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		winner = -1
	)
	for i, sh := range shapers {
		wg.Go(func() {
			err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "race", Step: 10}, shapes[i])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && winner >= 0:
				t.Errorf("creators %d and %d both created the tag", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, leaf.ErrTagExists):
				t.Errorf("creator %d: %v, want ErrTagExists", i, err)
			}
		})
	}
	wg.Wait()
	if winner < 0 {
		t.Fatal("no creator won")
	}
	s.wantShape(t, shapers[(winner+1)%3], "race", shapes[winner])
}

// reservePeriod reserves from a period, failing the test on an error.
func (storeSuite) reservePeriod(t *testing.T, ps leaf.PeriodStore, tag, key string, step int) leaf.Reservation {
	t.Helper()
	r, err := ps.ReservePeriod(t.Context(), tag, key, step)
	if err != nil {
		t.Fatalf("ReservePeriod(%s, %s, %d): %v", tag, key, step, err)
	}
	return r
}

func periodKeys(ps []leaf.PeriodAlloc) []string {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.Key
	}
	return keys
}

// periodRows: each period of a tag is a row of its own, made on first use
// with the tag's step and its max_id as the start value; the tag's row is
// never reserved from. Period rows are not tags: the listings leave them
// out and the change counter does not move. Pruning keeps tombstones, so a
// pruned period made again continues above them; deleting the tag prunes
// every period.
func (s storeSuite) periodRows(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	sh, ps := s.shaper(t, st), s.periods(t, st)
	st2, _ := s.open(t, open)
	ps2 := s.periods(t, st2)
	version := func() int64 { return 0 }
	if _, ok := st.(leaf.SegmentVersioner); ok {
		version = s.versioner(t, st)
	}
	daily := leaf.TagShape{Period: leaf.PeriodDay}
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "orders", MaxID: 1000, Step: 10}, daily); err != nil {
		t.Fatal(err)
	}
	s.create(t, adm, "orders-x", 1, 10) // sorts after the period rows
	v := version()

	// Each period starts at the start value, from either instance.
	s.wantRange(t, s.reservePeriod(t, ps, "orders", "20261124", 0), 1000, 10, 10)
	s.wantRange(t, s.reservePeriod(t, ps2, "orders", "20261124", 0), 1010, 10, 10)
	s.wantRange(t, s.reservePeriod(t, ps2, "orders", "20261125", 25), 1000, 25, 10)
	s.wantRange(t, s.reservePeriod(t, ps, "orders", "20261123", 0), 1000, 10, 10)
	if a := s.alloc(t, st, "orders"); a.MaxID != 1000 {
		t.Errorf("the tag's row moved to %d; it holds the start value 1000", a.MaxID)
	}
	if got := version(); got != v {
		t.Errorf("making period rows moved the change counter from %d to %d", v, got)
	}
	if got := s.tags(t, st); !slices.Equal(got, []string{"orders", "orders-x"}) {
		t.Errorf("Tags = %q, want the tags without their periods", got)
	}
	if as, err := st.Allocs(ctx); err != nil || len(as) != 2 {
		t.Errorf("Allocs = %+v, %v; want the two tags", as, err)
	}
	if p, ok := st.(leaf.AllocPager); ok {
		if got := s.page(t, p, "orders", "", 10); !slices.Equal(got, []string{"orders", "orders-x"}) {
			t.Errorf("AllocsPage = %q, want the tags without their periods", got)
		}
	}
	_, err := st.Reserve(ctx, tagshape.PeriodRow("orders", "20261124"), 0)
	s.wantErr(t, "Reserve of a period row's name", err, leaf.ErrInvalidTag)

	// Listing: newest first, a keyset page at a time, and a count.
	got, err := ps2.Periods(ctx, "orders", "", 10)
	if err != nil || !slices.Equal(periodKeys(got), []string{"20261125", "20261124", "20261123"}) {
		t.Fatalf("Periods = %v, %v", periodKeys(got), err)
	}
	if got[0].MaxID != 1025 || got[0].Step != 10 || got[1].MaxID != 1020 {
		t.Errorf("Periods rows = %+v", got)
	}
	s.checkFresh(t, got[0].UpdateTime)
	if got, err := ps.Periods(ctx, "orders", "20261125", 1); err != nil || !slices.Equal(periodKeys(got), []string{"20261124"}) {
		t.Errorf("Periods before 20261125, limit 1 = %v, %v", periodKeys(got), err)
	}
	if n, err := ps.CountPeriods(ctx, "orders"); err != nil || n != 3 {
		t.Errorf("CountPeriods = %d, %v; want 3", n, err)
	}
	if n, err := ps.CountPeriods(ctx, "orders-x"); err != nil || n != 0 {
		t.Errorf("CountPeriods of a plain tag = %d, %v; want 0", n, err)
	}

	// The tag's step reaches its periods.
	if err := adm.SetStep(ctx, "orders", 20); err != nil {
		t.Fatal(err)
	}
	s.wantRange(t, s.reservePeriod(t, ps, "orders", "20261124", 0), 1020, 20, 20)
	s.wantRange(t, s.reservePeriod(t, ps, "orders", "20261126", 0), 1000, 20, 20)

	// Give back: conditional, as GiveBack.
	if ok, err := ps.GiveBackPeriod(ctx, "orders", "20261126", 1005, 1020); err != nil || !ok {
		t.Errorf("GiveBackPeriod = %v, %v; want true", ok, err)
	}
	if ok, err := ps2.GiveBackPeriod(ctx, "orders", "20261126", 1001, 1020); err != nil || ok {
		t.Errorf("GiveBackPeriod with a stale max_id = %v, %v; want false", ok, err)
	}
	s.wantRange(t, s.reservePeriod(t, ps2, "orders", "20261126", 0), 1005, 20, 20)

	// Pruning: the rows below the key go, oldest first, leaving tombstones.
	pruned, err := ps2.PrunePeriods(ctx, "orders", "20261125")
	if err != nil || !slices.Equal(periodKeys(pruned), []string{"20261123", "20261124"}) {
		t.Fatalf("PrunePeriods before 20261125 = %v, %v", periodKeys(pruned), err)
	}
	if pruned[1].MaxID != 1040 {
		t.Errorf("pruned 20261124 at max_id %d, want 1040", pruned[1].MaxID)
	}
	if got, err := ps.Periods(ctx, "orders", "", 10); err != nil || !slices.Equal(periodKeys(got), []string{"20261126", "20261125"}) {
		t.Errorf("Periods after pruning = %v, %v", periodKeys(got), err)
	}
	if again, err := ps.PrunePeriods(ctx, "orders", "20261125"); err != nil || len(again) != 0 {
		t.Errorf("pruning again = %v, %v; want nothing", periodKeys(again), err)
	}
	// A pruned period never starts again at its start value.
	s.wantRange(t, s.reservePeriod(t, ps, "orders", "20261124", 0), 1040, 20, 20)
	if ok, err := ps.GiveBackPeriod(ctx, "orders", "20261124", 1030, 1060); err != nil || ok {
		t.Errorf("GiveBackPeriod below a pruned period's tombstone = %v, %v; want false", ok, err)
	}

	// Deleting the tag takes its periods; created again, each continues.
	if err := adm.DeleteTag(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if n, err := ps.CountPeriods(ctx, "orders"); err != nil || n != 0 {
		t.Errorf("CountPeriods after DeleteTag = %d, %v; want 0", n, err)
	}
	_, err = ps.ReservePeriod(ctx, "orders", "20261127", 0)
	s.wantErr(t, "ReservePeriod of a deleted tag", err, leaf.ErrTagNotFound)
	if n, err := ps.CountPeriods(ctx, "orders"); err != nil || n != 0 {
		t.Errorf("ReservePeriod of a deleted tag left %d rows, %v", n, err)
	}
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "orders", Step: 10}, daily); err != nil {
		t.Fatal(err)
	}
	s.wantRange(t, s.reservePeriod(t, ps2, "orders", "20261125", 0), 1025, 10, 10)
	s.wantRange(t, s.reservePeriod(t, ps2, "orders", "20261127", 0), 1000, 10, 10)
	if a := s.alloc(t, st, "orders-x"); a.MaxID != 1 {
		t.Errorf("deleting orders touched orders-x: %+v", a)
	}
}

// periodInvalid: bad tags, keys and limits are refused before any SQL.
func (s storeSuite) periodInvalid(t *testing.T, open Opener) {
	ctx := t.Context()
	st, _ := s.open(t, open)
	ps := s.periods(t, st)
	_, err := ps.ReservePeriod(ctx, "missing", "20261124", 0)
	s.wantErr(t, "ReservePeriod of a missing tag", err, leaf.ErrTagNotFound)
	for _, key := range []string{"", "2026-11", "20261324", "x'; --"} {
		_, err := ps.ReservePeriod(ctx, "t", key, 0)
		s.wantErr(t, fmt.Sprintf("ReservePeriod key %q", key), err, leaf.ErrInvalidArgument)
		_, err = ps.PrunePeriods(ctx, "t", key)
		s.wantErr(t, fmt.Sprintf("PrunePeriods key %q", key), err, leaf.ErrInvalidArgument)
		_, err = ps.GiveBackPeriod(ctx, "t", key, 1, 2)
		s.wantErr(t, fmt.Sprintf("GiveBackPeriod key %q", key), err, leaf.ErrInvalidArgument)
	}
	_, err = ps.ReservePeriod(ctx, "a b", "2026", 0)
	s.wantErr(t, "ReservePeriod of an invalid tag", err, leaf.ErrInvalidTag)
	_, err = ps.Periods(ctx, "t", "", 0)
	s.wantErr(t, "Periods limit 0", err, leaf.ErrInvalidArgument)
	_, err = ps.Periods(ctx, "t", "1", 10)
	s.wantErr(t, "Periods before a bad key", err, leaf.ErrInvalidArgument)
	_, err = ps.CountPeriods(ctx, "")
	s.wantErr(t, "CountPeriods of an empty tag", err, leaf.ErrInvalidTag)
}

// periodConcurrent: instances race to make and reserve from the same new
// periods; the ranges of a period never overlap, and each period's first
// range begins at the start value.
func (s storeSuite) periodConcurrent(t *testing.T, open Opener) {
	ctx := t.Context()
	var stores []leaf.PeriodStore
	for range 3 {
		st, _ := s.open(t, open)
		stores = append(stores, s.periods(t, st))
	}
	st, _ := s.open(t, open)
	if err := s.shaper(t, st).CreateShapedTag(ctx, leaf.Alloc{Tag: "race", MaxID: 7, Step: 5}, leaf.TagShape{Period: leaf.PeriodMonth}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"202611", "202612", "202701"}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[string][]leaf.Reservation{}
	)
	for _, ps := range stores {
		for g := range 4 {
			wg.Go(func() {
				for i := range 6 {
					key := keys[(g+i)%len(keys)]
					r, err := ps.ReservePeriod(ctx, "race", key, 0)
					if err != nil {
						t.Errorf("ReservePeriod(%s): %v", key, err)
						return
					}
					mu.Lock()
					got[key] = append(got[key], r)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for key, rs := range got {
		s.checkTiling(t, "race period "+key, 7, rs)
	}
}
