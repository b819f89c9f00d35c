// Package mysql is the segment store on MySQL or MariaDB, on the very
// leaf_alloc table Java Leaf uses: a database a Leaf deployment already has
// works unchanged, and Java and Go servers may share it.
//
// A reserve is Leaf's own transaction: BEGIN; UPDATE leaf_alloc SET max_id =
// max_id + step ...; SELECT max_id, step ...; COMMIT. The UPDATE's row lock
// serialises servers, so the SELECT reads the row this transaction wrote.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
)

// Schema is Leaf's scripts/leaf_alloc.sql with IF NOT EXISTS. It is run on
// every Open and never alters a table that exists.
const Schema = "CREATE TABLE IF NOT EXISTS `leaf_alloc` (\n" +
	"  `biz_tag` varchar(128) NOT NULL DEFAULT '',\n" +
	"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
	"  `step` int(11) NOT NULL,\n" +
	"  `description` varchar(256) DEFAULT NULL,\n" +
	"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// TombstoneSchema creates the table of deleted tags beside leaf_alloc (see
// leaf.SegmentAdmin): per tag, the highest max_id its deleted rows had. Java
// Leaf never reads it; leaf_alloc stays exactly Leaf's table.
const TombstoneSchema = "CREATE TABLE IF NOT EXISTS `leaf_alloc_tombstone` (\n" +
	"  `biz_tag` varchar(128) NOT NULL,\n" +
	"  `max_id` bigint(20) NOT NULL,\n" +
	"  `deleted_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// VersionSchema creates the change counter beside leaf_alloc (see
// leaf.SegmentVersioner): one row that every CreateTag and DeleteTag moves,
// read by each refresh. Java Leaf never reads or moves it. VersionSeed adds
// the row if it is missing.
const (
	VersionSchema = "CREATE TABLE IF NOT EXISTS `leaf_alloc_version` (\n" +
		"  `id` int(11) NOT NULL,\n" +
		"  `version` bigint(20) NOT NULL,\n" +
		"  PRIMARY KEY (`id`)\n" +
		") ENGINE=InnoDB"
	VersionSeed = "INSERT IGNORE INTO `leaf_alloc_version` (`id`, `version`) VALUES (1, 0)"
)

// ShapeSchema creates the shapes of tags created with one beside leaf_alloc
// (see leaf.TagShaper and sqlstore.ShapeSchema). Java Leaf never reads it,
// and serves a periodic tag's rows as plain tags.
const ShapeSchema = "CREATE TABLE IF NOT EXISTS `leaf_tag_shape` (\n" +
	"  `biz_tag` varchar(128) NOT NULL,\n" +
	"  `period` varchar(8) NOT NULL DEFAULT '',\n" +
	"  `time_zone` varchar(64) NOT NULL DEFAULT '',\n" +
	"  `fmt_prefix` varchar(32) NOT NULL DEFAULT '',\n" +
	"  `fmt_width` int(11) NOT NULL DEFAULT '0',\n" +
	"  `fmt_radix` int(11) NOT NULL DEFAULT '0',\n" +
	"  `opaque_bits` int(11) NOT NULL DEFAULT '0',\n" +
	"  `key_check` varchar(128) NOT NULL DEFAULT '',\n" +
	"  `created_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// OwnerSchema creates the leases of ordered tags beside leaf_alloc (see
// leaf.OrderedStore and sqlstore.OwnerSchema): one row per ordered tag.
// lease_until is microseconds since the Unix epoch by the server's clock
// (UTC_TIMESTAMP(6), which no session time zone shifts). owner is compared
// byte for byte (ascii_bin), not under the default collation, which ignores
// case. Java Leaf never reads it.
const OwnerSchema = "CREATE TABLE IF NOT EXISTS `leaf_tag_owner` (\n" +
	"  `tag` varchar(128) NOT NULL,\n" +
	"  `owner` varchar(512) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',\n" +
	"  `token` bigint(20) NOT NULL DEFAULT '0',\n" +
	"  `lease_until` bigint(20) NOT NULL DEFAULT '0',\n" +
	"  `updated_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`tag`)\n" +
	") ENGINE=InnoDB"

// schema is what Open runs, in order.
var schema = []string{Schema, TombstoneSchema, VersionSchema, VersionSeed, ShapeSchema, OwnerSchema, StripeSchema, sqlstore.FailoverSchema}

// MySQL and MariaDB error numbers the store reacts to.
const (
	erDupEntry        = 1062 // ER_DUP_ENTRY: the tag exists
	erLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	erLockDeadlock    = 1213 // ER_LOCK_DEADLOCK
)

// Store is a leaf.SegmentStore and leaf.SegmentAdmin on MySQL or MariaDB.
// Its methods come from the embedded shared SQL store.
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

var dialect = sqlstore.Dialect{
	Name: "mysql",
	// MariaDB has RETURNING for INSERT and DELETE only, MySQL not at all.
	Returning:      false,
	OnDuplicateKey: true,
	LockingReads:   true,
	IsUniqueViolation: func(err error) bool {
		var e *mysql.MySQLError
		return errors.As(err, &e) && e.Number == erDupEntry
	},
	IsRetryable: func(err error) bool {
		var e *mysql.MySQLError
		return errors.As(err, &e) && (e.Number == erLockDeadlock || e.Number == erLockWaitTimeout)
	},
	// The server's clock, the same for every session: UTC_TIMESTAMP is
	// NOW in UTC, and like NOW keeps one value within a statement.
	// TIMESTAMPDIFF from the epoch as a DATETIME is plain arithmetic,
	// where UNIX_TIMESTAMP(NOW(6)) would convert through the session's
	// time zone.
	ClockMicros: "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
}

// config parses dsn and forces the settings Open documents, so that the
// segment store and the worker registry run their sessions alike. op names
// the caller in errors ("mysql: <op>: ...").
func config(dsn, op string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %s: %w: %w", op, leaf.ErrInvalidArgument, err)
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("mysql: %s %s@%s: %w: the DSN names no database", op, cfg.User, cfg.Addr, leaf.ErrInvalidArgument)
	}
	cfg.InterpolateParams = true
	cfg.ParseTime = true
	cfg.ClientFoundRows = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Loc == time.UTC {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		if _, ok := cfg.Params["time_zone"]; !ok {
			cfg.Params["time_zone"] = "'+00:00'"
		}
	}
	return cfg, nil
}

// Open connects to the database named in dsn (go-sql-driver syntax, e.g.
// "user:pass@tcp(127.0.0.1:3306)/leaf") and creates leaf_alloc if it is
// missing, and leaf_alloc_tombstone, leaf_alloc_version, leaf_tag_shape,
// leaf_tag_owner and leaf_stripe beside it.
//
// Some DSN settings are forced because the store depends on them:
// interpolateParams (one round trip per statement, no server-side prepared
// statements), parseTime, and clientFoundRows (so that an UPDATE that
// matches a row but changes nothing still counts it). Unless the DSN sets
// loc or time_zone, the session runs in UTC so update_time reads back right.
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
	cfg, err := config(dsn, "open")
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: open %s: %w", cfg.DBName, err)
	}
	db := sql.OpenDB(conn)
	// Reserves are rare (one per segment), so a small pool suffices; the
	// lifetimes stay under common wait_timeout and proxy idle limits.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("mysql: open %s: create schema: %w", cfg.DBName, err)
		}
	}
	st := sqlstore.New(db, dialect, sqlstore.Config{})
	s := &Store{Store: st, Stripes: sqlstore.NewStripes(st)}
	if guard {
		if err := s.CheckSingleDatabase(ctx, "open "+cfg.DBName); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Identities of a MySQL or MariaDB server for the failover fence (see
// sqlstore.WatchFailover): a Galera node names its cluster (its state UUID,
// the same on every node and across restarts: a node failing over to
// another is no failover of the data), any other MariaDB server its
// server_id (distinct on a primary and its replicas, as replication
// requires), a MySQL server its server_uuid.
const (
	mariadbIdentity = "IF(@@wsrep_on, CONCAT('galera:', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS" +
		" WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATE_UUID')), CONCAT('server_id:', @@server_id))"
	mysqlIdentity = "CONCAT('server_uuid:', @@server_uuid)"
)

// WatchFailover turns the failover fence on (sqlstore.Store.WatchFailover)
// with the identity of the server's flavour.
func (s *Store) WatchFailover(ctx context.Context, set sqlstore.FailoverConfig) error {
	var version string
	if err := s.DB().QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return fmt.Errorf("mysql: failover fence: read the version: %w", err)
	}
	set.Identity = mysqlIdentity
	if strings.Contains(strings.ToLower(version), "mariadb") {
		set.Identity = mariadbIdentity
	}
	return s.Store.WatchFailover(ctx, set)
}
