package testutil

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStartTimeout bounds each step of setting up a pair (initdb, a base
// backup, a start, the standby catching up) and a promotion: generous,
// because the tests share a small machine with other work.
const pgStartTimeout = 2 * time.Minute

// pgStandbyName is the standby's application_name, the name the primary's
// synchronous_standby_names waits for.
const pgStandbyName = "standby1"

// PostgresPair is a PostgreSQL primary with one synchronous standby, both
// of the test's own: their own data directories and ports on 127.0.0.1, so
// that the test may kill the primary and promote the standby without
// touching the shared server other tests use. User postgres logs in over
// TCP without a password. Its methods are safe for concurrent use.
//
// A commit on the primary returns only once the standby has flushed it
// (synchronous_commit=on, synchronous_standby_names='FIRST 1 (standby1)'),
// so whatever a client saw committed survives the primary's loss.
type PostgresPair struct {
	primary, standby *Server
}

// PostgresIdentity is which database a client talks to, as a store sees
// it: the same system on a new timeline after a failover, another system
// when pointed at a different cluster.
type PostgresIdentity struct {
	// SystemID is pg_control_system().system_identifier: chosen by initdb,
	// copied by pg_basebackup to every standby, kept by a promotion.
	SystemID uint64
	// Timeline is the timeline of the WAL the server writes now; each
	// promotion starts a new one, one higher.
	Timeline uint32
}

// NewPostgresPair initialises a primary, starts it on a free port, clones
// a standby from it with pg_basebackup -R, starts that on another port, and
// waits until the primary counts it as its synchronous standby. The test's
// cleanup kills both by PID and removes their directories. Without the
// programs the test is skipped, or failed under LEAF_TEST_STRICT=1.
//
// PostgreSQL refuses to run as root: when the test is root, the programs
// run as the postgres user, which owns the directories.
func NewPostgresPair(t testing.TB) *PostgresPair {
	t.Helper()
	initdb, postgres, basebackup := pgProgram("initdb"), pgProgram("postgres"), pgProgram("pg_basebackup")
	needPrograms(t, initdb, postgres, basebackup)
	cred := pgCredential(t)

	base := t.TempDir()
	if cred != nil {
		// t.TempDir's directories are the test user's own; postgres needs
		// to pass through them to its own, not to read them.
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatalf("testutil: %v", err)
			}
		}
	}
	serverDir := func(name string) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatalf("testutil: %v", err)
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatalf("testutil: %v", err)
			}
		}
		return d
	}
	primaryDir, standbyDir := serverDir("primary"), serverDir("standby")
	primaryData, standbyData := filepath.Join(primaryDir, "data"), filepath.Join(standbyDir, "data")
	primaryPort, standbyPort := FreePort(t), FreePort(t)

	// step bounds one step of the setup.
	step := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), pgStartTimeout)
		t.Cleanup(cancel)
		return ctx
	}
	// --no-locale and --no-sync make it quick; trust for every local and
	// 127.0.0.1 login, replication included, as on the shared server.
	if err := pgRun(step(), base, cred, initdb, "-D", primaryData, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"); err != nil {
		t.Fatal(err)
	}

	p := &PostgresPair{}
	// The synchronous settings go on the primary's command line, not in
	// postgresql.conf, which pg_basebackup copies: a promoted standby that
	// named a synchronous standby of its own would block every commit.
	p.primary = newServer(t, "postgres-primary", fmt.Sprintf("127.0.0.1:%d", primaryPort), primaryDir, pgStartTimeout,
		append(pgServerArgv(postgres, primaryData, primaryPort, "leaf-primary"),
			"-c", "synchronous_standby_names=FIRST 1 ("+pgStandbyName+")",
			"-c", "synchronous_commit=on"),
		func(ctx context.Context) error { return pgExec(ctx, p.PrimaryDSN(""), "SELECT 1") })
	p.primary.credential = cred
	if err := p.primary.start(step()); err != nil {
		t.Fatal(err)
	}

	// -R writes standby.signal and, into postgresql.auto.conf,
	// primary_conninfo (this connection's, application_name included) and
	// primary_slot_name; the slot (-C -S) keeps the WAL the standby has not
	// yet received. -c fast: the backup's checkpoint at once, not spread.
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primaryPort, pgStandbyName)
	if err := pgRun(step(), base, cred, basebackup, "-D", standbyData, "-d", conninfo, "-R",
		"-X", "stream", "-C", "-S", pgStandbyName, "-c", "fast", "--no-sync"); err != nil {
		t.Fatal(err)
	}
	p.standby = newServer(t, "postgres-standby", fmt.Sprintf("127.0.0.1:%d", standbyPort), standbyDir, pgStartTimeout,
		pgServerArgv(postgres, standbyData, standbyPort, "leaf-standby"),
		func(ctx context.Context) error { return pgExec(ctx, p.StandbyDSN(""), "SELECT 1") })
	p.standby.credential = cred
	if err := p.standby.start(step()); err != nil {
		t.Fatal(err)
	}
	if err := p.waitSynchronous(step()); err != nil {
		t.Fatal(err)
	}
	return p
}

// pgServerArgv runs postgres on data and port, on 127.0.0.1 only.
// Everything here is the same on both servers: a hot standby needs
// max_connections, max_wal_senders and the like at least as high as its
// primary's.
func pgServerArgv(postgres, data string, port int, name string) []string {
	return []string{postgres, "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		// TCP only: the shared server's socket directory stays untouched.
		"-c", "unix_socket_directories=",
		"-c", "cluster_name=" + name, // in ps, to tell the processes apart
		"-c", "shared_buffers=16MB", "-c", "max_connections=40",
		"-c", "wal_level=replica", "-c", "max_wal_senders=4", "-c", "max_replication_slots=4",
		// A kill -9 loses nothing the kernel already holds; only a machine
		// crash would need the fsyncs, which cost the shared machine's disk.
		"-c", "fsync=off",
	}
}

// waitSynchronous waits until the standby streams and the primary counts
// it as its synchronous standby. Both sides, because pg_basebackup's own
// WAL stream carried the standby's application_name too: its walsender may
// linger a moment in pg_stat_replication after the backup.
func (p *PostgresPair) waitSynchronous(ctx context.Context) error {
	return pgPoll(ctx, "the standby to become synchronous", func(ctx context.Context) error {
		var status string
		if err := pgQueryRow(ctx, p.StandbyDSN(""), "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none')",
			nil, &status); err != nil {
			return err
		}
		if status != "streaming" {
			return fmt.Errorf("standby's WAL receiver is %s", status)
		}
		var n int
		var sync bool
		if err := pgQueryRow(ctx, p.PrimaryDSN(""),
			"SELECT count(*), coalesce(bool_and(sync_state = 'sync'), false) FROM pg_stat_replication WHERE application_name = $1",
			[]any{pgStandbyName}, &n, &sync); err != nil {
			return err
		}
		if n != 1 || !sync {
			return fmt.Errorf("primary has %d %s in pg_stat_replication, all sync: %v", n, pgStandbyName, sync)
		}
		return nil
	})
}

// Primary is the primary's server process, to Kill9, Stop or Restart.
func (p *PostgresPair) Primary() *Server { return p.primary }

// Standby is the standby's server process, to Kill9, Stop or Restart.
func (p *PostgresPair) Standby() *Server { return p.standby }

// PrimaryDSN is a postgres:// URL of database db on the primary ("" for
// the postgres database).
func (p *PostgresPair) PrimaryDSN(db string) string { return pgDSN(p.primary.Addr, db) }

// StandbyDSN is a postgres:// URL of database db on the standby ("" for the
// postgres database): read-only until Promote.
func (p *PostgresPair) StandbyDSN(db string) string { return pgDSN(p.standby.Addr, db) }

func pgDSN(addr, db string) string {
	if db == "" {
		db = "postgres"
	}
	// connect_timeout: a stopped server accepts the TCP connection and
	// never answers.
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: addr, Path: "/" + db,
		RawQuery: "sslmode=disable&connect_timeout=5"}
	return u.String()
}

// CreateDatabase creates an empty database on the primary, waits until the
// standby has replayed it and accepts connections to it, and returns the
// primary's DSN for it.
func (p *PostgresPair) CreateDatabase(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgStartTimeout)
	defer cancel()
	if err := pgExec(ctx, p.PrimaryDSN(""), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("testutil: create database %s on %s: %v", name, p.primary.Addr, err)
	}
	// The commit waited for the standby's flush, not its replay.
	if err := pgPoll(ctx, "database "+name+" on the standby", func(ctx context.Context) error {
		return pgExec(ctx, p.StandbyDSN(name), "SELECT 1")
	}); err != nil {
		t.Fatal(err)
	}
	return p.PrimaryDSN(name)
}

// Promote makes the standby a primary (it replays all the WAL it received
// first) and waits until it accepts writes. SELECT pg_promote(), not
// pg_ctl promote, which refuses to run as root.
func (p *PostgresPair) Promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pgStartTimeout)
	defer cancel()
	dl, _ := ctx.Deadline() // set just above
	wait := max(1, int(time.Until(dl)/time.Second))
	var promoted bool
	if err := pgQueryRow(ctx, p.StandbyDSN(""), "SELECT pg_promote(true, $1)", []any{wait}, &promoted); err != nil {
		return fmt.Errorf("testutil: promote the standby on %s: %w", p.standby.Addr, err)
	}
	if !promoted {
		return fmt.Errorf("testutil: the standby on %s did not finish its promotion within %ds", p.standby.Addr, wait)
	}
	// Assigning a transaction ID is what a standby refuses: the first step
	// of every write.
	return pgPoll(ctx, "the promoted standby to accept writes", func(ctx context.Context) error {
		return pgExec(ctx, p.StandbyDSN(""), "SELECT pg_current_xact_id()")
	})
}

// Identity is the identity of the database at dsn, a primary: its system
// identifier and the timeline it writes on. The timeline comes from the
// name of the current WAL file, whose first 8 hex digits are it, not from
// pg_control_checkpoint(), which shows the last checkpoint's: after a
// promotion that stays the old timeline until the next checkpoint, which
// the promotion requests but does not wait for. A standby has no timeline
// of its own to write on yet, and answers an error.
func (p *PostgresPair) Identity(ctx context.Context, dsn string) (PostgresIdentity, error) {
	var sysID int64
	var walFile *string
	// CASE, because pg_walfile_name fails during recovery.
	err := pgQueryRow(ctx, dsn, `SELECT system_identifier,
		CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_walfile_name(pg_current_wal_lsn()) END
		FROM pg_control_system()`, nil, &sysID, &walFile)
	if err != nil {
		return PostgresIdentity{}, fmt.Errorf("testutil: identity: %w", err)
	}
	if walFile == nil {
		return PostgresIdentity{}, fmt.Errorf("testutil: identity: %s is a standby (in recovery)", redactDSN(dsn))
	}
	tli, err := strconv.ParseUint((*walFile)[:min(8, len(*walFile))], 16, 32)
	if err != nil {
		return PostgresIdentity{}, fmt.Errorf("testutil: identity: WAL file name %q: %w", *walFile, err)
	}
	// The identifier is an unsigned 64-bit number that SQL shows as bigint.
	return PostgresIdentity{SystemID: uint64(sysID), Timeline: uint32(tli)}, nil
}

// redactDSN is dsn's host and database, for messages.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Host + u.Path
	}
	return "the database"
}

// pgProgram is the path of a PostgreSQL server program. Debian keeps them
// off PATH, in /usr/lib/postgresql/<version>/bin; the newest version
// installed wins, else PATH.
func pgProgram(name string) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p
		}
	}
	return name
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// pgCredential is the user PostgreSQL's programs run as: the test's own,
// or, when that is root, which initdb and postgres refuse, postgres.
func pgCredential(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		msg := fmt.Sprintf("testutil: running as root, PostgreSQL needs a postgres user to run as (%v); scripts/services.sh installs it", err)
		if os.Getenv(EnvStrict) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("testutil: user postgres: uid %q, gid %q", u.Uid, u.Gid)
	}
	// No supplementary groups: root's stay behind.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// pgRun runs a one-shot PostgreSQL program as cred in dir. PG* variables
// are left out of its environment: PGSSLMODE, PGHOST and the like would
// send it elsewhere than its arguments say. HOME is dir, because
// pg_basebackup -R writes libpq's default passfile, ~/.pgpass, into the
// standby's primary_conninfo: it should name no file of the test user's.
func pgRun(ctx context.Context, dir string, cred *syscall.Credential, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testutil: %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// pgExec runs one statement on a connection of its own, closed afterwards,
// so that no connection of the harness outlives a kill.
func pgExec(ctx context.Context, dsn, query string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, query, args...)
	return err
}

// pgQueryRow scans the one row of query into dest, on a connection of its
// own, as pgExec.
func pgQueryRow(ctx context.Context, dsn, query string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, query, args...).Scan(dest...)
}

// pgPoll calls check every 50ms until it succeeds or ctx ends, each call
// bounded so that a hung server makes it try again rather than wait.
func pgPoll(ctx context.Context, what string, check func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testutil: waiting for %s: %v; last: %w", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
