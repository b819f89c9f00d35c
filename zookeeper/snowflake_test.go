package zookeeper

import (
	"context"
	"errors"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/snowflake"
)

func opener(cfg Config, recycle bool) leaftest.RegistryOpener {
	return func(ctx context.Context) (leaf.WorkerRegistry, error) {
		if recycle {
			r, err := OpenRecycle(ctx, cfg)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return r, nil
		}
		r, err := Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// Four snowflake generators with worker IDs from each ZooKeeper registry × 8
// goroutines: every ID unique.
func TestSnowflakeHammer(t *testing.T) {
	addr := testutil.ZooKeeper(t)
	for _, recycle := range []bool{false, true} {
		name := map[bool]string{false: "zookeeper", true: "zookeeper-recycle"}[recycle]
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(addr, newName(t, addr, testutil.UniqueName()))
			leaftest.HammerSnowflake(t, opener(cfg, recycle))
		})
	}
}

// A generator cut off from ZooKeeper stops issuing before its session can
// expire; the server that takes its worker ID issues only above its IDs.
func TestSnowflakeLeaseHandover(t *testing.T) {
	addr := testutil.ZooKeeper(t)
	cfg := testConfig(addr, newName(t, addr, testutil.UniqueName()))
	p := testutil.NewProxy(t, addr)
	cut := cfg
	cut.Servers = []string{p.Addr()}
	leaftest.LeaseHandover(t, opener(cfg, true), opener(cut, true), p)
}

// Two generators given one endpoint: the second cannot start, so the first
// issues alone under the endpoint's worker ID.
func TestSnowflakeSameEndpoint(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	open := opener(testConfig(addr, newName(t, addr, testutil.UniqueName())), false)
	a := leaftest.StartSnowflake(t, open, leaftest.FastSnowflake(nil, leaftest.TestEndpoint(0)))
	if _, err := a.NextID(t.Context(), ""); err != nil {
		t.Fatalf("A: NextID: %v", err)
	}
	reg, err := open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	g, err := snowflake.New(t.Context(), leaftest.FastSnowflake(reg, leaftest.TestEndpoint(0)))
	if err == nil {
		_ = g.Close(context.Background())
		t.Fatalf("B started with A's endpoint and worker %d", g.Status().WorkerID)
	}
	if !errors.Is(err, leaf.ErrWorkerInUse) {
		t.Fatalf("B: snowflake.New: %v, want ErrWorkerInUse", err)
	}
	t.Logf("B: %v", err)
}
