package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/postgres"
)

func opener(dsn string) leaftest.Opener {
	return func() (leaf.SegmentStore, error) {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

func TestSegmentStore(t *testing.T) {
	leaftest.TestSegmentStore(t, func(t *testing.T) func() (leaf.SegmentStore, error) {
		return opener(testutil.Postgres(t))
	}, leaftest.StoreTraits{})
}

// leafDDL is Leaf's scripts/leaf_alloc.sql in PostgreSQL's dialect, as a
// deployment moving Leaf to PostgreSQL would write it.
const leafDDL = `CREATE TABLE leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint NOT NULL DEFAULT '1',
  step int NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// rawDB connects without the store, as an operator's tools would.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestExistingLeafTable(t *testing.T) {
	dsn := testutil.Postgres(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// TIMESTAMP has no zone: write update_time in the zone the store reads.
	cfg.RuntimeParams["timezone"] = "UTC"
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, q := range []string{leafDDL, leaftest.LeafSampleInsert} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	leaftest.TestExistingLeafTable(t, opener(dsn))
}

func TestOpenDSN(t *testing.T) {
	cases := []struct {
		name string
		dsn  string
		want error
	}{
		{"Malformed", "postgres://%zz", leaf.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := postgres.Open(t.Context(), c.dsn)
			if !errors.Is(err, c.want) {
				if s != nil {
					_ = s.Close()
				}
				t.Fatalf("Open(%q) = %v, want %v", c.dsn, err, c.want)
			}
		})
	}
}

// TestConcurrentSchemaCreation opens many stores at once on empty databases:
// CREATE TABLE IF NOT EXISTS races in PostgreSQL, and Open must absorb it.
func TestConcurrentSchemaCreation(t *testing.T) {
	for round := range 6 {
		dsn := testutil.Postgres(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				s, err := postgres.Open(t.Context(), dsn)
				if err != nil {
					t.Errorf("round %d, open %d: %v", round, i, err)
					return
				}
				_ = s.Close()
			})
		}
		wg.Wait()
	}
}

func TestTombstoneKeepsHighest(t *testing.T) {
	dsn := testutil.Postgres(t)
	leaftest.TombstoneKeepsHighest(t, opener(dsn), func(t *testing.T, tag string, maxID int64) {
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), "UPDATE leaf_alloc SET max_id = $1 WHERE biz_tag = $2", maxID, tag); err != nil {
			t.Fatal(err)
		}
	})
}

// The failover fence on PostgreSQL: see leaftest.TestFailoverFence.
func TestFailoverFence(t *testing.T) {
	leaftest.TestFailoverFence(t, func(t *testing.T) leaftest.FencedStore {
		s, err := postgres.Open(t.Context(), testutil.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, sqlstore.Rebind)
}
