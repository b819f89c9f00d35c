package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testdb"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/mysql"
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

func registryOpener(dsn string) leaftest.RegistryOpener {
	return func(ctx context.Context) (leaf.WorkerRegistry, error) {
		r, err := mysql.OpenWorkerRegistry(ctx, dsn)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return r, nil
	}
}

func TestWorkerRegistry(t *testing.T) {
	leaftest.TestWorkerRegistry(t, func(t *testing.T) leaftest.RegistryOpener {
		return registryOpener(testdb.MySQL(t))
	}, leaftest.RegistryTraits{Sticky: true})
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
	ours, forks := testdb.MySQL(t), testdb.MySQL(t)
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
	dsn := testdb.MySQL(t)
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
	if c.WorkerID != 1 || c.HighWater != mark || !c.Expires.IsZero() {
		t.Errorf("fork's row: claim %+v, want worker 1, high-water %d, no expiry", c, mark)
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

	// A new endpoint continues the fork's sequence.
	c, err = openWorkers(t, dsn).Register(ctx, leaf.Endpoint{IP: "10.0.0.3", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 8 || c.HighWater != 0 {
		t.Errorf("new endpoint: claim %+v, want worker 8, high-water 0", c)
	}
}

// TestWorkerSameEndpointRace: servers with one endpoint starting at once all
// get its one ID; only one row is written.
func TestWorkerSameEndpointRace(t *testing.T) {
	const n = 8
	dsn := testdb.MySQL(t)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	regs := make([]*mysql.WorkerRegistry, n)
	for i := range regs {
		regs[i] = openWorkers(t, dsn)
	}
	claims := make([]leaf.WorkerClaim, n)
	errs := make([]error, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range regs {
		wg.Go(func() {
			start.Wait()
			claims[i], errs[i] = regs[i].Register(t.Context(), ep, leaftest.MaxWorkerID)
		})
	}
	start.Done()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("registry %d: %v", i, err)
		}
		if claims[i].WorkerID != claims[0].WorkerID {
			t.Errorf("registry %d got worker %d, registry 0 worker %d", i, claims[i].WorkerID, claims[0].WorkerID)
		}
	}
	var rows int
	if err := rawDB(t, dsn).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM leaf_workerid_alloc").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d rows for one endpoint, want 1", rows)
	}
}

// TestWorkerAboveMaxID: an endpoint whose ID is above the layout's maximum
// fails, saying which ID and which maximum.
func TestWorkerAboveMaxID(t *testing.T) {
	dsn := testdb.MySQL(t)
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
	dsn := testdb.MySQL(t)
	db := rawDB(t, dsn)
	ctx := t.Context()
	r := openWorkers(t, dsn)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	before := time.Now()
	c, err := r.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerID != 1 || c.HighWater != 0 || !c.Expires.IsZero() {
		t.Errorf("first claim %+v, want worker 1, high-water 0, no expiry", c)
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
		if err != nil || !exp.IsZero() {
			t.Fatalf("Heartbeat(%d) = %v, %v; want zero time, nil", mark, exp, err)
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
	cfg, err := gomysql.ParseDSN(testdb.MySQL(t))
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
	leaftest.HammerSnowflake(t, registryOpener(testdb.MySQL(t)))
}
