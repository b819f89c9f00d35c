//go:build chaos

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/testdb"
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
			addr := testdb.ZooKeeper(t)
			t.Cleanup(func() { removeZKTree(t, addr, name) })
			return []string{"--zk", addr}
		}},
		{"etcd", func(t *testing.T, _ string) []string { return []string{"--etcd", testdb.Etcd(t)} }},
		{"mysql", func(t *testing.T, _ string) []string { return []string{"--snowflake-dsn", testdb.MySQL(t)} }},
	} {
		t.Run(tc.registry, func(t *testing.T) {
			t.Parallel()
			name := testdb.UniqueName()
			extra := tc.args(t, name)
			serve := func(i int, offset string) (*serverProc, bool) {
				dir := t.TempDir()
				clock := filepath.Join(dir, "clock")
				if err := os.WriteFile(clock, []byte(offset), 0o644); err != nil {
					t.Fatal(err)
				}
				env := append(cleanEnv(), "LEAF_SEGMENT_ENABLED=false", envChaosClockFile+"="+clock)
				args := append([]string{"--listen", "127.0.0.1:0", "--snowflake-registry", tc.registry, "--name", name,
					"--snowflake-endpoint", "10.6.6." + strconv.Itoa(i+1) + ":8080"}, extra...)
				return tryStart(t, bin, dir, env, args...)
			}
			for i := range 2 {
				if s, refused := serve(i, "0s"); refused {
					t.Fatalf("peer %d refused (exit %d):\n%s", i, s.exitCode(), s.log.String())
				}
			}
			ahead, refused := serve(2, "10s")
			if !refused {
				t.Fatalf("a server 10s ahead of its peers started:\n%s", ahead.log.String())
			}
			msg := ahead.log.String()
			if code := ahead.exitCode(); code != 1 || !strings.Contains(msg, "off the average of 2 live peers") || !strings.Contains(msg, "max_peer_skew") {
				t.Fatalf("server 10s ahead: exit %d, want 1 and the measured skew:\n%s", code, msg)
			}
			t.Logf("10s ahead: %s", lastLine(msg))
			near, refused := serve(3, "1s")
			if refused {
				t.Fatalf("a server 1s ahead of its peers refused (exit %d):\n%s", near.exitCode(), near.log.String())
			}
			if !strings.Contains(near.log.String(), "checked against live peers") {
				t.Errorf("the server 1s ahead did not log its peer check:\n%s", near.log.String())
			}
		})
	}
}
