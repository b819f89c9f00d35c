package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
)

// The segment store on replicated databases (issue 26): real replicated
// servers of the test's own (internal/testutil), leaf servers hammering one
// tag with a small step, a failover under load, and every ID checked.

// segLoad is IDs drawn from segment servers by clients, and the requests
// that failed.
type segLoad struct {
	mu       sync.Mutex
	start    time.Time
	ids      []int64
	byServer []int // how many of ids each server issued
	failed   int
	failures []string // the first few, with when they came
}

// failurePause is how long a client pauses after a failed request, so that
// a server failing for seconds (a failover) is not asked thousands of
// times: the load's pace, not a wait for anything.
const failurePause = 10 * time.Millisecond

// hammer has clients per server ask for single IDs of tag until ctx ends.
func (l *segLoad) hammer(ctx context.Context, t *testing.T, tag string, clients int, wg *sync.WaitGroup, servers ...*testutil.LeafServer) {
	client := &http.Client{Timeout: 5 * time.Second}
	l.start = time.Now()
	l.byServer = make([]int, len(servers))
	for i, s := range servers {
		for range clients {
			wg.Go(func() {
				for ctx.Err() == nil {
					resp, err := client.Get(s.URL("/api/segment/get/" + tag))
					if err != nil {
						if ctx.Err() == nil {
							l.fail(fmt.Sprintf("server %d: %v", i, err))
						}
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						l.fail(fmt.Sprintf("server %d: %d %s", i, resp.StatusCode, strings.TrimSpace(string(body))))
						select {
						case <-ctx.Done():
						case <-time.After(failurePause):
						}
						continue
					}
					ids := testutil.ParseIDs(t, string(body))
					l.mu.Lock()
					l.ids = append(l.ids, ids...)
					l.byServer[i] += len(ids)
					l.mu.Unlock()
				}
			})
		}
	}
}

// drawn is how many IDs each server issued so far.
func (l *segLoad) drawn() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byServer)
}

// waitEach waits until every server has issued n IDs more than it had in
// since (nil: from the start): the load's phases end on what the servers
// did, not after a guess at how long that takes.
func (l *segLoad) waitEach(t *testing.T, what string, since []int, n int) {
	t.Helper()
	testutil.WaitForState(t, what, func() (bool, string) {
		now := l.drawn()
		for i := range now {
			if since != nil {
				now[i] -= since[i]
			}
		}
		return slices.Min(now) >= n, fmt.Sprintf("IDs issued by each server meanwhile: %v, want %d each", now, n)
	})
}

func (l *segLoad) fail(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed++
	if len(l.failures) < 5 {
		l.failures = append(l.failures, fmt.Sprintf("+%v %s", time.Since(l.start).Round(100*time.Millisecond), what))
	}
}

// duplicates counts the IDs drawn more than once.
func (l *segLoad) duplicates() (dups, total int) {
	l.mu.Lock()
	ids := slices.Clone(l.ids)
	l.mu.Unlock()
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			dups++
		}
	}
	return dups, len(ids)
}

// segServers starts n leaf servers on the store at dsns[i] (segment mode
// only, the adaptive step capped at the tag's 10, so that they reserve
// every few milliseconds), after creating the tag through the first.
func segServers(t *testing.T, bin, store string, dsns []string, env ...string) []*testutil.LeafServer {
	t.Helper()
	base := append(append(testutil.CleanEnv(), "LEAF_SNOWFLAKE_ENABLED=false", "LEAF_SEGMENT_STORE="+store,
		"LEAF_SEGMENT_MAX_STEP=10", "LEAF_SEGMENT_FAILOVER_WINDOW=2s", "LEAF_SEGMENT_FAILOVER_MARGIN_STEPS=100"), env...)
	if r := runCLI(t, append(slices.Clone(base), "LEAF_SEGMENT_DSN="+dsns[0]), "tags", "create", "hot", "--step", "10"); r.code != 0 {
		t.Fatalf("tags create: exit %d: %s", r.code, r.stderr)
	}
	servers := make([]*testutil.LeafServer, len(dsns))
	for i, dsn := range dsns {
		s, refused := testutil.TryStartLeaf(t, bin, t.TempDir(), append(slices.Clone(base), "LEAF_SEGMENT_DSN="+dsn), "--listen", "127.0.0.1:0")
		if refused {
			t.Fatalf("server %d refused to start (exit %d):\n%s", i, s.ExitCode(), s.Log.String())
		}
		servers[i] = s
	}
	return servers
}

// TestReplicatedPostgres: three leaf servers on a PostgreSQL primary with a
// synchronous standby, reached by a DSN that names both and asks for the
// one that accepts writes (as libpq-style clients fail over); the primary
// is killed under load and the standby promoted. Nothing committed is lost
// on a synchronous standby, and the fence that the new timeline starts
// costs only its gap: no ID repeats.
func TestReplicatedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated PostgreSQL")
	}
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	pair := testutil.NewPostgresPair(t)
	pair.CreateDatabase(t, "leaf")
	primary, standby := pair.Primary().Addr, pair.Standby().Addr
	dsn := fmt.Sprintf("postgres://postgres@%s,%s/leaf?sslmode=disable&target_session_attrs=read-write&connect_timeout=2", primary, standby)
	servers := segServers(t, bin, "postgres", []string{dsn, dsn, dsn})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var load segLoad
	load.hammer(ctx, t, "hot", 2, &wg, servers...)
	load.waitEach(t, "every server to issue under load before the failover", nil, phaseIDs)
	pair.Primary().Kill9()
	if err := pair.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	testutil.WaitForState(t, "a fence on every server after the promotion", func() (bool, string) {
		fences := make([]string, len(servers))
		for i, s := range servers {
			_, body := testutil.Get(t, s.URL("/metrics"))
			fences[i] = metricValue(body, "leaf_segment_store_fences_total")
		}
		return !slices.ContainsFunc(fences, func(v string) bool { return v == "" || v == "0" }), fmt.Sprintf("fences %q", fences)
	})
	load.waitEach(t, "every server to issue on the new timeline", load.drawn(), phaseIDs)
	cancel()
	wg.Wait()
	dups, total := load.duplicates()
	t.Logf("%d IDs, %d repeated; %d requests failed %q; fenced %v after the promotion",
		total, dups, load.failed, load.failures, time.Since(promoted).Round(100*time.Millisecond))
	if dups > 0 {
		t.Fatalf("%d of %d IDs issued twice across the failover", dups, total)
	}
}

// mariadbFailover runs three leaf servers on a MariaDB pair through a proxy
// (the VIP), hammers one tag, and fails the pair over under load: lossy
// stops the replica's replication for 3s first, so that reserves certainly
// never reach it. It returns the load and the first server's /metrics.
func mariadbFailover(t *testing.T, mode testutil.ReplicationMode, lossy bool, env ...string) (*segLoad, string) {
	bin := testutil.BuildLeaf(t)
	pair := testutil.NewMariaDBPair(t, mode)
	dsn := pair.CreateDatabase(t, "leaf")
	proxy := testutil.NewProxy(t, pair.Primary.Addr)
	viaVIP := strings.Replace(dsn, pair.Primary.Addr, proxy.Addr(), 1)
	servers := segServers(t, bin, "mysql", []string{viaVIP, viaVIP, viaVIP}, env...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	load := &segLoad{}
	load.hammer(ctx, t, "hot", 2, &wg, servers...)
	load.waitEach(t, "every server to issue under load before the failover", nil, phaseIDs)
	if lossy {
		if err := pair.StopReplication(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Every server reserves a few dozen ranges the replica never sees.
		load.waitEach(t, "every server to issue from reserves the stopped replica misses", load.drawn(), phaseIDs)
	}
	pair.Primary.Kill9()
	if err := pair.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy.Switch(pair.Replica.Addr)
	// Every server reserves a few dozen ranges on the promoted replica
	// (through the fence, where there is one).
	load.waitEach(t, "every server to issue from the promoted replica", load.drawn(), phaseIDs)
	cancel()
	wg.Wait()
	_, metrics := testutil.Get(t, servers[0].URL("/metrics"))
	return load, metrics
}

// phaseIDs is how many IDs each server issues in a phase of the load of
// the failover tests: at the tag's step of 10, a hundred reserves or more.
const phaseIDs = 1000

// galeraEvictionPause is how long a Galera cluster holds its commits when a
// node dies, until it evicts it: testutil's evs.inactive_timeout.
const galeraEvictionPause = 3 * time.Second

// segTag is what /v2/status says of a segment tag.
type segTag struct {
	Tag         string  `json:"tag"`
	Step        int     `json:"step"`
	Rate        float64 `json:"ids_per_sec"`
	SecondsLeft float64 `json:"seconds_left"`
}

// segTagStatus is tag's entry in s's /v2/status (zero if it has none).
func segTagStatus(t *testing.T, s *testutil.LeafServer, tag string) segTag {
	t.Helper()
	_, body := testutil.Get(t, s.URL("/v2/status"))
	var st struct {
		Segment struct {
			Tags []segTag `json:"tags"`
		} `json:"segment"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/v2/status: %v: %.300s", err, body)
	}
	for _, ts := range st.Segment.Tags {
		if ts.Tag == tag {
			return ts
		}
	}
	return segTag{}
}

// wsrepClusterSize is the size of the Galera cluster as node m sees it.
func wsrepClusterSize(t *testing.T, m *testutil.MariaDB) (int, error) {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var name string
	var size int
	err = db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size)
	return size, err
}

// metricValue is the value of an unlabelled series in a /metrics page, ""
// if absent.
func metricValue(page, name string) string {
	for line := range strings.SplitSeq(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestReplicatedMariaDBSemiSync: on semi-synchronous replication (AFTER_SYNC)
// every committed reserve is on the replica's relay log before the reserve
// returns, so a failover loses none; the fence its new server_id starts
// costs only its gap. Three servers, the primary killed under load: no ID
// repeats.
func TestReplicatedMariaDBSemiSync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated MariaDB")
	}
	t.Parallel()
	load, metrics := mariadbFailover(t, testutil.SemiSync, false)
	dups, total := load.duplicates()
	t.Logf("%d IDs, %d repeated; %d requests failed %q; fences %s, gap %s", total, dups, load.failed, load.failures,
		metricValue(metrics, "leaf_segment_store_fences_total"), metricValue(metrics, "leaf_segment_store_fence_gap_ids"))
	if dups > 0 {
		t.Fatalf("%d of %d IDs issued twice across the failover", dups, total)
	}
}

// TestReplicatedMariaDBAsync: asynchronous replication, the replica's
// replication stopped for 3s before the primary is killed, so the reserves
// of those seconds are certainly lost. Without the fence the servers hand
// out their ranges again (the test sees the duplicates: it can see them);
// with it, none repeats and the gap is reported.
func TestReplicatedMariaDBAsync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated MariaDB")
	}
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fence bool
	}{{"without the fence", false}, {"with the fence", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			load, metrics := mariadbFailover(t, testutil.Async, true, fmt.Sprintf("LEAF_SEGMENT_FAILOVER_FENCE=%v", tc.fence))
			dups, total := load.duplicates()
			fences, gap := metricValue(metrics, "leaf_segment_store_fences_total"), metricValue(metrics, "leaf_segment_store_fence_gap_ids")
			t.Logf("%d IDs, %d repeated; %d requests failed %q; fences %s, gap %s", total, dups, load.failed, load.failures, fences, gap)
			switch {
			case !tc.fence && dups == 0:
				t.Fatalf("no duplicate without the fence among %d IDs: the test did not lose the reserves it meant to", total)
			case tc.fence && dups > 0:
				t.Fatalf("%d of %d IDs issued twice across the failover, with the fence", dups, total)
			case tc.fence && (fences == "" || fences == "0" || gap == "" || gap == "0"):
				t.Errorf("with the fence: fences %q, gap %q; want the fence and its gap reported", fences, gap)
			}
		})
	}
}

// TestDBFence: leaf db fence raises every tag by the margin and moves the
// fence's epoch; a store that cannot be fenced is a usage error.
func TestDBFence(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	env := append(testutil.CleanEnv(), "LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN="+dsn, "LEAF_SEGMENT_FAILOVER_WINDOW=1s")
	if r := runCLI(t, env, "tags", "create", "a", "--step", "10"); r.code != 0 {
		t.Fatalf("tags create: %d %s", r.code, r.stderr)
	}
	r := runCLI(t, env, "db", "fence", "--margin-steps", "5")
	if r.code != 0 || !strings.Contains(r.stdout, "epoch 2") || !strings.Contains(r.stdout, "raised by 5 steps (50 IDs in all)") {
		t.Fatalf("db fence: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	got := runCLI(t, env, "tags", "list")
	if got.code != 0 || !strings.Contains(got.stdout, "51") {
		t.Errorf("tags list after the fence: %q, want a's max_id raised from 1 to 51", got.stdout)
	}
	if r := runCLI(t, append(testutil.CleanEnv(), "LEAF_DATA_DIR="+t.TempDir()), "db", "fence"); r.code != 2 || !strings.Contains(r.stderr, "SQLite has no replica") {
		t.Errorf("db fence on SQLite: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
}

// TestReplicatedGalera: three leaf servers, each on its own node of a
// three-node Galera cluster (through a proxy, as through the load balancer
// a Galera client uses), hammer one tag: concurrent reserves through two
// nodes fail Galera's certification (MySQL error 1213) and are run again,
// counted in leaf_segment_store_retries_total, never surfaced. A node is
// killed and restarted under load (its server's proxy moving to a live node
// meanwhile, as a health check would): no request fails, no ID repeats, and
// no fence is needed (the cluster's identity is the same on every node).
func TestReplicatedGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Galera cluster")
	}
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	g := testutil.NewGalera(t, 3)
	g.CreateDatabase(t, "leaf")
	proxies := make([]*testutil.Proxy, g.Size())
	dsns := make([]string, g.Size())
	for i := range proxies {
		proxies[i] = testutil.NewProxy(t, g.Node(i).Addr)
		dsns[i] = strings.Replace(g.Node(i).DSN("leaf"), g.Node(i).Addr, proxies[i].Addr(), 1)
	}
	// The adaptive step as in production: the tag's step of 10 makes the
	// first reserves frequent (certification conflicts), and the step then
	// doubles until the buffers ride out the cluster's pause while it
	// evicts a dead node (Galera's evs.suspect_timeout).
	servers := segServers(t, bin, "mysql", dsns, "LEAF_SEGMENT_MAX_STEP=1000000")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var load segLoad
	load.hammer(ctx, t, "hot", 2, &wg, servers...)
	// The step grows until every server's buffers last out the cluster's
	// pause while it evicts the node killed below, at the rate the server
	// issues: the pause's worth of IDs twice over.
	testutil.WaitForState(t, "every server's buffers to outlast the eviction pause", func() (bool, string) {
		left := make([]string, len(servers))
		ok := true
		for i, s := range servers {
			st := segTagStatus(t, s, "hot")
			left[i] = fmt.Sprintf("step %d, %.0f IDs/s, %.1fs left", st.Step, st.Rate, st.SecondsLeft)
			ok = ok && st.Rate > 0 && float64(st.Step)/st.Rate >= 2*galeraEvictionPause.Seconds()
		}
		return ok, strings.Join(left, "; ")
	})
	g.Node(2).Kill9()
	proxies[2].Switch(g.Node(0).Addr)
	// The cluster evicts the dead node: the survivors are a cluster of two.
	testutil.WaitForState(t, "the cluster to evict the killed node", func() (bool, string) {
		size, err := wsrepClusterSize(t, g.Node(0))
		return err == nil && size == g.Size()-1, fmt.Sprintf("wsrep_cluster_size %d, %v", size, err)
	})
	if err := g.Node(2).Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitSynced(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	proxies[2].Switch(g.Node(2).Addr)
	load.waitEach(t, "every server to issue with the node back, server 2 through it", load.drawn(), phaseIDs)
	cancel()
	wg.Wait()

	var retries, fences int
	for _, s := range servers {
		_, page := testutil.Get(t, s.URL("/metrics"))
		var r, f int
		fmt.Sscan(metricValue(page, "leaf_segment_store_retries_total"), &r)
		fmt.Sscan(metricValue(page, "leaf_segment_store_fences_total"), &f)
		retries, fences = retries+r, fences+f
	}
	dups, total := load.duplicates()
	t.Logf("%d IDs, %d repeated; %d requests failed %q; %d reserves retried, %d fences", total, dups, load.failed, load.failures, retries, fences)
	switch {
	case dups > 0:
		t.Fatalf("%d of %d IDs issued twice", dups, total)
	case load.failed > 0:
		t.Errorf("%d requests failed", load.failed)
	case retries == 0:
		t.Errorf("no reserve was retried: the test met no certification conflict")
	case fences > 0:
		t.Errorf("%d fences on Galera, whose identity is the cluster's", fences)
	}
}
