package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/sqlite"
)

// result is the outcome of one in-process CLI run.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the CLI in-process with exactly env as its environment.
func runCLI(t *testing.T, env []string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, env: env}
	code := a.run(context.Background(), args)
	return result{code, out.String(), errOut.String()}
}

// dataEnv is an environment whose store is a fresh SQLite file.
func dataEnv(t *testing.T) []string {
	return []string{"LEAF_DATA_DIR=" + t.TempDir()}
}

// closedAddr is a loopback address nothing listens on (it did a moment ago).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestUsageAndExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        []string
		code       int
		stdout     string // substring expected on stdout
		stderr     string // substring expected on stderr
		noStderr   bool
		emptyStdio bool
	}{
		{name: "no args", args: nil, code: 2, stderr: "Usage:"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: `leaf: unknown command "frobnicate"`},
		{name: "help", args: []string{"help"}, code: 0, stdout: "leaf serve [flags]", noStderr: true},
		{name: "-h", args: []string{"-h"}, code: 0, stdout: "Exit status: 0 success, 1 error, 2 usage error.", noStderr: true},
		{name: "--help", args: []string{"--help"}, code: 0, stdout: "leaf tags set-step TAG N", noStderr: true},
		{name: "help serve", args: []string{"help", "serve"}, code: 0, stdout: "--segment-store sqlite|mysql|postgres", noStderr: true},
		{name: "help tags", args: []string{"help", "tags"}, code: 0, stdout: "leaf tags create TAG", noStderr: true},
		{name: "help get", args: []string{"help", "get"}, code: 0, stdout: "--server URL", noStderr: true},
		{name: "help version", args: []string{"help", "version"}, code: 0, stdout: "Usage: leaf version", noStderr: true},
		{name: "help unknown", args: []string{"help", "nope"}, code: 2, stderr: `unknown command "nope"`},
		{name: "help two args", args: []string{"help", "a", "b"}, code: 2, stderr: "at most one command"},
		{name: "serve -h", args: []string{"serve", "-h"}, code: 0, stdout: "--listen addr", noStderr: true},
		{name: "serve bad flag", args: []string{"serve", "--bogus"}, code: 2, stderr: "leaf serve: flag provided but not defined: -bogus"},
		{name: "serve extra arg", args: []string{"serve", "now"}, code: 2, stderr: "leaf serve: takes no arguments, got \"now\"\nRun 'leaf serve -h' for usage.\n"},
		{name: "serve bad level", args: []string{"serve", "--log-level", "loud"}, code: 2, stderr: `"loud" is not one of debug, info, warn, error`},
		{name: "serve bad listen", args: []string{"serve", "--listen", "8080"}, code: 2, stderr: `listen (from --listen): "8080" is not host:port`},
		{name: "serve mysql without dsn", args: []string{"serve", "--segment-store", "mysql"}, code: 2,
			stderr: "segment.dsn: required when segment.store is mysql"},
		{name: "serve postgres without dsn env", args: []string{"serve"}, env: []string{"LEAF_SEGMENT_STORE=postgres"}, code: 2,
			stderr: "segment.dsn: required when segment.store is postgres"},
		{name: "serve bad env duration", args: []string{"serve"}, env: []string{"LEAF_SHUTDOWN_TIMEOUT=10"}, code: 2,
			stderr: `LEAF_SHUTDOWN_TIMEOUT: "10" is not a duration`},
		{name: "serve missing config file", args: []string{"serve", "--config", "/nonexistent/leaf.yml"}, code: 2,
			stderr: "config file /nonexistent/leaf.yml: file does not exist"},
		{name: "serve bad mysql dsn", args: []string{"serve", "--segment-store", "mysql", "--segment-dsn", "no-database-named"}, code: 2,
			stderr: "invalid argument"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "leaf dev\ngo: go", noStderr: true},
		{name: "version extra", args: []string{"version", "x"}, code: 2, stderr: `unexpected argument "x"`},
		{name: "tags alone", args: []string{"tags"}, code: 2, stderr: "tags needs a subcommand"},
		{name: "tags unknown", args: []string{"tags", "rename"}, code: 2, stderr: `unknown tags subcommand "rename"`},
		{name: "tags help", args: []string{"tags", "--help"}, code: 0, stdout: "leaf tags delete TAG", noStderr: true},
		{name: "tags create -h", args: []string{"tags", "create", "-h"}, code: 0, stdout: "--description string", noStderr: true},
		{name: "tags create no tag", args: []string{"tags", "create"}, code: 2, stderr: "leaf tags create: missing TAG"},
		{name: "tags create two tags", args: []string{"tags", "create", "a", "b"}, code: 2, stderr: `unexpected argument "b"`},
		{name: "tags create bad tag", args: []string{"tags", "create", "a/b"}, code: 2, stderr: "leaf tags create: invalid tag"},
		{name: "tags create long tag", args: []string{"tags", "create", strings.Repeat("x", 129)}, code: 2, stderr: "129 bytes"},
		{name: "tags create step 0", args: []string{"tags", "create", "a", "--step", "0"}, code: 2, stderr: "step 0"},
		{name: "tags create step too big", args: []string{"tags", "create", "a", "--step=1000001"}, code: 2, stderr: "want 1..1000000"},
		{name: "tags create step not a number", args: []string{"tags", "create", "a", "--step", "many"}, code: 2, stderr: `invalid value "many" for flag -step`},
		{name: "tags create start 0", args: []string{"tags", "create", "a", "--start", "0"}, code: 2, stderr: "start 0"},
		{name: "tags create long description", args: []string{"tags", "create", "a", "--description", strings.Repeat("d", 257)}, code: 2, stderr: "description is 257 bytes"},
		{name: "tags set-step missing N", args: []string{"tags", "set-step", "a"}, code: 2, stderr: "leaf tags set-step: missing N"},
		{name: "tags set-step missing both", args: []string{"tags", "set-step"}, code: 2, stderr: "leaf tags set-step: missing TAG N"},
		{name: "tags set-step NaN", args: []string{"tags", "set-step", "a", "ten"}, code: 2, stderr: `step "ten" is not a whole number`},
		{name: "tags set-step 0", args: []string{"tags", "set-step", "a", "0"}, code: 2, stderr: "step 0"},
		{name: "tags set-step bad tag", args: []string{"tags", "set-step", "a b", "10"}, code: 2, stderr: "invalid tag"},
		{name: "tags delete missing", args: []string{"tags", "delete"}, code: 2, stderr: "missing TAG"},
		{name: "tags delete bad tag", args: []string{"tags", "delete", "ü"}, code: 2, stderr: "invalid tag"},
		{name: "tags list extra", args: []string{"tags", "list", "x"}, code: 2, stderr: `unexpected argument "x"`},
		{name: "tags list bad store", args: []string{"tags", "list", "--segment-store", "redis"}, code: 2, stderr: `"redis" is not one of sqlite, mysql, postgres`},
		{name: "get no tag", args: []string{"get"}, code: 2, stderr: "leaf get: missing TAG"},
		{name: "get bad tag", args: []string{"get", "a%b"}, code: 2, stderr: "invalid tag"},
		{name: "get count 0", args: []string{"get", "a", "--count", "0"}, code: 2, stderr: "invalid count: 0"},
		{name: "get count too big", args: []string{"get", "a", "--count", "10001"}, code: 2, stderr: "invalid count: 10001"},
		{name: "get count NaN", args: []string{"get", "a", "--count", "x"}, code: 2, stderr: `invalid value "x" for flag -count`},
		{name: "get bad server", args: []string{"get", "a", "--server", "ftp://x"}, code: 2, stderr: "is not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := append(dataEnv(t), tt.env...)
			r := runCLI(t, env, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.stdout) {
				t.Errorf("stdout %q does not contain %q", r.stdout, tt.stdout)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.stderr)
			}
			if tt.noStderr && r.stderr != "" {
				t.Errorf("unexpected stderr %q", r.stderr)
			}
			if tt.code == 2 && !strings.HasPrefix(r.stderr, "leaf") && !strings.HasPrefix(r.stderr, "Usage:") {
				t.Errorf("usage error not prefixed with the command: %q", r.stderr)
			}
		})
	}
}

func TestExitCodeTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("x: %w", leaf.ErrInvalidTag), 2},
		{fmt.Errorf("x: %w", leaf.ErrInvalidCount), 2},
		{fmt.Errorf("x: %w", leaf.ErrInvalidArgument), 2},
		{fmt.Errorf("x: %w", config.ErrInvalid), 2},
		{usageErrorf("bad"), 2},
		{fmt.Errorf("x: %w", leaf.ErrTagNotFound), 1},
		{fmt.Errorf("x: %w", leaf.ErrTagExists), 1},
		{fmt.Errorf("x: %w", leaf.ErrNotReady), 1},
		{leaf.ErrClosed, 1},
		{errors.New("connection refused"), 1},
		{context.DeadlineExceeded, 1},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	// Every sentinel of package leaf is in the table, so none falls through
	// by accident when one is added.
	listed := map[error]bool{}
	for _, e := range exitCodes {
		listed[e.err] = true
	}
	for _, s := range []error{leaf.ErrInvalidTag, leaf.ErrInvalidCount, leaf.ErrInvalidArgument, leaf.ErrTagNotFound,
		leaf.ErrTagExists, leaf.ErrNotReady, leaf.ErrClockBackwards, leaf.ErrWorkerIDsExhausted, leaf.ErrClosed} {
		if !listed[s] {
			t.Errorf("sentinel %v missing from exitCodes", s)
		}
	}
}

func TestParseFlagsInterspersed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		wantPos []string
		wantN   int
	}{
		{[]string{"a", "--n", "3"}, []string{"a"}, 3},
		{[]string{"--n=2", "a", "b"}, []string{"a", "b"}, 2},
		{[]string{"a", "--n", "4", "b"}, []string{"a", "b"}, 4},
		{[]string{"--", "-a", "--n", "5"}, []string{"-a", "--n", "5"}, 0},
		{[]string{"x", "--", "--n"}, []string{"x", "--n"}, 0},
		{nil, nil, 0},
		// A negative number is an argument, unless a flag takes it.
		{[]string{"a", "-5"}, []string{"a", "-5"}, 0},
		{[]string{"-5", "a", "--n", "2"}, []string{"-5", "a"}, 2},
		{[]string{"a", "--n", "-5"}, []string{"a"}, -5},
		{[]string{"--n=-3", "-7"}, []string{"-7"}, -3},
		{[]string{"--b", "-5", "--n", "1"}, []string{"-5"}, 1},
		{[]string{"-1", "--", "-2", "--n"}, []string{"-1", "-2", "--n"}, 0},
		{[]string{"--n", "4", "-0.5", "x"}, []string{"-0.5", "x"}, 4},
	}
	for _, tt := range tests {
		fs := newFlagSet("t")
		n := fs.Int("n", 0, "")
		fs.Bool("b", false, "")
		a := &app{stdout: io.Discard, stderr: io.Discard}
		pos, err := a.parseFlags(fs, "", tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if strings.Join(pos, "|") != strings.Join(tt.wantPos, "|") || *n != tt.wantN {
			t.Errorf("%q: positional %q n=%d, want %q n=%d", tt.args, pos, *n, tt.wantPos, tt.wantN)
		}
	}
}

// TestTags runs the tags commands against one SQLite file, in order.
func TestTags(t *testing.T) {
	t.Parallel()
	env := storeEnv(t)
	steps := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"tags", "list"}, 0, "TAG  MAX_ID  STEP  UPDATE_TIME  SHAPE  DESCRIPTION\n", ""},
		{[]string{"tags", "list", "--json"}, 0, "[]\n", ""},
		{[]string{"tags", "create", "orders", "--step", "50", "--start", "1000", "--description", "order\tids"}, 0, "created tag orders: step 50, first ID 1000\n", ""},
		{[]string{"tags", "create", "--", "-dash"}, 0, "created tag -dash: step 1000, first ID 1\n", ""},
		{[]string{"tags", "create", "orders"}, 1, "", "tag already exists"},
		{[]string{"tags", "list"}, 0, "order\\tids", ""},
		{[]string{"tags", "set-step", "orders", "70"}, 0, "tag orders: step 70\n", ""},
		{[]string{"tags", "set-step", "missing", "70"}, 1, "", "tag not found"},
		{[]string{"tags", "delete", "--", "-dash"}, 0, "deleted tag -dash\n", ""},
		{[]string{"tags", "delete", "-dash"}, 2, "", "flag provided but not defined: -dash"},
		{[]string{"tags", "delete", "missing"}, 1, "", "tag not found"},
	}
	for _, s := range steps {
		r := runCLI(t, env, s.args...)
		if r.code != s.code || !strings.Contains(r.stdout, s.stdout) || !strings.Contains(r.stderr, s.stderr) {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				s.args, r.code, r.stdout, r.stderr, s.code, s.stdout, s.stderr)
		}
	}
	r := runCLI(t, env, "tags", "list", "--json")
	var rows []httpapi.TagRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, r.stdout)
	}
	if len(rows) != 1 || rows[0].Tag != "orders" || rows[0].Step != 70 || rows[0].MaxID != 1000 || rows[0].Description != "order\tids" {
		t.Errorf("rows = %+v, want orders step 70 max_id 1000", rows)
	}
	if rows[0].UpdateTime.IsZero() {
		t.Errorf("update_time not set: %+v", rows[0])
	}
}

// TestTagsTombstone: a tag deleted and created again through the CLI never
// hands out its IDs again.
func TestTagsTombstone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"LEAF_DATA_DIR=" + dir}
	if r := runCLI(t, env, "tags", "create", "orders", "--start", "1", "--step", "10"); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	// A server issues some IDs: [1, 31) is reserved.
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Reserve(t.Context(), "orders", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"tags", "delete", "orders"}, 0, "deleted tag orders\n", ""},
		{[]string{"tags", "create", "orders", "--start", "1"}, 1, "",
			"tag orders was deleted; IDs below 31 may have been issued under it; create it with start >= 31 or without a start"},
		{[]string{"tags", "create", "orders", "--start", "30"}, 1, "", "start >= 31"},
		{[]string{"tags", "create", "orders", "--start", "0"}, 2, "", "start 0"},
		{[]string{"tags", "create", "orders", "--step", "10"}, 0, "created tag orders: step 10, first ID 31\n", ""},
		{[]string{"tags", "delete", "orders"}, 0, "deleted tag orders\n", ""},
		{[]string{"tags", "create", "orders", "--start", "31"}, 0, "created tag orders: step 1000, first ID 31\n", ""},
		{[]string{"tags", "create", "fresh"}, 0, "created tag fresh: step 1000, first ID 1\n", ""},
	}
	for _, s := range steps {
		r := runCLI(t, env, s.args...)
		if r.code != s.code || !strings.Contains(r.stdout, s.stdout) || !strings.Contains(r.stderr, s.stderr) {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				s.args, r.code, r.stdout, r.stderr, s.code, s.stdout, s.stderr)
		}
	}
}

// TestTagsStoreFlagsWin checks that --data-dir points the tags commands at
// another file than LEAF_DATA_DIR, and that --segment-dsn names a file.
func TestTagsStoreFlagsWin(t *testing.T) {
	t.Parallel()
	env := storeEnv(t)
	other := t.TempDir()
	file := filepath.Join(t.TempDir(), "custom.db")
	if r := runCLI(t, env, "tags", "create", "x", "--data-dir", other); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	if r := runCLI(t, env, "tags", "create", "y", "--segment-dsn", file); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tags", "list"}, ""},
		{[]string{"tags", "list", "--data-dir", other}, "x"},
		{[]string{"tags", "list", "--segment-dsn", file}, "y"},
	} {
		r := runCLI(t, env, append(c.args, "--json")...)
		var rows []httpapi.TagRow
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatalf("%q: %v %+v", c.args, err, r)
		}
		var tags []string
		for _, row := range rows {
			tags = append(tags, row.Tag)
		}
		if strings.Join(tags, ",") != c.want {
			t.Errorf("%q lists %q, want %q", c.args, tags, c.want)
		}
	}
}

func TestUnreachableMySQL(t *testing.T) {
	t.Parallel()
	dsn := "leaf:secret@tcp(" + closedAddr(t) + ")/leaf?timeout=2s"
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--segment-store", "mysql", "--segment-dsn", dsn},
		{"tags", "list", "--segment-store", "mysql", "--segment-dsn", dsn},
	} {
		r := runCLI(t, dataEnv(t), args...)
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1; stderr %q", args[0], r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "open segment store (mysql leaf:xxxxx@tcp(") {
			t.Errorf("%s: stderr %q does not name the redacted store", args[0], r.stderr)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("%s: stderr leaks the password: %q", args[0], r.stderr)
		}
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/segment/get/ok":
			n := 1
			if c := r.URL.Query().Get("count"); c != "" {
				n, _ = strconv.Atoi(c)
			}
			ids := make([]string, n)
			for i := range ids {
				ids[i] = strconv.Itoa(100 + i)
			}
			fmt.Fprint(w, strings.Join(ids, "\n"))
		case "/api/segment/get/missing":
			http.Error(w, `tag "missing" not found`, http.StatusNotFound)
		case "/api/segment/get/empty":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"one", nil, []string{"get", "ok", "--server", srv.URL}, 0, "100\n", ""},
		{"count", nil, []string{"get", "--count", "3", "ok", "--server", srv.URL + "/"}, 0, "100\n101\n102\n", ""},
		{"env server", []string{"LEAF_SERVER=" + srv.URL}, []string{"get", "ok"}, 0, "100\n", ""},
		{"flag over env", []string{"LEAF_SERVER=http://" + closedAddr(t)}, []string{"get", "ok", "--server", srv.URL}, 0, "100\n", ""},
		{"bare host:port", nil, []string{"get", "ok", "--server", strings.TrimPrefix(srv.URL, "http://")}, 0, "100\n", ""},
		{"not found", nil, []string{"get", "missing", "--server", srv.URL}, 1, "", `leaf get: server answered 404 Not Found: tag "missing" not found`},
		{"empty error body", nil, []string{"get", "empty", "--server", srv.URL}, 1, "", "503 Service Unavailable: Service Unavailable"},
		{"unreachable", nil, []string{"get", "ok", "--server", "http://" + closedAddr(t)}, 1, "", "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, tt.env, tt.args...)
			if r.code != tt.code || r.stdout != tt.stdout || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr ~%q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// inProcessServer is 'leaf serve' running in a goroutine of the test.
type inProcessServer struct {
	Addr   string
	Log    *testutil.LogBuffer
	cancel context.CancelFunc
	done   chan int
}

// serveInProcess starts serve with exactly env and args, and waits until it
// listens.
func serveInProcess(t *testing.T, env []string, args ...string) *inProcessServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &inProcessServer{Log: &testutil.LogBuffer{}, cancel: cancel, done: make(chan int, 1)}
	addrc := make(chan net.Addr, 1)
	a := &app{stdout: io.Discard, stderr: s.Log, env: env, onListen: func(addr net.Addr) { addrc <- addr }}
	go func() { s.done <- a.run(ctx, append([]string{"serve"}, args...)) }()
	t.Cleanup(func() { s.Stop(t) })
	select {
	case addr := <-addrc:
		s.Addr = addr.String()
	case code := <-s.done:
		s.done <- code
		t.Fatalf("serve exited %d before listening: %s", code, s.Log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen: %s", s.Log.String())
	}
	return s
}

func (s *inProcessServer) URL(path string) string { return "http://" + s.Addr + path }

// stop cancels serve's context, as a signal would, and returns its exit
// status. It may be called again (at cleanup) and returns the same status.
func (s *inProcessServer) Stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop: %s", s.Log.String())
		return -1
	}
}

// TestServeInProcess runs serve with its defaults (but a temporary data
// directory and port 0), issues IDs, and stops it by cancelling the context.
func TestServeInProcess(t *testing.T) {
	t.Parallel()
	s := serveInProcess(t, dataEnv(t), "--listen", "127.0.0.1:0", "--log-format", "json")
	var last int64
	for range 3 {
		id := testutil.FetchID(t, s.URL("/api/segment/get/"+config.SeedTag))
		if id <= last {
			t.Fatalf("id %d after %d", id, last)
		}
		last = id
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
	// The log is JSON, as asked, and names the address and the store.
	var sawListening bool
	for _, line := range strings.Split(strings.TrimSpace(s.Log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "listening" {
			sawListening = true
			if rec["addr"] != s.Addr || !strings.HasPrefix(fmt.Sprint(rec["store"]), "sqlite ") {
				t.Errorf("listening line %v", rec)
			}
		}
	}
	if !sawListening {
		t.Errorf("no listening line in %s", s.Log.String())
	}
}

// TestServeSegmentDisabled: with segment.enabled false no store is opened
// and the segment routes answer 404, not a made-up ID.
func TestServeSegmentDisabled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := serveInProcess(t, []string{"LEAF_DATA_DIR=" + dir, "LEAF_SEGMENT_ENABLED=false"}, "--listen", "127.0.0.1:0")
	resp, err := http.Get(s.URL("/api/segment/get/" + config.SeedTag))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("segment route with segment mode off: %s, want 404", resp.Status)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "leaf.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("segment store opened with segment mode off: %v", err)
	}
}

// TestSeeding pins when the embedded store gets the test tag: a fresh store
// by default, never when segment.seed is false, not again once the user has
// tags of their own, and whenever missing when segment.seed is true.
func TestSeeding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		env        []string
		preexist   bool // a tag "orders" exists before serve starts
		wantSeeded bool
	}{
		{"fresh store", nil, false, true},
		{"seed false", []string{"LEAF_SEGMENT_SEED=false"}, false, false},
		{"store in use", nil, true, false},
		{"seed true, store in use", []string{"LEAF_SEGMENT_SEED=true"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := append(dataEnv(t), tt.env...)
			if tt.preexist {
				if r := runCLI(t, env, "tags", "create", "orders"); r.code != 0 {
					t.Fatalf("create: %+v", r)
				}
			}
			s := serveInProcess(t, env, "--listen", "127.0.0.1:0")
			if code := s.Stop(t); code != 0 {
				t.Fatalf("serve exited %d: %s", code, s.Log.String())
			}
			r := runCLI(t, env, "tags", "list")
			if seeded := strings.Contains(r.stdout, config.SeedTag); seeded != tt.wantSeeded {
				t.Errorf("seeded = %v, want %v\n%s", seeded, tt.wantSeeded, r.stdout)
			}
		})
	}
}
