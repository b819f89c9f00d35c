package testutil

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestGalera walks a three-node cluster through what a store on it meets:
// a write on one node is read on the others; two nodes updating one row at
// once make some transactions fail with error 1213, to be retried; a node
// killed misses writes, and has them once restarted.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three mariadbds")
	}
	g := NewGalera(t, 3)
	ctx := Context(t, 5*time.Minute)
	g.CreateDatabase(t, "leaf")
	dbs := make([]*sql.DB, g.Size())
	for i := range dbs {
		dbs[i] = openDB(t, causal(t, g.Node(i).DSN("leaf")))
	}
	for i := range dbs {
		var size string
		if err := dbs[i].QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_size'").Scan(&size); err != nil || size != "3" {
			t.Fatalf("node %d: wsrep_cluster_size %q, %v; want 3", i, size, err)
		}
	}

	mustExec(ctx, t, dbs[0], "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")
	mustExec(ctx, t, dbs[0], "INSERT INTO t VALUES (1, 'written on node 0')")
	for i := range dbs {
		wantRows(ctx, t, dbs[i], 1)
	}

	t.Run("conflict", func(t *testing.T) {
		mustExec(ctx, t, dbs[0], "CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)")
		mustExec(ctx, t, dbs[0], "INSERT INTO counter VALUES (1, 0)")
		commits, deadlocks := updateConcurrently(ctx, t, dbs[0], dbs[1])
		t.Logf("%d commits, %d transactions failed with error 1213", commits, deadlocks)
		if deadlocks == 0 {
			t.Fatal("no transaction failed certification: no conflict shown")
		}
		// The failed ones left no trace: the counter is the commits on
		// every node.
		for i := range dbs {
			var n int64
			if err := dbs[i].QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil || n != commits {
				t.Fatalf("node %d: counter %d, %v; want the %d commits", i, n, err, commits)
			}
		}
	})

	t.Run("rejoin", func(t *testing.T) {
		g.Node(2).Kill9()
		// The survivors evict node 2 once it stops answering (after
		// evs.suspect_timeout); until then a commit waits for it.
		for id := 2; id <= 4; id++ {
			mustExec(ctx, t, dbs[0], fmt.Sprintf("INSERT INTO t VALUES (%d, 'node 2 is down')", id))
		}
		wantRows(ctx, t, dbs[1], 1, 2, 3, 4)
		if err := g.Node(2).Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := g.WaitSynced(ctx, 2); err != nil {
			t.Fatal(err)
		}
		wantRows(ctx, t, dbs[2], 1, 2, 3, 4)
		mustExec(ctx, t, dbs[2], "INSERT INTO t VALUES (5, 'written on the rejoined node 2')")
		wantRows(ctx, t, dbs[0], 1, 2, 3, 4, 5)
	})
}

// updateConcurrently increments counter row 1 in transactions on two nodes
// at once until some have failed with error 1213 (a certification
// conflict: each node let its own transaction through, the cluster orders
// them, the later one loses), or a deadline passes. It returns the number
// of commits and of such failures.
func updateConcurrently(ctx context.Context, t *testing.T, a, b *sql.DB) (commits, deadlocks int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const minRounds = 50 // each, for a conflict to show even on a busy machine
	var committed, failed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, db := range []*sql.DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < minRounds || failed.Load() == 0; round++ {
				if ctx.Err() != nil {
					return
				}
				err := increment(ctx, db)
				switch {
				case err == nil:
					committed.Add(1)
				case isMySQLError(err, 1213):
					failed.Add(1)
				case ctx.Err() != nil:
					return
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return committed.Load(), failed.Load()
}

// increment adds 1 to counter row 1 in a transaction of two statements, so
// that the other node's transaction has time to certify in between.
func increment(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1 FOR UPDATE").Scan(&n); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE counter SET n = ? WHERE id = 1", n+1); err != nil {
		return err
	}
	return tx.Commit()
}

// causal is dsn with wsrep_sync_wait=1: each read on the connection waits
// until the node has applied what the cluster committed before it began.
func causal(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wsrep_sync_wait"] = "1"
	return cfg.FormatDSN()
}
