package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/snowflake"
)

// answers collects what a server answered to snowflake batches: the IDs,
// when the last one came, and every refusal.
type answers struct {
	mu       sync.Mutex
	ids      []int64
	lastOK   time.Time
	refusals []string // "status body", first few
	refused  int
	lastBad  time.Time
	// firstRefusal is closed at the first refusal (made by draw).
	firstRefusal chan struct{}
}

// refusedPause is how long a drawing goroutine pauses after a refusal, so
// that a server refusing for seconds is not asked thousands of times.
const refusedPause = 20 * time.Millisecond

// draw asks s for batches of count snowflake IDs from two goroutines until
// ctx ends, each pausing between requests (bounding the IDs kept), longer
// after a refusal. The pauses are the load's pace, not a wait for
// anything: a timer the end of ctx cuts short.
func (a *answers) draw(ctx context.Context, t *testing.T, s *testutil.LeafServer, wg *sync.WaitGroup, count int, pause time.Duration) {
	client := &http.Client{Timeout: 5 * time.Second}
	a.mu.Lock()
	if a.firstRefusal == nil {
		a.firstRefusal = make(chan struct{})
	}
	a.mu.Unlock()
	for range 2 {
		wg.Go(func() {
			next := time.NewTimer(pause)
			defer next.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-next.C:
				}
				resp, err := client.Get(s.URL(fmt.Sprintf("/api/snowflake/get/x?count=%d", count)))
				if err != nil {
					if ctx.Err() == nil {
						select {
						case <-s.Exited:
							return
						default:
						}
						t.Errorf("GET: %v", err)
					}
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				a.mu.Lock()
				if resp.StatusCode == http.StatusOK {
					a.ids = append(a.ids, testutil.ParseIDs(t, string(body))...)
					a.lastOK = time.Now()
				} else {
					a.refused++
					a.lastBad = time.Now()
					if a.refused == 1 {
						close(a.firstRefusal)
					}
					if len(a.refusals) < 3 {
						a.refusals = append(a.refusals, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body))))
					}
				}
				a.mu.Unlock()
				if resp.StatusCode == http.StatusOK {
					next.Reset(pause)
				} else {
					next.Reset(refusedPause)
				}
			}
		})
	}
}

// tally is what answers has seen so far: the IDs drawn, the requests
// refused, and when the last of each came.
type tally struct {
	issued, refused int
	lastOK, lastBad time.Time
}

func (a *answers) tally() tally {
	a.mu.Lock()
	defer a.mu.Unlock()
	return tally{issued: len(a.ids), refused: a.refused, lastOK: a.lastOK, lastBad: a.lastBad}
}

// TestClaimCutOff is the operator's bad day of issue 25, on every registry
// that leases: server A reaches its registry through a proxy; server B is
// given A's endpoint (or, on ordinal, A's pod name) and, refused, is started
// again a second after each exit, as systemd would; A is cut off from its
// registry for longer than its lease while both are drawn from. No ID may
// be issued twice. A stops issuing at its lease and answers 503 with a
// message saying so; when it reaches the registry again it issues again if
// its claim is still its own (or, on the pooled registries, under a new one),
// and stops for good if B took it over meanwhile.
func TestClaimCutOff(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	const lease = 4 * time.Second
	for _, tc := range []struct {
		registry string
		// backend is the registry's address; flag the argument naming it.
		backend func(t *testing.T, name string) string
		flag    string
		env     []string
		// takenOver: B takes A's very claim once A's lease has run out (the
		// worker ID belongs to the endpoint or the pod), so A stops for
		// good; otherwise B leases another ID and A resumes.
		takenOver bool
		// holders, where B leases another ID, counts the claims the
		// registry holds for the cluster, A's and B's: A's lapses while it
		// is cut off.
		holders func(t *testing.T, addr, name string) func() int
	}{
		{"zookeeper", zkBackend, "--zk", nil, true, nil},
		{"zookeeper-recycle", zkBackend, "--zk", nil, false, zkRecycleHolders},
		{"etcd", etcdBackend, "--etcd", nil, false, etcdHolders},
		{"mysql", mysqlBackend, "--snowflake-dsn", nil, true, nil},
		{"ordinal", etcdBackend, "--etcd", []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=etcd", "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-3"}, true, nil},
		{"ordinal", mysqlBackend, "--snowflake-dsn", []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=mysql", "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-3"}, true, nil},
	} {
		name := tc.registry
		if len(tc.env) > 0 {
			name += "-" + strings.TrimPrefix(tc.env[0], "LEAF_SNOWFLAKE_ORDINAL_CLAIM=")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cluster := testutil.UniqueName()
			backend := tc.backend(t, cluster)
			proxy := testutil.NewProxy(t, proxyTarget(backend))
			env := append(append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false", "LEAF_SNOWFLAKE_LEASE_TTL="+lease.String()), tc.env...)
			common := []string{"--listen", "127.0.0.1:0", "--snowflake-registry", tc.registry, "--name", cluster,
				"--snowflake-endpoint", "10.7.7.7:8080"}
			argsA := append(slices.Clone(common), tc.flag, viaProxy(backend, proxy.Addr()))
			argsB := append(slices.Clone(common), tc.flag, backend)

			a, refused := testutil.TryStartLeaf(t, bin, t.TempDir(), env, argsA...)
			if refused {
				t.Fatalf("A refused to start (exit %d):\n%s", a.ExitCode(), a.Log.String())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			var fromA, fromB answers
			fromA.draw(ctx, t, a, &wg, 200, time.Millisecond)

			// B, restarted a second after each refusal, until the end.
			var bStarts, bRefusals int
			var bLast string
			bServing := make(chan time.Time, 1)
			dirB := t.TempDir()
			wg.Go(func() {
				for ctx.Err() == nil {
					b, refused := testutil.TryStartLeaf(t, bin, dirB, env, argsB...)
					bStarts++
					if !refused {
						bServing <- time.Now()
						fromB.draw(ctx, t, b, &wg, 200, time.Millisecond)
						return
					}
					bRefusals++
					bLast = lastLine(b.Log.String())
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			})

			// Where B takes another ID from the pool, it serves beside A
			// before the cut: wait for it (a busy machine may take long to
			// start it).
			var bAt time.Time
			if !tc.takenOver {
				select {
				case bAt = <-bServing:
				case <-time.After(time.Minute):
					t.Fatalf("B did not start beside A within a minute: its last refusal: %s", bLast)
				}
			}
			// Both issue before the cut: a hundred batches each.
			testutil.WaitFor(t, "A, and B where it serves beside A, to issue 100 batches before the cut", func() bool {
				return fromA.tally().issued >= 100*200 && (tc.takenOver || fromB.tally().issued >= 100*200)
			})
			var holders func() int
			if tc.holders != nil {
				holders = tc.holders(t, backend, cluster)
				if n := holders(); n != 2 {
					t.Fatalf("the registry holds %d claims before the cut, want A's and B's", n)
				}
			}
			proxy.Down()
			cut := time.Now()
			// A stays cut off until its lease has run out (it refuses) and
			// its claim has lapsed in the registry: B took it over, or, where
			// B leases another ID, the registry holds B's claim alone. Both
			// come only after the lease, whose length is the registry's to
			// time; the test waits for them rather than for a guess at it.
			testutil.WaitForState(t, "A to refuse, cut off past its lease, and its claim to lapse in the registry", func() (bool, string) {
				aRefused := fromA.tally().refused > 0
				if tc.takenOver {
					if bAt.IsZero() {
						select {
						case bAt = <-bServing:
						default:
						}
					}
					if bAt.IsZero() && time.Since(cut) > 5*lease {
						t.Fatalf("B did not serve within %v of the cut (5 leases)", 5*lease)
					}
					return aRefused && !bAt.IsZero(), fmt.Sprintf("A refused: %v; B serving: %v", aRefused, !bAt.IsZero())
				}
				n := holders()
				return aRefused && n == 1, fmt.Sprintf("A refused: %v; claims in the registry: %d, want B's alone", aRefused, n)
			})
			proxy.Up()
			back := time.Now()
			if tc.takenOver {
				// A reconnects and learns that B holds its claim: its /readyz
				// and its log say so, and it refuses from then on. The bounds
				// (here and below) are those the phases' lengths set before
				// they ended on these events.
				var learnt time.Time
				testutil.WaitForState(t, "A to learn, reconnected, that B holds its claim, and refuse after that", func() (bool, string) {
					_, ready := testutil.Get(t, a.URL("/readyz"))
					log := a.Log.String()
					if learnt.IsZero() && strings.Contains(ready, "lost") &&
						(strings.Contains(log, "held by another") || strings.Contains(log, "in use by another")) {
						learnt = time.Now()
					}
					if learnt.IsZero() && time.Since(back) > 2*lease {
						t.Fatalf("A did not learn within %v (2 leases) of reconnecting that B holds its claim: /readyz %q, log: %s",
							2*lease, ready, lastLine(log))
					}
					return !learnt.IsZero() && fromA.tally().lastBad.After(learnt), fmt.Sprintf("/readyz %q; log: %s", ready, lastLine(log))
				})
			} else {
				// A reconnects, renews or leases anew, and issues again.
				testutil.WaitForState(t, "A to issue again after reconnecting", func() (bool, string) {
					_, ready := testutil.Get(t, a.URL("/readyz"))
					if !fromA.tally().lastOK.After(back) && time.Since(back) > 2*lease {
						t.Fatalf("A did not issue again within %v (2 leases) of reconnecting; /readyz %q", 2*lease, ready)
					}
					return fromA.tally().lastOK.After(back), fmt.Sprintf("/readyz %q", ready)
				})
			}
			cancel()
			wg.Wait()

			t.Logf("A: %d IDs, %d refusals %q; B: %d starts (%d refused, last: %s), serving since %v, %d IDs",
				len(fromA.ids), fromA.refused, fromA.refusals, bStarts, bRefusals, bLast, bAt.Sub(cut).Round(100*time.Millisecond), len(fromB.ids))

			// Uniqueness above all.
			all := append(slices.Clone(fromA.ids), fromB.ids...)
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("ID %d issued twice (%d IDs from A, %d from B)", all[i], len(fromA.ids), len(fromB.ids))
				}
			}
			// A stopped at its lease and said so.
			if fromA.refused == 0 {
				t.Fatalf("A never refused while cut off from its registry for %v (lease %v)", back.Sub(cut).Round(100*time.Millisecond), lease)
			}
			if r := strings.Join(fromA.refusals, "\n"); !strings.Contains(r, "503") || !strings.Contains(r, "lease") {
				t.Errorf("A's refusals %q, want 503 saying the lease ran out", fromA.refusals)
			}
			var lastAWhileCut time.Time
			for _, id := range fromA.ids {
				p, _ := snowflake.LeafLayout.Decode(id)
				if at := time.UnixMilli(p.Timestamp); at.Before(back) && at.After(lastAWhileCut) {
					lastAWhileCut = at
				}
			}
			if lastAWhileCut.After(cut.Add(lease + time.Second)) {
				t.Errorf("A issued an ID stamped %v after the cut, past its lease of %v", lastAWhileCut.Sub(cut), lease)
			}
			_, ready := testutil.Get(t, a.URL("/readyz"))
			t.Logf("A's /readyz at the end: %q", ready)
			if tc.takenOver {
				// B took the claim once A's lease had run out, never before.
				if bAt.IsZero() {
					t.Fatalf("B never served: its last refusal: %s", bLast)
				}
				if bAt.Before(cut.Add(lease)) {
					t.Errorf("B served %v after the cut, before A's lease of %v could have run out", bAt.Sub(cut), lease)
				}
				if fromA.lastOK.After(back) {
					t.Errorf("A issued again after reconnecting, though B holds its claim")
				}
				if !strings.Contains(ready, "lost") {
					t.Errorf("A's /readyz after B took its claim: %q, want it to say the worker ID is lost", ready)
				}
				if log := a.Log.String(); !strings.Contains(log, "held by another") && !strings.Contains(log, "in use by another") {
					t.Errorf("A's log does not say who holds its claim now:\n%s", lastLine(log))
				}
			} else {
				if !fromA.lastOK.After(back) {
					t.Errorf("A did not issue again after reconnecting (last ID %v after reconnecting); /readyz %q",
						fromA.lastOK.Sub(back).Round(time.Millisecond), ready)
				}
			}
		})
	}
}

// The registries' addresses for TestClaimCutOff: a fresh namespace each.
func zkBackend(t *testing.T, name string) string {
	addr := testutil.ZooKeeper(t)
	t.Cleanup(func() { removeZKTree(t, addr, name) })
	return addr
}

func etcdBackend(t *testing.T, name string) string {
	addr := testutil.Etcd(t)
	t.Cleanup(func() { removeEtcdTree(t, addr, etcd.DefaultPrefix+name+"/") })
	return addr
}

func mysqlBackend(t *testing.T, _ string) string { return testutil.MySQL(t) }

// zkRecycleHolders counts the live holders in the recycle pool of cluster
// name on the ZooKeeper at addr: its inuse nodes, each ephemeral, gone with
// its holder's session. -1 when ZooKeeper does not answer.
func zkRecycleHolders(t *testing.T, addr, name string) func() int {
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatalf("connect to ZooKeeper %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	return func() int {
		kids, _, err := conn.Children("/snowflake/" + name + "/recycle/inuse")
		if err != nil {
			return -1
		}
		return len(kids)
	}
}

// etcdHolders counts the worker keys of cluster name on the etcd at addr,
// each on its holder's lease, gone when the lease expires. -1 when etcd
// does not answer.
func etcdHolders(t *testing.T, addr, name string) func() int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client for %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return func() int {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, etcd.DefaultPrefix+name+"/worker/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return -1
		}
		return int(resp.Count)
	}
}

// proxyTarget is the host:port a backend address names: a DSN's tcp(...)
// part, or the address itself.
func proxyTarget(backend string) string {
	if _, rest, ok := strings.Cut(backend, "tcp("); ok {
		addr, _, _ := strings.Cut(rest, ")")
		return addr
	}
	return backend
}

// viaProxy is backend with its host:port replaced by the proxy's.
func viaProxy(backend, proxy string) string {
	return strings.Replace(backend, proxyTarget(backend), proxy, 1)
}

// registryOutage is how long TestRegistryRestart stops each registry.
const registryOutage = 30 * time.Second

// TestRegistryRestart: the registry is stopped for 30s and started again
// while a server draws snowflake IDs from it as fast as it can: with the
// default lease (a minute) not one request fails, and no ID repeats. The
// registries are the test's own (a ZooKeeper, an etcd, a MariaDB holding
// leaf_workerid_alloc), killed with SIGKILL and restarted on their data.
func TestRegistryRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("stops registries for 30s each")
	}
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	for _, tc := range []struct {
		registry string
		start    func(t *testing.T) (srv *testutil.Server, flag, addr string)
	}{
		{"zookeeper", func(t *testing.T) (*testutil.Server, string, string) {
			s := testutil.NewZooKeeper(t)
			return s, "--zk", s.Addr
		}},
		{"zookeeper-recycle", func(t *testing.T) (*testutil.Server, string, string) {
			s := testutil.NewZooKeeper(t)
			return s, "--zk", s.Addr
		}},
		{"etcd", func(t *testing.T) (*testutil.Server, string, string) {
			s := testutil.NewEtcd(t)
			return s, "--etcd", s.Addr
		}},
		{"mysql", func(t *testing.T) (*testutil.Server, string, string) {
			m := testutil.NewMariaDB(t)
			return m.Server, "--snowflake-dsn", m.CreateDatabase(t, "leaf")
		}},
	} {
		t.Run(tc.registry, func(t *testing.T) {
			t.Parallel()
			srv, flag, addr := tc.start(t)
			env := append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false") // the default lease
			s, refused := testutil.TryStartLeaf(t, bin, t.TempDir(), env, "--listen", "127.0.0.1:0",
				"--snowflake-registry", tc.registry, "--name", "restart", flag, addr)
			if refused {
				t.Fatalf("serve refused to start (exit %d):\n%s", s.ExitCode(), s.Log.String())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			var got answers
			got.draw(ctx, t, s, &wg, 10, time.Millisecond)

			// The load under way: a hundred batches.
			testutil.WaitFor(t, "100 batches before the registry stops", func() bool { return got.tally().issued >= 100*10 })
			failing := strings.Count(s.Log.String(), "snowflake heartbeat failing")
			srv.Kill9()
			down := time.Now()
			// The server notices: its heartbeat fails.
			testutil.WaitFor(t, "the server to log its heartbeat failing", func() bool {
				return strings.Count(s.Log.String(), "snowflake heartbeat failing") > failing
			})
			// The registry stays down 30s, half the lease: how long a server
			// rides out an outage is what is tested, so this is a span of
			// time, not a wait for an event. The load goes on meanwhile; a
			// refusal or the server's exit fails the test at once.
			select {
			case <-time.After(time.Until(down.Add(registryOutage))):
			case <-got.firstRefusal:
				got.mu.Lock()
				at, refusals := got.lastBad.Sub(down), slices.Clone(got.refusals)
				got.mu.Unlock()
				t.Fatalf("refused %v into the outage: %q; the server's log ends:\n%s",
					at.Round(100*time.Millisecond), refusals, lastLines(s.Log.String(), 15))
			case <-s.Exited:
				t.Fatalf("the server exited %v into the outage: %v; its log ends:\n%s",
					time.Since(down).Round(100*time.Millisecond), s.Err, lastLines(s.Log.String(), 15))
			}
			if err := srv.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s down for %v", tc.registry, time.Since(down).Round(100*time.Millisecond))
			// The server reconnects and renews.
			testutil.WaitForState(t, "the heartbeat to recover after the restart (/readyz ok)", func() (bool, string) {
				_, body := testutil.Get(t, s.URL("/readyz"))
				return strings.TrimSpace(body) == "ok", fmt.Sprintf("/readyz %q; the server's log ends:\n%s", body, lastLines(s.Log.String(), 15))
			})
			// And issues on: a hundred batches more.
			recovered := got.tally().issued
			testutil.WaitFor(t, "100 batches after the recovery", func() bool { return got.tally().issued >= recovered+100*10 })
			cancel()
			wg.Wait()

			if got.refused > 0 {
				t.Errorf("%d requests refused while the registry restarted: %q; the server's log ends:\n%s", got.refused, got.refusals, lastLines(s.Log.String(), 15))
			}
			ids := slices.Clone(got.ids)
			slices.Sort(ids)
			for i := 1; i < len(ids); i++ {
				if ids[i] == ids[i-1] {
					t.Fatalf("ID %d issued twice", ids[i])
				}
			}
			t.Logf("%d IDs, none refused, none repeated", len(ids))
		})
	}
}

// TestRestartAfterKill: a server killed with SIGKILL (its claim neither
// released nor lapsed: the default lease, a minute) and started again at
// once on its data directory serves again within seconds, as it did when
// the claims were a few seconds long: it proves with its instance identity
// that the claim is its own and takes it back (on the registries that key
// the ID by endpoint or pod), or takes another ID from the pool. No ID is
// repeated, and the IDs go on increasing.
func TestRestartAfterKill(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	for _, tc := range []struct {
		name, registry string
		backend        func(t *testing.T, name string) string
		flag           string
		env            []string
		sameID         bool // the claim taken back: the ID of the endpoint, the pod, or our own lease in the pool
	}{
		{"zookeeper", "zookeeper", zkBackend, "--zk", nil, true},
		// The pool hands our own lease back first.
		{"zookeeper-recycle", "zookeeper-recycle", zkBackend, "--zk", nil, true},
		{"etcd", "etcd", etcdBackend, "--etcd", nil, false},
		{"mysql", "mysql", mysqlBackend, "--snowflake-dsn", nil, true},
		{"ordinal-etcd", "ordinal", etcdBackend, "--etcd", []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=etcd", "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-3"}, true},
		{"ordinal-mysql", "ordinal", mysqlBackend, "--snowflake-dsn", []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=mysql", "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-3"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cluster := testutil.UniqueName()
			env := append(append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false"), tc.env...)
			args := []string{"--listen", "127.0.0.1:0", "--snowflake-registry", tc.registry, "--name", cluster,
				"--snowflake-endpoint", "10.7.7.7:8080", tc.flag, tc.backend(t, cluster)}
			dir := t.TempDir()
			a, refused := testutil.TryStartLeaf(t, bin, dir, env, args...)
			if refused {
				t.Fatalf("serve refused to start (exit %d):\n%s", a.ExitCode(), a.Log.String())
			}
			before := drawSnowflake(t, 500*time.Millisecond, a)[0]
			if err := a.Cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-a.Exited
			began := time.Now()
			a2, refused := testutil.TryStartLeaf(t, bin, dir, env, args...)
			if refused {
				t.Fatalf("restart after kill -9 refused (exit %d):\n%s", a2.ExitCode(), a2.Log.String())
			}
			took := time.Since(began)
			after := drawSnowflake(t, 500*time.Millisecond, a2)[0]
			t.Logf("restart after kill -9 served after %v", took.Round(100*time.Millisecond))
			// A claim of the previous run was waited out for up to 10s
			// before the claims were leases of a minute: no longer.
			if took > 10*time.Second {
				t.Errorf("the restart took %v to serve, with the previous run's claim still leased", took)
			}
			w1, w2 := onlyWorker(t, "first run", before), onlyWorker(t, "restart", after)
			if tc.sameID && w2 != w1 {
				t.Errorf("the restart issues under worker %d, want its own %d back", w2, w1)
			}
			if !tc.sameID && w2 == w1 {
				t.Errorf("the restart took back worker %d from the pool, still leased by its previous run", w1)
			}
			if after[0] <= slices.Max(before) {
				t.Errorf("the restart's first ID %d is not above the previous run's last %d", after[0], slices.Max(before))
			}
			all := append(slices.Clone(before), after...)
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("ID %d issued twice", all[i])
				}
			}
		})
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
