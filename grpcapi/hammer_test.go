package grpcapi_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
)

// hammerGoroutines share one connection, as the clients of a service do.
const hammerGoroutines = 32

// hammerTotal is how many IDs a hammer draws in all.
func hammerTotal() int {
	if testing.Short() {
		return 50_000
	}
	return 200_000
}

// draw is one call of a hammer goroutine: it appends the IDs it got to ids.
type draw func(ctx context.Context, c leafv1.LeafClient, r *rand.Rand, ids []int64) ([]int64, error)

// hammer runs hammerGoroutines goroutines over c, each calling draws in turn
// until it holds its share of total IDs, and checks that every goroutine's
// IDs strictly increase and that no ID is issued twice.
func hammer(t *testing.T, c leafv1.LeafClient, total int, draws ...draw) {
	per := total / hammerGoroutines
	got := make([][]int64, hammerGoroutines)
	var wg sync.WaitGroup
	for g := range hammerGoroutines {
		wg.Go(func() {
			ctx := ctxFor(t)
			r := rand.New(rand.NewPCG(uint64(g), 1))
			ids := make([]int64, 0, per+leaf.MaxBatch)
			for i := 0; len(ids) < per; i++ {
				before := len(ids)
				var err error
				ids, err = draws[i%len(draws)](ctx, c, r, ids)
				if err != nil {
					t.Errorf("goroutine %d, call %d: %v", g, i, err)
					return
				}
				if len(ids) == before {
					t.Errorf("goroutine %d, call %d: no ID", g, i)
					return
				}
				// Each call's IDs above the previous call's, and increasing
				// within the call.
				for j := max(before, 1); j < len(ids); j++ {
					if ids[j] <= ids[j-1] {
						t.Errorf("goroutine %d, call %d: ID %d after %d", g, i, ids[j], ids[j-1])
						return
					}
				}
			}
			got[g] = ids
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	all := slices.Concat(got...)
	if len(all) < total-hammerGoroutines {
		t.Fatalf("%d IDs drawn, want %d", len(all), total)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice", all[i])
		}
	}
	if all[0] < 1 {
		t.Fatalf("ID %d issued", all[0])
	}
	t.Logf("%d IDs over %d goroutines on one connection, all unique", len(all), hammerGoroutines)
}

// batchSize is a random batch size: mostly small, sometimes large.
func batchSize(r *rand.Rand) int32 {
	if r.IntN(50) == 0 {
		return 1 + r.Int32N(1000)
	}
	return 1 + r.Int32N(50)
}

// TestHammerSegment mixes NextID, NextIDs and Range on one tag whose step
// is small, so that ranges are loaded (and switched) all the time.
func TestHammerSegment(t *testing.T) {
	g := newSegment(t, testutil.Store(t, leaf.Alloc{Tag: "hammer", MaxID: 1, Step: 1000}), nil)
	c := client(t, grpcapi.Config{Segment: g})
	hammer(t, c, hammerTotal(),
		func(ctx context.Context, c leafv1.LeafClient, _ *rand.Rand, ids []int64) ([]int64, error) {
			r, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "hammer"})
			if err != nil {
				return ids, err
			}
			return append(ids, r.GetId()), nil
		},
		func(ctx context.Context, c leafv1.LeafClient, rnd *rand.Rand, ids []int64) ([]int64, error) {
			n := batchSize(rnd)
			r, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "hammer", Count: n})
			if err != nil {
				return ids, err
			}
			if len(r.GetIds()) != int(n) {
				t.Errorf("NextIDs(%d) = %d IDs", n, len(r.GetIds()))
			}
			return append(ids, r.GetIds()...), nil
		},
		func(ctx context.Context, c leafv1.LeafClient, rnd *rand.Rand, ids []int64) ([]int64, error) {
			n := batchSize(rnd)
			r, err := c.Range(ctx, &leafv1.RangeRequest{Tag: "hammer", Count: n})
			if err != nil {
				return ids, err
			}
			if r.GetEnd() <= r.GetStart() || r.GetEnd()-r.GetStart() > int64(n) {
				t.Errorf("Range(%d) = [%d, %d)", n, r.GetStart(), r.GetEnd())
			}
			for id := r.GetStart(); id < r.GetEnd(); id++ {
				ids = append(ids, id)
			}
			return ids, nil
		},
	)
}

// TestHammerSnowflake mixes SnowflakeNextID and SnowflakeNextIDs.
func TestHammerSnowflake(t *testing.T) {
	c := client(t, grpcapi.Config{Snowflake: newSnowflake(t)})
	hammer(t, c, hammerTotal(),
		func(ctx context.Context, c leafv1.LeafClient, _ *rand.Rand, ids []int64) ([]int64, error) {
			r, err := c.SnowflakeNextID(ctx, &leafv1.SnowflakeNextIDRequest{})
			if err != nil {
				return ids, err
			}
			return append(ids, r.GetId()), nil
		},
		func(ctx context.Context, c leafv1.LeafClient, rnd *rand.Rand, ids []int64) ([]int64, error) {
			n := batchSize(rnd)
			r, err := c.SnowflakeNextIDs(ctx, &leafv1.SnowflakeNextIDsRequest{Key: "hammer", Count: n})
			if err != nil {
				return ids, err
			}
			if len(r.GetIds()) != int(n) {
				t.Errorf("SnowflakeNextIDs(%d) = %d IDs", n, len(r.GetIds()))
			}
			return append(ids, r.GetIds()...), nil
		},
	)
}
