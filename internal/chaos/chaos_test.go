package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
)

// Environment variables read by the test.
const (
	envChaos     = "LEAF_CHAOS"          // "1" runs the test
	envDuration  = "LEAF_CHAOS_DURATION" // load per registry, a Go duration; default 60s
	envArtifacts = "LEAF_TEST_ARTIFACTS" // where the summaries go; default /tmp/leaf-test-artifacts
)

const (
	defaultDuration = 60 * time.Second
	// minDuration leaves room for the schedule: three big faults, each
	// with its quiet time and a restart or two between them.
	minDuration = 40 * time.Second
	leafServers = 3
)

func TestChaos(t *testing.T) {
	if os.Getenv(envChaos) != "1" {
		t.Skip("the chaos test kills processes and runs ~2 minutes per registry; run it with " + envChaos + "=1")
	}
	if testing.Short() {
		t.Skip("the chaos test is long; not run with -short")
	}
	duration := defaultDuration
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minDuration {
			t.Fatalf("%s=%q: want a Go duration of at least %v", envDuration, v, minDuration)
		}
		duration = d
	}
	bin := testutil.BuildLeaf(t, "chaos")
	// The etcd run spreads the segment store over two databases: its
	// tags are multi-database tags, and the database outage kills one of
	// the two. The zookeeper run keeps the store of one database, whose
	// buffers alone must carry the outage.
	for _, c := range []struct {
		registry  string
		databases int
	}{{"zookeeper", 1}, {"etcd", 2}} {
		t.Run(c.registry, func(t *testing.T) { runChaos(t, bin, c.registry, c.databases, duration) })
	}
}

// run is one chaos run: its services, servers, schedule and what happened.
type run struct {
	t        *testing.T
	registry string
	duration time.Duration
	t0       time.Time
	db       *service   // the database the outage kills: dbs[0]
	dbs      []*service // every database of the segment store
	// databases is how many databases the segment store spans: with more
	// than one, a server's IDs of a tag increase within each answer only,
	// ranges from different databases interleaving.
	databases int
	reg       *service
	servers   []*leafServer
	rng       *rand.Rand // the scheduler's; only its goroutine uses it
	// ordered: the run has the ordered tag and its worker. Only a store of
	// one database keeps ordered tags.
	ordered bool

	mu          sync.Mutex
	faults      []fault
	dbDown      span // from the kill until the servers' first retry after mariadbd answered again
	regDown     span // from the kill until the registry answered again
	clockServer int
	clockSpan   span
}

// now is the time since the run began; every record and fault uses it.
func (r *run) now() time.Duration { return time.Since(r.t0) }

func (r *run) logf(format string, args ...any) {
	r.t.Logf("%6.1fs  %s", r.now().Seconds(), fmt.Sprintf(format, args...))
}

func runChaos(t *testing.T, bin, registry string, databases int, duration time.Duration) {
	ctx := t.Context()
	seed := rand.Uint64()
	r := &run{t: t, registry: registry, duration: duration, t0: time.Now(), clockServer: -1,
		rng: rand.New(rand.NewPCG(seed, 1)), databases: databases, ordered: databases == 1}
	t.Logf("registry %s, segment store over %d database(s), %v of load, seed %d", registry, databases, duration, seed)

	var dsns []string
	for i := range databases {
		name := "mariadb"
		if i > 0 {
			name = fmt.Sprintf("mariadb-%d", i)
		}
		db, dsn := startMariaDB(ctx, t, name)
		r.dbs, dsns = append(r.dbs, db), append(dsns, dsn)
	}
	r.db = r.dbs[0]
	dsnArgs := []string{"--segment-store", "mysql"}
	for _, d := range dsns {
		dsnArgs = append(dsnArgs, "--segment-dsn", d)
	}
	var registryArgs []string
	if registry == "zookeeper" {
		r.reg = startZooKeeper(ctx, t)
		registryArgs = []string{"--snowflake-registry", "zookeeper", "--zk", r.reg.addr}
	} else {
		r.reg = startEtcd(ctx, t)
		registryArgs = []string{"--snowflake-registry", "etcd", "--etcd", r.reg.addr}
	}
	for _, db := range r.dbs {
		r.logf("mariadbd on %s", db.addr)
	}
	r.logf("%s on %s", registry, r.reg.addr)
	if databases > 1 {
		// The operator's step before the first server starts.
		if err := runLeaf(ctx, bin, append([]string{"db", "init"}, dsnArgs...)...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range r.tags() {
		args := []string{"tags", "create", tag.name, "--step", strconv.Itoa(tag.step)}
		if tag.ordered {
			args = append(args, "--ordered")
		}
		if err := runLeaf(ctx, bin, append(args, dsnArgs...)...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range leafServers {
		r.servers = append(r.servers, newLeafServer(t, i, bin, registryArgs, dsnArgs, r.ordered))
	}
	t.Cleanup(func() { r.keepLogs(t) })
	for _, s := range r.servers {
		if err := s.launch(ctx, r.now); err != nil {
			t.Fatal(err)
		}
	}
	r.logf("servers up on %s, %s, %s", r.servers[0].addr, r.servers[1].addr, r.servers[2].addr)

	// The load runs until the schedule is over and the duration has passed,
	// so every fault happens under load.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadStart := r.now()
	var workers []*worker
	var wg sync.WaitGroup
	for i, spec := range workerSpecs {
		if spec.mode == orderedMode && !r.ordered {
			continue
		}
		w := newWorker(spec, seed+uint64(i)+1, len(r.servers))
		workers = append(workers, w)
		wg.Go(func() { w.run(loadCtx, r) })
	}
	r.chaos(ctx, loadStart)
	sleep(ctx, loadStart+duration-r.now())
	stopLoad()
	wg.Wait()
	loadTime := r.now() - loadStart
	r.logf("load stopped after %.1fs", loadTime.Seconds())

	for _, s := range r.servers {
		if err := s.healthz(ctx); err != nil {
			t.Errorf("%s does not serve at the end of the run: %v", s.name, err)
		}
	}
	res := r.check(workers)
	summary := r.summary(res, loadTime)
	t.Log("\n" + summary)
	if err := writeArtifact("chaos-"+registry+".txt", []byte(summary)); err != nil {
		t.Errorf("save the summary: %v", err)
	}
	for _, p := range res.problems {
		t.Error(p)
	}
}

// tags are the tags of this run: the ordered one only with one database.
func (r *run) tags() []tagSpec {
	var ts []tagSpec
	for _, t := range tags {
		if !t.ordered || r.ordered {
			ts = append(ts, t)
		}
	}
	return ts
}

// artifactsDir is where summaries and logs are kept after the run.
func artifactsDir() string {
	if d := os.Getenv(envArtifacts); d != "" {
		return d
	}
	return "/tmp/leaf-test-artifacts"
}

func writeArtifact(name string, data []byte) error {
	dir := artifactsDir()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}

// keepLogs copies every process's log next to the summary and, when the run
// failed, prints their tails.
func (r *run) keepLogs(t *testing.T) {
	procs := []*proc{}
	for _, db := range r.dbs {
		procs = append(procs, db.proc)
	}
	if r.reg != nil {
		procs = append(procs, r.reg.proc)
	}
	for _, s := range r.servers {
		procs = append(procs, s.proc)
	}
	for _, p := range procs {
		if b, err := os.ReadFile(p.logPath); err == nil {
			if err := writeArtifact(filepath.Join("chaos-"+r.registry+"-logs", p.name+".log"), b); err != nil {
				t.Logf("keep %s's log: %v", p.name, err)
			}
		}
		if t.Failed() {
			lines := 15 // the services'; the servers' matter more
			if strings.HasPrefix(p.name, "leaf-") {
				lines = 40
			}
			t.Logf("tail of %s's log (%s):\n%s", p.name, p.logPath, indent(p.logTail(lines)))
		}
	}
	t.Logf("logs kept in %s", filepath.Join(artifactsDir(), "chaos-"+r.registry+"-logs"))
}
