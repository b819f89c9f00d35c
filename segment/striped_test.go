package segment_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
	"github.com/leafgo/leaf/stripe"
)

// stripedStore is a store over several SQLite databases, each serving
// its stripe, taking them in turn: what a multi-database store hands the
// generator, without the health checks.
type stripedStore struct {
	*sqlite.Store // Tags, Allocs and the rest: database 0's
	members       []*sqlite.Store
	block         int64
	turn          atomic.Int64
}

func (s *stripedStore) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	i := int(s.turn.Add(1)) % len(s.members)
	r, err := s.members[i].Reserve(ctx, tag, step)
	r.Stripe = leaf.Stripe{Index: i, Databases: len(s.members), Block: s.block}
	return r, err
}

// A striped lease is never given back; the generator must not even ask.
func (s *stripedStore) GiveBack(context.Context, string, int64, int64) (bool, error) {
	return false, errors.New("give-back of a striped lease")
}

// TestStripedReservations: generators (like servers) over one set of
// databases, each reserving from them in turn, hand out each stripe's runs
// and nothing else: singles, batches and ranges of all of them are unique,
// and every ID is one its database reserved. Blocks of 7 IDs with steps of
// 20 to 80 make every lease several runs.
func TestStripedReservations(t *testing.T) {
	const databases, block, tag = 3, 7, "striped"
	members := make([]*sqlite.Store, databases)
	for i := range members {
		members[i] = testutil.Store(t)
		if err := members[i].CreateTag(bg, leaf.Alloc{Tag: tag, MaxID: 1, Step: 20}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu  sync.Mutex
		all []int64
		wg  sync.WaitGroup
	)
	for range 3 {
		st := &stripedStore{Store: members[0], members: members, block: block}
		g := newGen(t, settings(st, func(s *segment.Config) { s.MaxStep = 80 }))
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []int64
				for call := range 400 {
					switch (call + w) % 3 {
					case 0:
						id, err := g.NextID(bg, tag)
						if err != nil {
							t.Error(err)
							return
						}
						mine = append(mine, id)
					case 1:
						ids, err := g.NextIDs(bg, tag, 5, nil)
						if err != nil {
							t.Error(err)
							return
						}
						if !slices.IsSorted(ids) {
							t.Errorf("batch %v does not increase", ids)
							return
						}
						mine = append(mine, ids...)
					default:
						s, e, err := g.NextRange(bg, tag, 9)
						if err != nil {
							t.Error(err)
							return
						}
						for id := s; id < e; id++ {
							mine = append(mine, id)
						}
					}
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	testutil.CheckUnique(t, all)
	ends := make([]int64, databases)
	for i, m := range members {
		a, err := m.Alloc(bg, tag)
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = a.MaxID
	}
	runs := 0
	for _, id := range all {
		i := int(id/block) % databases
		s := leaf.Stripe{Index: i, Databases: databases, Block: block}
		if x := stripe.Number(s, id); x < 1 || x >= ends[i] {
			t.Fatalf("ID %d is number %d of database %d, which reserved [1, %d)", id, x, i, ends[i])
		}
		if id%block == 0 {
			runs++
		}
	}
	if runs < 10 {
		t.Fatalf("only %d IDs began a block: the leases were not striped", runs)
	}
}
