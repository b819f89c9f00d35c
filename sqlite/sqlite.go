// Package sqlite is the embedded segment store, the default when no database
// is configured: Leaf's leaf_alloc table in one SQLite file, through the
// pure-Go modernc.org/sqlite driver (no cgo).
//
// The file may be shared by several stores, in one process or in several:
// the database runs in WAL mode, every transaction takes the write lock when
// it begins (BEGIN IMMEDIATE), a writer waits up to BusyTimeout for another,
// and commits are synced to disk (synchronous=FULL) so that a range handed
// out is never handed out again after a crash or a power cut.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
)

// BusyTimeout is how long a statement waits for another connection's write
// lock before it fails with SQLITE_BUSY (and a reserve is retried).
const BusyTimeout = 15 * time.Second

// Schema creates leaf_alloc with the columns of Leaf's MySQL table, in the
// types SQLite understands. It is run on every Open and changes nothing when
// the table exists.
const Schema = `CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256)          DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// Store is a leaf.SegmentStore and leaf.SegmentAdmin on a SQLite file. Its
// methods come from the embedded shared SQL store.
type Store struct {
	*sqlstore.Store
}

var (
	_ leaf.SegmentStore     = (*Store)(nil)
	_ leaf.SegmentAdmin     = (*Store)(nil)
	_ leaf.SegmentVersioner = (*Store)(nil)
	_ leaf.TagShaper        = (*Store)(nil)
	_ leaf.PeriodStore      = (*Store)(nil)
	_ leaf.OrderedStore     = (*Store)(nil)
)

var dialect = sqlstore.Dialect{
	Name:       "sqlite",
	Returning:  true, // SQLite >= 3.35; the driver embeds a newer one
	PrefixGlob: true,
	IsUniqueViolation: func(err error) bool {
		c, ok := code(err)
		return ok && (c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
	},
	IsRetryable: func(err error) bool {
		c, ok := code(err)
		// Extended codes such as SQLITE_BUSY_SNAPSHOT share the primary
		// code in the low byte.
		return ok && (c&0xff == sqlite3.SQLITE_BUSY || c&0xff == sqlite3.SQLITE_LOCKED)
	},
}

func code(err error) (int, bool) {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code(), true
	}
	return 0, false
}

// Config tunes OpenWith; the zero value is Open's: a zero field takes
// DefaultConfig's value.
type Config struct {
	// Now is the clock the leases of ordered tags are counted by. Default
	// time.Now; tests step it, as an operator may step a host's clock.
	Now func() time.Time
}

// DefaultConfig returns the defaults a zero field of Config takes.
// OpenWith refuses no Config: what it checks is the path.
func DefaultConfig() Config { return Config{Now: time.Now} }

// Options is the old name of Config.
//
// Deprecated: use Config; Options goes in the release after the next.
type Options = Config

// Open opens (creating it and its directory if needed) the SQLite database at
// path and makes sure leaf_alloc, leaf_alloc_tombstone,
// leaf_alloc_version, leaf_tag_shape and leaf_tag_owner exist. The leases
// of ordered tags in leaf_tag_owner are counted by Go's clock: the file,
// and so every store sharing it, is on one host.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Config{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, opt Config) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: open: %w: empty path", leaf.ErrInvalidArgument)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// The driver cuts the DSN at the first '?' to find its parameters.
	if strings.ContainsRune(abs, '?') {
		return nil, fmt.Errorf("sqlite: open %s: %w: path contains '?'", path, leaf.ErrInvalidArgument)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	q := url.Values{}
	// Every pooled connection gets these. synchronous=FULL syncs each
	// commit: a reserve acknowledged before a power cut must survive it.
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", abs+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// SQLite has one writer at a time per file; a few connections let reads
	// run beside it, more would only poll each other's write lock.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	if err := setup(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if opt.Now == nil {
		opt.Now = DefaultConfig().Now
	}
	return &Store{Store: sqlstore.New(db, dialect, sqlstore.Config{Now: opt.Now})}, nil
}

// setup switches the file to WAL and creates the schema. Switching to WAL
// needs an exclusive lock that SQLite takes without waiting on busy_timeout,
// so several stores opening a new file at once get SQLITE_BUSY: the steps are
// retried until they pass, for up to BusyTimeout. WAL mode is stored in the
// file, so it is set here once rather than by every pooled connection.
func setup(ctx context.Context, db *sql.DB) error {
	ctx, cancel := context.WithTimeout(ctx, BusyTimeout)
	defer cancel()
	pause := time.Millisecond
	for {
		err := setupOnce(ctx, db)
		if err == nil || !dialect.IsRetryable(err) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func setupOnce(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("enable WAL: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("enable WAL: journal mode is still %q; is the file on a network file system?", mode)
	}
	for _, q := range []string{Schema, sqlstore.TombstoneSchema, sqlstore.VersionSchema, sqlstore.VersionSeed, sqlstore.ShapeSchema, sqlstore.OwnerSchema} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	return nil
}
