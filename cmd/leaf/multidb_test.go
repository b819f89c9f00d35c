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
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
)

// The multi-database tests run the real binary on MariaDB instances of
// their own (testutil.NewMariaDB), which they kill, stop and restart.

// multiWait is the servers' segment.wait_timeout in these tests: the
// budget a request may wait for a range. The store gives each database a
// third of it (memberTimeout), so a hanging database costs one try.
const multiWait = 3 * time.Second

// multiEnv is the environment of a leaf process on the databases dsns:
// segment mode only, on loopback.
func multiEnv(dsns ...string) []string {
	return append(testutil.CleanEnv(),
		"LEAF_SEGMENT_STORE=mysql",
		"LEAF_SEGMENT_DSN="+config.JoinDSNs(dsns),
		"LEAF_SEGMENT_WAIT_TIMEOUT="+multiWait.String(),
		"LEAF_SNOWFLAKE_ENABLED=false",
		"LEAF_LOG_LEVEL=info")
}

// mariaDBs starts n private instances, each with an empty database leaf,
// all at once.
func mariaDBs(t *testing.T, n int) ([]*testutil.MariaDB, []string) {
	t.Helper()
	dbs := make([]*testutil.MariaDB, n)
	dsns := make([]string, n)
	for i := range n {
		dbs[i] = testutil.NewMariaDB(t)
		dsns[i] = dbs[i].CreateDatabase(t, "leaf")
	}
	return dbs, dsns
}

// initDBs sets the databases up as one store, as an operator would
// before the first server starts.
func initDBs(t *testing.T, bin, dir string, dsns []string) {
	t.Helper()
	r := runBin(t, bin, dir, multiEnv(dsns...), "db", "init")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("set up %d databases as one segment store", len(dsns))) {
		t.Fatalf("leaf db init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// idLoad is concurrent clients asking servers for segment IDs, keeping
// every ID and every failure.
type idLoad struct {
	t0     time.Time
	client *http.Client

	mu       sync.Mutex
	ids      map[string][]int64 // by tag
	failures []loadFailure
	perSec   []int // IDs received in each second since t0
	requests atomic.Int64
}

// loadFailure is a request that did not return IDs: when it started, how
// long it took, and why.
type loadFailure struct {
	server   int
	start    time.Duration
	took     time.Duration
	why      string
	whenDown string // which fault was on when it started, if any
}

func newIDLoad() *idLoad {
	return &idLoad{
		t0: time.Now(),
		// Above the server's wait, so that a server keeping its promise
		// answers before the client gives up.
		client: &http.Client{Timeout: multiWait + 5*time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		ids:    map[string][]int64{},
	}
}

func (l *idLoad) since() time.Duration { return time.Since(l.t0) }

// run sends requests from clients goroutines per server, each alternating
// tags and asking for one ID or a batch, until ctx ends.
func (l *idLoad) run(ctx context.Context, servers []*testutil.LeafServer, tags []string, clients int, faults *faultLog) {
	var wg sync.WaitGroup
	for si, s := range servers {
		for c := range clients {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					tag := tags[(c+i)%len(tags)]
					count := 1
					if i%3 == 0 {
						count = 10 + (i*7)%50
					}
					l.once(ctx, si, s, tag, count, faults)
				}
			})
		}
	}
	wg.Wait()
}

func (l *idLoad) once(ctx context.Context, si int, s *testutil.LeafServer, tag string, count int, faults *faultLog) {
	start := l.since()
	l.requests.Add(1)
	req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), "GET", s.URL(fmt.Sprintf("/api/segment/get/%s?count=%d", tag, count)), nil)
	resp, err := l.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
	}
	end := l.since()
	var ids []int64
	if err == nil {
		if ids, err = parseIDLines(body); err == nil && len(ids) != count {
			err = fmt.Errorf("%d IDs, asked for %d", len(ids), count)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failures = append(l.failures, loadFailure{server: si, start: start, took: end - start, why: err.Error(), whenDown: faults.at(start)})
		return
	}
	l.ids[tag] = append(l.ids[tag], ids...)
	sec := int(end / time.Second)
	for len(l.perSec) <= sec {
		l.perSec = append(l.perSec, 0)
	}
	l.perSec[sec] += len(ids)
}

// parseIDLines reads the Leaf route's answer: one decimal ID per line.
func parseIDLines(body []byte) ([]int64, error) {
	var ids []int64
	for f := range strings.FieldsSeq(string(body)) {
		var id int64
		if _, err := fmt.Sscan(f, &id); err != nil || id < 1 {
			return nil, fmt.Errorf("%q is not an ID", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// faultLog records when each fault was on, for the report and to tell
// failures during a fault from others.
type faultLog struct {
	mu    sync.Mutex
	spans []faultSpan
}

type faultSpan struct {
	what     string
	from, to time.Duration // to is 0 while it lasts
}

func (f *faultLog) begin(what string, at time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spans = append(f.spans, faultSpan{what: what, from: at})
}

func (f *faultLog) end(what string, at time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.spans {
		if f.spans[i].what == what && f.spans[i].to == 0 {
			f.spans[i].to = at
		}
	}
}

// at names the faults on at d.
func (f *faultLog) at(d time.Duration) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var on []string
	for _, s := range f.spans {
		if s.from <= d && (s.to == 0 || d < s.to) {
			on = append(on, s.what)
		}
	}
	return strings.Join(on, ", ")
}

// TestMultiDatabaseFaults runs three servers on a store spread over two and
// over three MariaDB instances of the test's own, with concurrent clients,
// while one database is killed (kill -9) and restarted and another frozen
// (SIGSTOP) and continued, never all at once. Every ID is unique, no
// request fails while a database is alive, and IDs keep coming during each
// fault. The rates per second are logged; the ≥ 80% goal is measured by
// scripts/multidb-bench.sh, not asserted here.
func TestMultiDatabaseFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB instances and three servers")
	}
	bin := testutil.BuildLeaf(t)
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d databases", n), func(t *testing.T) { multiDatabaseFaults(t, bin, n) })
	}
}

func multiDatabaseFaults(t *testing.T, bin string, n int) {
	ctx := t.Context()
	dbs, dsns := mariaDBs(t, n)
	env := multiEnv(dsns...)
	dir := t.TempDir()
	initDBs(t, bin, dir, dsns)
	// Small steps, so that ranges run out and are reserved again all
	// through the faults.
	tags := []string{"multi.a", "multi.b"}
	for _, tag := range tags {
		if r := runBin(t, bin, dir, env, "tags", "create", tag, "--step", "500"); r.code != 0 {
			t.Fatalf("tags create %s: %+v", tag, r)
		}
	}
	var servers []*testutil.LeafServer
	for range 3 {
		servers = append(servers, testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0"))
	}
	for i, d := range dsns {
		if log := servers[0].Log.String(); !strings.Contains(log, fmt.Sprintf("msg=\"segment database\" index=%d of=%d name=%q", i, n, config.RedactDSN(d))) {
			t.Errorf("the log does not name database %d:\n%s", i, log)
		}
	}

	load := newIDLoad()
	faults := &faultLog{}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		load.run(loadCtx, servers, tags, 4, faults)
	}()

	// The schedule. With two databases the faults take turns, so that one
	// is always alive; with three they overlap, and the third carries on.
	const down = 3 * time.Second
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	kill := func(i int) {
		what := fmt.Sprintf("db%d killed", i)
		faults.begin(what, load.since())
		dbs[i].Kill9()
		pause(down)
		if err := dbs[i].Restart(ctx); err != nil {
			t.Error(err)
		}
		faults.end(what, load.since())
	}
	stop := func(i int) {
		what := fmt.Sprintf("db%d stopped", i)
		faults.begin(what, load.since())
		dbs[i].Stop()
		pause(down)
		dbs[i].Cont()
		faults.end(what, load.since())
	}
	pause(2 * time.Second) // the healthy rate first
	if n == 2 {
		kill(0)
		pause(2 * time.Second)
		stop(1)
	} else {
		// Two at a time, a third carrying on: db0 killed with db1
		// stopped, then db2 killed with db0 stopped.
		var wg sync.WaitGroup
		wg.Go(func() { kill(0) })
		pause(time.Second)
		wg.Go(func() { stop(1) })
		wg.Wait()
		pause(time.Second)
		wg.Go(func() { kill(2) })
		wg.Go(func() { stop(0) })
		wg.Wait()
	}
	pause(2 * time.Second) // and after
	stopLoad()
	<-loadDone

	// Report: the faults, the rate per second, the failures.
	var report strings.Builder
	for _, f := range faults.spans {
		fmt.Fprintf(&report, "%s from %.1fs to %.1fs\n", f.what, f.from.Seconds(), f.to.Seconds())
	}
	fmt.Fprintf(&report, "%d requests; IDs per second:", load.requests.Load())
	for i, c := range load.perSec {
		fmt.Fprintf(&report, " %d:%d", i, c)
	}
	fmt.Fprintf(&report, "\n%d failed requests\n", len(load.failures))
	for _, f := range load.failures {
		fmt.Fprintf(&report, "  server %d at %.2fs took %v (during %q): %s\n", f.server, f.start.Seconds(), f.took.Round(time.Millisecond), f.whenDown, f.why)
	}
	t.Log("\n" + report.String())

	var all []int64
	for _, tag := range tags {
		if len(load.ids[tag]) == 0 {
			t.Errorf("no IDs of %s", tag)
		}
		all = append(all, load.ids[tag]...)
	}
	// Tags share no IDs either: each is checked on its own.
	for _, tag := range tags {
		testutil.CheckUnique(t, slices.Clone(load.ids[tag]))
	}
	// A database was alive all along: the store skips a dead or hanging
	// one within a third of the wait, so no request needs to fail.
	if len(load.failures) > 0 {
		t.Errorf("%d requests failed while a database was alive (see the report)", len(load.failures))
	}
	// Issuing went on during each fault: IDs arrived in every second that
	// lies wholly within it.
	for _, f := range faults.spans {
		for sec := int(f.from/time.Second) + 1; sec+1 <= int(f.to/time.Second); sec++ {
			if sec < len(load.perSec) && load.perSec[sec] == 0 {
				t.Errorf("no ID in second %d, during %s", sec, f.what)
			}
		}
	}
	t.Logf("%d IDs in all", len(all))

	// The servers show the databases: /v2/status, /cache and /metrics.
	reserves := make([]uint64, n)
	for _, s := range servers {
		var st struct {
			Segment struct {
				Databases []httpapi.DatabaseStatus `json:"databases"`
			} `json:"segment"`
		}
		getJSON(t, s.URL("/v2/status"), &st)
		if len(st.Segment.Databases) != n {
			t.Fatalf("/v2/status shows %d databases, want %d", len(st.Segment.Databases), n)
		}
		for i, d := range st.Segment.Databases {
			if d.Index != i || d.Name != config.RedactDSN(dsns[i]) {
				t.Errorf("/v2/status database %d: %+v", i, d)
			}
			reserves[i] += d.Reserves
		}
		for _, want := range []struct{ path, text string }{
			{"/cache", "<h2>Databases</h2>"},
			{"/metrics", `leaf_segment_database_up{db="` + fmt.Sprint(n-1) + `"}`},
		} {
			if body := getText(t, s.URL(want.path)); !strings.Contains(body, want.text) {
				t.Errorf("%s lacks %q", want.path, want.text)
			}
		}
	}
	for i, r := range reserves {
		if r == 0 {
			t.Errorf("no server reserved from database %d", i)
		}
	}

	// Every server still serves.
	for i, s := range servers {
		testutil.FetchID(t, s.URL("/api/segment/get/multi.a"))
		if code := s.Stop(t); code != 0 {
			t.Errorf("server %d exited %d:\n%s", i, code, s.Log.String())
		}
	}
}

// TestMultiDatabaseRefused: a server whose list disagrees with what the
// databases record refuses to start, with a message naming the problem: the
// list in another order, a database left out, a database of another store.
func TestMultiDatabaseRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB instances")
	}
	bin := testutil.BuildLeaf(t)
	dbs, dsns := mariaDBs(t, 3)
	dir := t.TempDir()
	// Servers never set databases up: that is leaf db init's job.
	if r := runBin(t, bin, dir, multiEnv(dsns...), "serve", "--listen", "127.0.0.1:0"); r.code != exitUsage || !strings.Contains(r.stderr, "leaf db init") {
		t.Errorf("serve on databases not set up: exit %d, stderr:\n%s\nwant exit %d and a pointer to leaf db init", r.code, r.stderr, exitUsage)
	}
	initDBs(t, bin, dir, dsns)
	// Set up once, for good.
	if r := runBin(t, bin, dir, multiEnv(dsns...), "db", "init"); r.code != exitUsage || !strings.Contains(r.stderr, "already records") {
		t.Errorf("leaf db init again: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r := runBin(t, bin, dir, multiEnv(dsns...), "tags", "create", "refused.a"); r.code != 0 {
		t.Fatalf("tags create: %+v", r)
	}
	other := dbs[0].CreateDatabase(t, "other") // a fresh database: no record
	for _, tc := range []struct {
		name string
		dsns []string
		want string
	}{
		{"reversed", []string{dsns[2], dsns[1], dsns[0]}, "stripe"},
		{"two swapped", []string{dsns[1], dsns[0], dsns[2]}, "stripe"},
		{"one left out", []string{dsns[0], dsns[1]}, "stripe"},
		{"one replaced", []string{dsns[0], dsns[1], other}, "stripe"},
		{"one database alone", []string{dsns[1]}, "stripe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, bin, dir, multiEnv(tc.dsns...), "serve", "--listen", "127.0.0.1:0")
			t.Logf("exit %d: %s", r.code, lastLine(r.stderr))
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
	// Shaped tags need a store of one database.
	for _, shape := range [][]string{{"--period", "day"}, {"--format", "INV-{seq:6}"}} {
		r := runBin(t, bin, dir, multiEnv(dsns...), append([]string{"tags", "create", "refused.shaped"}, shape...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "need a segment store of one database") {
			t.Errorf("tags create %v: exit %d, stderr:\n%s", shape, r.code, r.stderr)
		}
	}
	// The right list still serves.
	s := testutil.StartLeaf(t, bin, dir, multiEnv(dsns...), "--listen", "127.0.0.1:0")
	testutil.FetchID(t, s.URL("/api/segment/get/refused.a"))
	s.Stop(t)
}

// TestMultiDatabaseMigrate is the documented procedure: a store of one
// database becomes one of two, then of three (stop every server, leaf db
// migrate, start the servers with the new list). After each step every
// new ID of a tag is above every ID it issued before, and a server still
// configured with the old list refuses to start.
func TestMultiDatabaseMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB instances")
	}
	bin := testutil.BuildLeaf(t)
	_, dsns := mariaDBs(t, 3)
	dir := t.TempDir()
	tags := []string{"mig.a", "mig.b"}
	for _, tag := range tags {
		if r := runBin(t, bin, dir, multiEnv(dsns[0]), "tags", "create", tag, "--step", "100"); r.code != 0 {
			t.Fatalf("tags create %s: %+v", tag, r)
		}
	}
	highest := map[string]int64{}
	// serveAndIssue serves on the list with two servers, takes IDs of every
	// tag from both, checks them against everything issued before, and
	// stops the servers.
	serveAndIssue := func(list []string) {
		t.Helper()
		env := multiEnv(list...)
		servers := []*testutil.LeafServer{testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0"), testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0")}
		for _, tag := range tags {
			var ids []int64
			for i := range 6 {
				s := servers[i%2]
				r := runBin(t, bin, dir, env, "get", tag, "--count", "150", "--server", s.URL(""))
				if r.code != 0 {
					t.Fatalf("leaf get %s on %d databases: exit %d: %s", tag, len(list), r.code, r.stderr)
				}
				ids = append(ids, testutil.ParseIDs(t, r.stdout)...)
			}
			if len(ids) != 900 {
				t.Fatalf("%s: %d IDs, want 900", tag, len(ids))
			}
			for _, id := range ids {
				if id <= highest[tag] {
					t.Fatalf("%s: ID %d after migrating to %d databases, not above %d issued before", tag, id, len(list), highest[tag])
				}
			}
			testutil.CheckUnique(t, slices.Clone(ids))
			highest[tag] = max(highest[tag], slices.Max(ids))
		}
		for _, s := range servers {
			if code := s.Stop(t); code != 0 {
				t.Fatalf("server exited %d:\n%s", code, s.Log.String())
			}
		}
	}
	serveAndIssue(dsns[:1])

	for _, step := range []struct{ from, to []string }{
		{dsns[:1], dsns[:2]},
		{dsns[:2], dsns[:3]},
	} {
		args := []string{"db", "migrate", "--segment-store", "mysql"}
		for _, d := range step.from {
			args = append(args, "--from", d)
		}
		for _, d := range step.to {
			args = append(args, "--to", d)
		}
		r := runBin(t, bin, dir, testutil.CleanEnv(), args...)
		if r.code != 0 {
			t.Fatalf("leaf %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		t.Logf("leaf db migrate %d → %d:\n%s", len(step.from), len(step.to), r.stdout)
		for _, tag := range tags {
			if !strings.Contains(r.stdout, tag) {
				t.Errorf("the report does not name tag %s:\n%s", tag, r.stdout)
			}
		}
		// The old list is refused now, the new one serves above the old IDs.
		if r := runBin(t, bin, dir, multiEnv(step.from...), "serve", "--listen", "127.0.0.1:0"); r.code != exitUsage || !strings.Contains(r.stderr, "stripe") {
			t.Errorf("serve on the old list of %d: exit %d, stderr:\n%s\nwant exit %d", len(step.from), r.code, r.stderr, exitUsage)
		}
		serveAndIssue(step.to)
	}

	// A migration that would drop a database is refused: its IDs would
	// be issued again.
	args := []string{"db", "migrate", "--segment-store", "mysql", "--from", dsns[0], "--from", dsns[1], "--from", dsns[2], "--to", dsns[0], "--to", dsns[1]}
	if r := runBin(t, bin, dir, testutil.CleanEnv(), args...); r.code == 0 {
		t.Errorf("migrate 3 → 2: exit 0, want a refusal:\n%s", r.stdout)
	}
}

// TestMultiDatabaseCheck: serve --check takes a list of databases, and
// refuses one that names a database twice (however spelled), a malformed
// entry, or a list for the embedded store, without connecting.
func TestMultiDatabaseCheck(t *testing.T) {
	t.Parallel()
	a := "leaf:s3cret@tcp(" + closedAddr(t) + ")/leaf"
	b := "leaf:s3cret@tcp(" + closedAddr(t) + ")/leaf"
	tests := []struct {
		name   string
		env    []string
		code   int
		stdout string
		stderr string
	}{
		{"two databases", []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + a + "\n" + b}, 0,
			"mysql over 2 databases: leaf:xxxxx@tcp(", ""},
		{"one database twice, spelled differently", []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + a + "\n" + a + "?timeout=5s"}, 2,
			"", "segment.dsn: databases 0 and 1 are one database"},
		{"a malformed entry", []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + a + "\nleaf@tcp(db)"}, 2,
			"", "segment.dsn: database 1 (leaf@tcp(db)): mysql: parse DSN"},
		{"postgres schemas of one database", []string{"LEAF_SEGMENT_STORE=postgres",
			"LEAF_SEGMENT_DSN=postgres://p@db/leaf?search_path=s1\npostgres://p@db/leaf?search_path=s2"}, 0, "postgres over 2 databases", ""},
		{"the same schema twice", []string{"LEAF_SEGMENT_STORE=postgres",
			"LEAF_SEGMENT_DSN=postgres://p@db/leaf?search_path=s1\nhost=db user=p dbname=leaf search_path=s1"}, 2, "", "are one database"},
		{"sqlite", []string{"LEAF_SEGMENT_DSN=a.db\nb.db"}, 2, "", "segment.store sqlite is one file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append(dataEnv(t), tc.env...), "serve", "--check")
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d\nstdout %s\nstderr %s\nwant exit %d, %q, %q", r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cret") {
				t.Error("a password was printed")
			}
		})
	}
}

// TestDBMigrateUsage: leaf db migrate refuses, exit 2 and before it
// connects anywhere, what cannot be a migration.
func TestDBMigrateUsage(t *testing.T) {
	t.Parallel()
	a := "leaf:s3cret@tcp(" + closedAddr(t) + ")/leaf"
	b := "leaf:s3cret@tcp(" + closedAddr(t) + ")/leaf"
	tests := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"help", nil, []string{"db", "-h"}, 0, "leaf db migrate --to DSN", ""},
		{"migrate help", nil, []string{"db", "migrate", "-h"}, 0, "Stop every server", ""},
		{"main help names it", nil, []string{"help"}, 0, "leaf db migrate", ""},
		{"no subcommand", nil, []string{"db"}, 2, "", "db needs a subcommand: init, migrate or fence"},
		{"init of one database", []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + a}, []string{"db", "init"}, 2, "",
			"leaf db init: segment.dsn lists 1 database(s); init sets up a store of 2 or more"},
		{"init of one database twice", []string{"LEAF_SEGMENT_STORE=mysql"}, []string{"db", "init", "--segment-dsn", a, "--segment-dsn", a + "?timeout=3s"}, 2, "",
			"segment.dsn: databases 0 and 1 are one database"},
		{"init of SQLite files", nil, []string{"db", "init", "--segment-dsn", "a.db", "--segment-dsn", "b.db"}, 2, "", "segment.store sqlite is one file"},
		{"unknown subcommand", nil, []string{"db", "shrink"}, 2, "", `unknown db subcommand "shrink"`},
		{"the embedded store", nil, []string{"db", "migrate", "--from", "a.db", "--to", "a.db", "--to", "b.db"}, 2, "",
			"segment.store is sqlite: only mysql and postgres stores span several databases"},
		{"no current list", []string{"LEAF_SEGMENT_STORE=mysql"}, []string{"db", "migrate", "--to", a, "--to", b}, 2, "",
			"segment.dsn: required when segment.store is mysql"},
		{"no database added", []string{"LEAF_SEGMENT_STORE=mysql"}, []string{"db", "migrate", "--from", a, "--from", b, "--to", a, "--to", b}, 2, "",
			"leaf db migrate: --to lists 2 database(s) and --from 2: a migration keeps every database and adds at least one"},
		{"one database twice", []string{"LEAF_SEGMENT_STORE=mysql"}, []string{"db", "migrate", "--from", a, "--to", a, "--to", a + "?timeout=3s"}, 2, "",
			"--to: invalid configuration: segment.dsn: databases 0 and 1 are one database"},
		{"an empty DSN", []string{"LEAF_SEGMENT_STORE=mysql"}, []string{"db", "migrate", "--from", a, "--to", " "}, 2, "", "an empty DSN"},
		{"a database of the old list left out", []string{"LEAF_SEGMENT_STORE=mysql"}, []string{"db", "migrate", "--from", a, "--to", b, "--to", b + "x"}, 2, "",
			"is not in the new list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append(dataEnv(t), tc.env...), tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d\nstdout %s\nstderr %s\nwant exit %d, %q, %q", r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cret") {
				t.Error("a password was printed")
			}
		})
	}
}

// getText and getJSON read a 200 answer.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s %.200s", url, err, resp.Status, b)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, url)), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestMultiDatabaseMigrateOrdered: a store of several databases serves
// every tag as a plain one, so leaf db migrate refuses a store holding an
// ordered tag (exit 2, naming it and the way out) before it changes
// anything, rather than move the tag and lose its order without a word;
// once the tags are made plain, the migration goes through.
func TestMultiDatabaseMigrateOrdered(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary on MariaDB")
	}
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	db1, db2 := testutil.MySQL(t), testutil.MySQL(t)
	dir := t.TempDir()
	one := multiEnv(db1)
	for _, args := range [][]string{
		{"tags", "create", "keep", "--ordered"},
		{"tags", "create", "keep.too"},
		{"tags", "order", "keep.too", "on"},
		{"tags", "create", "plain.a", "--step", "100"},
	} {
		if r := runBin(t, bin, dir, one, args...); r.code != 0 {
			t.Fatalf("leaf %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Issue from every tag, so that the rows hold more than their start.
	s := testutil.StartLeaf(t, bin, dir, one, "--listen", "127.0.0.1:0")
	for _, tag := range []string{"keep", "keep.too", "plain.a"} {
		testutil.FetchID(t, s.URL("/api/segment/get/"+tag))
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("server exited %d:\n%s", code, s.Log.String())
	}

	before1, before2 := dumpDatabase(t, db1), dumpDatabase(t, db2)
	args := []string{"db", "migrate", "--segment-store", "mysql", "--from", db1, "--to", db1, "--to", db2}
	r := runBin(t, bin, dir, testutil.CleanEnv(), args...)
	t.Logf("leaf db migrate with ordered tags: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != exitUsage {
		t.Errorf("exit %d, want %d", r.code, exitUsage)
	}
	for _, s := range []string{`"keep"`, `"keep.too"`, "2 ordered tags", "leaf tags order TAG off", "one database"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr does not say %q:\n%s", s, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "plain.a") {
		t.Errorf("stderr names the plain tag plain.a:\n%s", r.stderr)
	}
	if after := dumpDatabase(t, db1); after != before1 {
		t.Errorf("the refused migration changed the old database:\nbefore\n%s\nafter\n%s", before1, after)
	}
	if after := dumpDatabase(t, db2); after != before2 {
		t.Errorf("the refused migration changed the new database:\nbefore\n%s\nafter\n%s", before2, after)
	}
	// The store of one database still serves, the ordered tag included.
	s = testutil.StartLeaf(t, bin, dir, one, "--listen", "127.0.0.1:0")
	testutil.FetchID(t, s.URL("/api/segment/get/keep"))
	if code := s.Stop(t); code != 0 {
		t.Fatalf("server exited %d:\n%s", code, s.Log.String())
	}

	for _, tag := range []string{"keep", "keep.too"} {
		if r := runBin(t, bin, dir, one, "tags", "order", tag, "off"); r.code != 0 {
			t.Fatalf("tags order %s off: exit %d\n%s", tag, r.code, r.stderr)
		}
	}
	r = runBin(t, bin, dir, testutil.CleanEnv(), args...)
	if r.code != 0 {
		t.Fatalf("leaf db migrate once the tags are plain: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tag := range []string{"keep", "keep.too", "plain.a"} {
		if !strings.Contains(r.stdout, tag) {
			t.Errorf("the report does not name %s:\n%s", tag, r.stdout)
		}
	}
}

// dumpDatabase renders every row of every table of the MySQL database dsn,
// sorted, so that two dumps are equal when nothing changed.
func dumpDatabase(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	var tables []string
	rows, err := db.QueryContext(ctx, "SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	slices.Sort(tables)
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, "SELECT * FROM `"+table+"`")
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fields := make([]string, len(cols))
			for i, v := range vals {
				fields[i] = cols[i] + "=" + string(v)
			}
			lines = append(lines, "  "+strings.Join(fields, " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(lines)
		fmt.Fprintf(&b, "%s (%d rows)\n%s\n", table, len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}
