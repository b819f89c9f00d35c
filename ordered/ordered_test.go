package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

var errCut = errors.New("link cut")

// link is one server's view of a shared store, which the test can cut as
// a network partition (or a process that stopped sending) would.
type link struct {
	*sqlite.Store
	cut atomic.Bool
	// renewCalls and renewLeases count the renewals asked of the store:
	// calls (RenewTag or RenewTags) and the leases they carried.
	renewCalls, renewLeases atomic.Int64
	// stuck, when set, is a tag whose row cannot be had, as one locked by
	// a stopped peer: every renewal naming it fails.
	stuck atomic.Pointer[string]
}

var errStuck = errors.New("lock wait timeout")

func (l *link) stuckOn(tags ...string) bool {
	if p := l.stuck.Load(); p != nil {
		return slices.Contains(tags, *p)
	}
	return false
}

func (l *link) check() error {
	if l.cut.Load() {
		return errCut
	}
	return nil
}

func (l *link) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	if err := l.check(); err != nil {
		return leaf.Reservation{}, err
	}
	return l.Store.Reserve(ctx, tag, step)
}

func (l *link) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	return l.Store.GiveBack(ctx, tag, from, expect)
}

func (l *link) TagLease(ctx context.Context, tag string) (leaf.TagLease, bool, error) {
	if err := l.check(); err != nil {
		return leaf.TagLease{}, false, err
	}
	return l.Store.TagLease(ctx, tag)
}

func (l *link) AcquireTag(ctx context.Context, tag, owner string, ttl time.Duration, watched leaf.TagLease) (leaf.TagLease, error) {
	if err := l.check(); err != nil {
		return leaf.TagLease{}, err
	}
	return l.Store.AcquireTag(ctx, tag, owner, ttl, watched)
}

func (l *link) ReserveOwned(ctx context.Context, tag, owner string, token int64, step int) (leaf.Reservation, error) {
	if err := l.check(); err != nil {
		return leaf.Reservation{}, err
	}
	return l.Store.ReserveOwned(ctx, tag, owner, token, step)
}

func (l *link) RenewTag(ctx context.Context, tag, owner string, token int64, ttl time.Duration) (leaf.TagLease, error) {
	l.renewCalls.Add(1)
	l.renewLeases.Add(1)
	if err := l.check(); err != nil {
		return leaf.TagLease{}, err
	}
	if l.stuckOn(tag) {
		return leaf.TagLease{}, errStuck
	}
	return l.Store.RenewTag(ctx, tag, owner, token, ttl)
}

func (l *link) RenewTags(ctx context.Context, owner string, leases []leaf.TagToken, ttl time.Duration) ([]leaf.LeaseResult, error) {
	l.renewCalls.Add(1)
	l.renewLeases.Add(int64(len(leases)))
	if err := l.check(); err != nil {
		return nil, err
	}
	for _, x := range leases {
		if l.stuckOn(x.Tag) {
			return nil, errStuck
		}
	}
	return l.Store.RenewTags(ctx, owner, leases, ttl)
}

func (l *link) ReleaseTag(ctx context.Context, tag, owner string, token int64) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	return l.Store.ReleaseTag(ctx, tag, owner, token)
}

// cluster is n generators on one shared store, each with an owner
// identity of its own, as n servers.
type cluster struct {
	st    *sqlite.Store
	gens  []*gen
	links []*link
}

func ownerOf(i int) string { return fmt.Sprintf("http://10.0.0.%d:8080#n%d", i+1, i+1) }

func newCluster(t *testing.T, n int, tags []string, tweaks ...func(*conf)) *cluster {
	t.Helper()
	st := testutil.Store(t)
	for _, tag := range tags {
		if err := st.CreateTag(bg, leaf.Alloc{Tag: tag, MaxID: 1, Step: 100}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetOrdered(bg, tag, true); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{st: st}
	for i := range n {
		l := &link{Store: st}
		tw := append([]func(*conf){func(s *conf) { s.Owner = ownerOf(i) }}, tweaks...)
		c.links = append(c.links, l)
		c.gens = append(c.gens, newGen(t, settings(l, tw...)))
	}
	return c
}

func notOwner(t *testing.T, err error) *leaf.NotOwnerError {
	t.Helper()
	var e *leaf.NotOwnerError
	if !errors.As(err, &e) || !errors.Is(err, leaf.ErrNotOwner) {
		t.Fatalf("error %v, want a *leaf.NotOwnerError", err)
	}
	return e
}

// Three servers share one ordered tag: the first to ask owns it and
// issues; the others answer with the owner's URL and the time its lease
// has left. Ranges are refused but through NextOrderedRange; the status
// says who owns the tag.
func TestOrderedOneOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, []string{"seq"})
		g0, g1, g2 := c.gens[0], c.gens[1], c.gens[2]
		if id := next(t, g0, "seq"); id != 1 {
			t.Fatalf("first ID %d, want 1", id)
		}
		for _, g := range []*gen{g1, g2} {
			for range 3 {
				_, err := g.NextID(bg, "seq")
				e := notOwner(t, err)
				if e.Tag != "seq" || e.Owner != ownerOf(0) || e.URL != "http://10.0.0.1:8080" || e.Retry <= 0 || e.Retry > 10*time.Second {
					t.Errorf("NotOwnerError %+v", e)
				}
			}
			_, err := g.NextIDs(bg, "seq", 3, nil)
			notOwner(t, err)
			_, _, err = g.NextOrderedRange(bg, "seq", 3)
			notOwner(t, err)
		}
		ids, err := g0.NextIDs(bg, "seq", 5, nil)
		if err != nil || !slices.Equal(ids, []int64{2, 3, 4, 5, 6}) {
			t.Fatalf("owner's NextIDs = %v, %v", ids, err)
		}
		if s, e, err := g0.NextOrderedRange(bg, "seq", 4); err != nil || s != 7 || e != 11 {
			t.Fatalf("owner's NextOrderedRange = [%d, %d), %v", s, e, err)
		}
		if v, key, err := g0.NextIDPeriod(bg, "seq"); err != nil || v != 11 || key != "" {
			t.Fatalf("NextIDPeriod = %d %q, %v", v, key, err)
		}
		for _, g := range c.gens {
			_, _, err := g.NextRange(bg, "seq", 5)
			testutil.ErrIs(t, err, leaf.ErrOrderedTag)
		}

		// The first load's IDs can be issued before the load has counted
		// itself (InitOK, Loads): let it finish.
		synctest.Wait()
		st0, st1 := testutil.StatusOf(g0, "seq"), testutil.StatusOf(g1, "seq")
		if !st0.Ordered || st0.Owner != ownerOf(0) || st0.OwnerToken < 1 || st0.Issued != 11 || !st0.InitOK {
			t.Errorf("owner's status %+v", st0)
		}
		if !st1.Ordered || st1.Owner != ownerOf(0) || st1.OwnerToken != st0.OwnerToken || st1.Issued != 0 {
			t.Errorf("other's status %+v", st1)
		}

		// The lease is renewed while the owner lives: a minute later it
		// still owns the tag.
		time.Sleep(time.Minute)
		if id := next(t, g0, "seq"); id != 12 {
			t.Errorf("ID after a minute %d, want 12", id)
		}
		_, err = g2.NextID(bg, "seq")
		if e := notOwner(t, err); e.Owner != ownerOf(0) {
			t.Errorf("owner after a minute %q", e.Owner)
		}
		// A plain tag beside it is served by every server.
		if err := c.st.CreateTag(bg, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		for _, g := range c.gens {
			if st := testutil.StatusOf(g, "plain"); st.Ordered {
				t.Fatal("plain tag reported ordered")
			}
			if _, err := g.NextID(bg, "plain"); err != nil {
				t.Fatal(err)
			}
			if s, e, err := g.NextOrderedRange(bg, "plain", 3); err != nil || e-s != 3 {
				t.Errorf("NextOrderedRange of a plain tag = [%d, %d), %v", s, e, err)
			}
		}
	})
}

// Many goroutines call whichever server, forwarding to the owner (as the
// transports do) when told to; meanwhile the owner shuts down gracefully
// and another takes over. Every ID is unique, each goroutine's strictly
// increase, and a call that ended before another began got lower IDs.
func TestOrderedHammer(t *testing.T) {
	c := newCluster(t, 3, []string{"seq"}, func(s *conf) { s.OwnerLease = 2 * time.Second })
	hammerOrdered(t, c.gens, 8, 1500)
}

// hammerOrdered runs workers goroutines of calls each on gens (whose
// owners are ownerOf(i)) for the ordered tag "seq", and checks the order.
func hammerOrdered(t *testing.T, gens []*gen, workers, calls int) {
	type call struct {
		begin, end int64 // on seq
		lo, hi     int64
	}
	var (
		seq      atomic.Int64
		closed   sync.Once
		closedAt atomic.Int64
		mu       sync.Mutex
		all      []call
		perG     = make([][]int64, workers)
	)
	byURL := func(url string) *gen {
		for i, g := range gens {
			if leaf.OwnerURL(ownerOf(i)) == url {
				return g
			}
		}
		t.Fatalf("no server at %s", url)
		return nil
	}
	ctx := testutil.Context(t, time.Minute)
	forward := func(owner *gen, n int) ([]int64, error) {
		var out []int64
		for len(out) < n {
			s, e, err := owner.NextOrderedRange(ctx, "seq", n-len(out))
			if err != nil {
				return nil, err
			}
			for id := s; id < e; id++ {
				out = append(out, id)
			}
		}
		return out, nil
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []call
			for i := 0; i < calls; i++ {
				if w == 0 && i == calls/3 {
					// The owner shuts down: it releases the tag.
					closed.Do(func() {
						for i, g := range gens {
							if testutil.StatusOf(g, "seq").Owner == ownerOf(i) {
								closedAt.Store(seq.Load())
								if err := g.Close(bg); err != nil {
									t.Error(err)
								}
								return
							}
						}
					})
				}
				g := gens[r.IntN(len(gens))]
				n := 1 + r.IntN(4)
				begin := seq.Add(1)
				var (
					ids []int64
					err error
				)
				for tries := 0; ; tries++ {
					if n == 1 {
						var id int64
						if id, err = g.NextID(ctx, "seq"); err == nil {
							ids = []int64{id}
						}
					} else {
						ids, err = g.NextIDs(ctx, "seq", n, nil)
					}
					var no *leaf.NotOwnerError
					if errors.As(err, &no) && no.URL != "" {
						if ids, err = forward(byURL(no.URL), n); err != nil {
							g.OwnerUnreachable("seq")
						}
					}
					if err == nil {
						break
					}
					if tries > 5000 || !errors.Is(err, leaf.ErrClosed) && !errors.Is(err, leaf.ErrNotOwner) && !errors.Is(err, leaf.ErrNotReady) {
						t.Errorf("worker %d call %d: %v", w, i, err)
						return
					}
					// The owner closed and the others still name it,
					// or no one owns the tag yet: try another server,
					// after a client's pause. It is real time: the
					// others see the handover when they read the lease
					// again, no sooner than 10ms after their last read
					// (OwnerUnreachable), and hammerOrdered also drives
					// MariaDB over the network, which no bubble can hold.
					g = gens[r.IntN(len(gens))]
					time.Sleep(time.Millisecond)
				}
				end := seq.Add(1)
				if len(ids) != n {
					t.Errorf("worker %d: %d IDs, want %d", w, len(ids), n)
					return
				}
				mine = append(mine, call{begin, end, ids[0], ids[len(ids)-1]})
				perG[w] = append(perG[w], ids...)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var ids []int64
	for w, got := range perG {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("worker %d: ID %d after %d", w, got[i], got[i-1])
			}
		}
		ids = append(ids, got...)
	}
	testutil.CheckUnique(t, ids)
	// Real-time order: sorted by when they ended, the calls that ended
	// before a call began all got lower IDs than it.
	sort.Slice(all, func(i, j int) bool { return all[i].end < all[j].end })
	prefixMax := make([]int64, len(all))
	for i, cl := range all {
		if cl.lo > cl.hi {
			t.Fatalf("a batch decreases: %+v", cl)
		}
		prefixMax[i] = cl.hi
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	for _, cl := range all {
		k := sort.Search(len(all), func(i int) bool { return all[i].end >= cl.begin }) // calls [0, k) ended before cl began
		if k > 0 && prefixMax[k-1] >= cl.lo {
			t.Fatalf("call %+v got ID %d, not above %d issued by a call that ended before it began", cl, cl.lo, prefixMax[k-1])
		}
	}
	if closedAt.Load() == 0 {
		t.Error("no owner was closed during the run")
	}
	owners := 0
	for _, g := range gens {
		if st := testutil.StatusOf(g, "seq"); st.Issued > 0 {
			owners++
		}
	}
	if owners < 2 {
		t.Errorf("%d servers issued; the tag should have changed owner", owners)
	}
	t.Logf("%d IDs in %d calls", len(ids), len(all))
}

// An owner cut off from the store (dead, or partitioned) stops issuing
// before its lease can run out; another takes over once it has, and its
// first ID is above every ID the first could have issued.
func TestOrderedTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, []string{"seq"})
		// Ranges that outlast the lease: only the lease stops g0.
		if err := c.st.SetStep(bg, "seq", 5000); err != nil {
			t.Fatal(err)
		}
		g0, g1 := c.gens[0], c.gens[1]
		var issued0 []int64
		issued0 = append(issued0, next(t, g0, "seq"))
		_, err := g1.NextID(bg, "seq")
		notOwner(t, err)
		token0 := testutil.StatusOf(g0, "seq").OwnerToken
		c.links[0].cut.Store(true)
		cutAt := time.Now()
		reserved := testutil.MaxID(t, c.st, "seq") // every ID g0 could issue is below it
		lease, _, _ := c.st.TagLease(bg, "seq")
		expires := cutAt.Add(lease.Left)
		// g0 issues from its buffers until its lease's margin, then never
		// again; g1 is told g0 owns the tag until the lease runs out.
		var lastAt time.Time
		for i := 0; ; i++ {
			var (
				id  int64
				err error
			)
			if i%2 == 0 {
				id, err = g0.NextID(bg, "seq")
			} else {
				var ids []int64
				if ids, err = g0.NextIDs(bg, "seq", 2, nil); err == nil {
					id = ids[1]
				}
			}
			if err != nil {
				testutil.ErrIs(t, err, leaf.ErrNotReady)
				testutil.ErrIs(t, err, leaf.ErrLeaseLost)
				break
			}
			issued0, lastAt = append(issued0, id), time.Now()
			time.Sleep(10 * time.Millisecond)
		}
		if !lastAt.Before(expires) {
			t.Errorf("the cut-off owner issued until %s after the cut, its lease ran out %s after it", lastAt.Sub(cutAt), lease.Left)
		}
		for range 3 {
			if id, err := g0.NextID(bg, "seq"); err == nil {
				t.Fatalf("the cut-off owner issued %d after it stopped", id)
			}
		}
		var first int64
		for {
			id, err := g1.NextID(bg, "seq")
			if err == nil {
				first = id
				break
			}
			e := notOwner(t, err)
			if e.Owner != ownerOf(0) {
				t.Fatalf("owner %q before the takeover", e.Owner)
			}
			time.Sleep(e.Retry)
		}
		if time.Now().Before(expires) {
			t.Errorf("taken over %s after the cut, before the lease ran out (%s)", time.Since(cutAt), lease.Left)
		}
		if first < reserved || first <= slices.Max(issued0) {
			t.Errorf("new owner's first ID %d, want >= %d (reserved by the old owner) and above its last %d", first, reserved, slices.Max(issued0))
		}
		// Back on the network, the old owner learns of the new one.
		c.links[0].cut.Store(false)
		time.Sleep(2 * time.Second)
		_, err = g0.NextID(bg, "seq")
		if e := notOwner(t, err); e.Owner != ownerOf(1) {
			t.Errorf("old owner says %q owns the tag", e.Owner)
		}
		if st := testutil.StatusOf(g1, "seq"); st.Owner != ownerOf(1) || st.OwnerToken <= token0 {
			t.Errorf("new owner's status %+v", st)
		}
	})
}

// An owner paused between taking IDs and answering them, past its lease
// (as a process SIGSTOPped there), discards them: it issues nothing after
// it wakes, and the server that took over meanwhile issues above them.
func TestOrderedPausedOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(g *gen) (int, error)
	}{
		{"NextID", func(g *gen) (int, error) {
			if _, err := g.NextID(bg, "seq"); err != nil {
				return 0, err
			}
			return 1, nil
		}},
		{"NextIDs", func(g *gen) (int, error) {
			ids, err := g.NextIDs(bg, "seq", 3, nil)
			return len(ids), err
		}},
		{"NextOrderedRange", func(g *gen) (int, error) {
			s, e, err := g.NextOrderedRange(bg, "seq", 3)
			return int(e - s), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, 2, []string{"seq"})
				g0, g1 := c.gens[0], c.gens[1]
				var (
					pause  atomic.Bool
					taken  [2]int64
					second int64
				)
				g0.PauseAfterTake(func(tag string, s, e int64) {
					if !pause.Load() {
						return
					}
					taken = [2]int64{s, e}
					c.links[0].cut.Store(true) // a stopped process sends nothing
					time.Sleep(11 * time.Second)
					// While it sleeps the lease runs out and g1 takes over.
					id, err := g1.NextID(bg, "seq")
					if err != nil {
						t.Errorf("g1 during the pause: %v", err)
					}
					second = id
					c.links[0].cut.Store(false)
				})
				last := next(t, g0, "seq")
				// g1 has seen g0's lease before the pause: a server takes
				// a lease over only once it has watched it go unrenewed for
				// a whole lease, not when the store's clock says it ran
				// out (which it does during the pause).
				_, err := g1.NextID(bg, "seq")
				notOwner(t, err)
				pause.Store(true)
				n, err := tc.call(g0)
				pause.Store(false)
				if err == nil || n != 0 {
					t.Fatalf("paused owner answered %d IDs, %v", n, err)
				}
				testutil.ErrIs(t, err, leaf.ErrNotReady)
				testutil.ErrIs(t, err, leaf.ErrLeaseLost)
				if taken[0] <= last || second < taken[1] {
					t.Errorf("paused owner took [%d, %d) after %d; the new owner issued %d, want above them", taken[0], taken[1], last, second)
				}
				_, err = g0.NextID(bg, "seq")
				if e := notOwner(t, err); e.Owner != ownerOf(1) {
					t.Errorf("after the pause, owner %q", e.Owner)
				}
			})
		})
	}
}

// A renewal that finds the lease taken stops the owner at once; one that
// fails keeps it issuing until its deadline only.
func TestOrderedLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1, []string{"seq"})
		g := c.gens[0]
		next(t, g, "seq")
		token := testutil.StatusOf(g, "seq").OwnerToken
		// An operator ends the lease by hand and another server takes it.
		if ok, err := c.st.ReleaseTag(bg, "seq", ownerOf(0), token); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, err := c.st.AcquireTag(bg, "seq", "http://other:1#x", 10*time.Second, leaf.TagLease{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second/3 + time.Millisecond) // the next renewal
		synctest.Wait()
		_, err := g.NextID(bg, "seq")
		if e := notOwner(t, err); e.URL != "http://other:1" {
			t.Errorf("after the lease was lost: %+v", e)
		}
	})
}

// An owner whose local deadline passed while the store still holds its
// lease (renewals failed for a while) takes the tag again under a new
// token, with a new buffer above the old one.
func TestOrderedRetakeAfterLapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1, []string{"seq"})
		g := c.gens[0]
		first := next(t, g, "seq")
		token := testutil.StatusOf(g, "seq").OwnerToken
		reserved := testutil.MaxID(t, c.st, "seq")
		c.links[0].cut.Store(true)
		time.Sleep(9500 * time.Millisecond) // past the local deadline, before the lease runs out
		if l, _, _ := c.st.TagLease(bg, "seq"); !l.Held() || l.Token != token {
			t.Fatalf("lease %+v, want still held with token %d", l, token)
		}
		_, err := g.NextID(bg, "seq")
		testutil.ErrIs(t, err, leaf.ErrNotReady)
		c.links[0].cut.Store(false)
		time.Sleep(60 * time.Millisecond) // the failure's cached answer runs out; the lease has not
		id, err := g.NextID(bg, "seq")
		if err != nil {
			t.Fatal(err)
		}
		if id <= first || id < reserved {
			t.Errorf("ID %d after the retake, want above %d and >= %d", id, first, reserved)
		}
		st := testutil.StatusOf(g, "seq")
		if l, _, _ := c.st.TagLease(bg, "seq"); st.OwnerToken <= token || l.Token != st.OwnerToken || l.Owner != ownerOf(0) {
			t.Errorf("token %d (store: %+v), want a new one above %d", st.OwnerToken, l, token)
		}
	})
}

// A graceful Close gives the unused IDs back and releases the lease: the
// next server takes over at once and continues right above the last ID.
func TestOrderedCloseReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, []string{"seq"})
		g0, g1 := c.gens[0], c.gens[1]
		for range 5 {
			next(t, g0, "seq")
		}
		_, err := g1.NextID(bg, "seq")
		notOwner(t, err)
		if err := g0.Close(bg); err != nil {
			t.Fatal(err)
		}
		if l, _, _ := c.st.TagLease(bg, "seq"); l.Held() {
			t.Fatalf("lease after Close: %+v", l)
		}
		// g1 trusts the lease it read for up to a second, unless told
		// that the owner it names did not answer.
		time.Sleep(10 * time.Millisecond)
		_, err = g1.NextID(bg, "seq")
		if e := notOwner(t, err); e.Owner != ownerOf(0) {
			t.Fatalf("%+v", e)
		}
		g1.OwnerUnreachable("seq")
		start := time.Now()
		if id := next(t, g1, "seq"); id != 6 {
			t.Errorf("new owner's first ID %d, want 6", id)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("takeover waited %s", d)
		}
	})
}

// A server without an owner identity never takes an ordered tag; it
// forwards while another owns it.
func TestOrderedNoIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1, []string{"seq"})
		anon := newGen(t, settings(c.st))
		_, err := anon.NextID(bg, "seq")
		testutil.ErrIs(t, err, leaf.ErrNotReady)
		if errors.Is(err, leaf.ErrNotOwner) || !strings.Contains(err.Error(), "owner identity") {
			t.Errorf("error %v: want one naming the missing identity", err)
		}
		next(t, c.gens[0], "seq")
		time.Sleep(time.Second + time.Millisecond)
		_, err = anon.NextID(bg, "seq")
		if e := notOwner(t, err); e.URL != "http://10.0.0.1:8080" {
			t.Errorf("%+v", e)
		}
		if l, _, _ := c.st.TagLease(bg, "seq"); l.Owner != ownerOf(0) {
			t.Errorf("lease %+v", l)
		}
	})
}

// A tag switched to ordered is ordered at once on the server that
// switched it, at the next refresh on the others; and back.
func TestOrderedSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, nil)
		g0, g1 := c.gens[0], c.gens[1]
		if err := c.st.CreateTag(bg, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		next(t, g0, "t")
		next(t, g1, "t")
		if err := g0.SetOrdered(bg, "t", true); err != nil {
			t.Fatal(err)
		}
		reserved := testutil.MaxID(t, c.st, "t")
		first := next(t, g0, "t")
		if first < reserved {
			t.Errorf("first ordered ID %d, below %d reserved before the switch", first, reserved)
		}
		if st := testutil.StatusOf(g0, "t"); !st.Ordered || st.Owner != ownerOf(0) {
			t.Errorf("status after the switch %+v", st)
		}
		// g1 still issues from its plain buffer until its refresh.
		if _, err := g1.NextID(bg, "t"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the refresh keeps buffers made since it began
		if err := g1.Refresh(); err != nil {
			t.Fatal(err)
		}
		_, err := g1.NextID(bg, "t")
		notOwner(t, err)

		// Back to plain: g0 at once; g1 when its cached lease runs out.
		if err := g0.SetOrdered(bg, "t", false); err != nil {
			t.Fatal(err)
		}
		if st := testutil.StatusOf(g0, "t"); st.Ordered {
			t.Errorf("status after the switch back %+v", st)
		}
		if _, err := g0.NextID(bg, "t"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the load counts itself after its IDs are out
		if st := testutil.StatusOf(g0, "t"); st.Ordered || !st.InitOK {
			t.Errorf("status after the switch back %+v", st)
		}
		time.Sleep(time.Second + time.Millisecond)
		if _, err := g1.NextID(bg, "t"); err != nil {
			t.Fatalf("g1 after the switch back: %v", err)
		}
		// And g1's refresh converts an idle ordered state as well.
		if err := g1.SetOrdered(bg, "t", true); err != nil {
			t.Fatal(err)
		}
		next(t, g1, "t")
		if _, err := g0.NextID(bg, "t"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if err := g0.Refresh(); err != nil {
			t.Fatal(err)
		}
		_, err = g0.NextID(bg, "t")
		notOwner(t, err)
		if err := g0.SetOrdered(bg, "t", false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the refresh keeps buffers made since it began
		if err := g1.Refresh(); err != nil {
			t.Fatal(err)
		}
		if st := testutil.StatusOf(g1, "t"); st.Ordered {
			t.Errorf("g1 still ordered after its refresh: %+v", st)
		}
		if _, err := g1.NextID(bg, "t"); err != nil {
			t.Fatal(err)
		}
	})
}

// orderedAll is a store on which every tag named ord-* reads as ordered,
// whatever its shape: the stores refuse to make such tags, and the
// generator must refuse them too should one exist.
type orderedAll struct{ *sqlite.Store }

func (o orderedAll) TagLease(ctx context.Context, tag string) (leaf.TagLease, bool, error) {
	if strings.HasPrefix(tag, "ord-") {
		return leaf.TagLease{Tag: tag}, true, nil
	}
	return o.Store.TagLease(ctx, tag)
}

// An ordered tag must be plain: one with a period, a format or opaque IDs
// is refused, by SetOrdered and when met.
func TestOrderedShapesRefused(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	st := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10})
	shapes := map[string]leaf.TagShape{
		"periodic":  {Period: leaf.PeriodDay, TimeZone: "UTC"},
		"formatted": {Format: leaf.IDFormat{Prefix: "A-", Width: 8}},
		"opaque":    {OpaqueBits: 40},
	}
	for name, shape := range shapes {
		shape, err := segment.PrepareShape(shape, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range []string{name, "ord-" + name} {
			if err := st.CreateShapedTag(bg, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}, shape); err != nil {
				t.Fatal(err)
			}
		}
	}
	g := newGen(t, settings(orderedAll{st}, func(s *conf) { s.Owner = ownerOf(0); s.OpaqueKey = key }))
	for name := range shapes {
		t.Run(name, func(t *testing.T) {
			testutil.ErrIs(t, g.SetOrdered(bg, name, true), leaf.ErrOrderedTag)
			if _, ok, _ := st.TagLease(bg, name); ok {
				t.Error("the refused tag is ordered in the store")
			}
			_, err := g.NextID(bg, "ord-"+name)
			testutil.ErrIs(t, err, leaf.ErrOrderedTag)
			_, err = g.NextIDs(bg, "ord-"+name, 2, nil)
			testutil.ErrIs(t, err, leaf.ErrOrderedTag)
		})
	}
	testutil.ErrIs(t, g.SetOrdered(bg, "nope", true), leaf.ErrTagNotFound)
	testutil.ErrIs(t, g.SetOrdered(bg, "bad tag", true), leaf.ErrInvalidTag)
	if _, _, err := g.NextOrderedRange(bg, "periodic", 2); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("NextOrderedRange of a periodic tag: %v", err)
	}
	_, _, err := g.NextOrderedRange(bg, "opaque", 2)
	testutil.ErrIs(t, err, leaf.ErrOpaqueRange)
	_, _, err = g.NextOrderedRange(bg, "plain", 0)
	testutil.ErrIs(t, err, leaf.ErrInvalidCount)
}

// plainOnly hides the store's ordered tags, as a store without them.
type plainOnly struct{ leaf.SegmentStore }

func TestOrderedSettings(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10})
	for _, tc := range []struct {
		name  string
		tweak func(*conf)
		want  string
	}{
		{"short lease", func(s *conf) { s.OwnerLease = 100 * time.Millisecond }, "OwnerLease is 100ms, want 500ms..10m0s"},
		{"no lease", func(s *conf) { s.OwnerLease = 0 }, "OwnerLease is 0s"},
		{"long lease", func(s *conf) { s.OwnerLease = time.Hour }, "OwnerLease is 1h0m0s"},
		{"owner without URL", func(s *conf) { s.Owner = "#abc" }, "has no URL"},
		{"owner with a space", func(s *conf) { s.Owner = "http://a b#1" }, "space or a control"},
		{"long owner", func(s *conf) { s.Owner = "http://" + strings.Repeat("a", 300) }, "at most 255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := start(settings(st, tc.tweak))
			testutil.ErrIs(t, err, leaf.ErrInvalidArgument)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := start(settings(plainOnly{st}, func(s *conf) { s.Owner = ownerOf(0) })); !errors.Is(err, leaf.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "keeps no ordered tags") {
		t.Errorf("ordered tags on a store without them: %v", err)
	}
}

// An ordered tag nobody asks for is dropped after IdleTimeout, and its
// lease released: another server takes it at once.
func TestOrderedIdleReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, []string{"seq"}, func(s *conf) { s.IdleTimeout = time.Minute })
		last := next(t, c.gens[0], "seq")
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if st := testutil.StatusOf(c.gens[0], "seq"); st.Tag != "" {
			t.Fatalf("idle ordered tag still held: %+v", st)
		}
		if l, _, _ := c.st.TagLease(bg, "seq"); l.Held() {
			t.Fatalf("lease of the idle tag %+v", l)
		}
		if n := c.gens[0].HeldTokens(); n != 0 {
			t.Errorf("%d fencing tokens kept after the idle tag's lease was released, want 0", n)
		}
		if id := next(t, c.gens[1], "seq"); id <= last {
			t.Errorf("next owner's ID %d, not above %d", id, last)
		}
	})
}

// The ordered path's cost on the owner, beside BenchmarkNextID's.
func BenchmarkNextIDOrdered(b *testing.B) {
	st := testutil.Store(b)
	if err := st.CreateTag(bg, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 100000}); err != nil {
		b.Fatal(err)
	}
	if err := st.SetOrdered(bg, "seq", true); err != nil {
		b.Fatal(err)
	}
	g, err := start(settings(st, func(s *conf) { s.Owner = ownerOf(0) }))
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close(bg)
	for b.Loop() {
		if _, err := g.NextID(bg, "seq"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenewBatched: a generator owning many ordered tags renews their
// leases together, a few store calls per round however many tags, and
// holds them all, under their first tokens, past several leases.
func TestRenewBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2*leaf.MaxRenewBatch + 200 // three calls per round
		tags := make([]string, n)
		for i := range tags {
			tags[i] = fmt.Sprintf("conv-%04d", i)
		}
		c := newCluster(t, 1, tags)
		g, l := c.gens[0], c.links[0]
		// Taken in 12 groups 100ms apart: the first renewal pulls the
		// others along, and from then on they renew together.
		for i, tag := range tags {
			if i > 0 && i%100 == 0 {
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := g.NextID(bg, tag); err != nil {
				t.Fatal(err)
			}
		}
		const lease = 10 * time.Second // segment.DefaultConfig
		time.Sleep(5 * lease / 2)
		calls, leases := l.renewCalls.Load(), l.renewLeases.Load()
		// A round every third of the lease, three calls each: 7 rounds in
		// 2.5 leases, where a renewal per tag would make 7 * 1,200 calls
		// and rounds out of step 7 * 12.
		if calls != 7*3 || leases != 7*n {
			t.Errorf("%d renewal calls carrying %d leases in %v for %d tags: want 7 rounds of 3 calls, each of up to %d leases",
				calls, leases, 5*lease/2, n, leaf.MaxRenewBatch)
		}
		for _, tag := range tags {
			ls, ok, err := c.st.TagLease(bg, tag)
			if err != nil || !ok || ls.Owner != ownerOf(0) || ls.Token != 1 || !ls.Held() {
				t.Fatalf("tag %s: lease %+v, %v, %v: want held by %s with its first token", tag, ls, ok, err, ownerOf(0))
			}
			if _, err := g.NextID(bg, tag); err != nil {
				t.Fatalf("tag %s: %v", tag, err)
			}
		}
	})
}

// TestRenewRecovers: renewals that fail for less than the lease's margin
// are tried again, and once the store answers the ownerships go on under
// their tokens, past the lease they had when the store went away.
func TestRenewRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tags := []string{"a", "b", "c"}
		c := newCluster(t, 1, tags)
		g, l := c.gens[0], c.links[0]
		for _, tag := range tags {
			next(t, g, tag)
		}
		l.cut.Store(true)
		time.Sleep(5 * time.Second) // a round failed, and a few retries
		failed := l.renewCalls.Load()
		l.cut.Store(false)
		time.Sleep(7 * time.Second) // past the lease taken before the cut
		if failed < 2 {
			t.Errorf("%d renewal calls while the store was away, want the round and its retries", failed)
		}
		for _, tag := range tags {
			if st := testutil.StatusOf(g, tag); st.OwnerToken != 1 {
				t.Errorf("tag %s: token %d, want still the first", tag, st.OwnerToken)
			}
			next(t, g, tag)
		}
	})
}

// busyStore is a store whose give-backs and lease releases each take a
// while, and which counts how many run at once.
type busyStore struct {
	*sqlite.Store
	running, most atomic.Int64
}

func (s *busyStore) busy() func() {
	n := s.running.Add(1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	// The store's load, simulated; TestCloseManyTags runs it on a synctest
	// bubble's clock.
	time.Sleep(2 * time.Millisecond)
	return func() { s.running.Add(-1) }
}

func (s *busyStore) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	defer s.busy()()
	return s.Store.GiveBack(ctx, tag, from, expect)
}

func (s *busyStore) ReleaseTag(ctx context.Context, tag, owner string, token int64) (bool, error) {
	defer s.busy()()
	return s.Store.ReleaseTag(ctx, tag, owner, token)
}

// TestCloseManyTags: Close gives back the unused IDs of every tag in use
// and releases every lease, several at a time, and the next generator
// continues right above what was issued.
func TestCloseManyTags(t *testing.T) {
	t.Parallel()
	// In a synctest bubble the store's pauses are on the bubble's clock,
	// which moves only when every goroutine in it is blocked: the store
	// calls Close runs together have all begun their pause before the
	// first one's ends, so most counts exactly how many it runs at once,
	// and the pauses cost no wall time.
	synctest.Test(t, func(t *testing.T) {
		st := &busyStore{Store: testutil.Store(t)}
		var plain, ordered []string
		for i := range 60 {
			tag := fmt.Sprintf("p%02d", i)
			if i%3 == 0 {
				tag = fmt.Sprintf("o%02d", i)
				ordered = append(ordered, tag)
			} else {
				plain = append(plain, tag)
			}
			if err := st.CreateTag(bg, leaf.Alloc{Tag: tag, MaxID: 1, Step: 1000}); err != nil {
				t.Fatal(err)
			}
			if tag[0] == 'o' {
				if err := st.SetOrdered(bg, tag, true); err != nil {
					t.Fatal(err)
				}
			}
		}
		all := append(slices.Clone(plain), ordered...)
		// Owners of their own: other tests run alongside with ownerOf's.
		g := newGen(t, settings(st, func(s *conf) { s.Owner = "http://10.0.9.1:8080#close1" }))
		last := map[string]int64{}
		for _, tag := range all {
			last[tag] = next(t, g, tag)
		}
		if err := g.Close(bg); err != nil {
			t.Fatal(err)
		}
		if m := st.most.Load(); m < 2 {
			t.Errorf("at most %d give-backs or releases ran at once, want several", m)
		}
		for _, tag := range ordered {
			if l, _, _ := st.TagLease(bg, tag); l.Held() {
				t.Errorf("tag %s: lease %+v after Close, want released", tag, l)
			}
		}
		g2 := newGen(t, settings(st, func(s *conf) { s.Owner = "http://10.0.9.2:8080#close2" }))
		for _, tag := range all {
			if id := next(t, g2, tag); id != last[tag]+1 {
				t.Errorf("tag %s: %d after %d, want the next: the unused IDs given back", tag, id, last[tag])
			}
		}
	})
}

// TestRenewIsolatesBadRow: one tag's row cannot be renewed (its lock held
// by a stopped peer), which fails every batch naming it. Only that tag
// loses its lease: the others of its batch are retried on their own and
// keep theirs, past several leases.
func TestRenewIsolatesBadRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tags := []string{"a", "b", "c", "d", "e"}
		c := newCluster(t, 1, tags)
		g, l := c.gens[0], c.links[0]
		for _, tag := range tags {
			next(t, g, tag)
		}
		stuck := "c"
		l.stuck.Store(&stuck)
		time.Sleep(25 * time.Second) // over two leases
		for _, tag := range tags {
			st := testutil.StatusOf(g, tag)
			if tag == stuck {
				if st.OwnerToken == 1 {
					t.Errorf("tag %s: still owned under token 1, whose lease could not be renewed", tag)
				}
				continue
			}
			if st.OwnerToken != 1 {
				t.Errorf("tag %s: token %d, want still the first: a bad row in its batch cost it its lease", tag, st.OwnerToken)
			}
			next(t, g, tag)
		}
	})
}
