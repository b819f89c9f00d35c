// Package leaftest holds the conformance suites that every implementation of
// a leaf seam must pass: the SQL stores (SQLite, MySQL, PostgreSQL) and the
// multi-database store run the same checks, so a generator tested against
// one can trust the others.
package leaftest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/stripe"
)

// The sample row of Leaf's README, inserted by hand after Leaf's DDL. Store
// tests put it in a table they create with raw SQL and pass the database to
// TestExistingLeafTable.
const (
	LeafSampleTag         = "leaf-segment-test"
	LeafSampleStep        = 2000
	LeafSampleDescription = "Test leaf Segment Mode Get Id"
	LeafSampleInsert      = "insert into leaf_alloc(biz_tag, max_id, step, description) values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')"
)

// Opener opens one independent instance (its own connection pool) of a store
// on a database shared by all instances it opens.
type Opener = func() (leaf.SegmentStore, error)

// StoreTraits says what a segment store does differently from one database
// holding one leaf_alloc; the zero value is a single-database store, held to
// every exact check.
type StoreTraits struct {
	// Striped: the store spreads each tag over several databases, each
	// issuing the IDs of its stripe from numbers of its own (multidb). The
	// databases share no transaction, so:
	//   - a reservation's MaxID and Step are numbers of the one database
	//     that made it (Reservation.Stripe maps them to IDs): ranges of two
	//     databases overlap in numbers and never in IDs, and which database
	//     answers is the store's choice, so the suite checks the IDs are
	//     disjoint instead of exact ranges;
	//   - Alloc's MaxID is a bound in IDs (every ID issued is below it),
	//     not a sum of steps;
	//   - GiveBack never gives a range back (the numbers alone do not say
	//     which database's they are) and answers false;
	//   - a TombstoneError's MinStart is in IDs, above every ID issued,
	//     not one database's max_id;
	//   - CreateTag of a tag some databases already hold completes it
	//     (a create cut short part-way must be able to finish), so
	//     concurrent creators of one tag may each be told it succeeded.
	Striped bool
}

// TestSegmentStore runs the leaf.SegmentStore and leaf.SegmentAdmin
// conformance suite, and that of leaf.TagShaper, leaf.PeriodStore and
// leaf.OrderedStore for stores that implement them. newDB makes a fresh, empty database for one subtest and
// returns its Opener; the subtests run in parallel. traits declares what the
// store legitimately does differently from a single database.
func TestSegmentStore(t *testing.T, newDB func(t *testing.T) func() (leaf.SegmentStore, error), traits StoreTraits) {
	s := storeSuite{traits: traits}
	cases := []struct {
		name string
		run  func(t *testing.T, open Opener)
	}{
		{"Empty", s.empty},
		{"CreateListAlloc", s.createListAlloc},
		{"AllocsPage", s.allocsPage},
		{"AllocsPageChurn", s.allocsPageChurn},
		{"CreateInvalid", s.createInvalid},
		{"CreateDuplicate", s.createDuplicate},
		{"CreateConcurrent", s.createConcurrent},
		{"InvalidTagBeforeSQL", s.invalidTagBeforeSQL},
		{"ReserveStoredStep", s.reserveStoredStep},
		{"ReserveFirstRangeFromOne", s.reserveFirstRange},
		{"ReserveExplicitStep", s.reserveExplicitStep},
		{"ReserveStepChangeNoOverlap", s.reserveStepChange},
		{"ReserveUnknownTag", s.reserveUnknown},
		{"ReserveCanceled", s.reserveCanceled},
		{"GiveBack", s.giveBack},
		{"SetStep", s.setStep},
		{"DeleteTag", s.deleteTag},
		{"CreateWithoutStart", s.createWithoutStart},
		{"Tombstone", s.tombstone},
		{"TombstoneGiveBack", s.tombstoneGiveBack},
		{"TombstoneConcurrent", s.tombstoneConcurrent},
		{"ConcurrentReserves", s.concurrentReserves},
		{"SchemaIdempotent", s.schemaIdempotent},
		{"TagsVersion", s.tagsVersion},
		{"TagsVersionConcurrent", s.tagsVersionConcurrent},
		{"Shape", s.shape},
		{"ShapeInvalid", s.shapeInvalid},
		{"ShapeConcurrent", s.shapeConcurrent},
		{"PeriodRows", s.periodRows},
		{"PeriodInvalid", s.periodInvalid},
		{"PeriodConcurrent", s.periodConcurrent},
		{"OrderedMark", s.orderedMark},
		{"OrderedNotFound", s.orderedNotFound},
		{"OrderedShaped", s.orderedShaped},
		{"OrderedAcquire", s.orderedAcquire},
		{"OrderedExpiry", s.orderedExpiry},
		{"OrderedRenewExpired", s.orderedRenewExpired},
		{"OrderedReserveOwned", s.orderedReserveOwned},
		{"OrderedReserveRace", s.orderedReserveRace},
		{"OrderedRenew", s.orderedRenew},
		{"OrderedRenewTags", s.orderedRenewTags},
		{"OrderedRenewTagsMany", s.orderedRenewTagsMany},
		{"OrderedRelease", s.orderedRelease},
		{"OrderedDeleteTag", s.orderedDeleteTag},
		{"OrderedDeleteRace", s.orderedDeleteRace},
		{"OrderedInvalid", s.orderedInvalid},
		{"OrderedRace", s.orderedRace},
		{"OrderedTagsPage", s.orderedTagsPage},
		{"Close", s.close},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newDB(t))
		})
	}
}

// TestExistingLeafTable checks a store against a table it did not create:
// the database behind open must already hold leaf_alloc, made with the
// database's version of Leaf's DDL, with the sample row of LeafSampleInsert
// and nothing else. Opening must keep the row, and the first range is Leaf's
// first range, [1, 2001).
func TestExistingLeafTable(t *testing.T, open Opener) {
	var s storeSuite
	ctx := t.Context()
	st, adm := s.open(t, open)
	as, err := st.Allocs(ctx)
	if err != nil {
		t.Fatalf("Allocs: %v", err)
	}
	if len(as) != 1 || as[0].Tag != LeafSampleTag || as[0].MaxID != 1 || as[0].Step != LeafSampleStep || as[0].Description != LeafSampleDescription {
		t.Fatalf("Allocs on Leaf's table = %+v, want only the sample row", as)
	}
	s.checkFresh(t, as[0].UpdateTime)
	r := s.reserve(t, st, LeafSampleTag, 0)
	s.wantRange(t, r, 1, LeafSampleStep, LeafSampleStep)
	if err := adm.CreateTag(ctx, leaf.Alloc{Tag: "go-tag", MaxID: 7, Step: 3}); err != nil {
		t.Fatalf("CreateTag on Leaf's table: %v", err)
	}

	// Opening again must find everything as it was.
	st2, _ := s.open(t, open)
	if got := s.alloc(t, st2, LeafSampleTag).MaxID; got != 1+LeafSampleStep {
		t.Errorf("max_id after reopening = %d, want %d", got, 1+LeafSampleStep)
	}
	r = s.reserve(t, st2, LeafSampleTag, 0)
	s.wantRange(t, r, 1+LeafSampleStep, LeafSampleStep, LeafSampleStep)
	r = s.reserve(t, st2, "go-tag", 0)
	s.wantRange(t, r, 7, 3, 3)
}

// storeSuite groups the subtests and their helpers; its only state is the
// traits of the store under test.
type storeSuite struct{ traits StoreTraits }

// ledgers holds, per running subtest of a striped store, the IDs each tag
// handed out through reserve: the disjointness check that replaces exact
// ranges there.
var ledgers sync.Map // *testing.T -> *ledger

type ledger struct {
	mu   sync.Mutex
	tags map[string][][2]int64 // tag -> [start, end) of the IDs issued
}

// idRanges expands r into its IDs, as [start, end) intervals. For a
// single-database store that is [r.Start(), r.MaxID).
func idRanges(r leaf.Reservation) [][2]int64 {
	var out [][2]int64
	stripe.Reserved(r, func(start, end int64) bool {
		out = append(out, [2]int64{start, end})
		return true
	})
	return out
}

// record adds r's IDs to the subtest's ledger, failing if any was handed
// out before under the tag.
func (storeSuite) record(t *testing.T, r leaf.Reservation) {
	t.Helper()
	v, loaded := ledgers.LoadOrStore(t, &ledger{tags: map[string][][2]int64{}})
	if !loaded {
		t.Cleanup(func() { ledgers.Delete(t) })
	}
	l := v.(*ledger)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range idRanges(r) {
		for _, o := range l.tags[r.Tag] {
			if n[0] < o[1] && o[0] < n[1] {
				t.Errorf("%s: IDs [%d, %d) of %+v were handed out before, in [%d, %d)", r.Tag, n[0], n[1], r, o[0], o[1])
			}
		}
		l.tags[r.Tag] = append(l.tags[r.Tag], n)
	}
}

// issuedBound is one past the highest ID the subtest's reserves handed out
// under tag, 0 before the first.
func (storeSuite) issuedBound(t *testing.T, tag string) int64 {
	v, ok := ledgers.Load(t)
	if !ok {
		return 0
	}
	l := v.(*ledger)
	l.mu.Lock()
	defer l.mu.Unlock()
	var b int64
	for _, r := range l.tags[tag] {
		b = max(b, r[1])
	}
	return b
}

// wantMaxID checks Alloc's MaxID after the subtest's reserves: exactly want
// on a single database; on a striped store, a bound at or above every ID
// the subtest's reserves handed out under the tag.
func (s storeSuite) wantMaxID(t *testing.T, what string, a leaf.Alloc, want int64) {
	t.Helper()
	if !s.traits.Striped {
		if a.MaxID != want {
			t.Errorf("%s: max_id %d, want %d", what, a.MaxID, want)
		}
		return
	}
	if b := s.issuedBound(t, a.Tag); a.MaxID < b || a.MaxID < 1 {
		t.Errorf("%s: max_id %d, want a bound at or above %d, past every ID handed out", what, a.MaxID, b)
	}
}

func (storeSuite) open(t *testing.T, open Opener) (leaf.SegmentStore, leaf.SegmentAdmin) {
	t.Helper()
	st, err := open()
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	adm, ok := st.(leaf.SegmentAdmin)
	if !ok {
		t.Fatalf("%T does not implement leaf.SegmentAdmin; the suite needs it to create tags", st)
	}
	return st, adm
}

func (storeSuite) create(t *testing.T, adm leaf.SegmentAdmin, tag string, start int64, step int) {
	t.Helper()
	if err := adm.CreateTag(t.Context(), leaf.Alloc{Tag: tag, MaxID: start, Step: step}); err != nil {
		t.Fatalf("CreateTag(%q, start %d, step %d): %v", tag, start, step, err)
	}
}

func (s storeSuite) reserve(t *testing.T, st leaf.SegmentStore, tag string, step int) leaf.Reservation {
	t.Helper()
	r, err := st.Reserve(t.Context(), tag, step)
	if err != nil {
		t.Fatalf("Reserve(%q, %d): %v", tag, step, err)
	}
	if r.Tag != tag {
		t.Errorf("Reserve(%q, %d).Tag = %q", tag, step, r.Tag)
	}
	if s.traits.Striped {
		// Never given back, so every reserve's IDs must be new.
		s.record(t, r)
	}
	return r
}

func (storeSuite) alloc(t *testing.T, st leaf.SegmentStore, tag string) leaf.Alloc {
	t.Helper()
	a, err := st.Alloc(t.Context(), tag)
	if err != nil {
		t.Fatalf("Alloc(%q): %v", tag, err)
	}
	return a
}

func (storeSuite) tags(t *testing.T, st leaf.SegmentStore) []string {
	t.Helper()
	tags, err := st.Tags(t.Context())
	if err != nil {
		t.Fatalf("Tags: %v", err)
	}
	return tags
}

// wantRange checks that r is [start, start+step) with the given stored step.
// On a striped store, where which database answers decides the numbers, it
// checks the steps; reserve has checked the IDs are new.
func (s storeSuite) wantRange(t *testing.T, r leaf.Reservation, start int64, step, stored int) {
	t.Helper()
	if s.traits.Striped {
		if r.Step != step || r.StoredStep != stored || !r.Stripe.Striped() {
			t.Errorf("Reserve(%q) = step %d stored %d stripe %+v; want step %d stored %d from a stripe",
				r.Tag, r.Step, r.StoredStep, r.Stripe, step, stored)
		}
		return
	}
	if r.Start() != start || r.MaxID != start+int64(step) || r.Step != step || r.StoredStep != stored {
		t.Errorf("Reserve(%q) = [%d, %d) step %d stored %d; want [%d, %d) step %d stored %d",
			r.Tag, r.Start(), r.MaxID, r.Step, r.StoredStep, start, start+int64(step), step, stored)
	}
}

// checkFresh checks an update_time against the local clock, which catches a
// store that writes or reads it in the wrong time zone.
func (storeSuite) checkFresh(t *testing.T, at time.Time) {
	t.Helper()
	if d := time.Since(at); d < -5*time.Minute || d > 5*time.Minute {
		t.Errorf("update_time %v is %v away from now; time zone handling?", at, d)
	}
}

func (storeSuite) wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func (s storeSuite) empty(t *testing.T, open Opener) {
	ctx := t.Context()
	st, _ := s.open(t, open)
	if err := st.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if tags := s.tags(t, st); len(tags) != 0 {
		t.Errorf("Tags of an empty store = %q", tags)
	}
	as, err := st.Allocs(ctx)
	if err != nil || len(as) != 0 {
		t.Errorf("Allocs of an empty store = %v, %v", as, err)
	}
	_, err = st.Alloc(ctx, "nothing")
	s.wantErr(t, "Alloc of an unknown tag", err, leaf.ErrTagNotFound)
}

func (s storeSuite) createListAlloc(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	long := strings.Repeat("x", leaf.MaxTagLen)
	want := []leaf.Alloc{
		// In byte order, which is how Tags and Allocs sort whatever the
		// database's collation.
		{Tag: "C:tag_1", MaxID: 5, Step: 1},
		{Tag: "a.tag", MaxID: 1, Step: 2000, Description: "Test leaf Segment Mode Get Id"},
		{Tag: "b-tag", MaxID: 100, Step: 10, Description: "second"},
		{Tag: long, MaxID: 1 << 40, Step: leaf.MaxStep, Description: strings.Repeat("d", 256)},
	}
	for _, i := range []int{2, 0, 3, 1} {
		if err := adm.CreateTag(ctx, want[i]); err != nil {
			t.Fatalf("CreateTag(%+v): %v", want[i], err)
		}
	}
	wantTags := []string{want[0].Tag, want[1].Tag, want[2].Tag, want[3].Tag}

	// A second instance sees what the first wrote.
	st2, _ := s.open(t, open)
	for _, x := range []leaf.SegmentStore{st, st2} {
		if got := s.tags(t, x); !slices.Equal(got, wantTags) {
			t.Errorf("Tags = %q, want %q", got, wantTags)
		}
		as, err := x.Allocs(ctx)
		if err != nil {
			t.Fatalf("Allocs: %v", err)
		}
		if len(as) != len(want) {
			t.Fatalf("Allocs returned %d rows, want %d: %+v", len(as), len(want), as)
		}
		for i, a := range as {
			w := want[i]
			if a.Tag != w.Tag || a.MaxID != w.MaxID || a.Step != w.Step || a.Description != w.Description {
				t.Errorf("Allocs[%d] = %+v, want %+v", i, a, w)
			}
			s.checkFresh(t, a.UpdateTime)
			one := s.alloc(t, x, w.Tag)
			if one.Tag != a.Tag || one.MaxID != a.MaxID || one.Step != a.Step || one.Description != a.Description || !one.UpdateTime.Equal(a.UpdateTime) {
				t.Errorf("Alloc(%q) = %+v, Allocs has %+v", w.Tag, one, a)
			}
		}
	}
	// The longest tag and the largest step work in reserves too.
	r := s.reserve(t, st2, long, 0)
	s.wantRange(t, r, 1<<40, leaf.MaxStep, leaf.MaxStep)
}

func (s storeSuite) createInvalid(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	ok := leaf.Alloc{Tag: "ok", MaxID: 1, Step: 10}
	with := func(f func(*leaf.Alloc)) leaf.Alloc { a := ok; f(&a); return a }
	cases := []struct {
		name string
		a    leaf.Alloc
		want error
	}{
		{"EmptyTag", with(func(a *leaf.Alloc) { a.Tag = "" }), leaf.ErrInvalidTag},
		{"LongTag", with(func(a *leaf.Alloc) { a.Tag = strings.Repeat("t", leaf.MaxTagLen+1) }), leaf.ErrInvalidTag},
		{"Space", with(func(a *leaf.Alloc) { a.Tag = "a b" }), leaf.ErrInvalidTag},
		{"Injection", with(func(a *leaf.Alloc) { a.Tag = "x'); DROP TABLE leaf_alloc; --" }), leaf.ErrInvalidTag},
		{"NonASCII", with(func(a *leaf.Alloc) { a.Tag = "täg" }), leaf.ErrInvalidTag},
		{"StepZero", with(func(a *leaf.Alloc) { a.Step = 0 }), leaf.ErrInvalidArgument},
		{"StepNegative", with(func(a *leaf.Alloc) { a.Step = -1 }), leaf.ErrInvalidArgument},
		{"StepTooLarge", with(func(a *leaf.Alloc) { a.Step = leaf.MaxStep + 1 }), leaf.ErrInvalidArgument},
		{"StartNegative", with(func(a *leaf.Alloc) { a.MaxID = -7 }), leaf.ErrInvalidArgument},
		{"LongDescription", with(func(a *leaf.Alloc) { a.Description = strings.Repeat("d", 257) }), leaf.ErrInvalidArgument},
	}
	for _, c := range cases {
		s.wantErr(t, fmt.Sprintf("CreateTag %s", c.name), adm.CreateTag(ctx, c.a), c.want)
	}
	if tags := s.tags(t, st); len(tags) != 0 {
		t.Errorf("invalid CreateTag calls left tags %q", tags)
	}
}

func (s storeSuite) createDuplicate(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	orig := leaf.Alloc{Tag: "dup", MaxID: 10, Step: 5, Description: "first"}
	if err := adm.CreateTag(ctx, orig); err != nil {
		t.Fatalf("CreateTag: %v", err)
	}
	s.reserve(t, st, "dup", 0)
	_, adm2 := s.open(t, open)
	for _, x := range []leaf.SegmentAdmin{adm, adm2} {
		err := x.CreateTag(ctx, leaf.Alloc{Tag: "dup", MaxID: 1, Step: 99, Description: "second"})
		s.wantErr(t, "CreateTag of an existing tag", err, leaf.ErrTagExists)
	}
	a := s.alloc(t, st, "dup")
	if a.Step != 5 || a.Description != "first" {
		t.Errorf("a duplicate CreateTag changed the row: %+v", a)
	}
	s.wantMaxID(t, "after a duplicate CreateTag", a, 15)
}

// createConcurrent races creators of one tag over several instances: exactly
// one wins and the others get ErrTagExists, whatever the interleaving.
func (s storeSuite) createConcurrent(t *testing.T, open Opener) {
	ctx := t.Context()
	var admins []leaf.SegmentAdmin
	for range 3 {
		_, adm := s.open(t, open)
		admins = append(admins, adm)
	}
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		created, exist int
	)
	start := make(chan struct{})
	for i := range 24 {
		wg.Go(func() {
			<-start
			err := admins[i%len(admins)].CreateTag(ctx, leaf.Alloc{Tag: "race", MaxID: int64(i + 1), Step: 10})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, leaf.ErrTagExists):
				exist++
			default:
				t.Errorf("concurrent CreateTag: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	switch {
	case s.traits.Striped:
		// A creator that finds the tag on some databases completes it.
		if created < 1 || created+exist != 24 {
			t.Errorf("24 concurrent CreateTag: %d created, %d ErrTagExists; want at least 1 created, the rest ErrTagExists", created, exist)
		}
	case created != 1 || exist != 23:
		t.Errorf("24 concurrent CreateTag: %d created, %d ErrTagExists; want 1 and 23", created, exist)
	}
}

// invalidTagBeforeSQL checks that every method rejects a bad tag before it
// reaches the database: on a closed instance the error is still
// ErrInvalidTag, and names built to inject SQL leave the table intact.
func (s storeSuite) invalidTagBeforeSQL(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "victim", 1, 10)
	closed, err := open()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := closed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	bad := []string{
		"",
		strings.Repeat("a", leaf.MaxTagLen+1),
		"victim' OR '1'='1",
		"victim'; DROP TABLE leaf_alloc; --",
		`victim" OR "1"="1`,
		"victim%",
		"vic_im' --",
		"$1",
		"?",
		"a\x00b",
		"tag/with/slash",
		"tab\tbed",
		"ünïcode",
	}
	for _, x := range []leaf.SegmentStore{closed, st} {
		xa := x.(leaf.SegmentAdmin)
		for _, tag := range bad {
			calls := []struct {
				name string
				err  error
			}{
				{"Alloc", func() error { _, err := x.Alloc(ctx, tag); return err }()},
				{"Reserve", func() error { _, err := x.Reserve(ctx, tag, 0); return err }()},
				{"Reserve(step)", func() error { _, err := x.Reserve(ctx, tag, 10); return err }()},
				{"GiveBack", func() error { _, err := x.GiveBack(ctx, tag, 1, 11); return err }()},
				{"CreateTag", xa.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10})},
				{"SetStep", xa.SetStep(ctx, tag, 5)},
				{"DeleteTag", xa.DeleteTag(ctx, tag)},
			}
			for _, c := range calls {
				s.wantErr(t, fmt.Sprintf("%s(%q)", c.name, tag), c.err, leaf.ErrInvalidTag)
			}
		}
	}
	if tags := s.tags(t, st); !slices.Equal(tags, []string{"victim"}) {
		t.Errorf("Tags after invalid calls = %q, want [victim]", tags)
	}
	if a := s.alloc(t, st, "victim"); a.MaxID != 1 || a.Step != 10 {
		t.Errorf("victim row changed by invalid calls: %+v", a)
	}
}

func (s storeSuite) reserveStoredStep(t *testing.T, open Opener) {
	st, adm := s.open(t, open)
	s.create(t, adm, "stored", 1000, 10)
	for i := range int64(3) {
		r := s.reserve(t, st, "stored", 0)
		s.wantRange(t, r, 1000+10*i, 10, 10)
	}
	s.wantMaxID(t, "after 3 reserves of 10 from 1000", s.alloc(t, st, "stored"), 1030)
}

// reserveFirstRange: max_id is the first ID to issue, so a tag created at 1
// with Leaf's sample step hands out [1, 2001) then [2001, 4001).
func (s storeSuite) reserveFirstRange(t *testing.T, open Opener) {
	st, adm := s.open(t, open)
	s.create(t, adm, "from-one", 1, 2000)
	s.wantRange(t, s.reserve(t, st, "from-one", 0), 1, 2000, 2000)
	s.wantRange(t, s.reserve(t, st, "from-one", 0), 2001, 2000, 2000)
}

func (s storeSuite) reserveExplicitStep(t *testing.T, open Opener) {
	st, adm := s.open(t, open)
	s.create(t, adm, "explicit", 50, 10)
	s.wantRange(t, s.reserve(t, st, "explicit", 25), 50, 25, 10)
	s.wantRange(t, s.reserve(t, st, "explicit", 0), 75, 10, 10)
	s.wantRange(t, s.reserve(t, st, "explicit", 1), 85, 1, 10)
	s.wantRange(t, s.reserve(t, st, "explicit", -3), 86, 10, 10)
	// Like Leaf, an explicit step lives in the caller's memory only.
	a := s.alloc(t, st, "explicit")
	if a.Step != 10 {
		t.Errorf("after explicit reserves: %+v, want step 10", a)
	}
	s.wantMaxID(t, "after explicit reserves", a, 96)
}

// reserveStepChange is the go-zero bug: a server that computes a range from
// a step it cached overlaps another's range once the stored step shrinks.
// Bounds must come from the updated row.
func (s storeSuite) reserveStepChange(t *testing.T, open Opener) {
	a, adm := s.open(t, open)
	b, _ := s.open(t, open)
	s.create(t, adm, "shrink", 1, 1000)
	var got []leaf.Reservation
	got = append(got, s.reserve(t, a, "shrink", 0))
	s.wantRange(t, got[0], 1, 1000, 1000)
	if err := adm.SetStep(t.Context(), "shrink", 10); err != nil {
		t.Fatalf("SetStep: %v", err)
	}
	got = append(got, s.reserve(t, b, "shrink", 0))
	s.wantRange(t, got[1], 1001, 10, 10)
	got = append(got, s.reserve(t, a, "shrink", 0))
	s.wantRange(t, got[2], 1011, 10, 10)
	got = append(got, s.reserve(t, a, "shrink", 1000)) // a's cached step
	s.wantRange(t, got[3], 1021, 1000, 10)
	if err := adm.SetStep(t.Context(), "shrink", 5000); err != nil {
		t.Fatalf("SetStep: %v", err)
	}
	got = append(got, s.reserve(t, b, "shrink", 0))
	s.wantRange(t, got[4], 2021, 5000, 5000)
	end := s.checkTiling(t, "shrink", 1, got)
	s.wantMaxID(t, "after the step changes", s.alloc(t, a, "shrink"), end)
}

// checkTiling checks that rs, in any order, tile [start, end) exactly:
// pairwise disjoint and without gaps. It returns end. On a striped store
// each database tiles numbers of its own, so it checks that the IDs are
// pairwise disjoint and at or above start, and returns one past the
// highest.
func (s storeSuite) checkTiling(t *testing.T, tag string, start int64, rs []leaf.Reservation) int64 {
	t.Helper()
	if s.traits.Striped {
		return s.checkDisjoint(t, tag, start, rs)
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b leaf.Reservation) int {
		switch {
		case a.Start() < b.Start():
			return -1
		case a.Start() > b.Start():
			return 1
		}
		return 0
	})
	next := start
	for i, r := range rs {
		if r.Step <= 0 {
			t.Errorf("%s: range %d [%d, %d) has step %d", tag, i, r.Start(), r.MaxID, r.Step)
		}
		switch {
		case r.Start() < next:
			t.Errorf("%s: range [%d, %d) overlaps the one before, which ends at %d", tag, r.Start(), r.MaxID, next)
		case r.Start() > next:
			t.Errorf("%s: gap [%d, %d) before range [%d, %d)", tag, next, r.Start(), r.Start(), r.MaxID)
		}
		next = max(next, r.MaxID)
	}
	return next
}

// checkDisjoint checks that the IDs of rs are pairwise disjoint and at or
// above start, and returns one past the highest.
func (storeSuite) checkDisjoint(t *testing.T, tag string, start int64, rs []leaf.Reservation) int64 {
	t.Helper()
	var all [][2]int64
	for _, r := range rs {
		if r.Step <= 0 {
			t.Errorf("%s: range [%d, %d) has step %d", tag, r.Start(), r.MaxID, r.Step)
		}
		all = append(all, idRanges(r)...)
	}
	slices.SortFunc(all, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	end := start
	for i, r := range all {
		if r[0] < start {
			t.Errorf("%s: IDs [%d, %d) below the start %d", tag, r[0], r[1], start)
		}
		if i > 0 && r[0] < all[i-1][1] {
			t.Errorf("%s: IDs [%d, %d) and [%d, %d) overlap", tag, all[i-1][0], all[i-1][1], r[0], r[1])
		}
		end = max(end, r[1])
	}
	return end
}

func (s storeSuite) reserveUnknown(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "known", 1, 10)
	for _, step := range []int{0, 7} {
		_, err := st.Reserve(ctx, "ghost", step)
		s.wantErr(t, fmt.Sprintf("Reserve(ghost, %d)", step), err, leaf.ErrTagNotFound)
		if err != nil && !strings.Contains(err.Error(), "ghost") {
			t.Errorf("Reserve(ghost) error %q does not name the tag", err)
		}
	}
	if tags := s.tags(t, st); !slices.Equal(tags, []string{"known"}) {
		t.Errorf("Reserve of an unknown tag left tags %q; it must never insert", tags)
	}
	_, err := st.Alloc(ctx, "ghost")
	s.wantErr(t, "Alloc(ghost)", err, leaf.ErrTagNotFound)
	ok, err := st.GiveBack(ctx, "ghost", 1, 10)
	if ok || err != nil {
		t.Errorf("GiveBack(ghost) = %v, %v; want false, nil", ok, err)
	}
	if a := s.alloc(t, st, "known"); a.MaxID != 1 {
		t.Errorf("other row changed: %+v", a)
	}
}

func (s storeSuite) reserveCanceled(t *testing.T, open Opener) {
	st, adm := s.open(t, open)
	s.create(t, adm, "cancel", 1, 10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := st.Reserve(ctx, "cancel", 0)
	s.wantErr(t, "Reserve with a cancelled context", err, context.Canceled)
	if a := s.alloc(t, st, "cancel"); a.MaxID != 1 {
		t.Errorf("a cancelled Reserve moved max_id to %d", a.MaxID)
	}
}

func (s storeSuite) giveBack(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "gb", 100, 10)
	r := s.reserve(t, st, "gb", 0) // [100, 110)
	if s.traits.Striped {
		s.giveBackStriped(t, st, r)
		return
	}
	if ok, err := st.GiveBack(ctx, "gb", 104, r.MaxID); !ok || err != nil {
		t.Fatalf("GiveBack(104, 110) = %v, %v; want true", ok, err)
	}
	if got := s.alloc(t, st, "gb").MaxID; got != 104 {
		t.Errorf("max_id after give back = %d, want 104", got)
	}
	r = s.reserve(t, st, "gb", 0)
	s.wantRange(t, r, 104, 10, 10)
	// Someone reserved since 110: the give back must not apply.
	if ok, err := st.GiveBack(ctx, "gb", 100, 110); ok || err != nil {
		t.Errorf("stale GiveBack = %v, %v; want false, nil", ok, err)
	}
	if got := s.alloc(t, st, "gb").MaxID; got != 114 {
		t.Errorf("max_id after stale give back = %d, want 114", got)
	}
	// Nothing to give back still matches the row.
	if ok, err := st.GiveBack(ctx, "gb", 114, 114); !ok || err != nil {
		t.Errorf("GiveBack(114, 114) = %v, %v; want true", ok, err)
	}
	for _, c := range []struct{ from, expect int64 }{{0, 114}, {-1, 114}, {115, 114}} {
		_, err := st.GiveBack(ctx, "gb", c.from, c.expect)
		s.wantErr(t, fmt.Sprintf("GiveBack(%d, %d)", c.from, c.expect), err, leaf.ErrInvalidArgument)
	}
	if got := s.alloc(t, st, "gb").MaxID; got != 114 {
		t.Errorf("max_id after invalid give backs = %d, want 114", got)
	}
}

// giveBackStriped: a striped store never gives back, so a give back
// answers false and changes nothing; invalid arguments are still refused.
func (s storeSuite) giveBackStriped(t *testing.T, st leaf.SegmentStore, r leaf.Reservation) {
	ctx := t.Context()
	before := s.alloc(t, st, "gb")
	if ok, err := st.GiveBack(ctx, "gb", r.Start()+4, r.MaxID); ok || err != nil {
		t.Errorf("GiveBack on a striped store = %v, %v; want false, nil", ok, err)
	}
	if a := s.alloc(t, st, "gb"); a.MaxID != before.MaxID {
		t.Errorf("max_id after a refused give back = %d, want %d", a.MaxID, before.MaxID)
	}
	s.reserve(t, st, "gb", 0) // its IDs must be new: nothing came back
	for _, c := range []struct{ from, expect int64 }{{0, 114}, {-1, 114}, {115, 114}} {
		_, err := st.GiveBack(ctx, "gb", c.from, c.expect)
		s.wantErr(t, fmt.Sprintf("GiveBack(%d, %d)", c.from, c.expect), err, leaf.ErrInvalidArgument)
	}
}

func (s storeSuite) setStep(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "step", 1, 10)
	cases := []struct {
		name string
		tag  string
		step int
		want error
	}{
		{"Raise", "step", 20, nil},
		{"Same", "step", 20, nil}, // a no-op UPDATE still finds the row
		{"Max", "step", leaf.MaxStep, nil},
		{"Lower", "step", 3, nil},
		{"Zero", "step", 0, leaf.ErrInvalidArgument},
		{"Negative", "step", -5, leaf.ErrInvalidArgument},
		{"TooLarge", "step", leaf.MaxStep + 1, leaf.ErrInvalidArgument},
		{"Unknown", "nope", 5, leaf.ErrTagNotFound},
	}
	stored := 10
	for _, c := range cases {
		err := adm.SetStep(ctx, c.tag, c.step)
		if c.want == nil {
			if err != nil {
				t.Errorf("SetStep %s (%d): %v", c.name, c.step, err)
				continue
			}
			stored = c.step
		} else {
			s.wantErr(t, "SetStep "+c.name, err, c.want)
		}
		if a := s.alloc(t, st, "step"); a.Step != stored || a.MaxID != 1 {
			t.Errorf("after SetStep %s: %+v, want step %d, max_id 1", c.name, a, stored)
		}
	}
	s.wantRange(t, s.reserve(t, st, "step", 0), 1, stored, stored)
	if tags := s.tags(t, st); !slices.Equal(tags, []string{"step"}) {
		t.Errorf("Tags = %q; SetStep of an unknown tag must not insert", tags)
	}
}

func (s storeSuite) deleteTag(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "a", 1, 10)
	s.create(t, adm, "b", 1, 10)
	s.reserve(t, st, "a", 0)
	if err := adm.DeleteTag(ctx, "a"); err != nil {
		t.Fatalf("DeleteTag: %v", err)
	}
	if tags := s.tags(t, st); !slices.Equal(tags, []string{"b"}) {
		t.Errorf("Tags after delete = %q, want [b]", tags)
	}
	_, err := st.Alloc(ctx, "a")
	s.wantErr(t, "Alloc of a deleted tag", err, leaf.ErrTagNotFound)
	_, err = st.Reserve(ctx, "a", 0)
	s.wantErr(t, "Reserve of a deleted tag", err, leaf.ErrTagNotFound)
	s.wantErr(t, "DeleteTag twice", adm.DeleteTag(ctx, "a"), leaf.ErrTagNotFound)
	s.wantErr(t, "DeleteTag of an unknown tag", adm.DeleteTag(ctx, "never"), leaf.ErrTagNotFound)
	// A tag created again starts where its creator says.
	s.create(t, adm, "a", 500, 5)
	s.wantRange(t, s.reserve(t, st, "a", 0), 500, 5, 5)
}

// concurrentReserves hammers two tags from three instances with 16
// goroutines each, mixing stored and explicit steps while another goroutine
// keeps changing the stored step. Every range must be disjoint from every
// other, and together they must tile [start, max_id) without gaps.
func (s storeSuite) concurrentReserves(t *testing.T, open Opener) {
	const instances, goroutines = 3, 16
	perGoroutine := 6
	if testing.Short() {
		perGoroutine = 2
	}
	ctx := t.Context()
	var stores []leaf.SegmentStore
	for range instances {
		st, _ := s.open(t, open)
		stores = append(stores, st)
	}
	_, adm := s.open(t, open)
	starts := map[string]int64{"hot": 1, "warm": 1_000_000}
	s.create(t, adm, "hot", starts["hot"], 7)
	s.create(t, adm, "warm", starts["warm"], 3)

	var (
		mu  sync.Mutex
		got = map[string][]leaf.Reservation{}
		wg  sync.WaitGroup
	)
	done := make(chan struct{})
	stepper := make(chan struct{})
	go func() {
		defer close(stepper)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := adm.SetStep(ctx, "hot", 1+i%9); err != nil {
				t.Errorf("concurrent SetStep: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range instances * goroutines {
		st := stores[i%instances]
		wg.Go(func() {
			for j := range perGoroutine {
				tag := "hot"
				if (i+j)%2 == 1 {
					tag = "warm"
				}
				step := []int{0, 5, 11}[(i+j)%3]
				r, err := st.Reserve(ctx, tag, step)
				if err != nil {
					t.Errorf("Reserve(%s, %d): %v", tag, step, err)
					return
				}
				if step > 0 && r.Step != step || step <= 0 && r.Step != r.StoredStep {
					t.Errorf("Reserve(%s, %d) = step %d, stored %d", tag, step, r.Step, r.StoredStep)
				}
				mu.Lock()
				got[tag] = append(got[tag], r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(done)
	<-stepper
	total := 0
	for tag, start := range starts {
		rs := got[tag]
		total += len(rs)
		end := s.checkTiling(t, tag, start, rs)
		var sum int64
		for _, r := range rs {
			sum += int64(r.Step)
		}
		a := s.alloc(t, stores[0], tag)
		switch {
		case s.traits.Striped:
			// Each database's numbers add up on their own; Alloc is a
			// bound in IDs.
			if a.MaxID < end {
				t.Errorf("%s: max_id %d, want a bound at or above %d, past every ID handed out", tag, a.MaxID, end)
			}
		case a.MaxID != end || a.MaxID != start+sum:
			t.Errorf("%s: max_id %d, want start %d + sum of steps %d = %d (last range ends at %d)", tag, a.MaxID, start, sum, start+sum, end)
		}
	}
	if want := instances * goroutines * perGoroutine; total != want && !t.Failed() {
		t.Errorf("%d reserves succeeded, want %d", total, want)
	}
}

// schemaIdempotent opens several instances at once on a fresh database (they
// race to create the table), then reopens one over existing rows.
func (s storeSuite) schemaIdempotent(t *testing.T, open Opener) {
	var wg sync.WaitGroup
	opened := make([]leaf.SegmentStore, 4)
	for i := range opened {
		wg.Go(func() {
			st, err := open()
			if err != nil {
				t.Errorf("concurrent open %d: %v", i, err)
				return
			}
			opened[i] = st
		})
	}
	wg.Wait()
	for _, st := range opened {
		if st != nil {
			t.Cleanup(func() { _ = st.Close() })
		}
	}
	if t.Failed() {
		return
	}
	adm := opened[0].(leaf.SegmentAdmin)
	s.create(t, adm, "kept", 40, 4)
	s.reserve(t, opened[1], "kept", 0)
	for _, st := range opened {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	st, _ := s.open(t, open)
	a := s.alloc(t, st, "kept")
	if a.Step != 4 {
		t.Errorf("after reopening: %+v, want step 4", a)
	}
	s.wantMaxID(t, "after reopening", a, 44)
	s.wantRange(t, s.reserve(t, st, "kept", 0), 44, 4, 4)
}

// close: closing one instance leaves the others working, and closing twice is
// harmless.
func (s storeSuite) close(t *testing.T, open Opener) {
	a, adm := s.open(t, open)
	s.create(t, adm, "c", 1, 10)
	b, err := open()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s.reserve(t, b, "c", 0)
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	s.wantRange(t, s.reserve(t, a, "c", 0), 11, 10, 10)
}

// createWithoutStart: MaxID 0 is "no start given"; a tag never deleted then
// starts at 1, like Leaf's column default.
func (s storeSuite) createWithoutStart(t *testing.T, open Opener) {
	st, adm := s.open(t, open)
	s.create(t, adm, "fresh", 0, 10)
	if a := s.alloc(t, st, "fresh"); a.MaxID != 1 || a.Step != 10 {
		t.Errorf("created without a start: %+v, want max_id 1", a)
	}
	s.wantRange(t, s.reserve(t, st, "fresh", 0), 1, 10, 10)
}

// tombstone: a deleted tag's IDs never come back. Created again without a
// start it continues above every ID issued before; a start below that is
// refused with the lowest start allowed, one at it is accepted. A second
// instance (another server) sees the same tombstone.
func (s storeSuite) tombstone(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	st2, adm2 := s.open(t, open)
	s.create(t, adm, "orders", 1, 10)
	for range 3 {
		s.reserve(t, st, "orders", 0) // [1, 31)
	}
	s.create(t, adm, "other", 5, 10)
	if err := adm.DeleteTag(ctx, "orders"); err != nil {
		t.Fatalf("DeleteTag: %v", err)
	}
	for _, start := range []int64{1, 30} {
		err := adm2.CreateTag(ctx, leaf.Alloc{Tag: "orders", MaxID: start, Step: 10})
		s.wantErr(t, fmt.Sprintf("CreateTag of a deleted tag at start %d", start), err, leaf.ErrTagTombstoned)
		var te *leaf.TombstoneError
		ok := errors.As(err, &te) && te.Tag == "orders"
		want := int64(31)
		if s.traits.Striped && ok {
			// In IDs: above every ID handed out, wherever the stripes put
			// them.
			want = max(te.MinStart, s.issuedBound(t, "orders"))
		}
		if !ok || te.MinStart != want {
			t.Errorf("CreateTag at start %d: error %v, want a *leaf.TombstoneError for orders with MinStart %d", start, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("start >= %d", want)) {
			t.Errorf("CreateTag at start %d: error %q does not give the lowest start allowed", start, err)
		}
	}
	// A refused create leaves no row behind.
	if tags := s.tags(t, st); !slices.Equal(tags, []string{"other"}) {
		t.Fatalf("Tags after refused creates = %q, want [other]", tags)
	}
	s.create(t, adm2, "orders", 0, 7)
	a := s.alloc(t, st, "orders")
	if a.Step != 7 {
		t.Errorf("re-created without a start: %+v, want step 7", a)
	}
	s.wantMaxID(t, "re-created without a start", a, 31)
	s.wantRange(t, s.reserve(t, st2, "orders", 0), 31, 7, 7) // max_id 38

	// Deleted again: the tombstone rises to 38; exactly 38 is allowed.
	if err := adm2.DeleteTag(ctx, "orders"); err != nil {
		t.Fatalf("second DeleteTag: %v", err)
	}
	lowest := int64(38)
	if s.traits.Striped {
		// The lowest start is the one the refusal names; it must be above
		// every ID handed out, and exactly it must be accepted.
		var te *leaf.TombstoneError
		if err := adm.CreateTag(ctx, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 7}); !errors.As(err, &te) {
			t.Fatalf("CreateTag at 1 after the second delete: %v, want a TombstoneError", err)
		}
		if b := s.issuedBound(t, "orders"); te.MinStart < b {
			t.Errorf("after the second delete the lowest start is %d, below IDs handed out (up to %d)", te.MinStart, b-1)
		}
		lowest = te.MinStart
	}
	err := adm.CreateTag(ctx, leaf.Alloc{Tag: "orders", MaxID: lowest - 1, Step: 7})
	s.wantErr(t, fmt.Sprintf("CreateTag at %d after the second delete", lowest-1), err, leaf.ErrTagTombstoned)
	s.create(t, adm, "orders", lowest, 7)
	s.wantRange(t, s.reserve(t, st, "orders", 0), lowest, 7, 7)
	// A start above the tombstone is the creator's to choose.
	if err := adm.DeleteTag(ctx, "orders"); err != nil {
		t.Fatalf("third DeleteTag: %v", err)
	}
	s.create(t, adm, "orders", 1000, 7)
	s.wantRange(t, s.reserve(t, st, "orders", 0), 1000, 7, 7)
	// Other tags are untouched by all of it; a tag never deleted has no
	// tombstone.
	if a := s.alloc(t, st, "other"); a.MaxID != 5 {
		t.Errorf("other tag changed: %+v", a)
	}
	s.create(t, adm, "never-deleted", 1, 10)
	s.wantErr(t, "DeleteTag of an unknown tag", adm.DeleteTag(ctx, "ghost"), leaf.ErrTagNotFound)
	s.create(t, adm, "ghost", 1, 10) // a failed delete leaves no tombstone
}

// tombstoneGiveBack: a server that still holds the last range of a deleted
// tag must not give its tail to the row that replaced it, which starts at
// the tombstone.
func (s storeSuite) tombstoneGiveBack(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "gb", 1, 10)
	r := s.reserve(t, st, "gb", 0) // [1, 11): only 1..3 issued, say
	if err := adm.DeleteTag(ctx, "gb"); err != nil {
		t.Fatalf("DeleteTag: %v", err)
	}
	s.create(t, adm, "gb", 0, 10) // starts at 11 = r.MaxID
	before := s.alloc(t, st, "gb")
	if ok, err := st.GiveBack(ctx, "gb", r.Start()+3, r.MaxID); ok || err != nil {
		t.Errorf("GiveBack below the tombstone = %v, %v; want false, nil", ok, err)
	}
	a := s.alloc(t, st, "gb")
	s.wantMaxID(t, "after a give back below the tombstone", a, 11)
	if a.MaxID != before.MaxID {
		t.Errorf("max_id after a give back below the tombstone = %d, want %d", a.MaxID, before.MaxID)
	}
	if s.traits.Striped {
		// It never gives back; the row's IDs stay new.
		s.reserve(t, st, "gb", 0)
		return
	}
	// Above the tombstone, give back works as ever.
	r = s.reserve(t, st, "gb", 0) // [11, 21)
	if ok, err := st.GiveBack(ctx, "gb", 15, r.MaxID); !ok || err != nil {
		t.Errorf("GiveBack(15, 21) = %v, %v; want true", ok, err)
	}
	s.wantRange(t, s.reserve(t, st, "gb", 0), 15, 10, 10)
}

// tombstoneConcurrent races reserves, deletes and creates (mostly without a
// start) of one tag over several instances. Whatever the interleaving, no
// two reserved ranges may overlap: a re-created row never starts below a
// range its predecessors handed out. (One delete or create in three calls
// is far above any real rate; many more make InnoDB's deadlocks between an
// insert over a deleted key and a locking read of it outlast the retries.)
func (s storeSuite) tombstoneConcurrent(t *testing.T, open Opener) {
	const instances, workers = 3, 12
	rounds := 24
	if testing.Short() {
		rounds = 12
	}
	ctx := t.Context()
	type inst struct {
		st  leaf.SegmentStore
		adm leaf.SegmentAdmin
	}
	var all []inst
	for range instances {
		st, adm := s.open(t, open)
		all = append(all, inst{st, adm})
	}
	s.create(t, all[0].adm, "churn", 1, 5)
	var (
		mu                      sync.Mutex
		got                     []leaf.Reservation
		wg                      sync.WaitGroup
		nDeleted, nCreated, nTS int
	)
	for i := range workers {
		x := all[i%instances]
		wg.Go(func() {
			for j := range rounds {
				var err error
				switch (i + j) % 6 {
				case 0, 1, 2, 3:
					var r leaf.Reservation
					if r, err = x.st.Reserve(ctx, "churn", 0); err == nil {
						mu.Lock()
						got = append(got, r)
						mu.Unlock()
					}
				case 4:
					if err = x.adm.DeleteTag(ctx, "churn"); err == nil {
						mu.Lock()
						nDeleted++
						mu.Unlock()
					}
				case 5:
					a := leaf.Alloc{Tag: "churn", Step: 5}
					if j%3 == 0 {
						a.MaxID = 1 // refused once a range was handed out
					}
					if err = x.adm.CreateTag(ctx, a); err == nil {
						mu.Lock()
						nCreated++
						mu.Unlock()
					}
					if errors.Is(err, leaf.ErrTagTombstoned) {
						mu.Lock()
						nTS++
						mu.Unlock()
						err = nil
					}
				}
				if err != nil && !errors.Is(err, leaf.ErrTagNotFound) && !errors.Is(err, leaf.ErrTagExists) {
					t.Errorf("worker %d round %d: %v", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// In IDs: a striped store's databases share numbers, never IDs.
	var ids [][2]int64
	for _, r := range got {
		ids = append(ids, idRanges(r)...)
	}
	slices.SortFunc(ids, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	for i := 1; i < len(ids); i++ {
		if ids[i][0] < ids[i-1][1] {
			t.Errorf("ranges [%d, %d) and [%d, %d) overlap", ids[i-1][0], ids[i-1][1], ids[i][0], ids[i][1])
		}
	}
	t.Logf("%d ranges reserved, %d deletes, %d creates, %d creates refused by the tombstone", len(got), nDeleted, nCreated, nTS)
	if len(got) == 0 || nDeleted == 0 || nCreated == 0 {
		t.Errorf("the race did not happen: %d ranges, %d deletes, %d creates", len(got), nDeleted, nCreated)
	}
}

// TombstoneKeepsHighest checks that deleting a tag again never lowers its
// tombstone, even when the row was set below it by hand (or by a Java Leaf
// node's operator, who sees only leaf_alloc). setMaxID writes a row's max_id
// with the database's own SQL.
func TombstoneKeepsHighest(t *testing.T, open Opener, setMaxID func(t *testing.T, tag string, maxID int64)) {
	var s storeSuite
	ctx := t.Context()
	st, adm := s.open(t, open)
	s.create(t, adm, "high", 500, 10)
	s.reserve(t, st, "high", 0) // max_id 510
	if err := adm.DeleteTag(ctx, "high"); err != nil {
		t.Fatalf("DeleteTag: %v", err)
	}
	s.create(t, adm, "high", 0, 10)
	setMaxID(t, "high", 3)
	if a := s.alloc(t, st, "high"); a.MaxID != 3 {
		t.Fatalf("setMaxID did not apply: %+v", a)
	}
	if err := adm.DeleteTag(ctx, "high"); err != nil {
		t.Fatalf("second DeleteTag: %v", err)
	}
	err := adm.CreateTag(ctx, leaf.Alloc{Tag: "high", MaxID: 3, Step: 10})
	var te *leaf.TombstoneError
	if !errors.As(err, &te) || te.MinStart != 510 {
		t.Errorf("CreateTag at 3 after deleting a row at 3 under a tombstone of 510: %v, want a TombstoneError with MinStart 510", err)
	}
	s.create(t, adm, "high", 0, 10)
	if a := s.alloc(t, st, "high"); a.MaxID != 510 {
		t.Errorf("re-created without a start at %d, want 510", a.MaxID)
	}
}

// versioner returns st's change counter reader, or skips the test for a
// store that keeps none (generators then list every tag at each refresh).
func (storeSuite) versioner(t *testing.T, st leaf.SegmentStore) func() int64 {
	t.Helper()
	vs, ok := st.(leaf.SegmentVersioner)
	if !ok {
		t.Skipf("%T keeps no change counter", st)
	}
	return func() int64 {
		t.Helper()
		v, err := vs.TagsVersion(t.Context())
		if err != nil {
			t.Fatalf("TagsVersion: %v", err)
		}
		return v
	}
}

// tagsVersion: the change counter moves with every CreateTag and DeleteTag
// that commits, and with nothing else, so that a refresh which finds it
// unchanged may skip the listing. It never comes back to a value it had,
// and it outlives the store instance.
func (s storeSuite) tagsVersion(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	read := s.versioner(t, st)
	v0 := read()
	if v := read(); v != v0 {
		t.Fatalf("TagsVersion moved by itself: %d, then %d", v0, v)
	}
	seen := map[int64]bool{v0: true}
	moved := func(what string) {
		t.Helper()
		v := read()
		if seen[v] {
			t.Errorf("%s: TagsVersion %d, a value it had before; want a new one", what, v)
		}
		seen[v] = true
	}
	v := v0
	unmoved := func(what string) {
		t.Helper()
		if got := read(); got != v {
			t.Errorf("%s moved TagsVersion from %d to %d; only creates and deletes may", what, v, got)
		}
	}

	s.create(t, adm, "a", 1, 10)
	moved("CreateTag")
	v = read()
	s.wantErr(t, "duplicate CreateTag", adm.CreateTag(ctx, leaf.Alloc{Tag: "a", MaxID: 1, Step: 10}), leaf.ErrTagExists)
	unmoved("a CreateTag that failed")
	s.reserve(t, st, "a", 0)
	unmoved("Reserve")
	if err := adm.SetStep(ctx, "a", 20); err != nil {
		t.Fatalf("SetStep: %v", err)
	}
	unmoved("SetStep")
	if _, err := st.GiveBack(ctx, "a", 5, 11); err != nil {
		t.Fatalf("GiveBack: %v", err)
	}
	unmoved("GiveBack")
	if _, err := st.Allocs(ctx); err != nil {
		t.Fatalf("Allocs: %v", err)
	}
	s.tags(t, st)
	unmoved("reads")
	s.wantErr(t, "DeleteTag of a missing tag", adm.DeleteTag(ctx, "missing"), leaf.ErrTagNotFound)
	unmoved("a DeleteTag that failed")

	if err := adm.DeleteTag(ctx, "a"); err != nil {
		t.Fatalf("DeleteTag: %v", err)
	}
	moved("DeleteTag")
	v = read()
	var te *leaf.TombstoneError
	if err := adm.CreateTag(ctx, leaf.Alloc{Tag: "a", MaxID: 1, Step: 10}); !errors.As(err, &te) {
		t.Fatalf("CreateTag below the tombstone: %v, want a TombstoneError", err)
	}
	unmoved("a CreateTag refused by the tombstone")
	s.create(t, adm, "a", 0, 10)
	moved("CreateTag after a delete")
	v = read()

	// Another instance, and one opened after this one closed, read the
	// same counter: it lives in the database.
	st2, _ := s.open(t, open)
	if got := s.versioner(t, st2)(); got != v {
		t.Errorf("TagsVersion from a second instance %d, want %d", got, v)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st3, _ := s.open(t, open)
	if got := s.versioner(t, st3)(); got != v {
		t.Errorf("TagsVersion after reopening %d, want %d", got, v)
	}
}

// tagsVersionConcurrent: creates and deletes from two instances at once
// all commit (the counter's one row serialises them without deadlocks the
// store does not retry), and each moves the counter.
func (s storeSuite) tagsVersionConcurrent(t *testing.T, open Opener) {
	ctx := t.Context()
	a, admA := s.open(t, open)
	_, admB := s.open(t, open)
	read := s.versioner(t, a)
	before := read()
	const perInstance = 8
	var wg sync.WaitGroup
	for i, adm := range []leaf.SegmentAdmin{admA, admB} {
		for k := range perInstance {
			wg.Go(func() {
				tag := fmt.Sprintf("v%d-%d", i, k)
				if err := adm.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}); err != nil {
					t.Errorf("CreateTag(%s): %v", tag, err)
					return
				}
				if err := adm.DeleteTag(ctx, tag); err != nil {
					t.Errorf("DeleteTag(%s): %v", tag, err)
				}
			})
		}
	}
	wg.Wait()
	after := read()
	if after == before {
		t.Errorf("TagsVersion %d unchanged after %d creates and deletes", after, 4*perInstance)
	}
	if tags := s.tags(t, a); len(tags) != 0 {
		t.Errorf("tags left: %q", tags)
	}
}
