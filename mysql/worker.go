package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
)

// WorkerSchema is the NotFound9 fork's scripts/leaf_workerid_alloc.sql with
// IF NOT EXISTS and without its AUTO_INCREMENT=0 (which MySQL and MariaDB
// read as 1 anyway, so the first worker ID is 1 either way). It is run on
// every OpenWorkerRegistry and never alters a table that exists, so a
// database the fork set up works unchanged and Java and Go servers may share
// it.
const WorkerSchema = "CREATE TABLE IF NOT EXISTS `leaf_workerid_alloc` (\n" +
	"  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n" +
	"  `ip` varchar(127) DEFAULT NULL,\n" +
	"  `port` varchar(127) DEFAULT NULL,\n" +
	"  `ip_port` varchar(127) NOT NULL,\n" +
	"  `max_timestamp` bigint(20) DEFAULT NULL,\n" +
	"  `create_time` timestamp NULL DEFAULT NULL,\n" +
	"  `update_time` timestamp NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`id`),\n" +
	"  UNIQUE KEY `idx_ipport` (`ip_port`) USING BTREE\n" +
	") ENGINE=InnoDB"

// The registry's statements. Heartbeat and Release match the row by ip_port
// as well as id: if an operator hands the ID to another endpoint by editing
// the row, the holder learns it has lost it rather than writing the other
// endpoint's mark.
const (
	selectWorker = "SELECT id, max_timestamp FROM leaf_workerid_alloc WHERE ip_port = ?"
	insertWorker = "INSERT INTO leaf_workerid_alloc (ip_port, ip, port, max_timestamp, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?)"
	// A heartbeat never lowers the mark: a late or reordered heartbeat must
	// not move it below one already promised.
	heartbeatWorker = "UPDATE leaf_workerid_alloc SET max_timestamp = GREATEST(COALESCE(max_timestamp, 0), ?), update_time = ? WHERE id = ? AND ip_port = ?"
	// Release stores the final mark as given: the holder may lower its mark
	// to what it actually used.
	releaseWorker = "UPDATE leaf_workerid_alloc SET max_timestamp = ?, update_time = ? WHERE id = ? AND ip_port = ?"
)

// registerAttempts bounds Register's SELECT-then-INSERT rounds. A second
// round is needed only when another server with the same endpoint inserted
// between our SELECT and INSERT; a third only if that row vanished again.
const registerAttempts = 3

// WorkerRegistry is a leaf.WorkerRegistry on the fork's leaf_workerid_alloc
// table (its snowflake "mysql" mode): the worker ID is the row's
// AUTO_INCREMENT id, keyed by "ip:port", so an endpoint keeps its ID for ever
// and IDs are never recycled. Claims do not lease (WorkerClaim.Expires is
// zero). The unique index on ip_port makes concurrent registrations safe:
// distinct endpoints get distinct rows, and one endpoint racing itself ends
// up with one row.
type WorkerRegistry struct {
	db     *sql.DB
	dbName string // for errors

	mu     sync.Mutex
	id     int64  // the claimed worker ID; 0 while none is held
	ipPort string // the holder's endpoint, "ip:port"
}

var _ leaf.WorkerRegistry = (*WorkerRegistry)(nil)

// OpenWorkerRegistry connects to the database named in dsn, with the DSN
// handling of Open, and creates leaf_workerid_alloc if it is missing.
func OpenWorkerRegistry(ctx context.Context, dsn string) (*WorkerRegistry, error) {
	cfg, err := config(dsn, "open worker registry")
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: open worker registry %s: %w", cfg.DBName, err)
	}
	db := sql.OpenDB(conn)
	// A registry runs one statement every few seconds; at most Register's
	// lookup and a heartbeat may overlap. Keeping one connection idle saves
	// a reconnect per heartbeat; the lifetimes are Open's.
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if _, err := db.ExecContext(ctx, WorkerSchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: open worker registry %s: create schema: %w", cfg.DBName, err)
	}
	return &WorkerRegistry{db: db, dbName: cfg.DBName}, nil
}

// Register claims ep's worker ID: the id of its row, inserted if it has
// none. HighWater is the row's max_timestamp (0 if NULL, and for a new row).
// An ID above maxID fails with leaf.ErrWorkerIDsExhausted; the row stays, as
// in the fork, so the endpoint keeps that ID.
func (r *WorkerRegistry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, fmt.Errorf("mysql: register: %w", err)
	}
	ipPort := ep.String()
	id, highWater, err := r.getOrCreate(ctx, ep, ipPort)
	if err != nil {
		return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s in %s: %w", ipPort, r.dbName, err)
	}
	if id > maxID {
		return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s: %w: worker ID %d of %s is above the layout's maximum %d",
			ipPort, leaf.ErrWorkerIDsExhausted, id, ipPort, maxID)
	}
	r.mu.Lock()
	r.id, r.ipPort = id, ipPort
	r.mu.Unlock()
	return leaf.WorkerClaim{WorkerID: id, HighWater: highWater}, nil
}

// getOrCreate returns the id and high-water mark of ipPort's row, inserting
// the row if there is none.
func (r *WorkerRegistry) getOrCreate(ctx context.Context, ep leaf.Endpoint, ipPort string) (id, highWater int64, err error) {
	for attempt := 1; ; attempt++ {
		var mark sql.NullInt64
		err := r.db.QueryRowContext(ctx, selectWorker, ipPort).Scan(&id, &mark)
		if err == nil {
			return id, mark.Int64, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, 0, fmt.Errorf("look up worker: %w", err)
		}
		// The fork's INSERT: max_timestamp is now, both times the same instant.
		// TIMESTAMP columns hold whole seconds; truncating keeps MySQL from
		// rounding up to the next one.
		now := time.Now()
		stamp := now.Truncate(time.Second)
		res, err := r.db.ExecContext(ctx, insertWorker, ipPort, ep.IP, strconv.Itoa(ep.Port), now.UnixMilli(), stamp, stamp)
		if err == nil {
			id, err := res.LastInsertId()
			if err != nil {
				return 0, 0, fmt.Errorf("insert worker: %w", err)
			}
			// A new ID has no history: no one issued IDs with it before.
			return id, 0, nil
		}
		// A duplicate means a server with the same endpoint inserted first: its
		// row is ours too, so look again. A deadlock may befall waiters on that
		// insert's key lock; the retry reads the row as well.
		if attempt == registerAttempts || !(dialect.IsUniqueViolation(err) || dialect.IsRetryable(err)) {
			return 0, 0, fmt.Errorf("insert worker: %w", err)
		}
	}
}

// Heartbeat raises the claim's max_timestamp to mark (never lowers it) and
// stamps update_time. It returns the zero Time: claims do not expire. A
// missing row (deleted, or its ip_port changed by an operator) fails with
// leaf.ErrWorkerLost.
func (r *WorkerRegistry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	return time.Time{}, r.update(ctx, "heartbeat", heartbeatWorker, mark)
}

// Release stores mark as the claim's final max_timestamp, lower than the
// last heartbeat's if the holder used less. The endpoint keeps its ID. A
// missing row fails with leaf.ErrWorkerLost.
func (r *WorkerRegistry) Release(ctx context.Context, mark int64) error {
	err := r.update(ctx, "release", releaseWorker, mark)
	if err == nil || errors.Is(err, leaf.ErrWorkerLost) {
		// The claim is over either way; a failed Release keeps it so that
		// the caller may retry.
		r.mu.Lock()
		r.id, r.ipPort = 0, ""
		r.mu.Unlock()
	}
	return err
}

// update runs Heartbeat's or Release's statement on the claimed row.
func (r *WorkerRegistry) update(ctx context.Context, op, query string, mark int64) error {
	r.mu.Lock()
	id, ipPort := r.id, r.ipPort
	r.mu.Unlock()
	if id == 0 {
		return fmt.Errorf("mysql: %s: no worker ID registered", op)
	}
	res, err := r.db.ExecContext(ctx, query, mark, time.Now().Truncate(time.Second), id, ipPort)
	if err != nil {
		return fmt.Errorf("mysql: %s worker %d of %s: %w", op, id, ipPort, err)
	}
	// clientFoundRows makes this count the row even when the mark did not
	// move, so 0 means the row is gone.
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mysql: %s worker %d of %s: %w", op, id, ipPort, err)
	}
	if n == 0 {
		return fmt.Errorf("mysql: %s: %w: worker %d of %s has no row in %s.leaf_workerid_alloc",
			op, leaf.ErrWorkerLost, id, ipPort, r.dbName)
	}
	return nil
}

// Close closes the connection pool. It does not Release: the row keeps the
// last heartbeat's mark.
func (r *WorkerRegistry) Close() error {
	return r.db.Close()
}
