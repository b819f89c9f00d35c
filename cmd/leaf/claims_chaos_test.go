//go:build chaos

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/testutil"
)

// The peer clock check (Meituan's leaf_temporary), on every registry that
// lists live peers: with two servers running, a third whose clock runs 10s
// ahead (a chaos build's clock offset) refuses to start and says by how
// much; one running 1s ahead starts.
func TestChaosPeerClockCheck(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t, "chaos")
	for _, tc := range []struct {
		registry string
		args     func(t *testing.T, name string) []string
	}{
		{"zookeeper", func(t *testing.T, name string) []string {
			addr := testutil.ZooKeeper(t)
			t.Cleanup(func() { removeZKTree(t, addr, name) })
			return []string{"--zk", addr}
		}},
		{"etcd", func(t *testing.T, _ string) []string { return []string{"--etcd", testutil.Etcd(t)} }},
		{"mysql", func(t *testing.T, _ string) []string { return []string{"--snowflake-dsn", testutil.MySQL(t)} }},
	} {
		t.Run(tc.registry, func(t *testing.T) {
			t.Parallel()
			name := testutil.UniqueName()
			extra := tc.args(t, name)
			serve := func(i int, offset string) (*testutil.LeafServer, bool) {
				dir := t.TempDir()
				clock := filepath.Join(dir, "clock")
				if err := os.WriteFile(clock, []byte(offset), 0o644); err != nil {
					t.Fatal(err)
				}
				env := append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false", envChaosClockFile+"="+clock)
				args := append([]string{"--listen", "127.0.0.1:0", "--snowflake-registry", tc.registry, "--name", name,
					"--snowflake-endpoint", "10.6.6." + strconv.Itoa(i+1) + ":8080"}, extra...)
				return testutil.TryStartLeaf(t, bin, dir, env, args...)
			}
			for i := range 2 {
				if s, refused := serve(i, "0s"); refused {
					t.Fatalf("peer %d refused (exit %d):\n%s", i, s.ExitCode(), s.Log.String())
				}
			}
			ahead, refused := serve(2, "10s")
			if !refused {
				t.Fatalf("a server 10s ahead of its peers started:\n%s", ahead.Log.String())
			}
			msg := ahead.Log.String()
			if code := ahead.ExitCode(); code != 1 || !strings.Contains(msg, "off the average of 2 live peers") || !strings.Contains(msg, "max_peer_skew") {
				t.Fatalf("server 10s ahead: exit %d, want 1 and the measured skew:\n%s", code, msg)
			}
			t.Logf("10s ahead: %s", lastLine(msg))
			near, refused := serve(3, "1s")
			if refused {
				t.Fatalf("a server 1s ahead of its peers refused (exit %d):\n%s", near.ExitCode(), near.Log.String())
			}
			if !strings.Contains(near.Log.String(), "checked against live peers") {
				t.Errorf("the server 1s ahead did not log its peer check:\n%s", near.Log.String())
			}
		})
	}
}
