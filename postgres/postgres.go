// Package postgres is the segment store on PostgreSQL, through pgx: a
// leaf_alloc table of the same shape as Leaf's MySQL one.
//
// A reserve is one UPDATE leaf_alloc ... RETURNING max_id, step inside a
// transaction: the row lock the UPDATE takes serialises servers, and the
// returned row is the one this transaction wrote.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
)

// Schema creates leaf_alloc with the columns of Leaf's MySQL table. PostgreSQL
// has no ON UPDATE CURRENT_TIMESTAMP; the store sets update_time itself. It is
// run on every Open and never alters a table that exists.
const Schema = `CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256)          DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// SQLSTATE codes the store reacts to.
const (
	uniqueViolation      = "23505"
	duplicateTable       = "42P07"
	duplicateObject      = "42710"
	serializationFailure = "40001"
	deadlockDetected     = "40P01"
	lockNotAvailable     = "55P03"
)

// Store is a leaf.SegmentStore and leaf.SegmentAdmin on PostgreSQL. Its
// methods come from the embedded shared SQL store.
type Store struct {
	*sqlstore.Store
	// Stripes gives the store the methods a database of a multi-database
	// store offers (multidb.Migratable): ReadStripe, ExpectStripe, Used, …
	*sqlstore.Stripes
}

var (
	_ leaf.SegmentStore     = (*Store)(nil)
	_ leaf.SegmentAdmin     = (*Store)(nil)
	_ leaf.SegmentVersioner = (*Store)(nil)
	_ leaf.TagShaper        = (*Store)(nil)
	_ leaf.PeriodStore      = (*Store)(nil)
	_ leaf.OrderedStore     = (*Store)(nil)
)

func sqlState(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

var dialect = sqlstore.Dialect{
	Name:         "postgres",
	Dollar:       true,
	Returning:    true,
	LockingReads: true,
	IsUniqueViolation: func(err error) bool {
		return sqlState(err) == uniqueViolation
	},
	IsRetryable: func(err error) bool {
		switch sqlState(err) {
		case serializationFailure, deadlockDetected, lockNotAvailable:
			return true
		}
		return false
	},
	// The server's clock when the expression runs (not the transaction's
	// start, as now() would be): after a wait for a row lock, the time of
	// the read. The epoch of a timestamptz is independent of the session's
	// time zone.
	ClockMicros: "floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
}

// Open connects to the database named in dsn (a postgres:// URL or
// key=value string, as pgx and libpq accept) and creates leaf_alloc if it is
// missing, and leaf_alloc_tombstone, leaf_alloc_version, leaf_tag_shape,
// leaf_tag_owner and leaf_stripe beside it. Unless the DSN sets timezone,
// the session runs in UTC, so update_time (a TIMESTAMP without zone) is
// written and read in UTC.
//
// A database that records in leaf_stripe that it is one of several of a
// segment store spread over several databases is refused
// (leaf.ErrStripeLayout): on its own it would issue the other databases'
// IDs. OpenMember opens such a database for that store. The check is
// repeated inside every reserve's transaction: once the database records
// such a stripe (a migration run while this store is open), reserves fail
// with leaf.ErrStripeLayout.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, true)
}

func open(ctx context.Context, dsn string, guard bool) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w: %w", leaf.ErrInvalidArgument, err)
	}
	if !hasParam(cfg.RuntimeParams, "timezone") {
		cfg.RuntimeParams["timezone"] = "UTC"
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	db := stdlib.OpenDB(*cfg)
	// Reserves are rare (one per segment), so a small pool suffices.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := createSchema(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: open %s: create schema: %w", cfg.Database, err)
	}
	st := sqlstore.New(db, dialect, sqlstore.Config{})
	s := &Store{Store: st, Stripes: sqlstore.NewStripes(st)}
	if guard {
		if err := s.CheckSingleDatabase(ctx, "open "+cfg.Database); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// hasParam reports whether params sets name; PostgreSQL parameter names are
// case-insensitive (TimeZone, timezone).
func hasParam(params map[string]string, name string) bool {
	for k := range params {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// createSchema runs Schema and sqlstore's TombstoneSchema, VersionSchema,
// VersionSeed, ShapeSchema, OwnerSchema, StripeSchema and FailoverSchema, tolerating a
// concurrent creator: CREATE TABLE IF
// NOT EXISTS is not atomic in PostgreSQL, and the loser of a race fails with
// a unique violation on pg_type (or duplicate_table) although the table is
// now there. Running it again then finds the table.
func createSchema(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{Schema, sqlstore.TombstoneSchema, sqlstore.VersionSchema, sqlstore.VersionSeed, sqlstore.ShapeSchema, sqlstore.OwnerSchema, sqlstore.StripeSchema, sqlstore.FailoverSchema} {
		var err error
		for range 3 {
			_, err = db.ExecContext(ctx, q)
			if s := sqlState(err); s != uniqueViolation && s != duplicateTable && s != duplicateObject {
				break
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// The identity of a PostgreSQL server for the failover fence (see
// sqlstore.WatchFailover): its cluster's system identifier, which a
// streaming standby shares with its primary, and the timeline it writes
// on, which a promotion moves to the next. The timeline comes from the name
// of the current WAL file rather than pg_control_checkpoint(), whose
// timeline changes only at the first checkpoint after a promotion.
// pg_control_system() needs a superuser or pg_monitor; without it the
// timeline alone tells a promotion.
const (
	pgTimeline         = "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"
	pgIdentity         = "'system:' || (SELECT system_identifier::text FROM pg_control_system()) || ':timeline:' || " + pgTimeline
	pgTimelineIdentity = "'timeline:' || " + pgTimeline
)

// WatchFailover turns the failover fence on (sqlstore.Store.WatchFailover)
// with the server's identity.
func (s *Store) WatchFailover(ctx context.Context, set sqlstore.FailoverConfig) error {
	set.Identity = pgIdentity
	var probe string
	if err := s.DB().QueryRowContext(ctx, "SELECT "+pgIdentity).Scan(&probe); err != nil {
		set.Identity = pgTimelineIdentity
	}
	return s.Store.WatchFailover(ctx, set)
}
