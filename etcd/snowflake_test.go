package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

func opener(cfg etcd.Config) leaftest.RegistryOpener {
	return func(ctx context.Context) (leaf.WorkerRegistry, error) {
		r, err := etcd.Open(ctx, cfg)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return r, nil
	}
}

// Four snowflake generators with worker IDs leased from etcd × 8 goroutines:
// every ID unique.
func TestSnowflakeHammer(t *testing.T) {
	leaftest.HammerSnowflake(t, opener(namespace(t, testutil.Etcd(t))))
}

// A generator cut off from etcd stops issuing before its lease expires; the
// server that takes its worker ID issues only above its IDs.
func TestSnowflakeLeaseHandover(t *testing.T) {
	addr := testutil.Etcd(t)
	cfg := namespace(t, addr)
	cfg.TTL = 2 * time.Second
	p := testutil.NewProxy(t, addr)
	cut := cfg
	cut.Endpoints = []string{p.Addr()}
	leaftest.LeaseHandover(t, opener(cfg), opener(cut), p)
}
