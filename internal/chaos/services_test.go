package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf/internal/testutil"
)

// Programs the test runs; scripts/services.sh installs them from Debian's
// packages.
const (
	mariadbInstallDB = "mariadb-install-db"
	mariadbd         = "/usr/sbin/mariadbd"
	java             = "/usr/bin/java"
	zookeeperJar     = "/usr/share/java/zookeeper.jar"
	etcdBin          = "/usr/bin/etcd"
)

// serviceStartTimeout bounds a (re)start of MariaDB, ZooKeeper or etcd,
// including the JVM's start-up.
const serviceStartTimeout = 60 * time.Second

// service is a MariaDB, ZooKeeper or etcd process of the test's own.
type service struct {
	*proc
	addr  string // host:port clients use
	ready func(context.Context) error
}

// up starts the process and waits until it answers.
func (s *service) up(ctx context.Context) error {
	if err := s.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, serviceStartTimeout)
	defer cancel()
	return s.waitReady(ctx, s.ready)
}

// needPrograms fails the test, with the fix, if a program is missing: the
// test only runs when asked for (LEAF_CHAOS=1), so skipping would hide that
// it did not run.
func needPrograms(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed (%v); scripts/services.sh installs it", p, err)
		}
	}
}

// startMariaDB initialises a data directory and starts a mariadbd of the
// test's own on a free port; root logs in over TCP without a password. It
// returns the service and a DSN for the database leaf uses.
func startMariaDB(ctx context.Context, t *testing.T, name string) (*service, string) {
	t.Helper()
	needPrograms(t, mariadbInstallDB, mariadbd)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// --auth-root-authentication-method=normal gives root@127.0.0.1 an empty
	// password instead of Debian's socket-only login; --no-defaults keeps
	// /etc/mysql (the shared server's configuration) out of it.
	install := exec.CommandContext(ctx, mariadbInstallDB, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user=root")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", mariadbInstallDB, err, out)
	}
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &service{addr: addr}
	s.proc = newProc(t, dir, name, mariadbd, "--no-defaults", "--datadir="+data,
		fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--skip-name-resolve",
		"--socket="+filepath.Join(dir, "mysqld.sock"), "--pid-file="+filepath.Join(dir, "mysqld.pid"),
		"--user=root", "--innodb-buffer-pool-size=64M")
	admin := mysql.NewConfig()
	admin.User, admin.Net, admin.Addr = "root", "tcp", addr
	admin.Timeout = time.Second
	s.ready = func(ctx context.Context) error {
		return withDB(ctx, admin.FormatDSN(), func(ctx context.Context, db *sql.DB) error { return db.PingContext(ctx) })
	}
	if err := s.up(ctx); err != nil {
		t.Fatal(err)
	}
	const dbName = "leaf_chaos"
	err := withDB(ctx, admin.FormatDSN(), func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "CREATE DATABASE "+dbName)
		return err
	})
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	leafCfg := admin.Clone()
	leafCfg.DBName = dbName
	return s, leafCfg.FormatDSN()
}

// withDB runs f on a connection pool of its own, closed afterwards, so that
// no connection outlives a database restart in the test process.
func withDB(ctx context.Context, dsn string, f func(context.Context, *sql.DB) error) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return f(ctx, db)
}

// startZooKeeper starts a standalone ZooKeeper of the test's own, configured
// like scripts/services.sh's: loopback only, no admin server (it would take
// 8080), a 500 ms tick, ruok allowed.
func startZooKeeper(ctx context.Context, t *testing.T) *service {
	t.Helper()
	needPrograms(t, java)
	if _, err := os.Stat(zookeeperJar); err != nil {
		t.Fatalf("ZooKeeper is not installed (%v); scripts/services.sh installs it", err)
	}
	dir := t.TempDir()
	port := testutil.FreePort(t)
	cfg := filepath.Join(dir, "zoo.cfg")
	err := os.WriteFile(cfg, fmt.Appendf(nil, `tickTime=500
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
minSessionTimeout=1000
maxSessionTimeout=30000
4lw.commands.whitelist=ruok
`, filepath.Join(dir, "data"), port), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &service{addr: addr, ready: func(ctx context.Context) error { return zkRuok(ctx, addr) }}
	s.proc = newProc(t, dir, "zookeeper", java, "-Xmx256m",
		"-Dzookeeper.log.dir="+dir, "-Dzookeeper.root.logger=INFO,CONSOLE",
		"-cp", "/etc/zookeeper/conf:"+zookeeperJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	if err := s.up(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// zkRuok is ZooKeeper's four-letter health check.
func zkRuok(ctx context.Context, addr string) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, "ruok"); err != nil {
		return err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != "imok" {
		return fmt.Errorf("ruok answered %q", b)
	}
	return nil
}

// startEtcd starts a single-member etcd of the test's own on free client and
// peer ports.
func startEtcd(ctx context.Context, t *testing.T) *service {
	t.Helper()
	needPrograms(t, etcdBin)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePort(t))
	s := &service{addr: addr}
	// The initial-cluster flags only matter on the first start; restarts
	// find the member in the data directory.
	s.proc = newProc(t, dir, "etcd", etcdBin, "--name", "chaos", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+addr, "--advertise-client-urls", "http://"+addr,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "chaos="+peer)
	hc := &http.Client{Timeout: time.Second}
	s.ready = func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
			return fmt.Errorf("etcd /health: %s %s", resp.Status, b)
		}
		return nil
	}
	if err := s.up(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
