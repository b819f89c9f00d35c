package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
)

// The end-to-end test drives the real binary the way a user would: no
// configuration at all, a fresh working directory (so the default
// ./leaf-data is used), port 0 for the listener.

// TestHarnessNames: the test harness's copies of the binary's names
// (internal/testutil cannot import cmd/leaf/internal/config) are the
// binary's.
func TestHarnessNames(t *testing.T) {
	if testutil.EnvPrefix != config.EnvPrefix || testutil.SeedTag != config.SeedTag {
		t.Errorf("testutil has EnvPrefix %q, SeedTag %q; the binary %q, %q",
			testutil.EnvPrefix, testutil.SeedTag, config.EnvPrefix, config.SeedTag)
	}
}

// runBin runs the binary to completion in dir.
func runBin(t *testing.T, bin, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %q: %v", args, err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// increasing checks that ids are positive and strictly increase after last,
// and returns the new last ID.
func increasing(t *testing.T, last int64, ids []int64) int64 {
	t.Helper()
	if len(ids) == 0 {
		t.Fatal("no IDs")
	}
	for _, id := range ids {
		if id < 1 || id <= last {
			t.Fatalf("ID %d after %d: IDs must be positive and increasing (%v)", id, last, ids)
		}
		last = id
	}
	return last
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testutil.BuildLeaf(t)
	dir := t.TempDir() // the working directory: the default ./leaf-data lands here
	env := testutil.CleanEnv()

	if r := runBin(t, bin, dir, env, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "leaf e2e-test\ngo: go") {
		t.Errorf("version: %+v", r)
	}

	srv := testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0")
	if !strings.Contains(srv.Log.String(), `store="sqlite leaf-data/leaf.db"`) {
		t.Errorf("the listening line should name the default store:\n%s", srv.Log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "leaf-data", "leaf.db")); err != nil {
		t.Errorf("default SQLite file: %v", err)
	}

	// IDs over HTTP, one at a time and as a batch.
	var last int64
	for range 5 {
		last = increasing(t, last, []int64{testutil.FetchID(t, srv.URL("/api/segment/get/"+config.SeedTag))})
	}
	if last != 5 {
		t.Errorf("the seeded tag starts at 1: fifth ID is %d, want 5", last)
	}
	last = increasing(t, last, testutil.ParseIDs(t, runBin(t, bin, dir, env, "get", config.SeedTag, "--count", "3", "--server", srv.URL("")).stdout))

	// leaf get: --server and LEAF_SERVER; a server error is exit 1 with the
	// server's message.
	r := runBin(t, bin, dir, append(env, "LEAF_SERVER="+srv.URL("")), "get", config.SeedTag)
	if r.code != 0 {
		t.Fatalf("leaf get: %+v", r)
	}
	last = increasing(t, last, testutil.ParseIDs(t, r.stdout))
	r = runBin(t, bin, dir, env, "get", "no-such-tag", "--server", srv.URL(""))
	if r.code != 1 || !strings.Contains(r.stderr, "leaf get: server answered 404") || !strings.Contains(r.stderr, "no-such-tag") {
		t.Errorf("leaf get unknown tag: %+v", r)
	}

	// Tags, in the same SQLite file, while the server runs.
	steps := []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"tags", "create", "e2e.orders", "--step", "10", "--start", "100", "--description", "end to end"}, 0, "created tag e2e.orders"},
		{[]string{"tags", "list"}, 0, "e2e.orders"},
		{[]string{"tags", "set-step", "e2e.orders", "20"}, 0, "tag e2e.orders: step 20"},
		{[]string{"tags", "create", "e2e.orders"}, 1, ""},
	}
	for _, s := range steps {
		if r := runBin(t, bin, dir, env, s.args...); r.code != s.code || !strings.Contains(r.stdout, s.stdout) {
			t.Fatalf("%q: %+v, want exit %d and %q", s.args, r, s.code, s.stdout)
		}
	}
	// The server finds a tag created behind its back on first request.
	if id := testutil.FetchID(t, srv.URL("/api/segment/get/e2e.orders")); id != 100 {
		t.Errorf("first ID of e2e.orders = %d, want its start 100", id)
	}
	var rows []httpapi.TagRow
	if err := json.Unmarshal([]byte(runBin(t, bin, dir, env, "tags", "list", "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	got := map[string]httpapi.TagRow{}
	for _, a := range rows {
		got[a.Tag] = a
	}
	if a := got["e2e.orders"]; a.Step != 20 || a.Description != "end to end" {
		t.Errorf("e2e.orders row = %+v, want step 20", a)
	}
	if a := got[config.SeedTag]; a.Step != 2000 || a.MaxID != 2001 {
		t.Errorf("%s row = %+v, want step 2000, max_id 2001 (one range reserved)", config.SeedTag, a)
	}
	for _, s := range []struct {
		args []string
		code int
	}{
		{[]string{"tags", "delete", "e2e.orders"}, 0},
		{[]string{"tags", "delete", "e2e.orders"}, 1},
	} {
		if r := runBin(t, bin, dir, env, s.args...); r.code != s.code {
			t.Errorf("%q: %+v, want exit %d", s.args, r, s.code)
		}
	}
	if r := runBin(t, bin, dir, env, "tags", "list"); strings.Contains(r.stdout, "e2e.orders") {
		t.Errorf("deleted tag still listed:\n%s", r.stdout)
	}

	// A second server on the same address fails at run time.
	if r := runBin(t, bin, dir, env, "serve", "--listen", srv.Addr); r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("serve on a busy port: %+v", r)
	}

	// Graceful stop: exit 0, unused IDs given back.
	if code := srv.Stop(t); code != 0 {
		t.Fatalf("leaf serve exited %d after SIGTERM:\n%s", code, srv.Log.String())
	}
	if log := srv.Log.String(); !strings.Contains(log, "msg=stopped") || !strings.Contains(log, "given back") {
		t.Errorf("shutdown log lacks the give-back or the final line:\n%s", log)
	}

	// Restart. Fewer than 10% of the seeded tag's first range (2000) were
	// used, so no second range was prefetched and the give-back returned the
	// whole unused tail: the next ID is exactly last+1. Without give-back it
	// would be 2001.
	srv = testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0")
	if id := testutil.FetchID(t, srv.URL("/api/segment/get/"+config.SeedTag)); id != last+1 {
		t.Errorf("first ID after restart = %d, want %d (last before restart + 1)", id, last+1)
	}
	if strings.Contains(srv.Log.String(), "seeded tag") {
		t.Errorf("restart re-seeded a store that has tags:\n%s", srv.Log.String())
	}
	if code := srv.Stop(t); code != 0 {
		t.Fatalf("leaf serve exited %d after SIGTERM:\n%s", code, srv.Log.String())
	}

	// Start-up failures: usage errors exit 2, an unreachable store exits 1,
	// and the password never reaches the terminal.
	failures := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"bad flag", []string{"serve", "--no-such-flag"}, 2, "flag provided but not defined"},
		{"mysql without DSN", []string{"serve", "--segment-store", "mysql"}, 2, "segment.dsn: required when segment.store is mysql"},
		{"unreachable mysql", []string{"serve", "--listen", "127.0.0.1:0", "--segment-store", "mysql",
			"--segment-dsn", "leaf:hunter2@tcp(" + closedAddr(t) + ")/leaf?timeout=2s"}, 1, "open segment store (mysql leaf:xxxxx@tcp("},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			r := runBin(t, bin, dir, env, f.args...)
			if r.code != f.code || !strings.Contains(r.stderr, f.stderr) {
				t.Errorf("exit %d stderr %q, want exit %d and %q", r.code, r.stderr, f.code, f.stderr)
			}
			if strings.Contains(r.stderr, "hunter2") {
				t.Errorf("password leaked: %q", r.stderr)
			}
		})
	}
}
