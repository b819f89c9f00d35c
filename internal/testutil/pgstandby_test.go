package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// errNotYet is a polled condition's answer while it does not hold yet.
var errNotYet = errors.New("not yet")

// pgConnect opens a connection the test closes at its end.
func pgConnect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestPGStandbySync checks that the standby is synchronous: a commit
// returns once the standby has flushed it, with remote_apply once it has
// applied it (so a read there sees it at once), and with the standby gone
// a commit waits until it is back.
func TestPGStandbySync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	pair := NewPostgresPair(t)
	ctx := Context(t, 5*time.Minute)
	dsn := pair.CreateDatabase(t, "leaf")
	primary := pgConnect(t, ctx, dsn)
	if _, err := primary.Exec(ctx, "CREATE TABLE t (x int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	// synchronous_commit=on: the commit waited until the standby reported
	// a flush past the transaction's WAL, the very report that
	// pg_stat_replication shows, so it shows it as soon as the commit
	// returns.
	tx, err := primary.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lsn string
	if err := tx.QueryRow(ctx, "INSERT INTO t VALUES (1) RETURNING pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var flushed bool
	if err := primary.QueryRow(ctx, "SELECT flush_lsn >= $1::pg_lsn FROM pg_stat_replication WHERE application_name = $2",
		lsn, pgStandbyName).Scan(&flushed); err != nil {
		t.Fatal(err)
	}
	if !flushed {
		t.Fatalf("a commit with synchronous_commit=on returned before the standby flushed past %s", lsn)
	}

	// remote_apply: the commit returns once the standby has replayed it, so
	// the row is visible there at once, no polling.
	if _, err := primary.Exec(ctx, "SET synchronous_commit = remote_apply"); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	standbyDSN := pair.StandbyDSN("leaf")
	var n int
	if err := pgQueryRow(ctx, standbyDSN, "SELECT count(*) FROM t", nil, &n); err != nil || n != 2 {
		t.Fatalf("standby right after a remote_apply commit: %d rows, %v; want 2", n, err)
	}

	// Without its standby the primary keeps the commit waiting (wait event
	// SyncRep) until the standby is back and has flushed it.
	pair.Standby().Kill9()
	committed := make(chan error, 1)
	go func() {
		committed <- pgExec(ctx, dsn, "INSERT INTO t VALUES (3)")
	}()
	if err := pgPoll(ctx, "a commit waiting for the standby", func(ctx context.Context) error {
		var waiting int
		if err := pgQueryRow(ctx, pair.PrimaryDSN(""),
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'", nil, &waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return errNotYet
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-committed:
		t.Fatalf("a commit returned (%v) with the synchronous standby down", err)
	default:
	}
	if err := pair.Standby().Restart(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-committed:
		if err != nil {
			t.Fatalf("the waiting commit: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting commit did not return after the standby came back")
	}
	// Flushed on the standby but, with synchronous_commit=on, perhaps not
	// yet replayed: poll.
	if err := pgPoll(ctx, "row 3 on the standby", func(ctx context.Context) error {
		var n int
		if err := pgQueryRow(ctx, standbyDSN, "SELECT count(*) FROM t WHERE x = 3", nil, &n); err != nil {
			return err
		}
		if n != 1 {
			return errNotYet
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPGStandbyPromote fails over: the primary is killed, the standby
// promoted; it accepts writes, keeps every row committed before the kill,
// and is the same system on the next timeline.
func TestPGStandbyPromote(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	pair := NewPostgresPair(t)
	ctx := Context(t, 5*time.Minute)
	dsn := pair.CreateDatabase(t, "leaf")
	before, err := pair.Identity(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("primary: %+v", before)
	if _, err := pair.Identity(ctx, pair.StandbyDSN("leaf")); err == nil {
		t.Error("Identity of a standby in recovery: no error")
	}
	for _, q := range []string{"CREATE TABLE t (x int PRIMARY KEY)", "INSERT INTO t VALUES (1), (2)", "INSERT INTO t VALUES (3)"} {
		if err := pgExec(ctx, dsn, q); err != nil {
			t.Fatal(err)
		}
	}

	pair.Primary().Kill9()
	if pid := pair.Primary().PID(); pid != 0 {
		t.Fatalf("primary's PID after Kill9: %d, want 0", pid)
	}
	if err := pair.Promote(ctx); err != nil {
		t.Fatal(err)
	}

	promoted := pair.StandbyDSN("leaf")
	var n int
	if err := pgQueryRow(ctx, promoted, "SELECT count(*) FROM t", nil, &n); err != nil || n != 3 {
		t.Fatalf("promoted standby: %d rows, %v; want the 3 committed before the kill", n, err)
	}
	if err := pgExec(ctx, promoted, "INSERT INTO t VALUES (4)"); err != nil {
		t.Fatalf("write on the promoted standby: %v", err)
	}

	after, err := pair.Identity(ctx, promoted)
	if err != nil {
		t.Fatal(err)
	}
	var checkpointTimeline uint32
	if err := pgQueryRow(ctx, promoted, "SELECT timeline_id FROM pg_control_checkpoint()", nil, &checkpointTimeline); err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted: %+v (pg_control_checkpoint's timeline: %d)", after, checkpointTimeline)
	if after.SystemID != before.SystemID {
		t.Errorf("system identifier after promotion %d, want %d as before", after.SystemID, before.SystemID)
	}
	if after.Timeline != before.Timeline+1 {
		t.Errorf("timeline after promotion %d, want %d", after.Timeline, before.Timeline+1)
	}
}
