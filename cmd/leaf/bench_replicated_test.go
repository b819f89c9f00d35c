package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/testutil"
)

// TestBenchReplicated is a benchmark, not a test: with LEAF_BENCH_REPLICATED=1
// it measures single segment IDs through one leaf server (leaf bench, 8
// workers, 10s) on a single MariaDB, on a semi-synchronous pair and on a
// three-node Galera cluster, one after the other, and the mean time of the
// server's reserves on each (leaf_segment_load_duration_seconds). The step
// is capped at 1000, so that the server reserves dozens of times a second.
//
//	LEAF_BENCH_REPLICATED=1 go test -run TestBenchReplicated -v ./cmd/leaf
func TestBenchReplicated(t *testing.T) {
	if os.Getenv("LEAF_BENCH_REPLICATED") != "1" {
		t.Skip("a benchmark: set LEAF_BENCH_REPLICATED=1")
	}
	bin := testutil.BuildLeaf(t)
	for _, setup := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"single-mariadb", func(t *testing.T) string { return testutil.NewMariaDB(t).CreateDatabase(t, "leaf") }},
		{"semi-sync-pair", func(t *testing.T) string {
			return testutil.NewMariaDBPair(t, testutil.SemiSync).CreateDatabase(t, "leaf")
		}},
		{"galera-3-nodes", func(t *testing.T) string {
			g := testutil.NewGalera(t, 3)
			g.CreateDatabase(t, "leaf")
			return g.Node(0).DSN("leaf")
		}},
	} {
		t.Run(setup.name, func(t *testing.T) {
			dsn := setup.dsn(t)
			servers := segServers(t, bin, "mysql", []string{dsn}, "LEAF_SEGMENT_MAX_STEP=1000")
			r := runCLI(t, testutil.CleanEnv(), "bench", "--server", servers[0].URL(""), "--tag", "hot", "--concurrency", "8",
				"--duration", "10s", "--quiet", "--json")
			if r.code != 0 {
				t.Fatalf("leaf bench: %d %s", r.code, r.stderr)
			}
			var sum struct {
				RPS     float64 `json:"requests_per_second"`
				Errors  int     `json:"errors"`
				Latency struct {
					P50 float64 `json:"p50"`
					P99 float64 `json:"p99"`
				} `json:"latency_us"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
				t.Fatalf("leaf bench --json: %v: %s", err, r.stdout)
			}
			_, page := testutil.Get(t, servers[0].URL("/metrics"))
			var loads, secs float64
			fmt.Sscan(metricValue(page, "leaf_segment_load_duration_seconds_count"), &loads)
			fmt.Sscan(metricValue(page, "leaf_segment_load_duration_seconds_sum"), &secs)
			mean := 0.0
			if loads > 0 {
				mean = secs / loads * 1000
			}
			t.Logf("%-18s %8.0f IDs/s  p50 %6.0fµs  p99 %6.0fµs  errors %d  reserves %4.0f, mean %.2fms",
				setup.name, sum.RPS, sum.Latency.P50, sum.Latency.P99, sum.Errors, loads, mean)
			if !strings.Contains(page, "leaf_segment_load_duration_seconds_count") {
				t.Errorf("no reserve latency in /metrics")
			}
		})
	}
}
