package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf/internal/testutil"
)

// Programs of a private MariaDB; scripts/services.sh installs them.
const (
	mariadbInstallDB = "mariadb-install-db"
	mariadbServer    = "/usr/sbin/mariadbd"
)

// mariadbStartTimeout bounds a start or restart of a private instance,
// crash recovery after a kill included.
const mariadbStartTimeout = 60 * time.Second

// MariaDB is a mariadbd of the test's own: its own data directory, socket,
// pid file and port on 127.0.0.1, so that the test may kill, stop and
// restart it without touching the shared server other tests use. root logs
// in over TCP without a password. Its methods are safe for concurrent use.
type MariaDB struct {
	*Server
}

// NewMariaDB initialises a data directory and starts a private mariadbd on
// a free port, and waits until it accepts connections. The test's cleanup
// kills it by PID and removes its directory. Without the programs the test
// is skipped, or failed under LEAF_TEST_STRICT=1.
func NewMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	needPrograms(t, mariadbInstallDB, mariadbServer)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// Small InnoDB files make both the install and each start quick; the
	// test's databases hold a few rows. --auth-root-authentication-method
	// =normal gives root@127.0.0.1 an empty password instead of Debian's
	// socket-only login; --no-defaults keeps /etc/mysql (the shared
	// server's configuration) out of it.
	tuning := []string{"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M"}
	ctx, cancel := context.WithTimeout(context.Background(), mariadbStartTimeout)
	defer cancel()
	install := exec.CommandContext(ctx, mariadbInstallDB, append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user=root"}, tuning...)...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("testdb: %s: %v\n%s", mariadbInstallDB, err, out)
	}
	port := testutil.FreePort(t)
	m := &MariaDB{}
	m.Server = newServer(t, "mariadbd", fmt.Sprintf("127.0.0.1:%d", port), dir, mariadbStartTimeout,
		append([]string{mariadbServer, "--no-defaults", "--datadir=" + data,
			fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--skip-name-resolve",
			"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--user=root", "--skip-log-bin", "--performance-schema=off"}, tuning...),
		func(ctx context.Context) error { return m.exec(ctx, "SELECT 1") })
	if err := m.start(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

// DSN is a DSN for database name on the instance ("" for none).
func (m *MariaDB) DSN(name string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", m.Addr, name
	cfg.Timeout = 2 * time.Second
	return cfg.FormatDSN()
}

// CreateDatabase creates an empty database and returns a DSN for it. The
// database goes with the instance.
func (m *MariaDB) CreateDatabase(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := m.exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testdb: create database %s on %s: %v", name, m.Addr, err)
	}
	return m.DSN(name)
}

// exec runs one statement on a connection of its own, closed afterwards, so
// that no connection of the harness outlives a kill.
func (m *MariaDB) exec(ctx context.Context, query string) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, query)
	return err
}
