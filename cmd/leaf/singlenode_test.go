package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestServeSingleNode runs the binary: on an address other hosts can reach,
// the defaults' node-local IDs (SQLite, local worker 0) are refused with exit
// 2 before anything is created or bound, unless --single-node; loopback is
// unaffected, and so are a shared store with an explicit worker ID.
func TestServeSingleNode(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	token := "LEAF_ADMIN_TOKEN=" + serveToken // the admin guard is not under test

	t.Run("defaults on every interface are refused", func(t *testing.T) {
		port := freePort(t)
		data := t.TempDir()
		env := append(testutil.CleanEnv(), token, "LEAF_DATA_DIR="+data)
		r := runBin(t, bin, t.TempDir(), env, "serve", "--listen", "0.0.0.0:"+port)
		if r.code != 2 {
			t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
		}
		for _, s := range []string{"single_node", "listen 0.0.0.0:" + port, "SQLite", "worker 0", "--single-node",
			"segment.store: mysql|postgres", "snowflake.registry: zookeeper|etcd|mysql"} {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("stderr does not say %q: %q", s, r.stderr)
			}
		}
		if entries, err := os.ReadDir(data); err != nil || len(entries) != 0 {
			t.Errorf("the refused server left %v in its data directory (%v); nothing may be created", entries, err)
		}
		ln, err := net.Listen("tcp", "0.0.0.0:"+port)
		if err != nil {
			t.Errorf("port %s after the refusal: %v", port, err)
		} else {
			ln.Close()
		}
	})

	t.Run("--single-node serves", func(t *testing.T) {
		env := append(testutil.CleanEnv(), token, "LEAF_DATA_DIR="+t.TempDir())
		srv := testutil.StartLeaf(t, bin, t.TempDir(), env, "--listen", "0.0.0.0:0", "--single-node")
		srv.Addr = "127.0.0.1" + srv.Addr[strings.LastIndex(srv.Addr, ":"):]
		serveIDs(t, srv)
	})

	t.Run("loopback default", func(t *testing.T) {
		if !config.IsLoopbackListen(config.Default().Listen) {
			t.Fatalf("the default listen address %s is not loopback", config.Default().Listen)
		}
		// The default's host, on port 0: 8080 may be taken on this machine.
		host, _, _ := net.SplitHostPort(config.Default().Listen)
		srv := testutil.StartLeaf(t, bin, t.TempDir(), append(testutil.CleanEnv(), "LEAF_DATA_DIR="+t.TempDir()), "--listen", host+":0")
		serveIDs(t, srv)
	})

	t.Run("shared store and explicit worker", func(t *testing.T) {
		dsn := testutil.MySQL(t)
		env := append(testutil.CleanEnv(), token, "LEAF_DATA_DIR="+t.TempDir(), "LEAF_SEGMENT_SEED=true")
		srv := testutil.StartLeaf(t, bin, t.TempDir(), env, "--listen", "0.0.0.0:0",
			"--segment-store", "mysql", "--segment-dsn", dsn, "--worker-id", "0")
		srv.Addr = "127.0.0.1" + srv.Addr[strings.LastIndex(srv.Addr, ":"):]
		serveIDs(t, srv)
	})
}

// freePort returns a port nothing listens on (it did a moment ago).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestServeCheckSampleSingleNode: etc/leaf.yml copied to a host and opened
// to the network is the copied configuration the guard exists for (two
// hosts, both worker 0): the sample documents snowflake.worker_id without
// setting it, so serve --check refuses it, exit 2 naming single_node, until
// the operator chooses a worker ID.
func TestServeCheckSampleSingleNode(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	sample, err := filepath.Abs("../../etc/leaf.yml")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	env := append(testutil.CleanEnv(), "LEAF_ADMIN_TOKEN="+serveToken, "LEAF_SEGMENT_ENABLED=false", "LEAF_DATA_DIR="+data)
	args := []string{"serve", "--check", "--config", sample, "--listen", "0.0.0.0:0"}
	r := runBin(t, bin, t.TempDir(), env, args...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "single_node") || !strings.Contains(r.stderr, "worker ID 0") {
		t.Errorf("%q: exit %d\nstdout %s\nstderr %s\nwant exit %d naming single_node and worker ID 0", args, r.code, r.stdout, r.stderr, exitUsage)
	}
	if strings.Contains(r.stdout, "config OK") {
		t.Errorf("%q printed a summary after the refusal:\n%s", args, r.stdout)
	}
	// The operator's own worker ID, 0 included, is a choice the guard
	// cannot second-guess.
	r = runBin(t, bin, t.TempDir(), env, append(args, "--worker-id", "0")...)
	if r.code != 0 || !strings.Contains(r.stdout, "local, worker ID 0") {
		t.Errorf("%q --worker-id 0: exit %d\nstdout %s\nstderr %s\nwant exit 0", args, r.code, r.stdout, r.stderr)
	}
	checkNotCreated(t, data)
}
