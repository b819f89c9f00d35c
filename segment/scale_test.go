package segment_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/faultstore"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// Cost follows use: the tests of issue #13's segment items.

// A tag nobody asked for costs its name: no buffers, counters or rate
// meter. 50,000 tags listed cost a few dozen bytes each, where a buffer
// alone is several hundred.
func TestUnusedTagsCostTheirName(t *testing.T) {
	const n = 50_000
	st := testutil.Store(t)
	rows := make([]leaf.Alloc, n)
	for i := range rows {
		rows[i] = leaf.Alloc{Tag: fmt.Sprintf("tag-%06d", i), MaxID: 1, Step: 100}
	}
	testutil.InsertForeign(t, st, rows...)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	g := newGen(t, settings(st))
	perTag := float64(int64(heap())-int64(before)) / n
	if g.TagCount() != n || len(g.Status()) != 0 {
		t.Fatalf("TagCount %d, %d tags with state; want %d and none", g.TagCount(), len(g.Status()), n)
	}
	// The names' strings are the store's own here, so this is the set's
	// 16 bytes a name plus whatever the generator adds per tag.
	if perTag > 48 {
		t.Errorf("%.0f bytes per unused tag, want at most 48", perTag)
	}
	for _, tag := range []string{"tag-000001", "tag-012345", "tag-049999"} {
		next(t, g, tag)
	}
	if s := g.Status(); len(s) != 3 || s[0].Tag != "tag-000001" || s[2].Tag != "tag-049999" {
		t.Fatalf("status after 3 tags used: %d tags, want those 3", len(s))
	}
	t.Logf("%.1f bytes per unused tag", perTag)
}

// Names the server does not know reach the store at LookupRate at most,
// shared by all names; the rest are answered not found at once. Known names
// are served without a lookup.
func TestUnknownNamesCostBounded(t *testing.T) {
	st := newCountingStore(testutil.Store(t, leaf.Alloc{Tag: "real", MaxID: 1, Step: 100}))
	g := newGen(t, settings(st))
	base := st.Calls()
	began := time.Now()
	const names, workers = 3000, 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		notFound int
		other    []error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range names / workers {
				_, err := g.NextID(bg, fmt.Sprintf("made-up-%016x", rng.Uint64()))
				mu.Lock()
				if errors.Is(err, leaf.ErrTagNotFound) {
					notFound++
				} else {
					other = append(other, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	if notFound != names || len(other) > 0 {
		t.Fatalf("%d of %d made-up names not found; others: %v", notFound, names, other[:min(len(other), 3)])
	}
	calls := st.Calls() - base
	// The default budget: 10 at once, 20 a second after.
	if limit := 10 + int(20*took.Seconds()) + 1; calls > limit || calls > 100 {
		t.Fatalf("%d store calls for %d made-up names in %v, want at most %d (and 100)", calls, names, took, limit)
	}
	tot := g.Totals()
	if tot.Lookups == 0 || tot.Refused < names-100 {
		t.Errorf("Totals: %d lookups, %d refused; want some lookups and the rest refused", tot.Lookups, tot.Refused)
	}
	// A listed tag is served with a reserve and no lookup, budget or not.
	before := st.Calls("Alloc")
	next(t, g, "real")
	if st.Calls("Alloc") != before {
		t.Errorf("a listed tag was looked up")
	}
	t.Logf("%d made-up names in %v: %d store calls, %d lookups, %d refused", names, took.Round(time.Millisecond), calls, tot.Lookups, tot.Refused)
}

// spendLookups uses up g's lookup budget, so that a name only a refresh can
// teach it is refused.
func spendLookups(t *testing.T, g *segment.Generator) {
	t.Helper()
	for i := 0; ; i++ {
		before := g.Totals().Refused
		_, err := g.NextID(bg, fmt.Sprintf("spend-%d-%d", time.Now().UnixNano(), i))
		testutil.ErrIs(t, err, leaf.ErrTagNotFound)
		if g.Totals().Refused > before {
			return
		}
	}
}

// A tag created through one server serves there at once, and on another
// within its refresh interval although that one's lookups are spent: the
// change counter moved. With nothing changed, refreshes read the counter
// and never the list.
func TestCreatedElsewhereServesWithinRefresh(t *testing.T) {
	const refresh = 50 * time.Millisecond
	st := newCountingStore(testutil.Store(t))
	set := settings(st, func(s *segment.Config) {
		s.RefreshInterval = refresh
		s.FullRefreshEvery = 1 << 30
		s.LookupRate = 0.001
		s.LookupBurst = 1
	})
	a, b := newGen(t, set), newGen(t, set)
	spendLookups(t, a)
	spendLookups(t, b)

	listings := st.Calls("Tags")
	readsA, readsB := a.Totals().VersionReads, b.Totals().VersionReads
	testutil.WaitFor(t, "three refreshes on each server", func() bool {
		return a.Totals().VersionReads >= readsA+3 && b.Totals().VersionReads >= readsB+3
	})
	if n := st.Calls("Tags") - listings; n != 0 {
		t.Errorf("%d listings while nothing changed, want none (the change counter says so)", n)
	}

	listedBefore := b.Totals().Listings
	if err := a.CreateTag(bg, leaf.Alloc{Tag: "fresh", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if id := next(t, a, "fresh"); id != 1 {
		t.Fatalf("first ID on the creating server %d, want 1", id)
	}
	var (
		id  int64
		err error
	)
	testutil.WaitFor(t, "the other server to serve the new tag", func() bool {
		id, err = b.NextID(bg, "fresh")
		return err == nil
	})
	if took := time.Since(created); took > 4*refresh {
		t.Errorf("served elsewhere %v after the create, want within about the refresh interval %v", took, refresh)
	}
	// Its lookups spent, b learned the tag from a listing the counter
	// called for.
	if b.Totals().Listings == listedBefore {
		t.Errorf("b served the new tag without listing the tags")
	}
	if id != 11 {
		t.Errorf("first ID on the other server %d, want 11 (after the first server's range)", id)
	}
}

// Rows that other tools or Java Leaf insert do not move the change counter:
// the full listing at every FullRefreshEvery-th refresh picks them up.
func TestForeignRowsAtFullRefresh(t *testing.T) {
	st := testutil.Store(t)
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.RefreshInterval = 10 * time.Millisecond
		s.FullRefreshEvery = 20 // every 200ms
		s.LookupRate = 0.001
		s.LookupBurst = 1
	}))
	spendLookups(t, g)
	testutil.InsertForeign(t, st, leaf.Alloc{Tag: "from-java", MaxID: 5, Step: 10})
	inserted := time.Now()
	testutil.WaitFor(t, "the foreign row to be served", func() bool { _, err := g.NextID(bg, "from-java"); return err == nil })
	if took := time.Since(inserted); took < 50*time.Millisecond || took > 2*time.Second {
		t.Errorf("foreign row served after %v, want by the full listing (every 200ms), not a counter refresh", took)
	}
}

// listingStore holds a listing it has read until released, so that a test
// can change the store while a refresh's query is in flight. From then on
// its change counter stays at what that listing saw, so no later refresh
// lists again and undoes a mistake of the held one.
type listingStore struct {
	*countingStore
	mu               sync.Mutex
	armed            bool
	pinned           *int64
	entered, release chan struct{}
}

func (s *listingStore) Tags(ctx context.Context) ([]string, error) {
	tags, err := s.countingStore.Tags(ctx)
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	if armed {
		v, _ := s.countingStore.TagsVersion(ctx)
		s.pinned = &v
	}
	s.mu.Unlock()
	if armed {
		close(s.entered)
		<-s.release
	}
	return tags, err
}

func (s *listingStore) TagsVersion(ctx context.Context) (int64, error) {
	s.mu.Lock()
	pinned := s.pinned
	s.mu.Unlock()
	if pinned != nil {
		return *pinned, nil
	}
	return s.countingStore.TagsVersion(ctx)
}

// A listing that began before this server created a tag must not take the
// tag out of the name set: the server that created it serves it at once,
// lookups spent or not.
func TestListingDoesNotUndoCreate(t *testing.T) {
	st := &listingStore{countingStore: newCountingStore(testutil.Store(t)), entered: make(chan struct{}), release: make(chan struct{})}
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.RefreshInterval = 5 * time.Millisecond
		s.FullRefreshEvery = 1 << 30
		s.LookupRate = 0.001
		s.LookupBurst = 1
	}))
	spendLookups(t, g)
	st.mu.Lock()
	st.armed = true
	st.mu.Unlock()
	// Move the counter so that the next refresh lists.
	if err := st.CreateTag(bg, leaf.Alloc{Tag: "other", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	<-st.entered // the listing has read the table: no "late" in it
	if err := g.CreateTag(bg, leaf.Alloc{Tag: "late", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	close(st.release)
	testutil.WaitFor(t, "the listing to be applied", func() bool { return g.Totals().Listings == 2 })
	reads := g.Totals().VersionReads
	testutil.WaitFor(t, "refreshes that find the counter unchanged", func() bool { return g.Totals().VersionReads >= reads+2 })
	lookups := st.Calls("Alloc")
	if id := next(t, g, "late"); id != 1 {
		t.Fatalf("first ID %d, want 1", id)
	}
	if st.Calls("Alloc") != lookups || g.TagCount() != 2 {
		t.Errorf("the created tag was looked up again or lost: TagCount %d", g.TagCount())
	}
}

// A tag without a request for IdleTimeout loses its state; the unused tail
// is given back (no one reserved since), and the next request continues
// right after the last ID issued. The totals keep what the state counted.
func TestIdleStateDropped(t *testing.T) {
	for _, giveBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("GiveBack=%v", giveBack), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 100}, leaf.Alloc{Tag: "busy", MaxID: 1, Step: 1000})
				g := newGen(t, settings(st, func(s *segment.Config) { s.IdleTimeout = 50 * time.Millisecond; s.GiveBack = giveBack }))
				var last int64
				for range 15 { // past 10%: the next range is loaded too
					last = next(t, g, "a")
				}
				synctest.Wait() // the load of a's next range has landed
				if s := testutil.StatusOf(g, "a"); !s.NextReady {
					t.Fatalf("a's next range not loaded: %+v", s)
				}
				// On the bubble's clock the sweep runs every 25ms and drops a
				// tag it saw idle for 50ms: by 100ms a is gone.
				for range 10 { // busy stays in use throughout
					time.Sleep(10 * time.Millisecond)
					next(t, g, "busy")
				}
				synctest.Wait() // the sweep's give-back is done
				if s := testutil.StatusOf(g, "a"); s.Tag != "" {
					t.Fatalf("a still has state after 100ms idle: %+v", s)
				}
				if s := testutil.StatusOf(g, "busy"); s.Tag == "" {
					t.Fatalf("busy lost its state while in use")
				}
				tot := g.Totals()
				if tot.Dropped != 1 || tot.Issued < 6 || tot.Known != 2 || tot.Active != 1 {
					t.Fatalf("Totals after the drop: %+v", tot)
				}
				wantMax := last + 1 // given back: [6, 201) returned
				if !giveBack {
					wantMax = 201 // both ranges abandoned
				}
				if got := testutil.MaxID(t, st, "a"); got != wantMax {
					t.Fatalf("max_id after the drop %d, want %d", got, wantMax)
				}
				if id := next(t, g, "a"); id != wantMax {
					t.Fatalf("first ID after the drop %d, want %d", id, wantMax)
				}
			})
		})
	}
}

// Known answers HEAD-style checks from the name set, and for other names
// within the lookup budget.
func TestKnown(t *testing.T) {
	st := newCountingStore(testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 10}))
	g := newGen(t, settings(st, func(s *segment.Config) { s.LookupRate = 0.001; s.LookupBurst = 2; s.NegativeTTL = time.Hour }))
	if err := g.Known(bg, "a"); err != nil {
		t.Fatalf("Known(a) = %v", err)
	}
	if n := st.Calls("Alloc"); n != 0 {
		t.Fatalf("a listed tag was looked up %d times", n)
	}
	if err := st.Store.CreateTag(bg, leaf.Alloc{Tag: "b", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := g.Known(bg, "b"); err != nil { // one lookup: found, and learned
		t.Fatalf("Known(b) = %v", err)
	}
	testutil.ErrIs(t, g.Known(bg, "c"), leaf.ErrTagNotFound) // the second lookup
	testutil.ErrIs(t, g.Known(bg, "c"), leaf.ErrTagNotFound) // the negative cache
	testutil.ErrIs(t, g.Known(bg, "d"), leaf.ErrTagNotFound) // the budget is spent
	testutil.ErrIs(t, g.Known(bg, "bad name"), leaf.ErrInvalidTag)
	if n := st.Calls("Alloc"); n != 2 {
		t.Errorf("%d lookups, want 2", n)
	}
	if err := g.Known(bg, "b"); err != nil || g.TagCount() != 2 {
		t.Errorf("Known(b) again = %v, TagCount %d; want nil and 2 (b learned)", err, g.TagCount())
	}
}

// When the first listing fails, names the server has not seen may exist:
// beyond the lookup budget they are not ready, not "not found", and the
// health check lists the tags as soon as the store answers.
func TestListingFailedAtStart(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 10})
	st, faults := faultstore.Wrap(db)
	faults.SetDown(errors.New("unplugged"))
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.HealthInterval = 10 * time.Millisecond
		s.LookupRate = 0.001
		s.LookupBurst = 1
		s.WaitTimeout = 20 * time.Millisecond
		s.RetryBackoff = time.Millisecond
		s.MaxRetryBackoff = 5 * time.Millisecond
	}))
	_, err := g.NextID(bg, "a") // the one lookup: the store is down
	testutil.ErrIs(t, err, leaf.ErrNotReady)
	_, err = g.NextID(bg, "b") // no lookup left, and no listing yet
	testutil.ErrIs(t, err, leaf.ErrNotReady)
	faults.SetDown(nil)
	testutil.WaitFor(t, "the listing", func() bool { return g.Totals().Listings == 1 })
	testutil.WaitFor(t, "a served", func() bool { _, err := g.NextID(bg, "a"); return err == nil })
	_, err = g.NextID(bg, "b")
	testutil.ErrIs(t, err, leaf.ErrTagNotFound)
}

// A request that found a buffer just before the idle sweep dropped it must
// not issue from it afterwards: its ranges were frozen and given back, and
// may already be another buffer's. It goes back for a new buffer instead.
func TestDroppedBufferIssuesNothing(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 100})
	g := newGen(t, settings(st, func(s *segment.Config) { s.IdleTimeout = 10 * time.Millisecond }))
	for range 15 {
		next(t, g, "a")
	}
	testutil.WaitFor(t, "a's next range", func() bool { return testutil.StatusOf(g, "a").NextReady })
	take, err := g.Held("a")
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "a dropped", func() bool { return g.Totals().Dropped == 1 })
	// The sweep counts the drop before it gives the tail back.
	testutil.WaitFor(t, "a's tail [16, 201) given back", func() bool { return testutil.MaxID(t, st, "a") == 16 })
	if lo, hi, err := take(1000); err != segment.ErrRetired {
		t.Fatalf("take from the dropped buffer = [%d, %d), %v; want ErrRetired", lo, hi, err)
	}
	if id := next(t, g, "a"); id != 16 {
		t.Fatalf("next ID %d, want 16 from a new buffer", id)
	}
}
