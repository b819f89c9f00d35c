package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/snowflake"
)

// forkWorkerDDL is the NotFound9 fork's scripts/leaf_workerid_alloc.sql,
// byte for byte (without its leading DROP TABLE).
const forkWorkerDDL = "CREATE TABLE `leaf_workerid_alloc` (\n" +
	"  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n" +
	"  `ip` varchar(127) DEFAULT NULL,\n" +
	"  `port` varchar(127) DEFAULT NULL,\n" +
	"  `ip_port` varchar(127) NOT NULL,\n" +
	"  `max_timestamp` bigint(20) DEFAULT NULL,\n" +
	"  `create_time` timestamp NULL DEFAULT NULL,\n" +
	"  `update_time` timestamp NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`id`),\n" +
	"  UNIQUE KEY `idx_ipport` (`ip_port`) USING BTREE\n" +
	") ENGINE=InnoDB AUTO_INCREMENT=0"

// forkInsert is the fork's WorkerIdAllocMapper insert.
const forkInsert = "insert into leaf_workerid_alloc (ip_port,ip,port,max_timestamp,create_time,update_time) values (?,?,?,?,?,?)"

func registryOpener(cfg mysql.WorkerConfig) leaftest.RegistryOpener {
	return func(ctx context.Context) (leaf.WorkerRegistry, error) {
		r, err := mysql.OpenWorkerRegistryWithConfig(ctx, cfg)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return r, nil
	}
}

func TestWorkerRegistry(t *testing.T) {
	leaftest.TestWorkerRegistry(t, func(t *testing.T) leaftest.RegistryOpener {
		// The shortest lease: a "crashed" holder's lease is waited out
		// before its endpoint registers again.
		return registryOpener(mysql.WorkerConfig{DSN: testutil.MySQL(t), LeaseTTL: mysql.MinLeaseTTL, Logger: testutil.Logger()})
	}, leaftest.RegistryTraits{Sticky: true, Leases: true})
}

// openWorkers opens a registry that is closed when the test ends.
func openWorkers(t *testing.T, dsn string) *mysql.WorkerRegistry {
	t.Helper()
	r, err := mysql.OpenWorkerRegistry(t.Context(), dsn)
	if err != nil {
		t.Fatalf("OpenWorkerRegistry: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func showCreate(t *testing.T, db *sql.DB) string {
	t.Helper()
	var ddl string
	if err := db.QueryRowContext(t.Context(), "SHOW CREATE TABLE leaf_workerid_alloc").Scan(new(string), &ddl); err != nil {
		t.Fatal(err)
	}
	return ddl
}

// TestWorkerSchemaIsForks checks that a table the registry creates is the
// one the fork's script creates, so the fork can use a database set up by us.
func TestWorkerSchemaIsForks(t *testing.T) {
	ours, forks := testutil.MySQL(t), testutil.MySQL(t)
	openWorkers(t, ours)
	forkDB := rawDB(t, forks)
	if _, err := forkDB.ExecContext(t.Context(), forkWorkerDDL); err != nil {
		t.Fatal(err)
	}
	if a, b := showCreate(t, rawDB(t, ours)), showCreate(t, forkDB); a != b {
		t.Errorf("schema differs from the fork's:\nours   %s\nfork's %s", a, b)
	}
}

// TestWorkerExistingForkTable: rows the fork wrote are read as it reads them,
// and the table is left as it is.
func TestWorkerExistingForkTable(t *testing.T) {
	dsn := testutil.MySQL(t)
	db := rawDB(t, dsn)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, forkWorkerDDL); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	mark := now.UnixMilli() - 5000
	// One row as the fork's holder leaves it, one an operator inserted with a
	// NULL mark and a chosen id.
	if _, err := db.ExecContext(ctx, forkInsert, "10.0.0.1:8080", "10.0.0.1", "8080", mark, now, now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO leaf_workerid_alloc (id, ip, port, ip_port) VALUES (7, '10.0.0.2', '8080', '10.0.0.2:8080')"); err != nil {
		t.Fatal(err)
	}
	before := showCreate(t, db)

	r := openWorkers(t, dsn)
	c, err := r.Register(ctx, leaf.Endpoint{IP: "10.0.0.1", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 1 || c.HighWater != mark || c.Expires.IsZero() {
		t.Errorf("fork's row: claim %+v, want worker 1, high-water %d, leased", c, mark)
	}
	r2 := openWorkers(t, dsn)
	c, err = r2.Register(ctx, leaf.Endpoint{IP: "10.0.0.2", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 7 || c.HighWater != 0 {
		t.Errorf("row with a NULL max_timestamp: claim %+v, want worker 7, high-water 0", c)
	}
	if _, err := r2.Heartbeat(ctx, now.UnixMilli()); err != nil {
		t.Fatalf("Heartbeat on a NULL mark: %v", err)
	}
	if after := showCreate(t, db); after != before {
		t.Errorf("the registry altered the fork's table:\nbefore %s\nafter  %s", before, after)
	}
	var leases int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM leaf_workerid_lease").Scan(&leases); err != nil {
		t.Fatalf("the lease table beside the fork's: %v", err)
	}
	if leases != 2 {
		t.Errorf("%d leases for two registered servers, want 2", leases)
	}

	// A new endpoint continues the fork's sequence.
	c, err = openWorkers(t, dsn).Register(ctx, leaf.Endpoint{IP: "10.0.0.3", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 8 || c.HighWater != 0 {
		t.Errorf("new endpoint: claim %+v, want worker 8, high-water 0", c)
	}
}

// TestWorkerAboveMaxID: an endpoint whose ID is above the layout's maximum
// fails, saying which ID and which maximum.
func TestWorkerAboveMaxID(t *testing.T) {
	dsn := testutil.MySQL(t)
	r := openWorkers(t, dsn)
	if _, err := rawDB(t, dsn).ExecContext(t.Context(),
		"INSERT INTO leaf_workerid_alloc (id, ip, port, ip_port, max_timestamp) VALUES (1024, '10.0.0.1', '8080', '10.0.0.1:8080', 0)"); err != nil {
		t.Fatal(err)
	}
	_, err := r.Register(t.Context(), leaf.Endpoint{IP: "10.0.0.1", Port: 8080}, leaftest.MaxWorkerID)
	if !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
		t.Fatalf("Register = %v, want ErrWorkerIDsExhausted", err)
	}
	if want := "worker ID 1024 of 10.0.0.1:8080 is above the layout's maximum 1023"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	// A new endpoint's row takes the next ID, also too large.
	_, err = r.Register(t.Context(), leaf.Endpoint{IP: "10.0.0.2", Port: 8080}, leaftest.MaxWorkerID)
	if !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
		t.Fatalf("Register of a new endpoint = %v, want ErrWorkerIDsExhausted", err)
	}
	if _, err := r.Heartbeat(t.Context(), time.Now().UnixMilli()); err == nil {
		t.Error("Heartbeat without a claim succeeded")
	}
}

type workerRow struct {
	ip, port, ipPort       string
	maxTimestamp           sql.NullInt64
	createUnix, updateUnix sql.NullInt64 // Unix seconds
}

func readWorkerRow(t *testing.T, db *sql.DB, id int64) workerRow {
	t.Helper()
	var w workerRow
	err := db.QueryRowContext(t.Context(),
		"SELECT ip, port, ip_port, max_timestamp, UNIX_TIMESTAMP(create_time), UNIX_TIMESTAMP(update_time) FROM leaf_workerid_alloc WHERE id = ?",
		id).Scan(&w.ip, &w.port, &w.ipPort, &w.maxTimestamp, &w.createUnix, &w.updateUnix)
	if err != nil {
		t.Fatalf("read row %d: %v", id, err)
	}
	return w
}

// TestWorkerRow: the row is written as the fork writes it, heartbeats never
// lower the mark, Release does, and a row removed or handed to another
// endpoint is reported lost.
func TestWorkerRow(t *testing.T) {
	dsn := testutil.MySQL(t)
	db := rawDB(t, dsn)
	ctx := t.Context()
	r := openWorkers(t, dsn)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	before := time.Now()
	c, err := r.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 1 || c.HighWater != 0 || c.Expires.IsZero() {
		t.Errorf("first claim %+v, want worker 1, high-water 0, leased", c)
	}
	w := readWorkerRow(t, db, c.WorkerID)
	if w.ip != "10.0.0.1" || w.port != "8080" || w.ipPort != "10.0.0.1:8080" {
		t.Errorf("row ip %q port %q ip_port %q", w.ip, w.port, w.ipPort)
	}
	if !w.maxTimestamp.Valid || w.maxTimestamp.Int64 < before.UnixMilli() || w.maxTimestamp.Int64 > time.Now().UnixMilli() {
		t.Errorf("new row's max_timestamp %v, want the time of Register", w.maxTimestamp)
	}
	// UNIX_TIMESTAMP reads the TIMESTAMP back in UTC, so this also checks the
	// session time zone the registry wrote it in.
	for name, v := range map[string]sql.NullInt64{"create_time": w.createUnix, "update_time": w.updateUnix} {
		if !v.Valid || v.Int64 < before.Unix()-1 || v.Int64 > time.Now().Unix()+1 {
			t.Errorf("new row's %s is %v, want about %d (Unix seconds)", name, v, before.Unix())
		}
	}

	hb := func(mark int64) {
		t.Helper()
		exp, err := r.Heartbeat(ctx, mark)
		if err != nil || !exp.After(time.Now()) {
			t.Fatalf("Heartbeat(%d) = %v, %v; want the lease's new expiry, nil", mark, exp, err)
		}
	}
	mark := time.Now().UnixMilli() + 3000
	hb(mark)
	hb(mark - 1000) // late: must not lower the mark
	if got := readWorkerRow(t, db, c.WorkerID).maxTimestamp.Int64; got != mark {
		t.Errorf("after a lower heartbeat max_timestamp is %d, want %d", got, mark)
	}
	hb(mark) // unchanged row: still found
	if err := r.Release(ctx, mark-2000); err != nil {
		t.Fatal(err)
	}
	if got := readWorkerRow(t, db, c.WorkerID).maxTimestamp.Int64; got != mark-2000 {
		t.Errorf("after Release max_timestamp is %d, want %d", got, mark-2000)
	}

	// An operator deletes the row.
	if _, err := r.Register(ctx, ep, leaftest.MaxWorkerID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM leaf_workerid_alloc WHERE id = ?", c.WorkerID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Heartbeat(ctx, mark); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("Heartbeat on a deleted row = %v, want ErrWorkerLost", err)
	}
	if err := r.Release(ctx, mark); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("Release on a deleted row = %v, want ErrWorkerLost", err)
	}

	// Re-registering makes a new row with a new ID (IDs are never reused);
	// then an operator gives that ID to another endpoint.
	c2, err := r.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c2.WorkerID == c.WorkerID {
		t.Errorf("re-registered after deletion: worker %d again", c2.WorkerID)
	}
	if _, err := db.ExecContext(ctx, "UPDATE leaf_workerid_alloc SET ip = '10.0.0.9', ip_port = '10.0.0.9:8080' WHERE id = ?", c2.WorkerID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Heartbeat(ctx, mark); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("Heartbeat on a row given to another endpoint = %v, want ErrWorkerLost", err)
	}
}

// TestOpenWorkerRegistryUnreachable: a server that is down fails Open
// promptly rather than at the first Register.
func TestOpenWorkerRegistryUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r, err := mysql.OpenWorkerRegistry(ctx, "root@tcp(127.0.0.1:1)/leaf")
	if err == nil {
		_ = r.Close()
		t.Fatal("OpenWorkerRegistry on 127.0.0.1:1 succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("OpenWorkerRegistry took %v to fail", d)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestOpenWorkerRegistryDSN(t *testing.T) {
	cfg, err := gomysql.ParseDSN(testutil.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	for _, dsn := range []string{cfg.FormatDSN(), "root@tcp(127.0.0.1:3306"} {
		r, err := mysql.OpenWorkerRegistry(t.Context(), dsn)
		if !errors.Is(err, leaf.ErrInvalidArgument) {
			if r != nil {
				_ = r.Close()
			}
			t.Errorf("OpenWorkerRegistry(%q) = %v, want ErrInvalidArgument", dsn, err)
		}
	}
}

// Four snowflake generators with worker IDs from leaf_workerid_alloc × 8
// goroutines: every ID unique.
func TestSnowflakeHammer(t *testing.T) {
	leaftest.HammerSnowflake(t, registryOpener(mysql.WorkerConfig{DSN: testutil.MySQL(t), Logger: testutil.Logger()}))
}

// leaseTTL keeps the lease tests quick: a refused Register waits about
// this long.
const leaseTTL = mysql.MinLeaseTTL

// openLeased opens a registry with a leaseTTL lease whose clock runs offset
// from the real one, closed when the test ends.
func openLeased(t *testing.T, dsn string, offset time.Duration) *mysql.WorkerRegistry {
	t.Helper()
	return openLeasedOn(t, dsn, func() time.Time { return time.Now().Add(offset) })
}

// openLeasedOn is openLeased with the registry's clock now.
func openLeasedOn(t *testing.T, dsn string, now func() time.Time) *mysql.WorkerRegistry {
	t.Helper()
	r, err := mysql.OpenWorkerRegistryWithConfig(t.Context(), mysql.WorkerConfig{
		DSN:      dsn,
		LeaseTTL: leaseTTL,
		Now:      now,
		Logger:   testutil.Logger(),
	})
	if err != nil {
		t.Fatalf("OpenWorkerRegistryWithConfig: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// keepAlive heartbeats r every 200ms, as a running server does, until the
// returned stop is called.
func keepAlive(t *testing.T, r *mysql.WorkerRegistry) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			_, err := r.Heartbeat(ctx, time.Now().UnixMilli()+3000)
			cancel()
			if err != nil {
				t.Errorf("keep-alive Heartbeat: %v", err)
				return
			}
		}
	})
	return sync.OnceFunc(func() { close(done); wg.Wait() })
}

// leaseHolder reads the holder column of worker id's lease.
func leaseHolder(t *testing.T, db *sql.DB, id int64) string {
	t.Helper()
	var h string
	if err := db.QueryRowContext(t.Context(), "SELECT holder FROM leaf_workerid_lease WHERE worker_id = ?", id).Scan(&h); err != nil {
		t.Fatalf("lease of worker %d: %v", id, err)
	}
	return h
}

// TestWorkerLeaseInUse: while a server holds its endpoint's worker ID and
// heartbeats, a second server with the same endpoint (whose clock is an hour
// fast, so that only the database's clock can time the lease) waits about
// the TTL and is refused with a message naming the endpoint and the holder.
// Once the first releases, a waiting Register takes the ID at once, with
// the mark the first left on release.
func TestWorkerLeaseInUse(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	db := rawDB(t, dsn)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	a := openLeased(t, dsn, 0)
	// B's clock counts its readings, which is how the test knows B has
	// looked at the lease: a Register reads it for the arguments of each
	// attempt's statements (twice), before running them.
	var bReads atomic.Int64
	b := openLeasedOn(t, dsn, func() time.Time {
		bReads.Add(1)
		return time.Now().Add(time.Hour)
	})
	// looked waits until B has run an attempt on the lease after from (its
	// reading count at that point) and found the lease held: one reading
	// after from starts an attempt whose statements run after it, and two
	// more start the next attempt, which comes only once that one is over.
	looked := func(what string, from int64) {
		t.Helper()
		testutil.WaitForState(t, what, func() (bool, string) {
			n := bReads.Load() - from
			return n >= 3, fmt.Sprintf("B read its clock %d times since", n)
		})
	}
	ca, err := a.Register(testutil.Context(t, 10*time.Second), ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("A: Register: %v", err)
	}
	holder := leaseHolder(t, db, ca.WorkerID)
	stop := keepAlive(t, a)
	t.Cleanup(stop)

	start := time.Now()
	_, err = b.Register(testutil.Context(t, 30*time.Second), ep, leaftest.MaxWorkerID)
	el := time.Since(start)
	// Refused by its own wait (not the caller's 30s deadline), and never
	// before the lease could have lapsed: how long past ClaimWait the last
	// look takes is the machine's.
	if !errors.Is(err, leaf.ErrWorkerInUse) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B: Register while A holds the lease: %v, want ErrWorkerInUse after its own wait", err)
	}
	if el < leaseTTL {
		t.Errorf("B: refused after %v, before the lease TTL %v", el, leaseTTL)
	}
	for _, want := range []string{ep.String(), holder, "snowflake.endpoint", "stop the other server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("B's error does not say %q: %v", want, err)
		}
	}
	t.Logf("B refused after %v: %v", el.Round(time.Millisecond), err)

	// A caller's deadline shorter than the wait is a refusal too, by the
	// deadline; it says the ID is in use whenever the registry got to look
	// at the lease before the deadline. On a machine busy enough that the
	// first look itself outlasts the deadline, it cannot know: then the
	// deadline alone is the answer.
	_, err = b.Register(testutil.Context(t, b.ClaimWait()/2), ep, leaftest.MaxWorkerID)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B: Register with a deadline of half its wait: %v, want DeadlineExceeded", err)
	}
	if !errors.Is(err, leaf.ErrWorkerInUse) {
		t.Logf("B: the deadline cut the first look at the lease: %v", err)
	}

	// A raises its mark while B waits, then releases with a final mark above
	// the one B could have read before waiting: B must read the mark only
	// once it holds the lease.
	stop()
	type result struct {
		c   leaf.WorkerClaim
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	start = time.Now()
	reads := bReads.Load()
	go func() {
		c, err := b.Register(testutil.Context(t, 30*time.Second), ep, leaftest.MaxWorkerID)
		got <- result{c, err, time.Now()}
	}()
	looked("B to find the lease held and wait", reads)
	raised := time.Now().UnixMilli() + 5000
	if _, err := a.Heartbeat(testutil.Context(t, 5*time.Second), raised); err != nil {
		t.Fatalf("A: Heartbeat: %v", err)
	}
	looked("B to look at the lease again after the raise", bReads.Load())
	final := raised - 1000
	if err := a.Release(testutil.Context(t, 5*time.Second), final); err != nil {
		t.Fatalf("A: Release: %v", err)
	}
	released := time.Now()
	res := <-got
	if res.err != nil {
		t.Fatalf("B: Register after A released: %v", res.err)
	}
	if res.c.WorkerID != ca.WorkerID || res.c.HighWater != final {
		t.Errorf("B: claim %+v, want worker %d with A's final mark %d", res.c, ca.WorkerID, final)
	}
	if d := res.at.Sub(released); d > time.Second {
		t.Errorf("B registered %v after A released, want at once", d)
	}
	if res.at.Sub(start) < 250*time.Millisecond {
		t.Errorf("B registered %v after it started, before A released", res.at.Sub(start))
	}
}

// TestWorkerLeaseKilledHolder: a holder that stops without releasing (kill
// -9: its connections close) leaves its lease, which its endpoint's next
// server waits out and takes with the same worker ID and the last mark.
func TestWorkerLeaseKilledHolder(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	a := openLeased(t, dsn, 0)
	ca, err := a.Register(testutil.Context(t, 10*time.Second), ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("A: Register: %v", err)
	}
	mark := time.Now().UnixMilli() + 1500
	if _, err := a.Heartbeat(testutil.Context(t, 5*time.Second), mark); err != nil {
		t.Fatalf("A: Heartbeat: %v", err)
	}
	renewed := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := openLeased(t, dsn, 0)
	cb, err := b.Register(testutil.Context(t, 30*time.Second), ep, leaftest.MaxWorkerID)
	took := time.Since(renewed)
	if err != nil {
		t.Fatalf("B: Register after A was killed: %v", err)
	}
	if cb.WorkerID != ca.WorkerID || cb.HighWater != mark {
		t.Errorf("B: claim %+v, want worker %d with A's last mark %d", cb, ca.WorkerID, mark)
	}
	// Never before the lease lapsed; that B took it at all means within its
	// own wait (ClaimWait), past which it would have been refused.
	if took < leaseTTL-100*time.Millisecond {
		t.Errorf("B took the lease %v after A's last renewal, before the TTL %v", took, leaseTTL)
	}
}

// TestWorkerLeaseTakenOver: a holder that stopped heartbeating (a paused
// process) past its lease learns on its next Heartbeat that its ID was taken
// over, and neither its Heartbeat nor its Release touches the new holder's
// lease or lowers the mark.
func TestWorkerLeaseTakenOver(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	db := rawDB(t, dsn)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	a := openLeased(t, dsn, 0)
	b := openLeased(t, dsn, 0)
	ca, err := a.Register(testutil.Context(t, 10*time.Second), ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("A: Register: %v", err)
	}
	cb, err := b.Register(testutil.Context(t, 30*time.Second), ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("B: Register once A's lease lapsed: %v", err)
	}
	if cb.WorkerID != ca.WorkerID {
		t.Fatalf("B: worker %d, want A's %d", cb.WorkerID, ca.WorkerID)
	}
	holder := leaseHolder(t, db, cb.WorkerID)
	bMark := time.Now().UnixMilli() + 3000
	if _, err := b.Heartbeat(testutil.Context(t, 5*time.Second), bMark); err != nil {
		t.Fatalf("B: Heartbeat: %v", err)
	}

	_, err = a.Heartbeat(testutil.Context(t, 5*time.Second), bMark+1000)
	if !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("A: Heartbeat after B took over: %v, want ErrWorkerLost", err)
	}
	if got := readWorkerRow(t, db, ca.WorkerID).maxTimestamp.Int64; got != bMark {
		t.Errorf("A's lost Heartbeat moved the mark to %d, want B's %d", got, bMark)
	}
	if err := a.Release(testutil.Context(t, 5*time.Second), bMark-2000); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("A: Release after B took over: %v, want ErrWorkerLost", err)
	}
	if got := readWorkerRow(t, db, ca.WorkerID).maxTimestamp.Int64; got != bMark {
		t.Errorf("A's lost Release set the mark to %d, want B's %d kept", got, bMark)
	}
	if got := leaseHolder(t, db, cb.WorkerID); got != holder {
		t.Errorf("lease holder after A's lost Release is %q, want B's %q", got, holder)
	}
	if _, err := b.Heartbeat(testutil.Context(t, 5*time.Second), bMark); err != nil {
		t.Fatalf("B: Heartbeat after A's attempts: %v", err)
	}
}

// TestWorkerSameEndpointRace: of servers with one endpoint starting at once,
// exactly one gets its ID; the others are refused while it runs. Only one
// row is written.
func TestWorkerSameEndpointRace(t *testing.T) {
	t.Parallel()
	const n = 8
	dsn := testutil.MySQL(t)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	regs := make([]*mysql.WorkerRegistry, n)
	for i := range regs {
		regs[i] = openLeased(t, dsn, 0)
	}
	claims := make([]leaf.WorkerClaim, n)
	errs := make([]error, n)
	var start, registered sync.WaitGroup
	start.Add(1)
	registered.Add(n)
	for i := range regs {
		go func() {
			start.Wait()
			claims[i], errs[i] = regs[i].Register(testutil.Context(t, 30*time.Second), ep, leaftest.MaxWorkerID)
			if errs[i] == nil {
				// The winner runs, keeping its lease, until all are done.
				t.Cleanup(keepAlive(t, regs[i]))
			}
			registered.Done()
		}()
	}
	start.Done()
	registered.Wait()
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			t.Logf("registry %d won worker %d", i, claims[i].WorkerID)
		case !errors.Is(err, leaf.ErrWorkerInUse):
			t.Errorf("registry %d: %v, want ErrWorkerInUse", i, err)
		}
	}
	if winners != 1 {
		t.Errorf("%d registries hold the endpoint's worker ID, want exactly 1", winners)
	}
	for table, want := range map[string]int{"leaf_workerid_alloc": 1, "leaf_workerid_lease": 1} {
		var rows int
		if err := rawDB(t, dsn).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != want {
			t.Errorf("%d rows in %s for one endpoint, want %d", rows, table, want)
		}
	}
}

// TestWorkerPeerClocks: three servers whose clocks are 0, +10s and -3s off
// each see the other two with the right offsets; a released one drops out.
func TestWorkerPeerClocks(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	offsets := []time.Duration{0, 10 * time.Second, -3 * time.Second}
	regs := make([]*mysql.WorkerRegistry, len(offsets))
	ids := make(map[int64]int) // worker ID -> index
	for i, off := range offsets {
		regs[i] = openLeased(t, dsn, off)
		c, err := regs[i].Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(i), leaftest.MaxWorkerID)
		if err != nil {
			t.Fatalf("registry %d: Register: %v", i, err)
		}
		ids[c.WorkerID] = i
	}
	readers := make([]leaftest.PeerClockReader, len(regs))
	for i, r := range regs {
		readers[i] = r
	}
	leaftest.CheckPeerClocks(t, testutil.Context(t, 5*time.Second), readers, ids, offsets, 200*time.Millisecond)
	if err := regs[2].Release(testutil.Context(t, 5*time.Second), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	peers, err := regs[0].PeerClocks(testutil.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 || ids[peers[0].WorkerID] != 1 {
		t.Errorf("after registry 2 released: peers %+v, want registry 1 alone", peers)
	}
}

func TestOpenWorkerRegistryLeaseTTL(t *testing.T) {
	r, err := mysql.OpenWorkerRegistryWithConfig(t.Context(), mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:1)/leaf", LeaseTTL: time.Second})
	if !errors.Is(err, leaf.ErrInvalidArgument) {
		if r != nil {
			_ = r.Close()
		}
		t.Fatalf("a 1s lease TTL: %v, want ErrInvalidArgument", err)
	}
	r, err = mysql.OpenWorkerRegistryWithConfig(t.Context(), mysql.WorkerConfig{DSN: testutil.MySQL(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := r.ClaimWait(), mysql.DefaultLeaseTTL; got < want || got > want+2*time.Second || got != mysql.LeaseClaimWait(0) {
		t.Errorf("ClaimWait with the default TTL %v: %v (LeaseClaimWait says %v)", want, got, mysql.LeaseClaimWait(0))
	}
}

// TestWorkerConfigValidate checks what Validate refuses, without a
// database, and that a zero config takes DefaultWorkerConfig's values.
func TestWorkerConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    mysql.WorkerConfig
		ok   bool
	}{
		{"defaults", mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:3306)/leaf"}, true},
		{"lease at the minimum", mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:3306)/leaf", LeaseTTL: mysql.MinLeaseTTL}, true},
		{"lease too short", mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:3306)/leaf", LeaseTTL: time.Second}, false},
		{"negative lease", mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:3306)/leaf", LeaseTTL: -time.Second}, false},
		{"holder too long", mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:3306)/leaf", Holder: strings.Repeat("h", 128)}, false},
		{"bad DSN", mysql.WorkerConfig{DSN: "root@tcp(127.0.0.1:3306"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Fatalf("Validate: %v, want ErrInvalidArgument", err)
			}
		})
	}
	if d := mysql.DefaultWorkerConfig(); d.LeaseTTL != mysql.DefaultLeaseTTL || d.Now == nil || d.Logger == nil {
		t.Errorf("DefaultWorkerConfig: %+v", d)
	}
}

// TestSnowflakeSameEndpoint reproduces two servers started with one
// endpoint: while the first issues from 4 goroutines, the second's generator
// refuses to start; once the first closes, the second starts on the same
// worker ID. Every ID of both is unique.
func TestSnowflakeSameEndpoint(t *testing.T) {
	t.Parallel()
	open := registryOpener(mysql.WorkerConfig{DSN: testutil.MySQL(t), LeaseTTL: leaseTTL, Logger: testutil.Logger()})
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	a := leaftest.StartSnowflake(t, open, leaftest.FastSnowflake(nil, ep))

	issue := func(g *snowflake.Generator, stop <-chan struct{}) [][]int64 {
		const goroutines, most = 4, 20_000
		out := make([][]int64, goroutines)
		var wg sync.WaitGroup
		for k := range out {
			wg.Go(func() {
				for len(out[k]) < most {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if out[k], err = g.NextIDs(t.Context(), "", 50, out[k]); err != nil {
						t.Errorf("NextIDs: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		return out
	}
	stop := make(chan struct{})
	got := make(chan [][]int64, 1)
	go func() { got <- issue(a, stop) }()

	rb, err := open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rb.Close() })
	if b, err := snowflake.New(testutil.Context(t, 30*time.Second), leaftest.FastSnowflake(rb, ep)); !errors.Is(err, leaf.ErrWorkerInUse) {
		if err == nil {
			_ = b.Close(context.Background())
		}
		t.Fatalf("second generator on %s while the first runs: %v, want ErrWorkerInUse", ep, err)
	}
	close(stop)
	ids := <-got
	if err := a.Close(testutil.Context(t, 10*time.Second)); err != nil {
		t.Fatalf("first generator: Close: %v", err)
	}

	b, err := snowflake.New(testutil.Context(t, 30*time.Second), leaftest.FastSnowflake(rb, ep))
	if err != nil {
		t.Fatalf("second generator after the first closed: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	stop = make(chan struct{})
	time.AfterFunc(200*time.Millisecond, func() { close(stop) })
	ids = append(ids, issue(b, stop)...)

	seen := make(map[int64]bool)
	n := 0
	for _, run := range ids {
		for _, id := range run {
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
			n++
		}
	}
	if n == 0 {
		t.Fatal("no IDs issued")
	}
	t.Logf("%d IDs, all unique", n)
}
