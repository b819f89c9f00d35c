package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestStaticBinary stands in for 'docker build', which this machine cannot
// run: it builds the binary with the script the Dockerfile runs
// (CGO_ENABLED=0), checks that it is static, and serves IDs with it, first
// as the image runs it (LEAF_* variables from the Dockerfile, listen address
// aside), then with the systemd unit's command line and the sample
// configuration.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release binary")
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^RUN scripts/build-static\.sh `).Match(dockerfile) {
		t.Fatal("the Dockerfile no longer builds with scripts/build-static.sh: this test checks that script's binary")
	}
	bin := filepath.Join(t.TempDir(), "leaf")
	build := exec.Command("../../scripts/build-static.sh", bin, "static-test")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-static.sh: %v\n%s", err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}

	dir := t.TempDir()
	if r := runBin(t, bin, dir, testutil.CleanEnv(), "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "leaf static-test\n") {
		t.Errorf("version: %+v", r)
	}

	t.Run("as the image runs it", func(t *testing.T) {
		// The image listens on every interface with the defaults' node-local
		// IDs (SQLite, worker 0): as it is, it must refuse to start, for
		// both the missing token and the missing single_node.
		env := append(testutil.CleanEnv(), dockerEnv(t, string(dockerfile))...)
		env = append(env, "LEAF_DATA_DIR="+t.TempDir())
		if r := runBin(t, bin, t.TempDir(), env, "serve"); r.code != 2 || !strings.Contains(r.stderr, "no admin token is set") ||
			!strings.Contains(r.stderr, "single_node") || !strings.Contains(r.stderr, "LEAF_SINGLE_NODE=true") {
			t.Errorf("the image's settings as they are: exit %d, stderr %q; want 2, naming the token and single_node", r.code, r.stderr)
		}
		// Run as the Dockerfile says one container runs: LEAF_SINGLE_NODE
		// and a token (port 0 instead of 8080).
		env = append(env, "LEAF_LISTEN=0.0.0.0:0", "LEAF_LOG_FORMAT=text", "LEAF_ADMIN_TOKEN="+serveToken, "LEAF_SINGLE_NODE=true")
		srv := testutil.StartLeaf(t, bin, t.TempDir(), env)
		srv.Addr = "127.0.0.1" + srv.Addr[strings.LastIndex(srv.Addr, ":"):]
		serveIDs(t, srv)
	})

	t.Run("as the systemd unit runs it", func(t *testing.T) {
		args := unitExecStart(t)
		if args[0] != "/usr/local/bin/leaf" || args[1] != "serve" {
			t.Fatalf("ExecStart %q: want /usr/local/bin/leaf serve ...", args)
		}
		sample, err := filepath.Abs("../../etc/leaf.yml")
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range args {
			if a == "/etc/leaf/leaf.yml" {
				args[i] = sample
			}
		}
		env := append(testutil.CleanEnv(), "LEAF_DATA_DIR="+t.TempDir())
		srv := testutil.StartLeaf(t, bin, t.TempDir(), env, append(args[2:], "--listen", "127.0.0.1:0")...)
		serveIDs(t, srv)
	})
}

// serveIDs gets segment and snowflake IDs from srv, then stops it with
// SIGTERM and expects a clean exit.
func serveIDs(t *testing.T, srv *testutil.LeafServer) {
	t.Helper()
	var last int64
	for range 3 {
		last = increasing(t, last, []int64{testutil.FetchID(t, srv.URL("/api/segment/get/"+config.SeedTag))})
	}
	if id := testutil.FetchID(t, srv.URL("/api/snowflake/get/x")); id <= 0 {
		t.Errorf("snowflake ID %d", id)
	}
	if code := srv.Stop(t); code != 0 {
		t.Errorf("exit status %d after SIGTERM:\n%s", code, srv.Log.String())
	}
}

// dockerEnv returns the Dockerfile's ENV settings as KEY=value, joining
// backslash-continued lines.
func dockerEnv(t *testing.T, dockerfile string) []string {
	t.Helper()
	joined := strings.ReplaceAll(dockerfile, "\\\n", " ")
	var env []string
	for _, line := range strings.Split(joined, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENV ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			if !strings.Contains(kv, "=") {
				t.Fatalf("Dockerfile ENV %q: want KEY=value pairs", rest)
			}
			env = append(env, kv)
		}
	}
	if len(env) == 0 {
		t.Fatal("the Dockerfile sets no ENV")
	}
	return env
}

// unitExecStart returns the systemd unit's ExecStart split into words, and
// checks that its stop timeout leaves room for the graceful shutdown.
func unitExecStart(t *testing.T) []string {
	t.Helper()
	unit, err := os.ReadFile("../../etc/leaf.service")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			values[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	stop, err := time.ParseDuration(values["TimeoutStopSec"])
	if err != nil || stop <= config.Default().ShutdownTimeout {
		t.Errorf("TimeoutStopSec %q must exceed shutdown_timeout (%v)", values["TimeoutStopSec"], config.Default().ShutdownTimeout)
	}
	args := strings.Fields(values["ExecStart"])
	if len(args) < 2 {
		t.Fatalf("ExecStart %q", values["ExecStart"])
	}
	return args
}
