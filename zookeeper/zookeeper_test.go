package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

// testSessionTimeout and testLease keep tests short; the server accepts
// session timeouts of 1..30 s.
const (
	testSessionTimeout = 2 * time.Second
	testLease          = 3 * time.Second
)

// testLogger shows the registries' warnings, not the client's chatter.
var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// rawConn is a plain client, to build trees as Java Leaf would and to look
// at what the registries wrote.
func rawConn(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	testutil.WaitForState(t, "a ZooKeeper session with "+addr, func() (bool, string) {
		st := conn.State()
		return st == zk.StateHasSession, fmt.Sprintf("connection %v", st)
	})
	return conn
}

// removeTree deletes p and everything under it: in one transaction (one
// write on the server, where the node-by-node way took most of the cold
// start's time), or node by node if the tree changes meanwhile.
func removeTree(conn *zk.Conn, p string) error {
	var ops []any
	var walk func(string) error
	walk = func(p string) error {
		children, _, err := conn.Children(p)
		if err != nil {
			return err
		}
		for _, c := range children {
			if err := walk(p + "/" + c); err != nil {
				return err
			}
		}
		ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		return nil
	}
	err := walk(p)
	if errors.Is(err, zk.ErrNoNode) {
		return removeEach(conn, p)
	}
	if err != nil {
		return err
	}
	if _, err := conn.Multi(ops...); err == nil {
		return nil
	}
	return removeEach(conn, p)
}

func removeEach(conn *zk.Conn, p string) error {
	for attempt := 0; ; attempt++ {
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, c := range children {
			if err := removeEach(conn, p+"/"+c); err != nil {
				return err
			}
		}
		err = conn.Delete(p, -1)
		switch {
		case err == nil || errors.Is(err, zk.ErrNoNode):
			return nil
		case !errors.Is(err, zk.ErrNotEmpty) || attempt == 5:
			return err
		}
		// A node created meanwhile (an ephemeral of a closing client):
		// go round again.
	}
}

// newName returns a fresh leaf.name whose tree is removed when t ends.
func newName(t *testing.T, addr, name string) string {
	t.Helper()
	t.Cleanup(func() {
		conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Errorf("cleanup: connect: %v", err)
			return
		}
		defer conn.Close()
		if err := removeTree(conn, Root+"/"+name); err != nil {
			t.Errorf("cleanup: remove %s/%s: %v", Root, name, err)
		}
	})
	return name
}

func testConfig(addr, name string) Config {
	return Config{Servers: []string{addr}, Name: name, SessionTimeout: testSessionTimeout, Lease: testLease, Logger: testLogger}
}

func openRegistry(t *testing.T, cfg Config) *Registry {
	t.Helper()
	r, err := Open(testutil.Context(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Both registries pass the conformance suite: zookeeper keeps an ID per
// endpoint, zookeeper-recycle leases them.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		recycle bool
		traits  leaftest.RegistryTraits
	}{
		{"zookeeper", false, leaftest.RegistryTraits{Sticky: true, Leases: true}},
		{"zookeeper-recycle", true, leaftest.RegistryTraits{Leases: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			leaftest.TestWorkerRegistry(t, func(t *testing.T) leaftest.RegistryOpener {
				addr := testutil.ZooKeeper(t)
				return opener(testConfig(addr, newName(t, addr, testutil.UniqueName())), c.recycle)
			}, c.traits)
		})
	}
}

func TestParseNodeName(t *testing.T) {
	for _, c := range []struct {
		name     string
		endpoint string
		seq      int64
		ok       bool
	}{
		{"10.0.0.1:8080-0000000000", "10.0.0.1:8080", 0, true},
		{"10.0.0.1:8080-0000000005", "10.0.0.1:8080", 5, true},
		{"192.168.100.200:65535-0000001023", "192.168.100.200:65535", 1023, true},
		{"10.0.0.1:8080-2147483647", "10.0.0.1:8080", 2147483647, true},
		{"::1:8080-0000000003", "::1:8080", 3, true}, // IPv6: the last ':' is the port's
		{"10.0.0.1:8080-5", "", 0, false},            // not ten digits
		{"10.0.0.1:8080-00000000005", "", 0, false},  // eleven
		{"10.0.0.1:8080-00000000x5", "", 0, false},
		{"10.0.0.1:8080--000000005", "", 0, false},
		{"10.0.0.1:8080-", "", 0, false},
		{"10.0.0.1:8080", "", 0, false},
		{"-0000000001", "", 0, false},
		{"garbage-0000000001", "", 0, false},
		{"10.0.0.1-0000000001", "", 0, false},       // no port
		{"10.0.0.1:0-0000000001", "", 0, false},     // port out of range
		{"a-b:8080-0000000001", "", 0, false},       // the prefix is not an endpoint
		{"10.0.0.1:8080-0000000001-", "", 0, false}, // last '-' ends the name
		{"", "", 0, false},
	} {
		ep, seq, ok := parseNodeName(c.name)
		if ep != c.endpoint || seq != c.seq || ok != c.ok {
			t.Errorf("parseNodeName(%q) = %q, %d, %v; want %q, %d, %v", c.name, ep, seq, ok, c.endpoint, c.seq, c.ok)
		}
	}
}

func TestConfigInvalid(t *testing.T) {
	ok := Config{Servers: []string{"127.0.0.1:2181"}, Name: "leaf"}
	for _, c := range []struct {
		what string
		edit func(*Config)
	}{
		{"no servers", func(c *Config) { c.Servers = nil }},
		{"empty server", func(c *Config) { c.Servers = []string{""} }},
		{"server without port", func(c *Config) { c.Servers = []string{"127.0.0.1"} }},
		{"server port 0", func(c *Config) { c.Servers = []string{"127.0.0.1:0"} }},
		{"server without host", func(c *Config) { c.Servers = []string{":2181"} }},
		{"no name", func(c *Config) { c.Name = "" }},
		{"name with /", func(c *Config) { c.Name = "a/b" }},
		{"name ..", func(c *Config) { c.Name = ".." }},
		{"name with space", func(c *Config) { c.Name = "a b" }},
		{"name with NUL", func(c *Config) { c.Name = "a\x00" }},
		{"long name", func(c *Config) { c.Name = strings.Repeat("a", leaf.MaxClusterNameLen+1) }},
		{"negative session timeout", func(c *Config) { c.SessionTimeout = -time.Second }},
	} {
		cfg := ok
		c.edit(&cfg)
		if _, err := Open(t.Context(), cfg); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Open with %s: %v, want ErrInvalidArgument", c.what, err)
		}
		if _, err := OpenRecycle(t.Context(), cfg); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("OpenRecycle with %s: %v, want ErrInvalidArgument", c.what, err)
		}
	}
	for _, name := range []string{"leaf", "com.sankuai.leaf.opensource.test", "my-leaf_2", "-"} {
		if err := leaf.ValidateClusterName(name); err != nil {
			t.Errorf("ValidateClusterName(%q): %v", name, err)
		}
	}
}

// TestUnreachable: with nothing listening, Open fails within its bound
// instead of handing back a client whose calls hang. The cases run side by
// side: each only waits.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	const dead = "127.0.0.1:1"
	type opener func(context.Context, Config) error
	openers := map[string]opener{
		"Open":        func(ctx context.Context, cfg Config) error { _, err := Open(ctx, cfg); return err },
		"OpenRecycle": func(ctx context.Context, cfg Config) error { _, err := OpenRecycle(ctx, cfg); return err },
	}
	var wg sync.WaitGroup
	for _, c := range []struct {
		what    string
		timeout time.Duration // the caller's context
		session time.Duration
	}{
		{"the session timeout", 30 * time.Second, 1500 * time.Millisecond},
		{"the context", 1500 * time.Millisecond, 0},
	} {
		for kind, open := range openers {
			wg.Go(func() {
				start := time.Now()
				err := open(testutil.Context(t, c.timeout), Config{Servers: []string{dead}, Name: "leaf", SessionTimeout: c.session, Logger: testLogger})
				took := time.Since(start)
				switch {
				case err == nil:
					t.Errorf("%s(%s), bounded by %s, succeeded", kind, dead, c.what)
				case errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), dead):
					t.Errorf("%s(%s), bounded by %s: %v, want an error naming the server", kind, dead, c.what, err)
				case took > 4*time.Second:
					t.Errorf("%s(%s), bounded by %s, took %v to fail", kind, dead, c.what, took)
				default:
					t.Logf("%s, bounded by %s, failed after %v: %v", kind, c.what, took.Round(time.Millisecond), err)
				}
			})
		}
	}
	wg.Wait()
}

func javaData(ip, port string, ts int64) []byte {
	return fmt.Appendf(nil, `{"ip":%q,"port":%q,"timestamp":%d}`, ip, port, ts)
}

// createJavaTree writes /snowflake/{name}/forever as Java Leaf's Curator
// does: parents empty, nodes PERSISTENT_SEQUENTIAL with Jackson's JSON.
func createJavaTree(t *testing.T, conn *zk.Conn, name string, nodes ...string) map[string]int64 {
	t.Helper()
	forever := Root + "/" + name + "/forever"
	for _, p := range []string{Root, Root + "/" + name, forever} {
		if _, err := conn.Create(p, nil, zk.FlagPersistent, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	stamps := make(map[string]int64)
	for i, ep := range nodes {
		ip, port, _ := strings.Cut(ep, ":")
		ts := time.Now().UnixMilli() - int64(10000*(i+1))
		p, err := conn.Create(forever+"/"+ep+"-", javaData(ip, port, ts), zk.FlagSequence, openACL)
		if err != nil {
			t.Fatalf("create the node of %s: %v", ep, err)
		}
		if want := fmt.Sprintf("%s/%s-%010d", forever, ep, i); p != want {
			t.Fatalf("Java-style node %s, want %s", p, want)
		}
		if _, ok := stamps[ep]; !ok {
			stamps[ep] = ts
		}
	}
	return stamps
}

var goNodeName = regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+:\d+-\d{10}$`)

// TestJavaCoexistence: a Go Registry reads and extends a tree Java Leaf
// wrote, under a leaf.name with '-' in it (Leaf#161), and writes nodes Java
// can read back.
func TestJavaCoexistence(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, "leaf-go-"+strings.ReplaceAll(testutil.UniqueName(), "_", "-"))
	raw := rawConn(t, addr)
	stamps := createJavaTree(t, raw, name, "10.0.0.1:8080", "10.0.0.2:8080")
	forever := Root + "/" + name + "/forever"
	ctx := testutil.Context(t, 30*time.Second)

	// A Java node's endpoint gets its ID and mark back.
	r1 := openRegistry(t, testConfig(addr, name))
	c1, err := r1.Register(ctx, leaf.Endpoint{IP: "10.0.0.1", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("Register 10.0.0.1:8080: %v", err)
	}
	if c1.WorkerID != 0 || c1.HighWater != stamps["10.0.0.1:8080"] || c1.Expires.IsZero() {
		t.Fatalf("Java endpoint: %+v, want worker 0 high-water %d, leased", c1, stamps["10.0.0.1:8080"])
	}
	// The tree had no temporary directory: the live node comes with one.
	checkLiveNode(t, raw, Root+"/"+name+"/temporary/10.0.0.1:8080", r1.c.conn.SessionID(), leaf.Endpoint{IP: "10.0.0.1", Port: 8080}, 0)

	// A new endpoint gets the next sequence, in a node Java can read.
	ep3 := leaf.Endpoint{IP: "10.0.0.3", Port: 8080}
	r3 := openRegistry(t, testConfig(addr, name))
	c3, err := r3.Register(ctx, ep3, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("Register %s: %v", ep3, err)
	}
	if c3.WorkerID != 2 || c3.HighWater != 0 {
		t.Fatalf("new endpoint: %+v, want worker 2, high-water 0", c3)
	}
	children, _, err := raw.Children(forever)
	if err != nil {
		t.Fatal(err)
	}
	var node string
	for _, c := range children {
		if !goNodeName.MatchString(c) {
			t.Errorf("node %q does not look like Leaf's", c)
		}
		if strings.HasPrefix(c, ep3.String()+"-") {
			node = forever + "/" + c
		}
	}
	if node != forever+"/10.0.0.3:8080-0000000002" {
		t.Fatalf("nodes %v, want 10.0.0.3:8080-0000000002 among them", children)
	}
	checkJavaData := func(wantTS int64) {
		t.Helper()
		data, _, err := raw.Get(node)
		if err != nil {
			t.Fatal(err)
		}
		// What Jackson writes, field for field and in order.
		if !regexp.MustCompile(`^\{"ip":"10\.0\.0\.3","port":"8080","timestamp":\d+\}$`).Match(data) {
			t.Errorf("node data %s is not Jackson's Endpoint", data)
		}
		var fields map[string]any
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("node data %s: %v", data, err)
		}
		if len(fields) != 3 || fields["ip"] != "10.0.0.3" || fields["port"] != "8080" {
			t.Errorf("node data %s: want exactly ip, port (a string) and timestamp", data)
		}
		if ts, ok := fields["timestamp"].(float64); !ok || (wantTS != 0 && int64(ts) != wantTS) {
			t.Errorf("node data %s: timestamp, want %d", data, wantTS)
		}
	}
	checkJavaData(0)

	mark := time.Now().UnixMilli() + 3000
	exp, err := r3.Heartbeat(ctx, mark)
	if err != nil || !exp.After(time.Now()) {
		t.Fatalf("Heartbeat = %v, %v; want the lease's new expiry", exp, err)
	}
	checkJavaData(mark)
	if err := r3.Release(ctx, mark+1); err != nil {
		t.Fatalf("Release: %v", err)
	}
	checkJavaData(mark + 1)
	if ok, _, err := raw.Exists(node); err != nil || !ok {
		t.Fatalf("node %s after Release: exists %v, %v; the endpoint keeps it", node, ok, err)
	}
	if ok, _, err := raw.Exists(Root + "/" + name + "/temporary/" + ep3.String()); err != nil || ok {
		t.Errorf("live node after Release: exists %v, %v", ok, err)
	}
	// Java lists only the forever directory, which holds nothing else.
	if children, _, err = raw.Children(forever); err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if !goNodeName.MatchString(c) {
			t.Errorf("after Release: node %q in %s does not look like Leaf's", c, forever)
		}
	}
}

// TestRegistryTreeQuirks: names that are not Leaf's are ignored, two nodes of
// one endpoint (a past race) give the lowest sequence, and an ID above maxID
// is refused, not wrapped.
func TestRegistryTreeQuirks(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	stamps := createJavaTree(t, raw, name, "10.0.0.1:8080", "10.0.0.1:8080", "10.0.0.2:8080")
	forever := Root + "/" + name + "/forever"
	for _, junk := range []string{"garbage", "10.0.0.1:8080-12", "10.0.0.4:8080-00000000x1", "10.0.0.4:8080"} {
		if _, err := raw.Create(forever+"/"+junk, []byte("junk"), zk.FlagPersistent, openACL); err != nil {
			t.Fatalf("create %s: %v", junk, err)
		}
	}
	ctx := testutil.Context(t, 30*time.Second)
	r := openRegistry(t, testConfig(addr, name))

	c, err := r.Register(ctx, leaf.Endpoint{IP: "10.0.0.1", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil || c.WorkerID != 0 || c.HighWater != stamps["10.0.0.1:8080"] {
		t.Fatalf("endpoint with two nodes: %+v, %v; want worker 0, high-water %d", c, err, stamps["10.0.0.1:8080"])
	}
	_, err = r.Register(ctx, leaf.Endpoint{IP: "10.0.0.2", Port: 8080}, 1)
	if !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
		t.Fatalf("worker 2 with maxID 1: %v, want ErrWorkerIDsExhausted", err)
	}
	t.Logf("worker 2 with maxID 1: %v", err)
	// The junk took sequence numbers: 10.0.0.4 gets the next real one.
	c, err = r.Register(ctx, leaf.Endpoint{IP: "10.0.0.4", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil || c.WorkerID != 7 || c.HighWater != 0 {
		t.Fatalf("new endpoint after junk: %+v, %v; want worker 7", c, err)
	}
}

// TestRegistryUse: calls out of order and after Close fail with the errors
// the generator tells apart.
func TestRegistryUse(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	ctx := testutil.Context(t, 30*time.Second)
	r := openRegistry(t, testConfig(addr, name))
	if _, err := r.Heartbeat(ctx, 1); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("Heartbeat before Register: %v, want ErrWorkerLost", err)
	}
	c, err := r.Register(ctx, leaftest.TestEndpoint(0), leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	// An operator deleting the node takes the ID off record.
	raw := rawConn(t, addr)
	node := fmt.Sprintf("%s/%s/forever/%s-%010d", Root, name, leaftest.TestEndpoint(0), c.WorkerID)
	if err := raw.Delete(node, -1); err != nil {
		t.Fatalf("delete %s: %v", node, err)
	}
	if _, err := r.Heartbeat(ctx, 1); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("Heartbeat after the node was deleted: %v, want ErrWorkerLost", err)
	}
	c2, err := r.Register(ctx, leaftest.TestEndpoint(0), leaftest.MaxWorkerID)
	if err != nil || c2.WorkerID <= c.WorkerID {
		t.Errorf("Register after the node was deleted: %+v, %v; want a new, higher ID than %d", c2, err, c.WorkerID)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Register(ctx, leaftest.TestEndpoint(0), leaftest.MaxWorkerID); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("Register after Close: %v, want ErrClosed", err)
	}
	if _, err := r.Heartbeat(ctx, 1); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("Heartbeat after Close: %v, want ErrClosed", err)
	}
}

// TestServerGone: when ZooKeeper goes away after Open, calls fail within a
// second or two with an error a caller can fall back on, rather than hang;
// a lease is not reported lost while its session may still live.
func TestServerGone(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	proxy := testutil.NewProxy(t, addr)
	r := openRegistry(t, testConfig(proxy.Addr(), name))
	rr := openRecycle(t, testConfig(proxy.Addr(), name))
	if _, err := rr.Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(0), leaftest.MaxWorkerID); err != nil {
		t.Fatal(err)
	}
	proxy.Down()

	start := time.Now()
	_, err := r.Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(0), leaftest.MaxWorkerID)
	if err == nil || errors.Is(err, leaf.ErrWorkerIDsExhausted) || errors.Is(err, leaf.ErrInvalidArgument) {
		t.Fatalf("Register with the server gone: %v, want a connection error", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Register with the server gone took %v", took)
	}
	t.Logf("Register failed after %v: %v", time.Since(start).Round(time.Millisecond), err)

	start = time.Now()
	_, err = rr.Heartbeat(testutil.Context(t, 10*time.Second), time.Now().UnixMilli())
	if err == nil || errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("Heartbeat with the server gone: %v, want a connection error, not ErrWorkerLost", err)
	}
	t.Logf("Heartbeat failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
