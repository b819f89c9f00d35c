// Package testutil is the tests' one harness, for the test files of every
// package (bbolt's internal/btesting is the model):
//
//   - databases: a fresh database of the test's own on the MariaDB and
//     PostgreSQL servers the environment names, dropped at the end
//     (testutil.go), extra servers of the test's own (replicas, a Galera
//     cluster, a PostgreSQL standby), a TCP proxy that cuts a connection,
//     the registries' addresses;
//   - the embedded SQLite store holding given rows;
//   - the leaf binary, built once per test and run as a server
//     (leafserver.go), and its logs read while written (LogBuffer);
//   - waiting for a condition, bounded contexts, free ports, a quiet
//     logger, parsing ID lists, checking answers for order.
//
// It is imported by tests only; nothing here may be used by production code.
package testutil

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/sqlite"
)

// Logger discards everything unless the tests run with -v, where it logs
// to the default handler so a failure can be followed.
func Logger() *slog.Logger {
	if testing.Verbose() {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

// Context is the test's context bounded by d, so that a hang fails the test
// instead of the whole run.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond until it holds, and fails the test naming what it waited
// for when it does not within 30 seconds (or the test's context ends). The
// pause between polls grows from 100µs to 20ms, so that a condition met in
// microseconds (a background load of an embedded store) costs no more, and
// one that takes seconds (a server restarting) does not spin.
//
// It is for conditions a test cannot be told of (another process's state, a
// store's row); a test that can wait on the event itself (a channel, a
// callback, synctest.Wait) should.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	pause := 100 * time.Microsecond
	for !cond() {
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// FreePort returns a loopback port nothing listened on a moment ago. It may
// be taken again before the caller binds it; on loopback within one test run
// that does not happen in practice.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ModuleRoot is the leaf module's directory: the first one upwards from
// the test's directory whose go.mod declares github.com/leafgo/leaf (the
// heavy tests' module in e2e/ has a go.mod of its own below it).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(mod), "module github.com/leafgo/leaf\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("the leaf module's go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// BuildLeaf compiles cmd/leaf into the test's temporary directory, with the
// given build tags ("chaos") and the version stamped as "e2e-test", and
// returns the binary's path.
func BuildLeaf(t testing.TB, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leaf")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", strings.Join(tags, ","),
		"-ldflags", "-X main.version=e2e-test", "-o", bin, "./cmd/leaf")
	cmd.Dir = ModuleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/leaf: %v\n%s", err, out)
	}
	return bin
}

// ParseIDs reads whitespace-separated decimal IDs, as the Leaf routes and
// `leaf get` print them.
func ParseIDs(t testing.TB, text string) []int64 {
	t.Helper()
	var ids []int64
	for _, f := range strings.Fields(text) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("%q is not an ID (in %q)", f, text)
		}
		ids = append(ids, id)
	}
	return ids
}

// Store returns the embedded SQLite store, on a file of the test's own
// (see SQLiteDir), holding rows, and closes it when the test ends. It is
// the store generator and transport tests run on: tombstones, shapes,
// periods and leases behave as the SQL stores' do because they are the
// SQL stores' (package sqlstore). Tests that need a store to fail or
// stall wrap it with faultstore.Wrap.
func Store(t testing.TB, rows ...leaf.Alloc) *sqlite.Store {
	t.Helper()
	st := OpenSQLite(t, filepath.Join(SQLiteDir(t), "leaf.db"))
	for _, a := range rows {
		if err := st.CreateTag(context.Background(), a); err != nil {
			t.Fatalf("CreateTag(%s): %v", a.Tag, err)
		}
	}
	return st
}

// OpenSQLite opens the SQLite store at path, closed when the test ends.
// Several stores opened on one path share the database, as several
// servers on one host do.
func OpenSQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open SQLite store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// SQLiteDir is a directory of the test's own for SQLite files, removed
// when the test ends: under /dev/shm where the host has one, so that the
// store's synced commits (synchronous=FULL: a range handed out must survive
// a power cut) cost no disk flush; measured, a reserve costs about 0.2ms
// there against 1ms on the temporary directory's disk. Elsewhere it is
// t.TempDir().
func SQLiteDir(t testing.TB) string {
	t.Helper()
	if dir, err := os.MkdirTemp("/dev/shm", "leaftest-"); err == nil {
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return t.TempDir()
}

// InsertForeign adds rows to st's leaf_alloc as Java Leaf's scripts or a
// hand-written INSERT would: no tombstone check and no change to the tags'
// version, which only this module's CreateTag moves. The rows go in one
// transaction, so that tens of thousands cost one synced commit.
func InsertForeign(t testing.TB, st *sqlite.Store, rows ...leaf.Alloc) {
	t.Helper()
	tx, err := st.DB().Begin()
	if err != nil {
		t.Fatalf("insert by hand: %v", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, a := range rows {
		if _, err := tx.Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)",
			a.Tag, a.MaxID, a.Step, a.Description); err != nil {
			t.Fatalf("insert %s by hand: %v", a.Tag, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("insert by hand: %v", err)
	}
}

// ShutdownFast shuts a fasthttp server down, waiting at most 3s for its
// connections. fasthttp closes idle keep-alive connections at shutdown,
// but not one a client dialled and never sent a request on (net/http
// dials such spare connections when requests race for one); such a
// connection kept a test's cleanup waiting until the client dropped it,
// 90s later (http.Transport's IdleConnTimeout).
func ShutdownFast(srv *fasthttp.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.ShutdownWithContext(ctx)
}
