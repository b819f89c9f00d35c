// Package sqlstore is the SQL shared by the sqlite, mysql and postgres
// segment stores: the one reserve-a-range transaction, the conditional give
// back, the listings and the tag admin statements, all on Leaf's leaf_alloc
// table, plus three tables beside it: the tombstones of deleted tags in
// leaf_alloc_tombstone, in leaf_alloc_version a change counter that every
// CreateTag and DeleteTag moves in its own transaction, so that a refresh
// with nothing to do is one primary-key read, and in leaf_tag_shape the
// shapes of tags created with one (leaf.TagShaper), and in leaf_tag_owner
// the leases of ordered tags (leaf.OrderedStore, see OwnerSchema).
// leaf_alloc itself stays exactly Leaf's table, which Java Leaf nodes may
// share.
//
// The periods of a periodic tag are rows of leaf_alloc named
// tagshape.PeriodRow(tag, key) ("orders#20261124"), made on first use (see
// leaf.PeriodStore). The listings leave them out. The databases differ only
// in a small Dialect: placeholder style, whether UPDATE ... RETURNING
// exists, the upsert syntax, row locks, and how their drivers report a
// duplicate key or a transient conflict.
//
// Every statement is parameterised, and every method validates its tag with
// leaf.ValidateTag before any SQL runs.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/backoff"
	"github.com/leafgo/leaf/tagshape"
)

// Dialect is what differs between the SQL databases.
type Dialect struct {
	// Name prefixes error messages: "sqlite", "mysql", "postgres".
	Name string
	// Dollar selects numbered placeholders ($1, $2, ...) instead of ?.
	Dollar bool
	// Returning says UPDATE ... RETURNING and DELETE ... RETURNING exist
	// (PostgreSQL, SQLite >= 3.35), which saves the read-back SELECT of a
	// reserve and the locking SELECT of a delete. MariaDB has no UPDATE ...
	// RETURNING, MySQL no RETURNING at all.
	Returning bool
	// OnDuplicateKey selects MySQL's INSERT ... ON DUPLICATE KEY UPDATE for
	// the tombstone upsert instead of INSERT ... ON CONFLICT.
	OnDuplicateKey bool
	// LockingReads says SELECT ... FOR UPDATE exists and is needed: under
	// MySQL's REPEATABLE READ a plain SELECT may read an older snapshot. Not
	// for SQLite, whose transactions take the database's write lock when
	// they begin.
	LockingReads bool
	// PrefixGlob matches a name prefix with GLOB rather than LIKE (SQLite,
	// whose LIKE ignores ASCII case and so cannot use the biz_tag index).
	PrefixGlob bool
	// IsUniqueViolation reports a duplicate primary key: the tag exists.
	IsUniqueViolation func(error) bool
	// IsRetryable reports a transient conflict (deadlock, serialization
	// failure, busy database) after which the statement may simply run again.
	IsRetryable func(error) bool
	// ClockMicros is an SQL expression for the database's clock in
	// microseconds since the Unix epoch, which the leases of ordered tags
	// are counted by, so that servers whose clocks differ agree when one
	// runs out. It must keep one value within a statement, or be used
	// once per statement (the store does the latter). Empty: Go's clock
	// (SQLite, on one host).
	ClockMicros string
}

// The tables beside leaf_alloc in portable SQL, as SQLite and PostgreSQL
// create them (MySQL writes its own, with its quoting and INSERT IGNORE).
// TombstoneSchema holds the deleted tags (see leaf.SegmentAdmin): per tag,
// the highest max_id its deleted rows had. VersionSchema is the change
// counter (see leaf.SegmentVersioner): one row that every CreateTag and
// DeleteTag moves, read by each refresh; VersionSeed adds the row if it is
// missing.
const (
	TombstoneSchema = `CREATE TABLE IF NOT EXISTS leaf_alloc_tombstone (
  biz_tag    VARCHAR(128) NOT NULL,
  max_id     BIGINT       NOT NULL,
  deleted_at TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`
	VersionSchema = `CREATE TABLE IF NOT EXISTS leaf_alloc_version (
  id      INT    NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (id)
)`
	VersionSeed = `INSERT INTO leaf_alloc_version (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`
	// ShapeSchema holds the shapes of tags created with one (see
	// leaf.TagShaper), in leaf.TagShape's Canonical spelling. A plain tag
	// has no row. A row outlives its tag, as the tombstone does.
	ShapeSchema = `CREATE TABLE IF NOT EXISTS leaf_tag_shape (
  biz_tag     VARCHAR(128) NOT NULL,
  period      VARCHAR(8)   NOT NULL DEFAULT '',
  time_zone   VARCHAR(64)  NOT NULL DEFAULT '',
  fmt_prefix  VARCHAR(32)  NOT NULL DEFAULT '',
  fmt_width   INT          NOT NULL DEFAULT 0,
  fmt_radix   INT          NOT NULL DEFAULT 0,
  opaque_bits INT          NOT NULL DEFAULT 0,
  key_check   VARCHAR(128) NOT NULL DEFAULT '',
  created_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`
)

// Widths of leaf_tag_shape's text columns that tagshape.Validate does
// not bound.
const (
	maxTimeZoneLen = 64
	maxKeyCheckLen = 128
)

// Config tunes a Store; the zero value is the default.
type Config struct {
	// MaxAttempts bounds how often a transaction runs when the dialect calls
	// its error retryable (a deadlock, a busy database). Default 8: InnoDB
	// picks deadlock victims among a tag's reserve, delete and create when
	// they race, and each retry may meet the next racer.
	MaxAttempts int
	// RetryBackoff bounds the first pause between attempts; the bound
	// doubles each time up to maxRetryPause, and each pause is drawn below
	// it (full jitter). Default 10ms.
	RetryBackoff time.Duration
	// Now is the clock the leases of ordered tags are counted by when the
	// dialect has none of its own (Dialect.ClockMicros empty: SQLite).
	// Default time.Now; tests step it, as a database's clock may be
	// stepped, to show that no takeover hangs on it alone.
	Now func() time.Time
}

// Store implements leaf.SegmentStore, leaf.SegmentAdmin, leaf.SegmentVersioner,
// leaf.TagShaper, leaf.PeriodStore and leaf.OrderedStore on a *sql.DB whose
// leaf_alloc, leaf_alloc_tombstone, leaf_alloc_version, leaf_tag_shape and
// leaf_tag_owner tables already exist.
type Store struct {
	db       *sql.DB
	d        Dialect
	q        queries
	o        ownerQueries
	attempts int
	backoff  time.Duration
	now      func() time.Time // Config.Now
	closed   atomic.Bool
	// fo is the failover fence, nil while it is off (WatchFailover).
	fo atomic.Pointer[failover]
	// retries counts reserve attempts run again (Retries).
	retries atomic.Int64
	// forShare is the dialect's shared row lock clause ("" without
	// locking reads), for the statements that read under it.
	forShare string
	// fence is what leaf_stripe must record for a reserve to commit (see
	// Stripes.CheckSingleDatabase and Stripes.ExpectStripe); nil: no check, as on SQLite,
	// which has no leaf_stripe.
	fence atomic.Pointer[stripeFence]
}

var (
	_ leaf.SegmentStore     = (*Store)(nil)
	_ leaf.SegmentAdmin     = (*Store)(nil)
	_ leaf.SegmentVersioner = (*Store)(nil)
	_ leaf.TagShaper        = (*Store)(nil)
	_ leaf.PeriodStore      = (*Store)(nil)
	_ leaf.OrderedStore     = (*Store)(nil)
)

// versionTable is the change counter's table: one row, id 1. Each store
// package creates it with VersionSchema's columns in its own dialect and
// seeds the row; see leaf.SegmentVersioner.
const versionTable = "leaf_alloc_version"

type queries struct {
	reserveStored, reserveStep, readBack string
	giveBack                             string
	tags, allocs, alloc                  string
	create, setStep, remove              string
	// Tombstones: read (and lock) one, lock a row before deleting it, delete
	// a row returning its max_id, record a tombstone, move a new row's start.
	tombstone, lockRow, removeReturning string
	bury, setStart                      string
	// The change counter: read it, and move it inside a create or delete.
	version, bump string
	// Shapes: read one (locking, inside a create), read one, add one.
	shapeLocked, shape, addShape string
	// Periods: read the tag's row under a shared lock, add a period's row
	// unless it exists, raise a new row's start to its tombstone.
	parentShared, addPeriod, raiseStart string
	// The step of a tag's period rows, set with the tag's.
	setPeriodStep string
	// The stripe record read under a shared lock inside a reserve.
	fence string
}

// DefaultConfig returns the defaults a zero (or, for MaxAttempts and
// RetryBackoff, non-positive) field of Config takes.
func DefaultConfig() Config {
	return Config{MaxAttempts: 8, RetryBackoff: 10 * time.Millisecond, Now: time.Now}
}

// New wraps db. The Store owns db from now on: Close closes it. Config
// has nothing to refuse: every field takes its default when unset.
func New(db *sql.DB, d Dialect, set Config) *Store {
	if d.IsUniqueViolation == nil {
		d.IsUniqueViolation = func(error) bool { return false }
	}
	if d.IsRetryable == nil {
		d.IsRetryable = func(error) bool { return false }
	}
	def := DefaultConfig()
	if set.MaxAttempts < 1 {
		set.MaxAttempts = def.MaxAttempts
	}
	if set.RetryBackoff <= 0 {
		set.RetryBackoff = def.RetryBackoff
	}
	if set.Now == nil {
		set.Now = def.Now
	}
	const cols = "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc"
	forUpdate, forShare := "", ""
	if d.LockingReads {
		forUpdate, forShare = " FOR UPDATE", " FOR SHARE"
		if d.OnDuplicateKey {
			forShare = " LOCK IN SHARE MODE" // MariaDB has no FOR SHARE
		}
	}
	returning := ""
	if d.Returning {
		returning = " RETURNING max_id, step"
	}
	q := queries{
		// step on the right-hand side is the row's own column, read under
		// the row lock the UPDATE takes: no cached step is involved.
		reserveStored: "UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?" + returning,
		reserveStep:   "UPDATE leaf_alloc SET max_id = max_id + ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?" + returning,
		readBack:      "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?",
		// Never below the tag's tombstone: a server that still holds a range
		// of a deleted tag must not hand its tail to the row that replaced it.
		giveBack: "UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND max_id = ?" +
			" AND NOT EXISTS (SELECT 1 FROM leaf_alloc_tombstone WHERE biz_tag = ? AND max_id > ?)",

		tags:    "SELECT biz_tag FROM leaf_alloc WHERE " + notPeriod,
		allocs:  cols + " WHERE " + notPeriod,
		alloc:   cols + " WHERE biz_tag = ?",
		create:  "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)",
		setStep: "UPDATE leaf_alloc SET step = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?",
		remove:  "DELETE FROM leaf_alloc WHERE biz_tag = ?",

		tombstone:       "SELECT max_id FROM leaf_alloc_tombstone WHERE biz_tag = ?" + forUpdate,
		lockRow:         "SELECT max_id FROM leaf_alloc WHERE biz_tag = ?" + forUpdate,
		removeReturning: "DELETE FROM leaf_alloc WHERE biz_tag = ? RETURNING max_id",
		setStart:        "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?",

		version: "SELECT version FROM " + versionTable + " WHERE id = 1",
		bump:    "UPDATE " + versionTable + " SET version = version + 1 WHERE id = 1",

		shapeLocked: shapeCols + " WHERE biz_tag = ?" + forUpdate,
		shape:       shapeCols + " WHERE biz_tag = ?",
		addShape: "INSERT INTO leaf_tag_shape (biz_tag, period, time_zone, fmt_prefix, fmt_width, fmt_radix, opaque_bits, key_check, created_at)" +
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, CURRENT_TIMESTAMP)",

		parentShared: "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?" + forShare,
		addPeriod:    "INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time) VALUES (?, ?, ?, CURRENT_TIMESTAMP) ON CONFLICT (biz_tag) DO NOTHING",
		raiseStart:   "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ? AND max_id < ?",

		fence: "SELECT db_index, db_count, block, cluster FROM leaf_stripe WHERE id = 1" + forShare,
	}
	if d.OnDuplicateKey {
		// INSERT IGNORE also turns other errors into warnings; the values
		// are checked before (the name's length) or copied from a row.
		q.addPeriod = "INSERT IGNORE INTO leaf_alloc (biz_tag, max_id, step, update_time) VALUES (?, ?, ?, CURRENT_TIMESTAMP)"
	}
	q.setPeriodStep = "UPDATE leaf_alloc SET step = ? WHERE " + periodMatch(d)
	// A re-delete keeps the highest max_id ever seen: a row created below its
	// tombstone (never by CreateTag) must not lower it.
	if d.OnDuplicateKey {
		q.bury = "INSERT INTO leaf_alloc_tombstone (biz_tag, max_id, deleted_at) VALUES (?, ?, CURRENT_TIMESTAMP)" +
			" ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, ?), deleted_at = CURRENT_TIMESTAMP"
	} else {
		q.bury = "INSERT INTO leaf_alloc_tombstone (biz_tag, max_id, deleted_at) VALUES (?, ?, CURRENT_TIMESTAMP)" +
			" ON CONFLICT (biz_tag) DO UPDATE SET max_id = CASE WHEN excluded.max_id > leaf_alloc_tombstone.max_id" +
			" THEN excluded.max_id ELSE leaf_alloc_tombstone.max_id END, deleted_at = CURRENT_TIMESTAMP"
	}
	if d.Dollar {
		for _, p := range []*string{&q.reserveStored, &q.reserveStep, &q.readBack, &q.giveBack,
			&q.tags, &q.allocs, &q.alloc, &q.create, &q.setStep, &q.remove,
			&q.tombstone, &q.lockRow, &q.removeReturning, &q.bury, &q.setStart,
			&q.shapeLocked, &q.shape, &q.addShape, &q.parentShared, &q.addPeriod, &q.raiseStart, &q.setPeriodStep} {
			*p = Rebind(*p)
		}
	}
	return &Store{db: db, d: d, q: q, o: newOwnerQueries(d, forUpdate, forShare), forShare: forShare, attempts: set.MaxAttempts, backoff: set.RetryBackoff, now: set.Now}
}

// Rebind turns ? placeholders into $1, $2, ... . The statements here have
// no string literals, so every ? is a placeholder.
func Rebind(query string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// DB is the underlying pool, for store packages that keep more tables.
func (s *Store) DB() *sql.DB { return s.db }

// wrap adds the dialect and operation to err, and turns the driver's
// "database is closed" after Close into leaf.ErrClosed.
func (s *Store) wrap(op string, err error) error {
	if s.closed.Load() && !errors.Is(err, leaf.ErrClosed) {
		return fmt.Errorf("%s: %s: %w (%w)", s.d.Name, op, leaf.ErrClosed, err)
	}
	return fmt.Errorf("%s: %s: %w", s.d.Name, op, err)
}

func (s *Store) checkOpen(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %s: %w", s.d.Name, op, leaf.ErrClosed)
	}
	return nil
}

// Reserve adds step (the stored step when step <= 0) to the tag's max_id and
// returns the range read back from the updated row in the same transaction.
func (s *Store) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q", tag)
	if err := s.checkOpen(op); err != nil {
		return leaf.Reservation{}, err
	}
	var r leaf.Reservation
	// Running the transaction again is safe even if a failed attempt did in
	// fact commit: each attempt takes its bounds from the row it updated, so
	// a lost commit wastes a range but never hands one out twice.
	err := s.retry(ctx, func() error {
		var err error
		r, err = s.reserveOnce(ctx, tag, step, nil)
		return err
	})
	if err != nil {
		return leaf.Reservation{}, s.wrap(op, err)
	}
	return r, nil
}

// afterReserve tells the failover fence, if on, of a reserve's outcome: a
// range to remember, or a refusal that may start a fence.
func (s *Store) afterReserve(ctx context.Context, tag string, maxID int64, err error) {
	f := s.fo.Load()
	if f == nil {
		return
	}
	if fe, ok := errors.AsType[*failoverError](err); ok {
		f.afterRefusal(ctx, fe)
		return
	}
	if err == nil {
		f.reserved(tag, maxID)
	}
}

// reserveOnce is one reserve transaction; h, when set, must hold the
// tag's lease for it to commit (ReserveOwned).
func (s *Store) reserveOnce(ctx context.Context, tag string, step int, h *leaseHolder) (leaf.Reservation, error) {
	var maxID, stored int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		query, args := s.q.reserveStored, []any{tag}
		if step > 0 {
			query, args = s.q.reserveStep, []any{int64(step), tag}
		}
		if s.d.Returning {
			err := tx.QueryRowContext(ctx, query, args...).Scan(&maxID, &stored)
			if errors.Is(err, sql.ErrNoRows) {
				return leaf.ErrTagNotFound
			}
			if err != nil {
				return fmt.Errorf("update: %w", err)
			}
		} else {
			res, err := tx.ExecContext(ctx, query, args...)
			if err != nil {
				return fmt.Errorf("update: %w", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("update: %w", err)
			}
			if n == 0 {
				return leaf.ErrTagNotFound
			}
			// The UPDATE holds the row lock until commit, so this reads exactly
			// the row it wrote.
			err = tx.QueryRowContext(ctx, s.q.readBack, tag).Scan(&maxID, &stored)
			if errors.Is(err, sql.ErrNoRows) {
				return leaf.ErrTagNotFound
			}
			if err != nil {
				return fmt.Errorf("read back: %w", err)
			}
		}
		if f := s.fence.Load(); f != nil {
			if err := s.checkFence(ctx, tx, f); err != nil {
				return err
			}
		}
		if h != nil {
			if err := s.checkOwner(ctx, tx, tag, h); err != nil {
				return err
			}
		}
		if f := s.fo.Load(); f != nil {
			used := int64(step)
			if step <= 0 {
				used = stored
			}
			return f.checkReserve(ctx, tx, tag, maxID-used)
		}
		return nil
	})
	s.afterReserve(ctx, tag, maxID, err)
	if err != nil {
		return leaf.Reservation{}, err
	}
	used := step
	if step <= 0 {
		used = int(stored)
	}
	return leaf.Reservation{Tag: tag, MaxID: maxID, Step: used, StoredStep: int(stored)}, nil
}

// GiveBack sets max_id to from if it still equals expect and from is not
// below the tag's tombstone. It reports whether the row changed; an unknown
// tag is simply not changed.
func (s *Store) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return false, err
	}
	if from < 1 || from > expect {
		return false, fmt.Errorf("%w: give back %q from %d at max_id %d: want 1 <= from <= max_id", leaf.ErrInvalidArgument, tag, from, expect)
	}
	return s.giveBackRow(ctx, fmt.Sprintf("give back %q", tag), tag, from, expect)
}

// giveBackRow is GiveBack on the row named name (a tag's, or a period's).
func (s *Store) giveBackRow(ctx context.Context, op, name string, from, expect int64) (bool, error) {
	if err := s.checkOpen(op); err != nil {
		return false, err
	}
	var n int64
	// Retrying is safe: the condition max_id = expect makes a repeat a no-op.
	err := s.retry(ctx, func() (err error) {
		n, err = s.execCount(ctx, s.q.giveBack, from, name, expect, name, from)
		return err
	})
	if f := s.fo.Load(); f != nil {
		// Whether it applied or not (an answer lost), nothing at or above
		// from is issued from this range: the next range may start there.
		f.gaveBack(name, from)
	}
	if err != nil {
		return false, s.wrap(op, err)
	}
	return n == 1, nil
}

// execCount runs a statement and answers how many rows it changed (matched,
// on MySQL: clientFoundRows).
func (s *Store) execCount(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// maxRetryPause caps the bound of a retry's pause.
const maxRetryPause = 250 * time.Millisecond

func (s *Store) retry(ctx context.Context, f func() error) error {
	// Jitter, so that instances that collided do not collide again.
	pause := backoff.Backoff{Base: s.backoff, Max: maxRetryPause}
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt >= s.attempts || !s.d.IsRetryable(err) {
			return err
		}
		s.retries.Add(1)
		if serr := backoff.Sleep(ctx, pause.Next()); serr != nil {
			return fmt.Errorf("%w (after %d attempts, last: %w)", serr, attempt, err)
		}
	}
}

// inTx runs fn in a transaction of its own and commits what it wrote,
// unless fn fails: then, as when the commit fails, it rolls back and
// returns the error. fn's errors come back as they are, so that callers
// still find the sentinels in them.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Also after a failed commit: a Commit that finds ctx done returns
	// without ending the transaction.
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Tags lists every tag, in byte order.
func (s *Store) Tags(ctx context.Context) ([]string, error) {
	if err := s.checkOpen("list tags"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q.tags)
	if err != nil {
		return nil, s.wrap("list tags", err)
	}
	defer rows.Close()
	tags := []string{}
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, s.wrap("list tags", err)
		}
		tags = append(tags, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list tags", err)
	}
	// Sorted here rather than by ORDER BY: collations differ between the
	// databases (MySQL's is case-insensitive), byte order does not.
	slices.Sort(tags)
	return tags, nil
}

// Allocs lists every row, ordered by tag (byte order).
func (s *Store) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	if err := s.checkOpen("list allocs"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q.allocs)
	if err != nil {
		return nil, s.wrap("list allocs", err)
	}
	defer rows.Close()
	as := []leaf.Alloc{}
	for rows.Next() {
		a, err := scanAlloc(rows)
		if err != nil {
			return nil, s.wrap("list allocs", err)
		}
		as = append(as, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list allocs", err)
	}
	slices.SortFunc(as, func(a, b leaf.Alloc) int { return strings.Compare(a.Tag, b.Tag) })
	return as, nil
}

// Alloc reads one row; leaf.ErrTagNotFound if there is none.
func (s *Store) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Alloc{}, err
	}
	op := fmt.Sprintf("read %q", tag)
	if err := s.checkOpen(op); err != nil {
		return leaf.Alloc{}, err
	}
	a, err := scanAlloc(s.db.QueryRowContext(ctx, s.q.alloc, tag))
	if errors.Is(err, sql.ErrNoRows) {
		return leaf.Alloc{}, s.wrap(op, leaf.ErrTagNotFound)
	}
	if err != nil {
		return leaf.Alloc{}, s.wrap(op, err)
	}
	return a, nil
}

func scanAlloc(row interface{ Scan(...any) error }) (leaf.Alloc, error) {
	var (
		a    leaf.Alloc
		step int64
		desc sql.NullString
		at   dbTime
	)
	if err := row.Scan(&a.Tag, &a.MaxID, &step, &desc, &at); err != nil {
		return leaf.Alloc{}, err
	}
	a.Step = int(step)
	a.Description = desc.String
	a.UpdateTime = at.t
	return a, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.checkOpen("ping"); err != nil {
		return err
	}
	if err := s.db.PingContext(ctx); err != nil {
		return s.wrap("ping", err)
	}
	return nil
}

// Close closes the pool. Later calls fail with leaf.ErrClosed; closing twice
// is harmless.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if f := s.fo.Load(); f != nil {
		f.close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", s.d.Name, err)
	}
	return nil
}

// CreateTag inserts a plain tag: CreateShapedTag with the zero shape.
func (s *Store) CreateTag(ctx context.Context, a leaf.Alloc) error {
	return s.CreateShapedTag(ctx, a, leaf.TagShape{})
}

// CreateShapedTag inserts a row whose max_id is the first ID to issue:
// a.MaxID, or with a.MaxID 0 the tag's tombstone if it has one, else 1, and
// the shape's row unless the shape is plain, in one transaction. A start
// below the tombstone fails with a *leaf.TombstoneError; a shape other than
// the one the tag was deleted with (plain included) with a
// *leaf.ShapeError. The primary key, not a prior SELECT, decides a race
// between two creators.
func (s *Store) CreateShapedTag(ctx context.Context, a leaf.Alloc, shape leaf.TagShape) error {
	if err := leaf.ValidateAlloc(a); err != nil {
		return err
	}
	if err := tagshape.Validate(shape); err != nil {
		return err
	}
	if err := tagshape.ValidateTag(a.Tag, shape); err != nil {
		return err
	}
	if len(shape.TimeZone) > maxTimeZoneLen || len(shape.KeyCheck) > maxKeyCheckLen {
		return fmt.Errorf("%w: time zone or key check too long (at most %d and %d bytes)", leaf.ErrInvalidArgument, maxTimeZoneLen, maxKeyCheckLen)
	}
	shape = shape.Canonical()
	op := fmt.Sprintf("create %q", a.Tag)
	if err := s.checkOpen(op); err != nil {
		return err
	}
	// A deadlock or a busy database rolls the whole transaction back, so
	// running it again is safe.
	err := s.retry(ctx, func() error { return s.createOnce(ctx, a, shape) })
	if err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// shapeCols are the columns of a shape read, in scanShape's order.
const shapeCols = "SELECT period, time_zone, fmt_prefix, fmt_width, fmt_radix, opaque_bits, key_check FROM leaf_tag_shape"

func scanShape(row *sql.Row) (sh leaf.TagShape, found bool, err error) {
	var period string
	var width, radix, bits int64
	err = row.Scan(&period, &sh.TimeZone, &sh.Format.Prefix, &width, &radix, &bits, &sh.KeyCheck)
	if errors.Is(err, sql.ErrNoRows) {
		return leaf.TagShape{}, false, nil
	}
	if err != nil {
		return leaf.TagShape{}, false, err
	}
	sh.Period, sh.Format.Width, sh.Format.Radix, sh.OpaqueBits = leaf.Period(period), int(width), int(radix), int(bits)
	return sh, true, nil
}

// TagShape reads a tag's shape: the zero shape if it has no row.
func (s *Store) TagShape(ctx context.Context, tag string) (leaf.TagShape, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagShape{}, err
	}
	op := fmt.Sprintf("shape of %q", tag)
	if err := s.checkOpen(op); err != nil {
		return leaf.TagShape{}, err
	}
	sh, _, err := scanShape(s.db.QueryRowContext(ctx, s.q.shape, tag))
	if err != nil {
		return leaf.TagShape{}, s.wrap(op, err)
	}
	return sh, nil
}

// createOnce inserts the row first and reads the tombstone and the shape
// second. The insert waits for any transaction that is deleting an earlier
// row of the tag, so the tombstone read after it (a locking read, or under
// SQLite's database lock) sees what that delete recorded. Reading first
// could miss it, and start the new row below IDs the deleted one issued.
// The shape's row is written only here, under the new row's lock, so two
// creators cannot both add one.
func (s *Store) createOnce(ctx context.Context, a leaf.Alloc, shape leaf.TagShape) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		start := max(a.MaxID, 1)
		desc := sql.NullString{String: a.Description, Valid: a.Description != ""}
		if _, err := tx.ExecContext(ctx, s.q.create, a.Tag, start, int64(a.Step), desc); err != nil {
			if s.d.IsUniqueViolation(err) {
				return fmt.Errorf("%w (%w)", leaf.ErrTagExists, err)
			}
			return fmt.Errorf("insert: %w", err)
		}
		var tomb int64
		hasTomb := true
		err := tx.QueryRowContext(ctx, s.q.tombstone, a.Tag).Scan(&tomb)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			tomb, hasTomb, err = 0, false, nil
		case err != nil:
			return fmt.Errorf("read tombstone: %w", err)
		}
		kept, hasShape, err := scanShape(tx.QueryRowContext(ctx, s.q.shapeLocked, a.Tag))
		if err != nil {
			return fmt.Errorf("read shape: %w", err)
		}
		// A tag deleted plain has a tombstone and no shape row: it stays plain.
		if hasShape && kept != shape || !hasShape && hasTomb && !shape.IsPlain() {
			return &leaf.ShapeError{Tag: a.Tag, Kept: kept}
		}
		if tomb > start {
			if a.MaxID != 0 {
				return &leaf.TombstoneError{Tag: a.Tag, MinStart: tomb}
			}
			if _, err = tx.ExecContext(ctx, s.q.setStart, tomb, a.Tag); err != nil {
				return fmt.Errorf("start above tombstone: %w", err)
			}
		}
		if !hasShape && !shape.IsPlain() {
			f := shape.Format
			if _, err = tx.ExecContext(ctx, s.q.addShape, a.Tag, string(shape.Period), shape.TimeZone,
				f.Prefix, int64(f.Width), int64(f.Radix), int64(shape.OpaqueBits), shape.KeyCheck); err != nil {
				return fmt.Errorf("add shape: %w", err)
			}
		}
		return s.bumpVersion(ctx, tx)
	})
}

// SetStep changes the stored step; leaf.ErrTagNotFound if there is no row.
func (s *Store) SetStep(ctx context.Context, tag string, step int) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if err := leaf.ValidateStep(step); err != nil {
		return err
	}
	op := fmt.Sprintf("set step of %q", tag)
	if err := s.checkOpen(op); err != nil {
		return err
	}
	if err := s.retry(ctx, func() error { return s.setStepOnce(ctx, tag, step) }); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// setStepOnce sets the step of the tag's row and of its period rows: new
// periods copy the tag's, the current ones take it from their next range.
// MySQL stores count matched rather than changed rows (clientFoundRows), or
// setting the step a tag already has would look like a missing tag.
func (s *Store) setStepOnce(ctx context.Context, tag string, step int) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q.setStep, int64(step), tag)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return leaf.ErrTagNotFound
		}
		if _, err = tx.ExecContext(ctx, s.q.setPeriodStep, append([]any{int64(step)}, s.periodArgs(tag)...)...); err != nil {
			return fmt.Errorf("set the step of the periods: %w", err)
		}
		return nil
	})
}

// DeleteTag removes the row and records its max_id in the tag's tombstone,
// in one transaction, which also deletes the tag's periods and its lease
// (leaf_tag_owner); leaf.ErrTagNotFound if there is no row.
func (s *Store) DeleteTag(ctx context.Context, tag string) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	op := fmt.Sprintf("delete %q", tag)
	if err := s.checkOpen(op); err != nil {
		return err
	}
	err := s.retry(ctx, func() error { return s.deleteOnce(ctx, tag) })
	if err != nil {
		return s.wrap(op, err)
	}
	return nil
}

func (s *Store) deleteOnce(ctx context.Context, tag string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// max_id is read under the row lock the delete holds until commit, so
		// no reserve can move it between the read and the tombstone.
		var maxID int64
		var err error
		if s.d.Returning {
			err = tx.QueryRowContext(ctx, s.q.removeReturning, tag).Scan(&maxID)
		} else {
			err = tx.QueryRowContext(ctx, s.q.lockRow, tag).Scan(&maxID)
			if err == nil {
				_, err = tx.ExecContext(ctx, s.q.remove, tag)
			}
		}
		if errors.Is(err, sql.ErrNoRows) {
			return leaf.ErrTagNotFound
		}
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		args := []any{tag, maxID}
		if s.d.OnDuplicateKey {
			args = append(args, maxID)
		}
		if _, err = tx.ExecContext(ctx, s.q.bury, args...); err != nil {
			return fmt.Errorf("record tombstone: %w", err)
		}
		// The tag's periods go with it, each leaving its tombstone: created
		// again, the tag continues every period above the IDs issued in it.
		// Once the tag's row is gone no server makes a period row for it (that
		// reads the tag's row under a shared lock), so none is left behind.
		if _, err = s.buryPeriods(ctx, tx, tag, "", 0); err != nil {
			return err
		}
		// A tag created again starts plain. Its lease goes with it, under the
		// tag's row lock that SetOrdered's shared read waits for, so no
		// marking can slip in between.
		if _, err = tx.ExecContext(ctx, s.o.unmark, tag); err != nil {
			return fmt.Errorf("delete the lease: %w", err)
		}
		return s.bumpVersion(ctx, tx)
	})
}

// bumpVersion moves the change counter inside a create or delete, so that
// it commits with the change: a refresh that reads the moved counter lists
// after the change is visible, and no crash can separate the two. It is the
// transaction's last lock, taken after the tag's rows in every create and
// delete, so the one row serialises them without a lock cycle. A missing
// row (deleted by hand) is not an error: TagsVersion then fails, and
// generators list every tag at each refresh, as on a store without the
// counter.
func (s *Store) bumpVersion(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, s.q.bump); err != nil {
		return fmt.Errorf("move change counter: %w", err)
	}
	return nil
}

// TagsVersion reads the change counter that CreateTag and DeleteTag move
// (see leaf.SegmentVersioner): one primary-key read.
func (s *Store) TagsVersion(ctx context.Context) (int64, error) {
	const op = "read tags version"
	if err := s.checkOpen(op); err != nil {
		return 0, err
	}
	var v int64
	err := s.db.QueryRowContext(ctx, s.q.version).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, s.wrap(op, fmt.Errorf("%s has no row; reopening the store seeds it", versionTable))
	}
	if err != nil {
		return 0, s.wrap(op, err)
	}
	return v, nil
}

// dbTime scans update_time whatever shape the driver gives it: time.Time
// (MySQL with parseTime, PostgreSQL), or text/integer (SQLite, which has no
// time type).
type dbTime struct{ t time.Time }

var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02",
}

func (d *dbTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		d.t = time.Time{}
	case time.Time:
		d.t = v
	case int64:
		d.t = time.Unix(v, 0).UTC()
	case []byte:
		return d.parse(string(v))
	case string:
		return d.parse(v)
	default:
		return fmt.Errorf("update_time: cannot scan %T", v)
	}
	return nil
}

func (d *dbTime) parse(s string) error {
	for _, l := range timeLayouts {
		// Times without a zone are UTC: that is what SQLite's
		// CURRENT_TIMESTAMP writes.
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			d.t = t
			return nil
		}
	}
	return fmt.Errorf("update_time: cannot parse %q", s)
}
