package zookeeper

import (
	"context"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testdb"
	"github.com/leafgo/leaf/leaftest"
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
	addr := testdb.ZooKeeper(t)
	for _, recycle := range []bool{false, true} {
		name := map[bool]string{false: "zookeeper", true: "zookeeper-recycle"}[recycle]
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(addr, newName(t, addr, testdb.UniqueName()))
			leaftest.HammerSnowflake(t, opener(cfg, recycle))
		})
	}
}

// A generator cut off from ZooKeeper stops issuing before its session can
// expire; the server that takes its worker ID issues only above its IDs.
func TestSnowflakeLeaseHandover(t *testing.T) {
	addr := testdb.ZooKeeper(t)
	cfg := testConfig(addr, newName(t, addr, testdb.UniqueName()))
	p := testdb.NewProxy(t, addr)
	cut := cfg
	cut.Servers = []string{p.Addr()}
	leaftest.LeaseHandover(t, opener(cfg, true), opener(cut, true), p)
}
