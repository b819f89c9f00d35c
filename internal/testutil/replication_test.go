package testutil

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestMariaDBPairSemiSync fails a semi-synchronous pair over: a write the
// primary acknowledged is on the replica, even when the primary dies right
// after it; read_only keeps the application off the replica until Promote;
// a Proxy Switch moves a client to the promoted replica.
func TestMariaDBPairSemiSync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two mariadbds")
	}
	p := NewMariaDBPair(t, SemiSync)
	ctx := Context(t, 3*time.Minute)
	dsn := p.CreateDatabase(t, "leaf")
	proxy := NewProxy(t, p.Primary.Addr)
	client := openDB(t, via(t, dsn, proxy.Addr()))
	replica := openDB(t, p.Replica.DSNAs(AppUser, "leaf"))

	// The settings took: had the timeout been clamped, the primary might
	// fall back to asynchronous replication on a slow machine.
	var waitPoint string
	var timeout int64
	if err := p.Primary.queryRow(ctx, "SELECT @@rpl_semi_sync_master_wait_point, @@rpl_semi_sync_master_timeout", &waitPoint, &timeout); err != nil {
		t.Fatal(err)
	}
	if waitPoint != "AFTER_SYNC" || timeout != semiSyncTimeout.Milliseconds() {
		t.Fatalf("primary: wait point %s, timeout %dms; want AFTER_SYNC, %dms", waitPoint, timeout, semiSyncTimeout.Milliseconds())
	}

	mustExec(ctx, t, client, "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")
	acked := func() int {
		n, err := p.Primary.status(ctx, "Rpl_semi_sync_master_yes_tx")
		if err != nil {
			t.Fatal(err)
		}
		i, _ := strconv.Atoi(n)
		return i
	}
	before := acked()
	mustExec(ctx, t, client, "INSERT INTO t VALUES (1, 'acknowledged')")
	if after := acked(); after <= before {
		t.Fatalf("Rpl_semi_sync_master_yes_tx %d → %d: the insert was not acknowledged by the replica", before, after)
	}
	if n, err := p.Primary.status(ctx, "Rpl_semi_sync_master_no_tx"); err != nil || n != "0" {
		t.Fatalf("Rpl_semi_sync_master_no_tx = %q, %v: the primary committed without the replica", n, err)
	}
	if err := p.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(ctx, t, replica, 1)
	if id := serverID(ctx, t, client); id != PrimaryServerID {
		t.Fatalf("client on server %d, want the primary's %d", id, PrimaryServerID)
	}

	// read_only binds AppUser: the replica refuses the application's
	// writes until it is promoted.
	_, err := replica.ExecContext(ctx, "INSERT INTO t VALUES (100, 'on the replica')")
	if !isMySQLError(err, 1290) { // ER_OPTION_PREVENTS_STATEMENT
		t.Fatalf("write on the replica before Promote: %v, want error 1290 (read-only)", err)
	}

	// The primary dies right after acknowledging a write: it is in the
	// replica's relay log, and Promote applies it before it forgets the
	// primary.
	mustExec(ctx, t, client, "INSERT INTO t VALUES (2, 'acknowledged, then the crash')")
	p.Primary.Kill9()
	if err := p.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(ctx, t, replica, 1, 2)
	mustExec(ctx, t, replica, "INSERT INTO t VALUES (3, 'on the promoted replica')")

	// The VIP moves: the client's connections drop, and it reconnects to
	// the new primary through the same address.
	proxy.Switch(p.Replica.Addr)
	err = waitUntil(ctx, "the client writing through the switched proxy", func(ctx context.Context) (bool, error) {
		_, err := client.ExecContext(ctx, "REPLACE INTO t VALUES (4, 'through the proxy, after the switch')")
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if id := serverID(ctx, t, client); id != ReplicaServerID {
		t.Fatalf("client on server %d after the switch, want the replica's %d", id, ReplicaServerID)
	}
	wantRows(ctx, t, client, 1, 2, 3, 4)
}

// TestMariaDBPairAsync shows the lossy failover: with replication stopped,
// a row committed on the primary is missing from the replica promoted after
// the primary's crash, and its key may be written again there. A fence must
// not depend on such a row.
func TestMariaDBPairAsync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two mariadbds")
	}
	p := NewMariaDBPair(t, Async)
	ctx := Context(t, 3*time.Minute)
	dsn := p.CreateDatabase(t, "leaf")
	primary := openDB(t, dsn)
	replica := openDB(t, p.Replica.DSNAs(AppUser, "leaf"))

	mustExec(ctx, t, primary, "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")
	mustExec(ctx, t, primary, "INSERT INTO t VALUES (1, 'replicated')")
	if err := p.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(ctx, t, replica, 1)
	for _, id := range []uint32{PrimaryServerID, ReplicaServerID} {
		m := map[uint32]*MariaDB{PrimaryServerID: p.Primary, ReplicaServerID: p.Replica}[id]
		if got, err := m.ServerID(ctx); err != nil || got != id {
			t.Fatalf("ServerID of %s = %d, %v; want %d", m.Addr, got, err, id)
		}
	}

	if err := p.StopReplication(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(ctx, t, primary, "INSERT INTO t VALUES (2, 'committed on the primary only')")
	if err := p.WaitCaughtUp(ctx); err == nil {
		t.Fatal("WaitCaughtUp succeeded with replication stopped")
	} else {
		t.Logf("WaitCaughtUp with replication stopped: %v", err)
	}
	p.Primary.Kill9()
	if err := p.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(ctx, t, replica, 1)
	// The lost row's key is free on the new primary.
	mustExec(ctx, t, replica, "INSERT INTO t VALUES (2, 'written again after the failover')")
	wantRows(ctx, t, replica, 1, 2)
}

// openDB is a pool on dsn, closed at the test's end.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// via is dsn with its address replaced by addr (a Proxy's).
func via(t testing.TB, dsn, addr string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	return cfg.FormatDSN()
}

func mustExec(ctx context.Context, t testing.TB, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.ExecContext(ctx, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// wantRows fails the test unless table t holds exactly the rows ids.
func wantRows(ctx context.Context, t testing.TB, db *sql.DB, ids ...int) {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT id FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("rows %v, want %v", got, ids)
	}
}

func serverID(ctx context.Context, t testing.TB, db *sql.DB) uint32 {
	t.Helper()
	var id uint32
	if err := db.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// isMySQLError reports whether err is the MySQL error number.
func isMySQLError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}
