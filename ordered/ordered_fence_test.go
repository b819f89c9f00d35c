package ordered_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/sqlite"
)

// orderedSegmentStore is what the fence tests need of a store: segments
// and the leases of ordered tags.
type orderedSegmentStore interface {
	leaf.SegmentStore
	leaf.OrderedStore
}

// countedStore counts the reserves of one server that succeed once
// counting is on: a stale owner's must all fail.
type countedStore struct {
	orderedSegmentStore
	counting atomic.Bool
	reserves atomic.Int64
}

func (c *countedStore) count(err error) {
	if err == nil && c.counting.Load() {
		c.reserves.Add(1)
	}
}

func (c *countedStore) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	r, err := c.orderedSegmentStore.Reserve(ctx, tag, step)
	c.count(err)
	return r, err
}

func (c *countedStore) ReserveOwned(ctx context.Context, tag, owner string, token int64, step int) (leaf.Reservation, error) {
	r, err := c.orderedSegmentStore.ReserveOwned(ctx, tag, owner, token, step)
	c.count(err)
	return r, err
}

// steppedClock is a store's clock that a test steps forward, as an
// operator or NTP may step a database server's.
type steppedClock struct{ ahead atomic.Int64 }

func (c *steppedClock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func (c *steppedClock) step(d time.Duration) { c.ahead.Add(int64(d)) }

// openSteppedSQLite opens a SQLite store on a clock the test steps, with
// the ordered tag "seq" (step 10).
func openSteppedSQLite(t *testing.T) (*sqlite.Store, *steppedClock) {
	t.Helper()
	clock := &steppedClock{}
	st, err := sqlite.OpenWith(bg, filepath.Join(t.TempDir(), "leaf.db"), sqlite.Config{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTag(bg, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetOrdered(bg, "seq", true); err != nil {
		t.Fatal(err)
	}
	return st, clock
}

// issuer is one server of a fence test: its generator, and the log of
// every ID issued by any of them, in issue order.
type issuer struct {
	gens []*gen
	log  []issued
}

type issued struct {
	by int // the index of the server that issued it
	id int64
}

// ask asks server i for one ID of "seq", forwarding to the owner it names,
// as the transports do, and logs who issued it. It answers the error of
// the ask when nothing was issued.
func (r *issuer) ask(t *testing.T, i int) error {
	t.Helper()
	id, err := r.gens[i].NextID(bg, "seq")
	if err == nil {
		r.log = append(r.log, issued{i, id})
		return nil
	}
	var no *leaf.NotOwnerError
	if !errors.As(err, &no) || no.URL == "" {
		return err
	}
	for j := range r.gens {
		if leaf.OwnerURL(ownerOf(j)) == no.URL {
			s, _, err := r.gens[j].NextOrderedRange(bg, "seq", 1)
			if err == nil {
				r.log = append(r.log, issued{j, s})
			}
			return err
		}
	}
	t.Fatalf("no server at %s", no.URL)
	return nil
}

// increasing checks that the IDs strictly increase in issue order.
func (r *issuer) increasing(t *testing.T) {
	t.Helper()
	for i := 1; i < len(r.log); i++ {
		if r.log[i].id <= r.log[i-1].id {
			t.Fatalf("ID %d issued by server %d after %d by server %d: the ordered tag's IDs went back (%d IDs issued in all)",
				r.log[i].id, r.log[i].by, r.log[i-1].id, r.log[i-1].by, len(r.log))
		}
	}
}

// issuedBy counts the IDs server i issued.
func (r *issuer) issuedBy(i int) int {
	n := 0
	for _, x := range r.log {
		if x.by == i {
			n++
		}
	}
	return n
}

// orderedClockJump: A owns "seq" and renews its lease; the store's clock
// is stepped (jump) by far more than the lease. B keeps being asked for
// IDs throughout, and forwards them to A: it must never take the tag
// over, whatever the store's clock says of A's lease, and every ID issued
// strictly increases.
func orderedClockJump(t *testing.T, stA, stB leaf.SegmentStore, lease time.Duration, jump func()) {
	tweak := func(i int) func(*conf) {
		return func(s *conf) { s.Owner, s.OwnerLease = ownerOf(i), lease }
	}
	r := &issuer{gens: []*gen{newGen(t, settings(stA, tweak(0))), newGen(t, settings(stB, tweak(1)))}}
	if err := r.ask(t, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.ask(t, 1); err != nil {
		t.Fatal(err)
	}
	jump()
	tick := time.NewTicker(lease / 20)
	defer tick.Stop()
	for range 100 { // five leases
		<-tick.C
		for _, i := range []int{1, 0} {
			if err := r.ask(t, i); err != nil {
				t.Fatalf("server %d: %v", i, err)
			}
		}
	}
	r.increasing(t)
	if n := r.issuedBy(1); n > 0 {
		t.Errorf("B issued %d IDs: it took the tag over while A renewed its lease", n)
	}
	ost := stA.(leaf.OrderedStore)
	if l, _, err := ost.TagLease(bg, "seq"); err != nil || l.Owner != ownerOf(0) {
		t.Errorf("lease after the clock jump: %+v, %v; want still A's", l, err)
	}
}

// TestOrderedClockJumpSQLite: the store's clock stepped an hour forward
// while A owns the tag and renews it does not let B take it over.
func TestOrderedClockJumpSQLite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, clock := openSteppedSQLite(t)
		orderedClockJump(t, st, st, 10*time.Second, func() { clock.step(time.Hour) })
	})
}

// orderedStaleOwner: A owns "seq"; another owner (B's identity) is put on
// the row directly in the store (force), while A still believes itself
// the owner (its clock says its lease has time left, as a host suspended
// past it would). A issues what it has buffered, and then its next
// reserve fails: not one reserve of the stale owner succeeds, A stops
// issuing and names B, and B issues above every ID A issued.
func orderedStaleOwner(t *testing.T, stA *countedStore, stB leaf.SegmentStore, force func()) {
	tweak := func(i int) func(*conf) {
		return func(s *conf) { s.Owner, s.MaxStep = ownerOf(i), 10 }
	}
	r := &issuer{gens: []*gen{newGen(t, settings(stA, tweak(0))), newGen(t, settings(stB, tweak(1)))}}
	for range 5 {
		if err := r.ask(t, 0); err != nil {
			t.Fatal(err)
		}
	}
	force()
	stA.counting.Store(true)
	var err error
	for range 100 {
		var id int64
		if id, err = r.gens[0].NextID(bg, "seq"); err != nil {
			break
		}
		r.log = append(r.log, issued{0, id})
	}
	if n := stA.reserves.Load(); n > 0 {
		t.Errorf("the stale owner reserved %d ranges after another owner took the tag", n)
	}
	// The failed reserve may end the ownership between a take and its
	// look at the deadline: that take's IDs are discarded, with
	// ErrLeaseLost. Either way A then names B.
	var no *leaf.NotOwnerError
	if !errors.Is(err, leaf.ErrLeaseLost) && !errors.As(err, &no) {
		t.Fatalf("the stale owner's answer once its buffer ran dry: %v; want ErrLeaseLost or ErrNotOwner", err)
	}
	if _, err = r.gens[0].NextID(bg, "seq"); !errors.As(err, &no) || no.Owner != ownerOf(1) {
		t.Fatalf("the stale owner's next answer: %v; want one naming %s", err, ownerOf(1))
	}
	for range 5 {
		if err := r.ask(t, 1); err != nil {
			t.Fatal(err)
		}
		if err := r.ask(t, 0); err != nil {
			t.Fatal(err)
		}
	}
	r.increasing(t)
	if r.issuedBy(1) == 0 {
		t.Error("B issued nothing after it took the tag")
	}
}

// forceOwner puts owner on the row of "seq" directly in the store, as a
// server that watched the lease for a whole lease would: the lease must
// have run out by the store's clock.
func forceOwner(t *testing.T, os leaf.OrderedStore, owner string) {
	t.Helper()
	cur, _, err := os.TagLease(bg, "seq")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := os.AcquireTag(bg, "seq", owner, 10*time.Second, cur); err != nil || l.Owner != owner {
		t.Fatalf("AcquireTag for %s watching %+v = %+v, %v", owner, cur, l, err)
	}
}

// TestOrderedStaleOwnerSQLite: the lease is made to run out by the
// store's clock, and another owner put on the row, while A still issues.
func TestOrderedStaleOwnerSQLite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, clock := openSteppedSQLite(t)
		stA := &countedStore{orderedSegmentStore: st}
		orderedStaleOwner(t, stA, st, func() {
			clock.step(time.Hour)
			forceOwner(t, st, ownerOf(1))
		})
	})
}
