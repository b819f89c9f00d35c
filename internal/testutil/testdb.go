package testutil

// Databases: a test gets a fresh, empty database of its own on the
// MariaDB/MySQL and PostgreSQL servers named by environment variables (a
// schema on PostgreSQL), dropped when the test ends.
//
// A test whose server is not configured is skipped, unless LEAF_TEST_STRICT=1
// (set by the project's full test command) turns that into a failure, so CI
// never passes by skipping.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// Environment variables read by the helpers.
const (
	EnvMySQL    = "LEAF_TEST_MYSQL_DSN"    // e.g. root@tcp(127.0.0.1:3306)/
	EnvPostgres = "LEAF_TEST_POSTGRES_DSN" // e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
	EnvZK       = "LEAF_TEST_ZK"           // e.g. 127.0.0.1:2181
	EnvEtcd     = "LEAF_TEST_ETCD"         // e.g. 127.0.0.1:2379
	EnvStrict   = "LEAF_TEST_STRICT"       // "1": a missing server fails the test
)

const setupTimeout = 30 * time.Second

// lookup returns the DSN in env, or skips (fails, when strict) the test.
func lookup(t testing.TB, env string) string {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn != "" {
		return dsn
	}
	msg := env + " is not set; start the test databases and export their DSNs with:\n\teval \"$(scripts/services.sh)\""
	if os.Getenv(EnvStrict) == "1" {
		t.Fatal(msg + "\n(" + EnvStrict + "=1 turns a missing service into a failure)")
	}
	t.Skip(msg)
	return ""
}

// ZooKeeper returns the address of the ZooKeeper server at $LEAF_TEST_ZK. The
// test keeps to a namespace of its own (UniqueName) and removes it.
func ZooKeeper(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvZK)
}

// Etcd returns the client endpoint of the etcd server at $LEAF_TEST_ETCD. The
// test keeps to a key prefix of its own (UniqueName) and removes it.
func Etcd(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvEtcd)
}

// UniqueName is a name no other test run uses: a database, a ZooKeeper
// namespace, an etcd prefix. It is a valid identifier in all of them.
func UniqueName() string { return uniqueName() }

// uniqueName is a database name no other test run uses.
func uniqueName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "leaftest_" + hex.EncodeToString(b[:])
}

// MySQL creates an empty database on the server at $LEAF_TEST_MYSQL_DSN and
// returns a DSN for it; the database is dropped when the test ends.
func MySQL(t testing.TB) string {
	t.Helper()
	base := lookup(t, EnvMySQL)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("testutil: %s: %v", EnvMySQL, err)
	}
	name := uniqueName()
	admin := cfg.Clone()
	admin.DBName = ""
	conn, err := mysql.NewConnector(admin)
	if err != nil {
		t.Fatalf("testutil: %s: %v", EnvMySQL, err)
	}
	db := sql.OpenDB(conn)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = db.Close()
		t.Fatalf("testutil: create MySQL database %s on %s: %v", name, cfg.Addr, err)
	}
	t.Cleanup(func() {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("testutil: drop MySQL database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// Postgres creates an empty schema in the database at
// $LEAF_TEST_POSTGRES_DSN and returns a DSN whose search_path is that schema,
// so that to the store it is an empty database; the schema is dropped when
// the test ends. A schema, not a database, because PostgreSQL copies a whole
// template for each CREATE DATABASE and serialises concurrent ones: a suite
// of parallel subtests took seconds per database.
func Postgres(t testing.TB) string {
	t.Helper()
	base := lookup(t, EnvPostgres)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("testutil: %s: %v", EnvPostgres, err)
	}
	name := uniqueName()
	exec := func(query string) error {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, query)
		return err
	}
	if err := exec("CREATE SCHEMA " + name); err != nil {
		t.Fatalf("testutil: create PostgreSQL schema %s in %s: %v", name, cfg.Database, err)
	}
	t.Cleanup(func() {
		if err := exec("DROP SCHEMA IF EXISTS " + name + " CASCADE"); err != nil {
			t.Errorf("testutil: drop PostgreSQL schema %s: %v", name, err)
		}
	})
	return withSearchPath(base, name)
}

// withSearchPath sets search_path in a pgx/libpq DSN, URL or key=value form.
func withSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	// In key=value form a later key overrides an earlier one.
	return dsn + " search_path=" + schema
}

// SQLitePath returns the path of a database file, not yet created, in a
// directory removed when the test ends.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "leaf.db")
}
