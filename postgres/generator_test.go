package postgres_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testdb"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/postgres"
)

// The generator on PostgreSQL: three instances with their own pools on one
// database (like three servers), restarts, and an outage through a proxy.

func dbOpener(dsn string) leaftest.Opener {
	return func() (leaf.SegmentStore, error) { return postgres.Open(context.Background(), dsn) }
}

func TestGeneratorHammer(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	leaftest.HammerSegment(t, dbOpener(testdb.Postgres(t)),
		leaftest.Hammer{Instances: 3, Goroutines: 32, Total: total, Step: 100, Batch: 10})
}

func TestGeneratorRestart(t *testing.T) {
	leaftest.RestartSegment(t, dbOpener(testdb.Postgres(t)))
}

func TestGeneratorOutage(t *testing.T) {
	u, err := url.Parse(testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	p := testdb.NewProxy(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	leaftest.OutageSegment(t, dbOpener(u.String()), p)
}

func TestGeneratorTombstone(t *testing.T) {
	leaftest.TombstoneSegment(t, dbOpener(testdb.Postgres(t)))
}
