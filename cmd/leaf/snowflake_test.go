package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/snowflake"
)

// getSnowflake fetches n IDs from /api/snowflake/get/KEY.
func getSnowflake(t *testing.T, s *inProcessServer, n int) []int64 {
	t.Helper()
	resp, err := http.Get(s.URL("/api/snowflake/get/order?count=" + strconv.Itoa(n)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("snowflake route: %s %s", resp.Status, body)
	}
	var ids []int64
	for _, line := range strings.Split(string(body), "\n") {
		id, err := strconv.ParseInt(line, 10, 64)
		if err != nil || id <= 0 {
			t.Fatalf("body line %q is not a positive ID", line)
		}
		ids = append(ids, id)
	}
	return ids
}

// With no configuration, serve issues snowflake IDs as local worker 0, and a
// restart on the same data directory continues above the IDs issued before.
func TestServeSnowflakeDefault(t *testing.T) {
	t.Parallel()
	env := dataEnv(t)
	s := serveInProcess(t, env, "--listen", "127.0.0.1:0")
	first := getSnowflake(t, s, 1000)
	for i, id := range first {
		p, err := snowflake.LeafLayout.Decode(id)
		if err != nil || p.WorkerID != 0 {
			t.Fatalf("ID %d decodes to %+v (%v), want worker 0", id, p, err)
		}
		if i > 0 && id <= first[i-1] {
			t.Fatalf("IDs not increasing: %d after %d", id, first[i-1])
		}
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
	s2 := serveInProcess(t, env, "--listen", "127.0.0.1:0")
	again := getSnowflake(t, s2, 10)
	if again[0] <= first[len(first)-1] {
		t.Fatalf("after restart: %d, not above %d", again[0], first[len(first)-1])
	}
}

// Snowflake with worker IDs from the mysql registry (the segment database),
// chosen by flags.
func TestServeSnowflakeMySQLRegistry(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	env := append(dataEnv(t), "LEAF_SEGMENT_ENABLED=false")
	s := serveInProcess(t, env, "--listen", "127.0.0.1:0", "--snowflake-registry", "mysql", "--snowflake-dsn", dsn,
		"--snowflake-endpoint", "10.9.9.9:8080")
	ids := getSnowflake(t, s, 10)
	p, _ := snowflake.LeafLayout.Decode(ids[0])
	if p.WorkerID != 1 { // the fork's AUTO_INCREMENT starts at 1
		t.Fatalf("worker %d, want 1", p.WorkerID)
	}
	resp, err := http.Get(s.URL("/v2/status"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Snowflake struct {
			Registry string `json:"registry"`
			Endpoint string `json:"endpoint"`
			WorkerID int64  `json:"worker_id"`
		} `json:"snowflake"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Snowflake.Registry != "mysql" || st.Snowflake.Endpoint != "10.9.9.9:8080" || st.Snowflake.WorkerID != 1 {
		t.Fatalf("/v2/status snowflake = %+v", st.Snowflake)
	}
}

func TestServeSnowflakeBadConfig(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--snowflake-registry", "zookeeper"}, // no --zk
		{"--snowflake-registry", "nope"},      // unknown
		{"--worker-id", "1024"},               // above the layout
		{"--snowflake-endpoint", "10.0.0.1"},  // no port
		{"--name", "a/b"},                     // not a node name
	} {
		r := runCLI(t, dataEnv(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "snowflake") {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and a message naming the key", args, r.code, r.stderr)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "decode", "1256557484213448722")
	if r.code != 0 || r.stdout != "id 1256557484213448722: time 2020-05-02T12:13:44.602Z (1588421624602 ms), worker 619, sequence 18\n" {
		t.Fatalf("decode: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "decode", "--json", "1256557484213448722")
	var p map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p["worker_id"] != 619.0 || p["id_str"] != "1256557484213448722" {
		t.Fatalf("decode --json: %q (%v)", r.stdout, err)
	}
	for _, bad := range [][]string{{"decode"}, {"decode", "abc"}, {"decode", "-5"}, {"decode", "99999999999999999999"}, {"decode", "0"}} {
		r := runCLI(t, nil, bad...)
		if r.code != 2 || r.stderr == "" {
			t.Errorf("%v: exit %d stderr %q, want 2 and a message", bad, r.code, r.stderr)
		}
	}
	// A custom layout from the configuration.
	r = runCLI(t, []string{"LEAF_SNOWFLAKE_WORKER_BITS=5", "LEAF_SNOWFLAKE_SEQUENCE_BITS=17"}, "decode", strconv.FormatInt(int64(3)<<22|int64(2)<<17|9, 10))
	if r.code != 0 || !strings.Contains(r.stdout, "worker 2, sequence 9") {
		t.Fatalf("decode with a custom layout: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// removeZKTree deletes /snowflake/NAME and everything under it.
func removeZKTree(t *testing.T, addr, name string) {
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer conn.Close()
	var rm func(p string)
	rm = func(p string) {
		kids, _, _ := conn.Children(p)
		for _, k := range kids {
			rm(p + "/" + k)
		}
		_ = conn.Delete(p, -1)
	}
	rm("/snowflake/" + name)
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// With ZooKeeper unreachable at start-up, serve starts on the worker ID in
// its cache file only inside the lease the cache recorded, and only if the
// clock is past the cached mark: a server stopped while ZooKeeper was down
// kept its lease and starts on it; one stopped cleanly released its claim,
// which may be another's by now, and does not.
func TestServeSnowflakeZooKeeperDownAtStart(t *testing.T) {
	t.Parallel()
	zkAddr := testutil.ZooKeeper(t)
	name := testutil.UniqueName()
	t.Cleanup(func() { removeZKTree(t, zkAddr, name) })
	proxy := testutil.NewProxy(t, zkAddr)
	env := append(dataEnv(t), "LEAF_SEGMENT_ENABLED=false")
	args := []string{"--listen", "127.0.0.1:0", "--snowflake-registry", "zookeeper", "--zk", proxy.Addr(),
		"--name", name, "--snowflake-endpoint", "10.8.8.8:8080"}

	// Stopped cleanly: the claim is released, the cache says so.
	s := serveInProcess(t, env, args...)
	before := getSnowflake(t, s, 100)
	worker, _ := snowflake.LeafLayout.Decode(before[0])
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
	proxy.Down()
	r := runCLI(t, env, append([]string{"serve"}, args...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "the last run released it") {
		t.Fatalf("serve with ZooKeeper down after a clean stop: exit %d, stderr %q; want a refusal saying the claim was released", r.code, r.stderr)
	}

	// Stopped while ZooKeeper was down: the lease is kept, and a restart
	// inside it starts on the cached ID.
	proxy.Up()
	s1 := serveInProcess(t, env, args...)
	before = getSnowflake(t, s1, 100)
	proxy.Down()
	testutil.WaitFor(t, "the heartbeat to fail with ZooKeeper down", func() bool {
		_, body := testutil.Get(t, s1.URL("/readyz"))
		return strings.Contains(body, "heartbeat failing")
	})
	if code := s1.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s1.Log.String())
	}
	s2 := serveInProcess(t, env, args...)
	after := getSnowflake(t, s2, 100)
	p, _ := snowflake.LeafLayout.Decode(after[0])
	if p.WorkerID != worker.WorkerID || after[0] <= before[len(before)-1] {
		t.Fatalf("started from the cache: ID %d worker %d, want worker %d above %d", after[0], p.WorkerID, worker.WorkerID, before[len(before)-1])
	}
	if !strings.Contains(s2.Log.String(), "cached worker ID") {
		t.Errorf("no log line about the cached worker ID: %s", s2.Log.String())
	}
	if _, body := testutil.Get(t, s2.URL("/readyz")); !strings.Contains(body, "until its cached lease ends at") {
		t.Errorf("/readyz of a server on its cached lease: %q", body)
	}
	if code := s2.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s2.Log.String())
	}

	// The cached mark an hour ahead: the clock cannot be trusted, no start.
	dataDir := strings.TrimPrefix(env[0], "LEAF_DATA_DIR=")
	cache := local.NewCache(filepath.Join(dataDir, "snowflake", name, "8080", "workerID.properties"))
	if err := cache.Save(leaf.CachedClaim{WorkerID: worker.WorkerID, Mark: time.Now().Add(time.Hour).UnixMilli(),
		LeaseUntil: time.Now().Add(time.Minute).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, append([]string{"serve"}, args...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "refuses to start") {
		t.Fatalf("serve with the cached mark ahead: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A second server on the same data directory would share local worker 0: it
// is refused while the first runs.
func TestServeSnowflakeLocalWorkerInUse(t *testing.T) {
	t.Parallel()
	env := append(dataEnv(t), "LEAF_SEGMENT_ENABLED=false")
	s := serveInProcess(t, env, "--listen", "127.0.0.1:0")
	r := runCLI(t, env, "serve", "--listen", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "in use by another process") {
		t.Fatalf("second server on the same data dir: exit %d, stderr %q", r.code, r.stderr)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("first server exited %d: %s", code, s.Log.String())
	}
}

// The endpoint is the configured one, else the IP Java Leaf's Utils.getIp
// picks (javaIP; empty on a host without a non-loopback IPv4 address, as
// Java's ":port") with the listen port. TestJavaIPNetns checks the choice on
// real interfaces.
func TestSnowflakeEndpoint(t *testing.T) {
	ep, err := snowflakeEndpoint("", 18080)
	if err != nil || ep.Port != 18080 || ep.IP != "" && (net.ParseIP(ep.IP).To4() == nil || net.ParseIP(ep.IP).IsLoopback()) {
		t.Fatalf("default endpoint = %+v, %v; want a non-loopback IPv4 address or none, and port 18080", ep, err)
	}
	if ep, err := snowflakeEndpoint("10.1.2.3:9000", 18080); err != nil || ep.String() != "10.1.2.3:9000" {
		t.Fatalf("configured endpoint = %v, %v", ep, err)
	}
	if _, err := snowflakeEndpoint("10.1.2.3", 18080); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("endpoint without a port: %v, want config.ErrInvalid", err)
	}
}

// The js-safe layout, chosen by flag, variable or file, takes IDs apart for
// 'leaf decode'; a name that is no layout, or a number against the preset,
// is a usage error.
func TestDecodeLayout(t *testing.T) {
	t.Parallel()
	const id = "231554233484074" // 2026-11-24T03:38:17.642Z, worker 3, sequence 42
	const want = "id 231554233484074: time 2026-11-24T03:38:17.642Z (1795491497642 ms), worker 3, sequence 42\n"
	yml := filepath.Join(t.TempDir(), "leaf.yml")
	if err := os.WriteFile(yml, []byte("snowflake:\n  layout: js-safe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"decode", "--snowflake-layout", "js-safe", id}},
		{"env", []string{"LEAF_SNOWFLAKE_LAYOUT=js-safe"}, []string{"decode", id}},
		{"file", nil, []string{"decode", "--config", yml, id}},
		{"flag over file", []string{"LEAF_CONFIG=" + yml}, []string{"decode", "--snowflake-layout", "JS-SAFE", id}},
	} {
		if r := runCLI(t, c.env, c.args...); r.code != 0 || r.stdout != want {
			t.Errorf("%s: exit %d stdout %q stderr %q", c.name, r.code, r.stdout, r.stderr)
		}
	}
	// The largest js-safe ID, and the first above it.
	r := runCLI(t, nil, "decode", "--snowflake-layout", "js-safe", "9007199254740991")
	if r.code != 0 || !strings.Contains(r.stdout, "time 2060-11-03T19:53:47.775Z (2866737227775 ms), worker 31, sequence 255") {
		t.Errorf("decode 2^53-1: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"above 2^53", nil, []string{"decode", "--snowflake-layout", "js-safe", "9007199254740992"}, "has bits above the layout's 53"},
		{"no such layout", nil, []string{"decode", "--snowflake-layout", "js", id}, `"js" is not one of leaf, js-safe, custom`},
		{"no such layout in env", []string{"LEAF_SNOWFLAKE_LAYOUT=safe"}, []string{"decode", id}, `LEAF_SNOWFLAKE_LAYOUT: "safe" is not one of leaf, js-safe, custom`},
		{"a number against the preset", []string{"LEAF_SNOWFLAKE_WORKER_BITS=10"}, []string{"decode", "--snowflake-layout", "js-safe", id},
			"snowflake.worker_bits (from LEAF_SNOWFLAKE_WORKER_BITS): 10 differs from the js-safe layout's 5 (snowflake.layout from --snowflake-layout)"},
	} {
		if r := runCLI(t, c.env, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d stderr %q; want 2 and %q", c.name, r.code, r.stderr, c.want)
		}
	}
}

// serve takes the layout from the same sources, names it in --check, and
// refuses a name that is no layout before it starts anything.
func TestServeLayoutChecks(t *testing.T) {
	t.Parallel()
	r := runCLI(t, dataEnv(t), "serve", "--check", "--snowflake-layout", "js-safe")
	if want := "layout js-safe: 40/5/8 bits, epoch 2026-01-01T00:00:00Z, until 2060-11-03"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("serve --check: exit %d stdout %q stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"LEAF_SNOWFLAKE_LAYOUT=javascript"}, nil, `LEAF_SNOWFLAKE_LAYOUT: "javascript" is not one of leaf, js-safe, custom`},
		{nil, []string{"--snowflake-layout", "js"}, `invalid value "js" for flag -snowflake-layout: "js" is not one of leaf, js-safe, custom`},
		{[]string{"LEAF_SNOWFLAKE_TIME_BITS=41"}, []string{"--snowflake-layout", "js-safe"}, "snowflake.time_bits (from LEAF_SNOWFLAKE_TIME_BITS): 41 differs from the js-safe layout's 40"},
	} {
		r := runCLI(t, append(dataEnv(t), c.env...), append([]string{"serve", "--listen", "127.0.0.1:0"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v %v: exit %d stderr %q; want 2 and %q", c.env, c.args, r.code, r.stderr, c.want)
		}
	}
}

// A server of the js-safe layout issues IDs below 2^53, takes them apart
// with that layout on both decode routes, and names it in /v2/status.
func TestServeSnowflakeJSSafe(t *testing.T) {
	t.Parallel()
	s := serveInProcess(t, append(dataEnv(t), "LEAF_SNOWFLAKE_LAYOUT=js-safe", "LEAF_SNOWFLAKE_WORKER_ID=31"), "--listen", "127.0.0.1:0")
	ids := getSnowflake(t, s, 1000)
	for i, id := range ids {
		if id > snowflake.MaxJSSafeID || (i > 0 && id <= ids[i-1]) {
			t.Fatalf("ID %d after %d: want increasing IDs below 2^53", id, ids[max(i-1, 0)])
		}
	}
	last := ids[len(ids)-1]
	want, err := snowflake.JSSafeLayout.Decode(last)
	if err != nil || want.WorkerID != 31 {
		t.Fatalf("ID %d decodes to %+v, %v; want worker 31", last, want, err)
	}
	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(s.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var v2 struct {
		Timestamp int64 `json:"timestamp_ms"`
		WorkerID  int64 `json:"worker_id"`
		Sequence  int64 `json:"sequence"`
	}
	getJSON("/v2/snowflake/decode/"+strconv.FormatInt(last, 10), &v2)
	if v2.Timestamp != want.Timestamp || v2.WorkerID != 31 || v2.Sequence != want.Sequence {
		t.Errorf("/v2/snowflake/decode: %+v, want %+v", v2, want)
	}
	var leafStyle struct {
		WorkerID   string `json:"workerId"`
		SequenceID string `json:"sequenceId"`
		Timestamp  string `json:"timestamp"`
	}
	getJSON("/decodeSnowflakeId?snowflakeId="+strconv.FormatInt(last, 10), &leafStyle)
	if leafStyle.WorkerID != "31" || leafStyle.SequenceID != strconv.FormatInt(want.Sequence, 10) ||
		!strings.HasPrefix(leafStyle.Timestamp, strconv.FormatInt(want.Timestamp, 10)+"(") {
		t.Errorf("/decodeSnowflakeId: %+v, want %+v", leafStyle, want)
	}
	var st struct {
		Snowflake struct {
			Layout string `json:"layout"`
		} `json:"snowflake"`
	}
	getJSON("/v2/status", &st)
	if st.Snowflake.Layout != "js-safe" {
		t.Errorf("/v2/status snowflake.layout = %q, want js-safe", st.Snowflake.Layout)
	}
}
