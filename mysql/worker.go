package mysql

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

// LeaseSchema is our own table beside the fork's: the live claim a running
// server holds on its worker ID, so that two processes given one endpoint
// (a copied configuration, a pinned port, a cloned VM) never both issue
// under its ID. The fork's table stays as the fork wrote it; the fork knows
// nothing of this one, so a Java server sharing the database is not guarded
// against.
//
//	worker_id   the leased ID, leaf_workerid_alloc.id
//	ip_port     the holder's endpoint
//	holder      the holding server: its instance identity (WorkerConfig.Holder),
//	            or host/pid/random, new per process, without one
//	expires_at  by the database's clock, UTC
//	clock_ms    the holder's clock at its last renewal, Unix ms
//	db_ms       the database's clock at that renewal, Unix ms
const LeaseSchema = "CREATE TABLE IF NOT EXISTS `leaf_workerid_lease` (\n" +
	"  `worker_id` bigint(20) NOT NULL,\n" +
	"  `ip_port` varchar(127) NOT NULL,\n" +
	"  `holder` varchar(127) NOT NULL,\n" +
	"  `expires_at` datetime(3) NOT NULL,\n" +
	"  `clock_ms` bigint(20) NOT NULL,\n" +
	"  `db_ms` bigint(20) NOT NULL,\n" +
	"  PRIMARY KEY (`worker_id`)\n" +
	") ENGINE=InnoDB"

// The registry's statements on leaf_workerid_alloc. Heartbeat and Release
// match the row by ip_port as well as id: if an operator hands the ID to
// another endpoint by editing the row, the holder learns it has lost it
// rather than writing the other endpoint's mark.
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

// The lease is timed by the database's clock alone, so a server whose clock
// is wrong can neither cut a live lease short nor stretch its own. It is
// read as UTC_TIMESTAMP, not NOW: servers whose DSNs set different session
// time zones must compare expires_at alike. Within one statement it is one
// instant.
const (
	dbNowMs     = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)"
	leaseExpiry = "UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND"

	// Taking a lease is one statement on its row, which InnoDB serialises:
	// of two servers racing, the second re-reads the row the first wrote and
	// finds it live and not its own. Our own lease (this instance's, left by
	// a run that died) is taken back at once: resumeLease, whose match says
	// that no one else held it since; a lapsed lease of another holder is
	// taken over with takeLease.
	resumeLease = "UPDATE leaf_workerid_lease SET ip_port = ?, expires_at = " + leaseExpiry +
		", clock_ms = ?, db_ms = " + dbNowMs + " WHERE worker_id = ? AND holder = ?"
	takeLease = "UPDATE leaf_workerid_lease SET ip_port = ?, holder = ?, expires_at = " + leaseExpiry +
		", clock_ms = ?, db_ms = " + dbNowMs + " WHERE worker_id = ? AND expires_at < UTC_TIMESTAMP(3)"
	// An ID never leased before: the primary key lets one insert win.
	insertLease = "INSERT INTO leaf_workerid_lease (worker_id, ip_port, holder, expires_at, clock_ms, db_ms) VALUES (?, ?, ?, " +
		leaseExpiry + ", ?, " + dbNowMs + ")"
	// Renewing needs only our token on the row: a lease of ours that lapsed
	// while nobody took it is still ours.
	renewLease = "UPDATE leaf_workerid_lease SET expires_at = " + leaseExpiry + ", clock_ms = ?, db_ms = " + dbNowMs +
		" WHERE worker_id = ? AND holder = ?"
	deleteLease = "DELETE FROM leaf_workerid_lease WHERE worker_id = ? AND holder = ?"
	selectLease = "SELECT holder, ip_port, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), expires_at), db_ms, " + dbNowMs +
		" FROM leaf_workerid_lease WHERE worker_id = ?"
	selectDBNow = "SELECT " + dbNowMs
	// The cap bounds the listing: a deployment has at most as many live
	// servers as worker IDs, 1024 in Leaf's layout.
	listLeases = "SELECT worker_id, ip_port, clock_ms, db_ms FROM leaf_workerid_lease" +
		" WHERE expires_at > UTC_TIMESTAMP(3) AND holder <> ? ORDER BY worker_id LIMIT 1024"
)

// registerAttempts bounds Register's SELECT-then-INSERT rounds. A second
// round is needed only when another server with the same endpoint inserted
// between our SELECT and INSERT; a third only if that row vanished again.
const registerAttempts = 3

// Lease timing.
const (
	// DefaultLeaseTTL is WorkerConfig.LeaseTTL's default.
	DefaultLeaseTTL = leaf.DefaultClaimLease
	// MinLeaseTTL is the shortest lease accepted: heartbeats come every
	// second, and a lease must outlive a few of them.
	MinLeaseTTL = 2 * time.Second
	// claimMargin is how long past the TTL Register waits for a lease it
	// found held: the holder's last renewal came before we looked, so a dead
	// holder's lease lapses within TTL; the margin covers round trips.
	claimMargin = time.Second
	// maxPoll is the longest pause between attempts on a held lease.
	maxPoll = 500 * time.Millisecond
)

// WorkerConfig configures OpenWorkerRegistryWithConfig.
type WorkerConfig struct {
	// DSN names the database, as for Open. Required.
	DSN string
	// LeaseTTL is how long a server's claim on its worker ID lasts without a
	// heartbeat: the holder stops issuing before it runs out, and another
	// process (a second one given the same endpoint, or a restart without
	// the holder's instance identity) may take the ID only after it (see
	// ClaimWait). The database may be unreachable this long without a
	// holder stopping. At least MinLeaseTTL, millisecond resolution.
	// Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Holder is this server's instance identity (local.Instance), written
	// as the lease's holder: a restart of the same server takes its lease
	// back at once (leaf.WorkerClaim.Resumed) rather than waiting it out.
	// Empty: a new identity per registry, so a restart waits.
	Holder string
	// Now is the clock whose readings the registry publishes for the peer
	// clock check (PeerClocks): the snowflake generator's. Default time.Now.
	// The lease itself is timed by the database's clock.
	Now func() time.Time
	// Logger receives the registry's own messages. Default slog.Default().
	Logger *slog.Logger
}

// WorkerRegistry is a leaf.WorkerRegistry on the fork's leaf_workerid_alloc
// table (its snowflake "mysql" mode): the worker ID is the row's
// AUTO_INCREMENT id, keyed by "ip:port", so an endpoint keeps its ID for ever
// and IDs are never recycled. The unique index on ip_port makes concurrent
// registrations safe: distinct endpoints get distinct rows, and one endpoint
// racing itself ends up with one row.
//
// Since the ID belongs to the endpoint, two processes registered under one
// endpoint would both get it and issue the same IDs. A lease in
// leaf_workerid_lease (LeaseSchema), which the holder renews with every
// heartbeat, lets only one of them hold the ID: the other waits for the
// lease to lapse and fails with leaf.ErrWorkerInUse if it does not. The
// claim is the lease: WorkerClaim.Expires and Heartbeat's expiry are set, so
// that a holder cut off from the database stops issuing before another
// process may take the ID, and a newcomer takes it only after the lease ran
// out by the database's clock. A restart of the holder itself (the same
// WorkerConfig.Holder) takes its lease back at once. Java servers of the
// fork hold no lease and are not guarded.
type WorkerRegistry struct {
	db     *sql.DB
	dbName string // for errors
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger
	holder string // our token in leaf_workerid_lease.holder

	mu     sync.Mutex
	held   bool   // a worker ID is claimed
	id     int64  // the claimed worker ID
	ipPort string // ip_port of its row: the holder's endpoint, or idKey(id) for RegisterID
	byID   bool   // claimed with RegisterID: the claim lasts as long as the lease
}

var _ leaf.WorkerRegistry = (*WorkerRegistry)(nil)

// DefaultWorkerConfig returns the defaults a zero field of WorkerConfig
// takes; DSN and Holder have none.
func DefaultWorkerConfig() WorkerConfig {
	return WorkerConfig{LeaseTTL: DefaultLeaseTTL, Now: time.Now, Logger: slog.Default()}
}

// Validate reports what OpenWorkerRegistryWithConfig would refuse in c,
// once its zero fields have taken their defaults, without connecting.
func (c WorkerConfig) Validate() error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	_, err = config(c.DSN, "open worker registry")
	return err
}

// withDefaults fills c's zero fields from DefaultWorkerConfig and checks
// what needs no database.
func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	d := DefaultWorkerConfig()
	if c.LeaseTTL == 0 {
		c.LeaseTTL = d.LeaseTTL
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if len(c.Holder) > 127 {
		return c, fmt.Errorf("mysql: open worker registry: %w: holder %q is longer than 127 bytes",
			leaf.ErrInvalidArgument, c.Holder[:40]+"...")
	}
	if c.LeaseTTL < MinLeaseTTL {
		return c, fmt.Errorf("mysql: open worker registry: %w: lease TTL %v, want at least %v",
			leaf.ErrInvalidArgument, c.LeaseTTL, MinLeaseTTL)
	}
	return c, nil
}

// OpenWorkerRegistry is OpenWorkerRegistryWithConfig with the defaults.
func OpenWorkerRegistry(ctx context.Context, dsn string) (*WorkerRegistry, error) {
	return OpenWorkerRegistryWithConfig(ctx, WorkerConfig{DSN: dsn})
}

// OpenWorkerRegistryWithConfig connects to the database named in cfg.DSN,
// with the DSN handling of Open, and creates leaf_workerid_alloc and
// leaf_workerid_lease if they are missing.
func OpenWorkerRegistryWithConfig(ctx context.Context, wc WorkerConfig) (*WorkerRegistry, error) {
	wc, err := wc.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := config(wc.DSN, "open worker registry")
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: open worker registry %s: %w", cfg.DBName, err)
	}
	db := sql.OpenDB(conn)
	// A registry runs a statement or a short transaction every second; at
	// most a heartbeat and a peer clock check may overlap. Keeping one
	// connection idle saves a reconnect per heartbeat; the lifetimes are
	// Open's.
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	for _, ddl := range []string{WorkerSchema, LeaseSchema} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("mysql: open worker registry %s: create schema: %w", cfg.DBName, err)
		}
	}
	return &WorkerRegistry{
		db:     db,
		dbName: cfg.DBName,
		ttl:    wc.LeaseTTL.Truncate(time.Millisecond),
		now:    wc.Now,
		log:    wc.Logger.With("registry", "mysql", "database", cfg.DBName),
		holder: cmp.Or(wc.Holder, holderToken()),
	}, nil
}

// holderToken names this registry in the lease table: the host and process
// tell an operator which server holds a lease, the random part tells two
// registries in one process (or a restarted process) apart.
func holderToken() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	if len(host) > 64 {
		host = host[:64]
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// ClaimWait is the longest Register waits for another holder's lease on its
// worker ID to lapse before failing with leaf.ErrWorkerInUse: the lease TTL
// plus a margin. A caller that wants a restart after kill -9 to succeed
// gives Register this much more than its usual timeout.
func (r *WorkerRegistry) ClaimWait() time.Duration { return LeaseClaimWait(r.ttl) }

// LeaseClaimWait is ClaimWait of a registry opened with WorkerConfig.LeaseTTL
// ttl (0: the default), for callers that must know it before the registry
// is opened.
func LeaseClaimWait(ttl time.Duration) time.Duration {
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	return ttl.Truncate(time.Millisecond) + claimMargin
}

// Register claims ep's worker ID: the id of its row, inserted if it has
// none, and the live lease on that ID. HighWater is the row's max_timestamp
// once the lease is held (0 if NULL, and for a row this call inserted). An
// ID above maxID fails with leaf.ErrWorkerIDsExhausted; the row stays, as in
// the fork, so the endpoint keeps that ID.
//
// If another holder's lease on the ID is live, Register logs a warning and
// waits up to ClaimWait (or ctx) for it to lapse, then takes it; if it is
// still held then, Register fails with an error wrapping
// leaf.ErrWorkerInUse that names the holder.
func (r *WorkerRegistry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, fmt.Errorf("mysql: register: %w", err)
	}
	ipPort := ep.String()
	for attempt := 1; ; attempt++ {
		id, created, err := r.getOrCreate(ctx, ep, ipPort)
		if err != nil {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s in %s: %w", ipPort, r.dbName, err)
		}
		if id > maxID {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s: %w: worker ID %d of %s is above the layout's maximum %d",
				ipPort, leaf.ErrWorkerIDsExhausted, id, ipPort, maxID)
		}
		t0, resumed, err := r.claimLease(ctx, id, ipPort, false)
		if err != nil {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s: %w", ipPort, err)
		}
		// The mark is read only now that no one else may move it: a holder
		// we waited for may have raised it, or lowered it on Release to what
		// it used, until the moment it let go.
		var (
			got  int64
			mark sql.NullInt64
		)
		err = r.db.QueryRowContext(ctx, selectWorker, ipPort).Scan(&got, &mark)
		if err == nil && got == id {
			r.hold(id, ipPort, false)
			highWater := mark.Int64
			if created == mark {
				// A new ID has no history: no one issued IDs with it before.
				highWater = 0
			}
			return leaf.WorkerClaim{WorkerID: id, HighWater: highWater, Expires: t0.Add(r.ttl), Resumed: resumed}, nil
		}
		// The row was deleted or handed to another ID meanwhile (an
		// operator's doing): give the lease back and start over.
		r.dropLease(ctx, id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s in %s: look up worker: %w", ipPort, r.dbName, err)
		}
		if attempt == registerAttempts {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register %s in %s: its row in leaf_workerid_alloc keeps changing", ipPort, r.dbName)
		}
	}
}

// getOrCreate returns the id of ipPort's row, inserting the row if there is
// none; then created is the max_timestamp it inserted (invalid otherwise).
func (r *WorkerRegistry) getOrCreate(ctx context.Context, ep leaf.Endpoint, ipPort string) (id int64, created sql.NullInt64, err error) {
	for attempt := 1; ; attempt++ {
		var mark sql.NullInt64
		err := r.db.QueryRowContext(ctx, selectWorker, ipPort).Scan(&id, &mark)
		if err == nil {
			return id, sql.NullInt64{}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, sql.NullInt64{}, fmt.Errorf("look up worker: %w", err)
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
				return 0, sql.NullInt64{}, fmt.Errorf("insert worker: %w", err)
			}
			return id, sql.NullInt64{Int64: now.UnixMilli(), Valid: true}, nil
		}
		// A duplicate means a server with the same endpoint inserted first: its
		// row is ours too, so look again. A deadlock may befall waiters on that
		// insert's key lock; the retry reads the row as well.
		if attempt == registerAttempts || !(dialect.IsUniqueViolation(err) || dialect.IsRetryable(err)) {
			return 0, sql.NullInt64{}, fmt.Errorf("insert worker: %w", err)
		}
	}
}

// leaseInfo is another holder's lease as Register found it.
type leaseInfo struct {
	holder, ipPort string
	expiresIn      time.Duration // by the database's clock; negative: lapsed
	renewedAgo     time.Duration // by the database's clock
	renewedAt      time.Time     // the database's clock at the last renewal
}

// claimLease takes the lease on worker id for ipPort, waiting up to
// ClaimWait for another holder's to lapse, and returns when the successful
// attempt began (the lease lasts at least the TTL from then) and whether it
// took back a lease of our own that no one held since. byID says the ID was
// asked for by number (RegisterID), for the refusal's advice.
func (r *WorkerRegistry) claimLease(ctx context.Context, id int64, ipPort string, byID bool) (time.Time, bool, error) {
	var (
		start    time.Time
		deadline time.Time // set at the first refusal
		held     *leaseInfo
	)
	for {
		t0 := time.Now()
		ok, resumed, info, err := r.tryLease(ctx, id, ipPort)
		if err != nil {
			return time.Time{}, false, err
		}
		if ok {
			if held != nil {
				r.log.Info("worker ID lease taken: the previous holder released it or stopped renewing it",
					"endpoint", ipPort, "worker_id", id, "previous_holder", held.holder, "waited", time.Since(start).Round(time.Millisecond))
			}
			return t0, resumed, nil
		}
		now := time.Now()
		if deadline.IsZero() {
			start, deadline = now, now.Add(r.ClaimWait())
		}
		// A nil info means the row changed between our statements: try
		// again soon.
		pause := 10 * time.Millisecond
		if info != nil {
			if held == nil {
				r.log.Warn("worker ID lease held by another holder: either a live server with the same endpoint (or worker ID), "+
					"or this server's previous run stopped without releasing it (kill -9); waiting for the lease to lapse",
					"endpoint", ipPort, "worker_id", id, "holder", info.holder, "holder_endpoint", info.ipPort,
					"renewed_ago", info.renewedAgo.Round(time.Millisecond), "expires_in", info.expiresIn.Round(time.Millisecond),
					"max_wait", r.ClaimWait())
			}
			held = info
			pause = min(max(info.expiresIn+20*time.Millisecond, 10*time.Millisecond), min(r.ttl/10, maxPoll))
		}
		if !now.Before(deadline) {
			return time.Time{}, false, r.inUse(id, ipPort, held, now.Sub(start), byID, nil)
		}
		t := time.NewTimer(min(pause, deadline.Sub(now)))
		select {
		case <-ctx.Done():
			t.Stop()
			if held == nil {
				return time.Time{}, false, fmt.Errorf("take the lease on worker %d: %w", id, ctx.Err())
			}
			return time.Time{}, false, r.inUse(id, ipPort, held, time.Since(start), byID, ctx.Err())
		case <-t.C:
		}
	}
}

// tryLease makes one attempt at the lease on worker id: our own back
// (resumed), a lapsed one taken over, or a new row. When another holder's
// lease is live it returns that lease; a nil info with ok false means try
// again.
func (r *WorkerRegistry) tryLease(ctx context.Context, id int64, ipPort string) (ok, resumed bool, info *leaseInfo, err error) {
	ttl := r.ttl.Microseconds()
	for _, q := range []struct {
		query   string
		args    []any
		resumed bool
	}{
		{resumeLease, []any{ipPort, ttl, r.now().UnixMilli(), id, r.holder}, true},
		{takeLease, []any{ipPort, r.holder, ttl, r.now().UnixMilli(), id}, false},
	} {
		res, err := r.db.ExecContext(ctx, q.query, q.args...)
		if err != nil {
			if dialect.IsRetryable(err) {
				return false, false, nil, nil
			}
			return false, false, nil, fmt.Errorf("take the lease on worker %d: %w", id, err)
		}
		// clientFoundRows: a matched row counts even if nothing changed.
		if n, err := res.RowsAffected(); err != nil {
			return false, false, nil, fmt.Errorf("take the lease on worker %d: %w", id, err)
		} else if n == 1 {
			return true, q.resumed, nil, nil
		}
	}
	_, err = r.db.ExecContext(ctx, insertLease, id, ipPort, r.holder, ttl, r.now().UnixMilli())
	switch {
	case err == nil:
		return true, false, nil, nil
	case dialect.IsRetryable(err):
		return false, false, nil, nil
	case !dialect.IsUniqueViolation(err):
		return false, false, nil, fmt.Errorf("take the lease on worker %d: %w", id, err)
	}
	info, err = r.readLease(ctx, r.db, id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, fmt.Errorf("read the lease on worker %d: %w", id, err)
	}
	if info.holder == r.holder || info.expiresIn < 0 {
		return false, false, nil, nil // changed since our UPDATE
	}
	return false, false, info, nil
}

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (r *WorkerRegistry) readLease(ctx context.Context, q querier, id int64) (*leaseInfo, error) {
	var (
		info              leaseInfo
		expiresUs         int64
		renewedMs, dbNowM int64
	)
	err := q.QueryRowContext(ctx, selectLease, id).Scan(&info.holder, &info.ipPort, &expiresUs, &renewedMs, &dbNowM)
	if err != nil {
		return nil, err
	}
	info.expiresIn = time.Duration(expiresUs) * time.Microsecond
	info.renewedAgo = time.Duration(dbNowM-renewedMs) * time.Millisecond
	info.renewedAt = time.UnixMilli(renewedMs).UTC()
	return &info, nil
}

// inUse is Register's and RegisterID's refusal: what holds the lease and
// what to change.
func (r *WorkerRegistry) inUse(id int64, ipPort string, held *leaseInfo, waited time.Duration, byID bool, ctxErr error) error {
	why := fmt.Sprintf("waited %v for it to lapse (lease TTL %v)", waited.Round(time.Millisecond), r.ttl)
	if ctxErr != nil {
		why = fmt.Sprintf("gave up after %v, before the lease TTL %v had passed", waited.Round(time.Millisecond), r.ttl)
	}
	advice := "Another server is running with this endpoint: give each server its own endpoint " +
		"(snowflake.endpoint / --snowflake-endpoint, or a distinct listen port), or stop the other server"
	if byID {
		advice = "Another live server has this worker ID: stop it, or give this server another ID"
	}
	err := fmt.Errorf("%w: worker %d of %s is leased in %s.leaf_workerid_lease by %s (endpoint %s), "+
		"last renewed %s by the database's clock (%v before our last look); %s. %s",
		leaf.ErrWorkerInUse, id, ipPort, r.dbName, held.holder, held.ipPort,
		held.renewedAt.Format("2006-01-02T15:04:05.000Z"), held.renewedAgo.Round(time.Millisecond), why, advice)
	if ctxErr != nil {
		return fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return err
}

// dropLease gives back our lease on id, if we hold it; a failure only
// leaves it to lapse.
func (r *WorkerRegistry) dropLease(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := r.db.ExecContext(ctx, deleteLease, id, r.holder); err != nil {
		r.log.Warn("giving back a worker ID lease failed; it lapses by itself", "worker_id", id, "err", err)
	}
}

// renew renews our lease on id and publishes our clock reading with it. A
// lease that is another's, or gone, fails with leaf.ErrWorkerLost: whoever
// took it over may have issued under the ID.
func (r *WorkerRegistry) renew(ctx context.Context, q querier, id int64, ipPort string) error {
	res, err := q.ExecContext(ctx, renewLease, r.ttl.Microseconds(), r.now().UnixMilli(), id, r.holder)
	if err != nil {
		return fmt.Errorf("renew the lease on worker %d of %s: %w", id, ipPort, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("renew the lease on worker %d of %s: %w", id, ipPort, err)
	}
	if n == 1 {
		return nil
	}
	info, err := r.readLease(ctx, q, id)
	if err != nil {
		return fmt.Errorf("%w: worker %d of %s has no lease of ours in %s.leaf_workerid_lease any more",
			leaf.ErrWorkerLost, id, ipPort, r.dbName)
	}
	return fmt.Errorf("%w: the lease on worker %d of %s was taken by %s (endpoint %s) after ours lapsed",
		leaf.ErrWorkerLost, id, ipPort, info.holder, info.ipPort)
}

// Heartbeat renews the lease, publishing our clock reading in it, and
// raises the claim's max_timestamp to mark (never lowers it), stamping
// update_time, in one transaction. If our lease was taken over it fails with
// leaf.ErrWorkerLost and leaves the mark alone; so does a missing row
// (deleted, or its ip_port changed by an operator). The expiry is counted
// from before the renewal was sent: never later than the database's.
func (r *WorkerRegistry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	id, ipPort, _, ok := r.claim()
	if !ok {
		return time.Time{}, errors.New("mysql: heartbeat: no worker ID registered")
	}
	t0 := time.Now()
	err := r.inTx(ctx, func(tx *sql.Tx) error {
		if err := r.renew(ctx, tx, id, ipPort); err != nil {
			return err
		}
		return r.storeMark(ctx, tx, heartbeatWorker, mark, id, ipPort)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("mysql: heartbeat: %w", err)
	}
	return t0.Add(r.ttl), nil
}

// Release stores mark as the claim's final max_timestamp, lower than the
// last heartbeat's if the holder used less, and gives back the lease, so
// that the next server with this endpoint starts at once. The endpoint keeps
// its ID. If the lease was taken over, the mark is only raised (the other
// holder's may be higher) and Release fails with leaf.ErrWorkerLost; so
// does a missing row.
func (r *WorkerRegistry) Release(ctx context.Context, mark int64) error {
	id, ipPort, _, ok := r.claim()
	if !ok {
		return errors.New("mysql: release: no worker ID registered")
	}
	err := r.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, deleteLease, id, r.holder)
		if err != nil {
			return fmt.Errorf("give back the lease on worker %d of %s: %w", id, ipPort, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("give back the lease on worker %d of %s: %w", id, ipPort, err)
		}
		if n == 1 {
			return r.storeMark(ctx, tx, releaseWorker, mark, id, ipPort)
		}
		if err := r.storeMark(ctx, tx, heartbeatWorker, mark, id, ipPort); err != nil {
			return err
		}
		return fmt.Errorf("%w: worker %d of %s: our lease in %s.leaf_workerid_lease was taken over or removed",
			leaf.ErrWorkerLost, id, ipPort, r.dbName)
	})
	if err == nil || errors.Is(err, leaf.ErrWorkerLost) {
		// The claim is over either way; a failed Release keeps it so that
		// the caller may retry.
		r.mu.Lock()
		r.held, r.id, r.ipPort, r.byID = false, 0, "", false
		r.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("mysql: release: %w", err)
	}
	return nil
}

// claim is the claim held: its ID, its row's ip_port, whether it was taken
// by ID; ok is false when none is held.
func (r *WorkerRegistry) claim() (id int64, ipPort string, byID, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id, r.ipPort, r.byID, r.held
}

// hold records a claim taken.
func (r *WorkerRegistry) hold(id int64, ipPort string, byID bool) {
	r.mu.Lock()
	r.held, r.id, r.ipPort, r.byID = true, id, ipPort, byID
	r.mu.Unlock()
}

// inTx runs f in a transaction. It commits when f succeeds or reports the
// claim lost: what f did before learning that (storing a mark, dropping a
// lease) still stands.
func (r *WorkerRegistry) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	ferr := f(tx)
	if ferr != nil && !errors.Is(ferr, leaf.ErrWorkerLost) {
		_ = tx.Rollback()
		return ferr
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return ferr
}

// storeMark runs Heartbeat's or Release's statement on the claimed row.
func (r *WorkerRegistry) storeMark(ctx context.Context, q querier, query string, mark, id int64, ipPort string) error {
	res, err := q.ExecContext(ctx, query, mark, time.Now().Truncate(time.Second), id, ipPort)
	if err != nil {
		return fmt.Errorf("store the mark of worker %d of %s: %w", id, ipPort, err)
	}
	// clientFoundRows makes this count the row even when the mark did not
	// move, so 0 means the row is gone.
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store the mark of worker %d of %s: %w", id, ipPort, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: worker %d of %s has no row in %s.leaf_workerid_alloc",
			leaf.ErrWorkerLost, id, ipPort, r.dbName)
	}
	return nil
}

// PeerClocks returns the clock offsets of the other servers holding a live
// lease (at most 1024), measured against the database's clock: a peer's
// offset from it is clock_ms − db_ms of its last renewal, ours is our clock
// at the middle of a SELECT of the database's time minus that time, and the
// peer's Offset is the difference. The error of each is about half a round
// trip to the database, whatever the time since the peer's last renewal.
// While a claim is held, the call first renews our lease, publishing our own
// reading; a lease taken over fails with leaf.ErrWorkerLost.
func (r *WorkerRegistry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	if id, ipPort, _, ok := r.claim(); ok {
		if err := r.renew(ctx, r.db, id, ipPort); err != nil {
			return nil, fmt.Errorf("mysql: peer clocks: %w", err)
		}
	}
	var dbMs int64
	t0 := r.now()
	if err := r.db.QueryRowContext(ctx, selectDBNow).Scan(&dbMs); err != nil {
		return nil, fmt.Errorf("mysql: peer clocks: read the database's clock: %w", err)
	}
	t1 := r.now()
	self := t0.Add(t1.Sub(t0)/2).UnixMilli() - dbMs

	rows, err := r.db.QueryContext(ctx, listLeases, r.holder)
	if err != nil {
		return nil, fmt.Errorf("mysql: peer clocks: list leases: %w", err)
	}
	defer rows.Close()
	var peers []leaf.PeerClock
	for rows.Next() {
		var (
			p             leaf.PeerClock
			clockMs, atMs int64
		)
		if err := rows.Scan(&p.WorkerID, &p.Endpoint, &clockMs, &atMs); err != nil {
			return nil, fmt.Errorf("mysql: peer clocks: list leases: %w", err)
		}
		p.Offset = time.Duration(clockMs-atMs-self) * time.Millisecond
		peers = append(peers, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: peer clocks: list leases: %w", err)
	}
	return peers, nil
}

// Close closes the connection pool. It does not Release: the row keeps the
// last heartbeat's mark, and the lease lapses after its TTL.
func (r *WorkerRegistry) Close() error {
	return r.db.Close()
}
