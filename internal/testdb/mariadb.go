package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	// Addr is host:port; it stays the same across restarts, so that DSNs
	// handed out stay valid.
	Addr string

	t    testing.TB
	dir  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// NewMariaDB initialises a data directory and starts a private mariadbd on
// a free port, and waits until it accepts connections. The test's cleanup
// kills it by PID and removes its directory. Without the programs the test
// is skipped, or failed under LEAF_TEST_STRICT=1.
func NewMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	for _, p := range []string{mariadbInstallDB, mariadbServer} {
		if _, err := exec.LookPath(p); err != nil {
			msg := fmt.Sprintf("testdb: %s is not installed (%v); scripts/services.sh installs it", p, err)
			if os.Getenv(EnvStrict) == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
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
	m := &MariaDB{
		Addr: fmt.Sprintf("127.0.0.1:%d", port),
		t:    t,
		dir:  dir,
		args: append([]string{"--no-defaults", "--datadir=" + data,
			fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--skip-name-resolve",
			"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--user=root", "--skip-log-bin", "--performance-schema=off"}, tuning...),
	}
	t.Cleanup(m.end)
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

// PID is the process ID of the running mariadbd, 0 when none runs.
func (m *MariaDB) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || isDone(m.exited) {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill9 kills the server with SIGKILL, as a crash would, and waits until it
// is gone.
func (m *MariaDB) Kill9() {
	m.t.Helper()
	cmd, exited := m.current()
	if cmd == nil || isDone(exited) {
		m.t.Fatalf("testdb: mariadb on %s is not running", m.Addr)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Stop freezes the server with SIGSTOP: its connections stay open and
// silent, as on a machine that hangs.
func (m *MariaDB) Stop() { m.signal(syscall.SIGSTOP) }

// Cont resumes a server frozen by Stop.
func (m *MariaDB) Cont() { m.signal(syscall.SIGCONT) }

func (m *MariaDB) signal(sig syscall.Signal) {
	m.t.Helper()
	cmd, exited := m.current()
	if cmd == nil || isDone(exited) {
		m.t.Fatalf("testdb: mariadb on %s is not running", m.Addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		m.t.Fatalf("testdb: signal %v to mariadb on %s: %v", sig, m.Addr, err)
	}
}

// Restart starts the server again on the same data directory and port
// after Kill9 (or kills it first if it still runs), and waits until it
// accepts connections: InnoDB's crash recovery runs first.
func (m *MariaDB) Restart(ctx context.Context) error {
	if cmd, exited := m.current(); cmd != nil && !isDone(exited) {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	ctx, cancel := context.WithTimeout(ctx, mariadbStartTimeout)
	defer cancel()
	return m.start(ctx)
}

func (m *MariaDB) current() (*exec.Cmd, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd, m.exited
}

// start launches mariadbd and waits until it answers or exits.
func (m *MariaDB) start(ctx context.Context) error {
	logPath := filepath.Join(m.dir, "mariadb.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testdb: %w", err)
	}
	// Not CommandContext: the server must outlive the start's deadline.
	cmd := exec.Command(mariadbServer, m.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a ^C to the test goes to the test, whose
	// cleanup ends the server by PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("testdb: start mariadbd: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()

	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := m.exec(pctx, "SELECT 1")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("testdb: mariadbd on %s exited while starting:\n%s", m.Addr, tail(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("testdb: mariadbd on %s did not answer: %v\n%s", m.Addr, err, tail(logPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
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

// end kills the server by PID, a stopped one included (SIGKILL needs no
// SIGCONT), and waits for it; t.TempDir's cleanup, which runs after this
// one, removes the directory.
func (m *MariaDB) end() {
	cmd, exited := m.current()
	if cmd == nil {
		return
	}
	if !isDone(exited) {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		m.t.Errorf("testdb: mariadbd %d on %s did not exit after SIGKILL", cmd.Process.Pid, m.Addr)
	}
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tail is the last n lines of the file at path, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
