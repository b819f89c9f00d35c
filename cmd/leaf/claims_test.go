package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/snowflake"
)

// drawSnowflake asks each server for batches of 1000 snowflake IDs from four
// goroutines per server for d, and returns every ID by server.
func drawSnowflake(t *testing.T, d time.Duration, servers ...*testutil.LeafServer) [][]int64 {
	t.Helper()
	out := make([][]int64, len(servers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i, s := range servers {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					resp, err := http.Get(s.URL("/api/snowflake/get/x?count=1000"))
					if err != nil {
						t.Errorf("server %d: %v", i, err)
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("server %d: %s %s", i, resp.Status, body)
						return
					}
					ids := testutil.ParseIDs(t, string(body))
					mu.Lock()
					out[i] = append(out[i], ids...)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return out
}

// workersOf lists the worker IDs in ids.
func workersOf(ids []int64) map[int64]int {
	w := map[int64]int{}
	for _, id := range ids {
		p, _ := snowflake.LeafLayout.Decode(id)
		w[p.WorkerID]++
	}
	return w
}

// Two servers started with one endpoint (a copied configuration, a pinned
// port, a cloned VM) never issue under one worker ID: on the registries that
// key the worker ID by endpoint the second refuses to start, on the pooled
// ones it takes another worker ID. No ID is repeated. (A kill -9 and restart
// of one server: TestRestartAfterKill.)
func TestSameEndpointTwoServers(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	for _, tc := range []struct {
		registry string
		args     func(t *testing.T, name string) []string
		// byEndpoint: the worker ID belongs to the endpoint, so the second
		// server must refuse and the restarted first gets its ID back.
		byEndpoint bool
	}{
		{"zookeeper", func(t *testing.T, name string) []string {
			addr := testutil.ZooKeeper(t)
			t.Cleanup(func() { removeZKTree(t, addr, name) })
			return []string{"--zk", addr}
		}, true},
		{"zookeeper-recycle", func(t *testing.T, name string) []string {
			addr := testutil.ZooKeeper(t)
			t.Cleanup(func() { removeZKTree(t, addr, name) })
			return []string{"--zk", addr}
		}, false},
		{"etcd", func(t *testing.T, _ string) []string { return []string{"--etcd", testutil.Etcd(t)} }, false},
		{"mysql", func(t *testing.T, _ string) []string { return []string{"--snowflake-dsn", testutil.MySQL(t)} }, true},
	} {
		t.Run(tc.registry, func(t *testing.T) {
			t.Parallel()
			name := testutil.UniqueName()
			args := append([]string{"--listen", "127.0.0.1:0", "--snowflake-registry", tc.registry, "--name", name,
				"--snowflake-endpoint", "10.7.7.7:8080"}, tc.args(t, name)...)
			// A short lease keeps the waits of this test short; it is also
			// the mysql registry's live-claim lease.
			env := append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false", "LEAF_SNOWFLAKE_LEASE_TTL=3s")
			dirA, dirB := t.TempDir(), t.TempDir()

			a, refused := testutil.TryStartLeaf(t, bin, dirA, env, args...)
			if refused {
				t.Fatalf("first server refused to start (exit %d):\n%s", a.ExitCode(), a.Log.String())
			}
			b, refused := testutil.TryStartLeaf(t, bin, dirB, env, args...)
			servers := []*testutil.LeafServer{a}
			if refused {
				if !tc.byEndpoint {
					t.Fatalf("second server refused on a leased registry (exit %d):\n%s", b.ExitCode(), b.Log.String())
				}
				msg := b.Log.String()
				if code := b.ExitCode(); code != 1 || !strings.Contains(msg, "10.7.7.7:8080") || !strings.Contains(msg, "in use") {
					t.Fatalf("second server: exit %d, want 1 and a message naming the endpoint's claim in use:\n%s", code, msg)
				}
				t.Logf("second server refused: %s", lastLine(msg))
			} else {
				if tc.byEndpoint {
					t.Errorf("second server with the same endpoint started on %s", tc.registry)
				}
				servers = append(servers, b)
			}
			all := drawSnowflake(t, 1500*time.Millisecond, servers...)
			workerA := onlyWorker(t, "first server", all[0])
			if len(servers) == 2 {
				if w := onlyWorker(t, "second server", all[1]); w == workerA {
					t.Fatalf("both servers issued under worker %d", w)
				}
			}

			seen := map[int64]bool{}
			n := 0
			for _, ids := range all {
				for _, id := range ids {
					if seen[id] {
						t.Fatalf("ID %d issued twice", id)
					}
					seen[id] = true
					n++
				}
			}
			t.Logf("%d IDs from %d servers, no duplicate", n, len(servers))
		})
	}
}

// onlyWorker returns the one worker ID under which ids were issued.
func onlyWorker(t *testing.T, who string, ids []int64) int64 {
	t.Helper()
	w := workersOf(ids)
	if len(w) != 1 {
		t.Fatalf("%s issued %d IDs under workers %v, want exactly one worker", who, len(ids), w)
	}
	for id := range w {
		return id
	}
	panic("unreachable")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
