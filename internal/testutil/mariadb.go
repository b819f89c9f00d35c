package testutil

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
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

// MariaDBConfig shape a private mariadbd beyond a standalone server: the
// members of a replicated pair or of a Galera cluster are each one of these.
// The zero value is the standalone server NewMariaDB starts.
type MariaDBConfig struct {
	// ServerID is @@server_id, which must differ between the servers of a
	// replication topology (a replica ignores events carrying its own); 0
	// keeps the server's default, 1.
	ServerID uint32
	// Flags are further mariadbd options (--log-bin=..., --wsrep-on=ON). They
	// come after the harness's own, and the last of a repeated option wins,
	// so that they may override one (--log-bin after --skip-log-bin).
	Flags []string
	// FirstStartFlags are added to the first start only, not to a Restart:
	// Galera's --wsrep-new-cluster bootstraps a cluster once, and a node
	// restarted later must join the cluster that then exists.
	FirstStartFlags []string
	// Ready says whether a started server may be handed to the test, at the
	// first start and at each Restart; nil: it answers a query. A Galera
	// node is ready when Synced, not when it first answers.
	Ready func(ctx context.Context, m *MariaDB) error
	// StartTimeout bounds a start or restart; 0 means mariadbStartTimeout.
	// A Galera joiner copies the donor's data before it answers.
	StartTimeout time.Duration
	// User is the system user mariadbd runs as (--user) when the test runs
	// as root; "" is root. Galera's state transfer by rsync needs one: its
	// rsync daemon, started by root, drops to nobody (rsyncd.conf's uid
	// default), who may not write the data directory; started by its owner,
	// it stays that user.
	User string
}

// NewMariaDB initialises a data directory and starts a private mariadbd on
// a free port, and waits until it accepts connections. The test's cleanup
// kills it by PID and removes its directory. Without the programs the test
// is skipped, or failed under LEAF_TEST_STRICT=1.
func NewMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	return NewMariaDBWith(t, MariaDBConfig{})
}

// NewMariaDBWith is NewMariaDB with options: a server ID, further flags, a
// readiness of its own.
func NewMariaDBWith(t testing.TB, o MariaDBConfig) *MariaDB {
	t.Helper()
	needPrograms(t, mariadbInstallDB, mariadbServer)
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = mariadbStartTimeout
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// Small InnoDB files make both the install and each start quick; the
	// test's databases hold a few rows. --auth-root-authentication-method
	// =normal gives root@127.0.0.1 an empty password instead of Debian's
	// socket-only login; --no-defaults keeps /etc/mysql (the shared
	// server's configuration) out of it. common goes to the install and to
	// the server.
	common := []string{"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M"}
	// Its temporary tables in a directory of its own, not the machine's
	// /tmp, which other servers and cleaners share.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	common = append(common, "--tmpdir="+tmp)
	runAs := "root"
	if o.User != "" && os.Geteuid() == 0 {
		runAs = o.User
		// t.TempDir's parent is the test's alone (0700): the user needs to
		// pass through it to dir, not to read it.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatalf("testutil: %v", err)
		}
		chown(t, runAs, dir, tmp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	install := exec.CommandContext(ctx, mariadbInstallDB, append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user=" + runAs}, common...)...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("testutil: %s: %v\n%s", mariadbInstallDB, err, out)
	}
	port := FreePort(t)
	argv := append([]string{mariadbServer, "--no-defaults", "--datadir=" + data,
		fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--skip-name-resolve",
		"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--user=" + runAs, "--skip-log-bin", "--performance-schema=off"}, common...)
	if o.ServerID != 0 {
		argv = append(argv, fmt.Sprintf("--server-id=%d", o.ServerID))
	}
	argv = append(argv, o.Flags...)
	m := &MariaDB{}
	ready := func(ctx context.Context) error { return m.exec(ctx, "SELECT 1") }
	if o.Ready != nil {
		ready = func(ctx context.Context) error { return o.Ready(ctx, m) }
	}
	m.Server = newServer(t, "mariadbd", fmt.Sprintf("127.0.0.1:%d", port), dir, timeout,
		append(argv[:len(argv):len(argv)], o.FirstStartFlags...), ready)
	if err := m.start(ctx); err != nil {
		t.Fatal(err)
	}
	// Restarts run without the first start's flags. Nothing else uses the
	// server yet: it is not handed out before this returns.
	m.argv = argv
	return m
}

// chown gives dirs to the system user name, for a server run as that user:
// its pid file, socket, temporary files and data directory go there.
func chown(t testing.TB, name string, dirs ...string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("testutil: user %s to run mariadbd as: %v (the mariadb-server package creates mysql)", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		t.Fatalf("testutil: user %s: uid %q, gid %q", name, u.Uid, u.Gid)
	}
	for _, d := range dirs {
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatalf("testutil: %v", err)
		}
	}
}

// DSN is a DSN for database name on the instance ("" for none), as root.
func (m *MariaDB) DSN(name string) string { return m.DSNAs("root", name) }

// DSNAs is a DSN for database name on the instance ("" for none), logging
// in as login, who has no password (AppUser on a MariaDBPair).
func (m *MariaDB) DSNAs(login, name string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = login, "tcp", m.Addr, name
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
		t.Fatalf("testutil: create database %s on %s: %v", name, m.Addr, err)
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

// ServerID is the server's @@server_id: which server a client reached, say
// through a Proxy before and after a Switch.
func (m *MariaDB) ServerID(ctx context.Context) (uint32, error) {
	var id uint32
	err := m.queryRow(ctx, "SELECT @@server_id", &id)
	return id, err
}

// queryRow runs a query that returns one row on a connection of its own, as
// exec does, and scans the row into dest.
func (m *MariaDB) queryRow(ctx context.Context, query string, dest ...any) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, query).Scan(dest...)
}

// status is the value of the global status variable name: SHOW STATUS,
// which a Galera node answers even while it may serve no other query.
func (m *MariaDB) status(ctx context.Context, name string) (string, error) {
	var n, v string
	if err := m.queryRow(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'", &n, &v); err != nil {
		return "", fmt.Errorf("status %s on %s: %w", name, m.Addr, err)
	}
	return v, nil
}
