package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

// testPrefix keeps the tests' keys apart from a real deployment's.
const testPrefix = "/leaftest/snowflake/"

// admin returns a plain client on the test server, closed at cleanup, to
// inspect and clean up keys behind the registry's back.
func admin(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// namespace returns a Config for a fresh namespace on addr, whose keys are
// deleted when the test ends.
func namespace(t *testing.T, addr string) etcd.Config {
	t.Helper()
	cfg := etcd.Config{Endpoints: []string{addr}, Prefix: testPrefix, Name: testutil.UniqueName(), Logger: testutil.Logger()}
	cli := admin(t, addr)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Delete(ctx, cfg.Prefix+cfg.Name+"/", clientv3.WithPrefix()); err != nil {
			t.Errorf("delete test keys: %v", err)
		}
	})
	return cfg
}

func open(t *testing.T, cfg etcd.Config) *etcd.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := etcd.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestWorkerRegistry(t *testing.T) {
	addr := testutil.Etcd(t)
	leaftest.TestWorkerRegistry(t, func(t *testing.T) leaftest.RegistryOpener {
		cfg := namespace(t, addr)
		return func(ctx context.Context) (leaf.WorkerRegistry, error) { return etcd.Open(ctx, cfg) }
	}, leaftest.RegistryTraits{Leases: true})
}

// TestLeaseExpiry cuts a holder off (its connection stalls, as behind a
// partition) and checks that its ID passes to another server no earlier than
// the expiry Heartbeat promised and with the holder's last mark, and that the
// holder then learns it lost the ID.
func TestLeaseExpiry(t *testing.T) {
	addr := testutil.Etcd(t)
	start := time.Now()
	cfg := namespace(t, addr)
	cfg.TTL = 2 * time.Second
	proxy := testutil.NewProxy(t, addr)
	cfgA := cfg
	cfgA.Endpoints = []string{proxy.Addr()}
	a := open(t, cfgA)
	b := open(t, cfg)

	// maxID 0: a pool of one ID.
	ca, err := a.Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(0), 0)
	if err != nil {
		t.Fatalf("A: Register: %v", err)
	}
	if ca.WorkerID != 0 || ca.HighWater != 0 {
		t.Fatalf("A: claim %+v, want worker 0 without history", ca)
	}
	mark := time.Now().UnixMilli() + 1500
	expires, err := a.Heartbeat(testutil.Context(t, 10*time.Second), mark)
	if err != nil {
		t.Fatalf("A: Heartbeat: %v", err)
	}
	if d := time.Until(expires); d <= 0 || d > 2*time.Second {
		t.Fatalf("A: Heartbeat expiry in %v, want within the 2s TTL", d)
	}
	t.Logf("A holds worker 0 until %v (in %v), mark in %v",
		expires.Format("15:04:05.000"), time.Until(expires).Round(time.Millisecond), time.Until(time.UnixMilli(mark)).Round(time.Millisecond))

	proxy.Stall()
	// B asks again and again: refused while A's lease lives, given the ID
	// once it has expired, never before.
	failures := 0
	var cb leaf.WorkerClaim
	testutil.WaitForState(t, "B to get worker 0 once A's lease expired", func() (bool, string) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("B: no worker ID %v after A's lease expired (%d attempts)", time.Since(expires), failures)
		}
		cb, err = b.Register(testutil.Context(t, 5*time.Second), leaftest.TestEndpoint(1), 0)
		done := time.Now()
		if err == nil {
			if done.Before(expires) {
				t.Fatalf("B: got worker %d at %v, before A's lease expiry %v", cb.WorkerID, done.Format("15:04:05.000"), expires.Format("15:04:05.000"))
			}
			return true, ""
		}
		if !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
			t.Fatalf("B: Register while A holds the only ID: %v, want ErrWorkerIDsExhausted", err)
		}
		failures++
		return false, fmt.Sprintf("%d refusals, %v after A's lease expiry", failures, time.Since(expires).Round(time.Millisecond))
	})
	t.Logf("B got worker %d after %d refusals, %v after A's expiry", cb.WorkerID, failures, time.Since(expires).Round(time.Millisecond))
	if failures == 0 {
		t.Fatal("B: the first Register succeeded while A's lease was alive")
	}
	if cb.WorkerID != 0 || cb.HighWater < mark {
		t.Fatalf("B: claim %+v, want worker 0 with high-water >= A's mark %d", cb, mark)
	}

	proxy.Up()
	_, err = a.Heartbeat(testutil.Context(t, 10*time.Second), time.Now().UnixMilli()+1500)
	if !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("A: Heartbeat after its lease expired: %v, want ErrWorkerLost", err)
	}
	// The lost holder must not have touched the mark B wrote.
	if _, err := b.Heartbeat(testutil.Context(t, 10*time.Second), time.Now().UnixMilli()); err != nil {
		t.Fatalf("B: Heartbeat: %v", err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %v, want < 20s", el)
	}
}

// TestLayout checks the keys a claim leaves in etcd: the worker key on the
// lease, the mark without one, and that Release frees the ID at once.
func TestLayout(t *testing.T) {
	addr := testutil.Etcd(t)
	cfg := namespace(t, addr)
	cli := admin(t, addr)
	r := open(t, cfg)
	ctx := testutil.Context(t, 20*time.Second)
	base := cfg.Prefix + cfg.Name + "/"

	c, err := r.Register(ctx, leaf.Endpoint{IP: "10.1.2.3", Port: 8080}, 1023)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if c.WorkerID != 0 || c.HighWater != 0 {
		t.Fatalf("claim %+v, want worker 0 without history", c)
	}
	if d := time.Until(c.Expires); d <= 0 || d > etcd.DefaultTTL {
		t.Fatalf("Register expiry in %v, want within the default TTL %v", d, etcd.DefaultTTL)
	}
	mark := time.Now().UnixMilli() + 3000
	if _, err := r.Heartbeat(ctx, mark); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}

	type rec struct {
		IP        string `json:"ip"`
		Port      string `json:"port"`
		Timestamp int64  `json:"timestamp"`
	}
	get := func(key string) (rec, clientv3.LeaseID, bool) {
		t.Helper()
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get %s: %v", key, err)
		}
		if len(resp.Kvs) == 0 {
			return rec{}, 0, false
		}
		var v rec
		if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
			t.Fatalf("%s = %q: %v", key, resp.Kvs[0].Value, err)
		}
		return v, clientv3.LeaseID(resp.Kvs[0].Lease), true
	}
	w, lease, ok := get(base + "worker/0")
	if !ok || w.IP != "10.1.2.3" || w.Port != "8080" || w.Timestamp <= 0 || lease == 0 {
		t.Fatalf("worker/0 = %+v lease %x (present %v), want our endpoint on a lease", w, lease, ok)
	}
	m, mlease, ok := get(base + "mark/0")
	if !ok || m.IP != "10.1.2.3" || m.Timestamp != mark || mlease != 0 {
		t.Fatalf("mark/0 = %+v lease %x (present %v), want timestamp %d without lease", m, mlease, ok, mark)
	}

	final := mark - 1000
	if err := r.Release(ctx, final); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, _, ok := get(base + "worker/0"); ok {
		t.Fatal("worker/0 still present after Release")
	}
	if m, _, _ := get(base + "mark/0"); m.Timestamp != final {
		t.Fatalf("mark/0 after Release = %d, want %d", m.Timestamp, final)
	}
	// Released: no claim to renew or release.
	if _, err := r.Heartbeat(ctx, final); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("Heartbeat after Release: %v, want ErrWorkerLost", err)
	}
	if err := r.Release(ctx, final); err != nil {
		t.Fatalf("second Release: %v", err)
	}

	// The released ID's mark lies in the future: the next claim skips it;
	// with a pool of that ID alone, none is free until the mark passes.
	c2, err := r.Register(ctx, leaf.Endpoint{IP: "10.1.2.4", Port: 8080}, 1023)
	if err != nil {
		t.Fatalf("Register after Release: %v", err)
	}
	if c2.WorkerID != 1 {
		t.Fatalf("Register after Release: worker %d, want 1 (0's mark is ahead)", c2.WorkerID)
	}
	r2 := open(t, cfg)
	if _, err := r2.Register(ctx, leaf.Endpoint{IP: "10.1.2.5", Port: 8080}, 0); !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
		t.Fatalf("Register(maxID 0) while 0's mark is ahead: %v, want ErrWorkerIDsExhausted", err)
	}
	// A refused Register leaves nothing behind.
	resp, err := cli.Get(ctx, base+"worker/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 {
		t.Fatalf("%d worker keys, want 1", resp.Count)
	}

	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := r.Heartbeat(ctx, final); !errors.Is(err, leaf.ErrClosed) {
		t.Fatalf("Heartbeat after Close: %v, want ErrClosed", err)
	}
	// Close does not release: the worker key stays until its lease expires.
	if _, _, ok := get(base + "worker/1"); !ok {
		t.Fatal("worker/1 gone right after Close; Close must not release")
	}
}

// TestUnreadableMark: an ID whose mark cannot be read is never handed out.
func TestUnreadableMark(t *testing.T) {
	addr := testutil.Etcd(t)
	cfg := namespace(t, addr)
	cli := admin(t, addr)
	ctx := testutil.Context(t, 20*time.Second)
	if _, err := cli.Put(ctx, cfg.Prefix+cfg.Name+"/mark/0", "not json"); err != nil {
		t.Fatal(err)
	}
	r := open(t, cfg)
	c, err := r.Register(ctx, leaftest.TestEndpoint(0), 1023)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if c.WorkerID != 1 {
		t.Fatalf("worker %d, want 1 (0's mark is unreadable)", c.WorkerID)
	}
}

func TestOpenUnreachable(t *testing.T) {
	start := time.Now()
	_, err := etcd.Open(t.Context(), etcd.Config{Endpoints: []string{"127.0.0.1:1"}, Name: "x", DialTimeout: 2 * time.Second})
	el := time.Since(start)
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	if errors.Is(err, leaf.ErrInvalidArgument) {
		t.Fatalf("Open on a closed port: %v, not an invalid argument", err)
	}
	if el > 4*time.Second {
		t.Fatalf("Open on a closed port took %v", el)
	}
	t.Logf("after %v: %v", el.Round(time.Millisecond), err)
}

func TestConfigInvalid(t *testing.T) {
	ok := etcd.Config{Endpoints: []string{"127.0.0.1:1"}, Name: "leaf"}
	for name, mod := range map[string]func(*etcd.Config){
		"no endpoints":       func(c *etcd.Config) { c.Endpoints = nil },
		"empty endpoint":     func(c *etcd.Config) { c.Endpoints = []string{""} },
		"no name":            func(c *etcd.Config) { c.Name = "" },
		"slash in name":      func(c *etcd.Config) { c.Name = "a/b" },
		"control in name":    func(c *etcd.Config) { c.Name = "a\nb" },
		"relative prefix":    func(c *etcd.Config) { c.Prefix = "leaf/" },
		"no trailing slash":  func(c *etcd.Config) { c.Prefix = "/leaf" },
		"short TTL":          func(c *etcd.Config) { c.TTL = time.Second },
		"fractional TTL":     func(c *etcd.Config) { c.TTL = 2500 * time.Millisecond },
		"negative TTL":       func(c *etcd.Config) { c.TTL = -time.Second },
		"negative dial time": func(c *etcd.Config) { c.DialTimeout = -time.Second },
	} {
		cfg := ok
		mod(&cfg)
		start := time.Now()
		_, err := etcd.Open(t.Context(), cfg)
		if !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("%s: Open = %v, want ErrInvalidArgument", name, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s: took %v: validation must not wait for the server", name, el)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", name, err)
		}
	}
}

// TestSameEndpoint: a second server with the same endpoint gets another
// worker ID; the ID belongs to the lease, not to the endpoint.
func TestSameEndpoint(t *testing.T) {
	cfg := namespace(t, testutil.Etcd(t))
	ep := leaf.Endpoint{IP: "10.1.2.3", Port: 8080}
	a, b := open(t, cfg), open(t, cfg)
	ca, err := a.Register(testutil.Context(t, 10*time.Second), ep, 1023)
	if err != nil {
		t.Fatalf("A: Register: %v", err)
	}
	cb, err := b.Register(testutil.Context(t, 10*time.Second), ep, 1023)
	if err != nil {
		t.Fatalf("B: Register: %v", err)
	}
	if ca.WorkerID == cb.WorkerID {
		t.Fatalf("two servers with endpoint %s both got worker %d", ep, ca.WorkerID)
	}
}

// TestPeerClocks: three servers whose clocks are 0, +10s and -3s off each
// see the other two, after a heartbeat, with the right offsets; a worker key
// written before readings were published is left out.
func TestPeerClocks(t *testing.T) {
	addr := testutil.Etcd(t)
	cfg := namespace(t, addr)
	ctx := testutil.Context(t, 20*time.Second)
	// An older version's worker key: no clock reading.
	if _, err := admin(t, addr).Put(ctx, cfg.Prefix+cfg.Name+"/worker/99", `{"ip":"10.9.9.9","port":"8080","timestamp":1}`); err != nil {
		t.Fatal(err)
	}
	offsets := []time.Duration{0, 10 * time.Second, -3 * time.Second}
	regs := make([]*etcd.Registry, len(offsets))
	ids := make(map[int64]int) // worker ID -> index
	for i, off := range offsets {
		c := cfg
		c.Now = func() time.Time { return time.Now().Add(off) }
		regs[i] = open(t, c)
		cl, err := regs[i].Register(ctx, leaftest.TestEndpoint(i), 1023)
		if err != nil {
			t.Fatalf("registry %d: Register: %v", i, err)
		}
		ids[cl.WorkerID] = i
	}
	// The readings published at Register grow stale: only the heartbeats'
	// are within the tolerance. Stale they are once every registry sees
	// every other's reading off by more than it.
	const interval = 500 * time.Millisecond
	tolerance := interval + 200*time.Millisecond
	testutil.WaitForState(t, "the readings published at Register to go stale", func() (bool, string) {
		for i, r := range regs {
			peers, err := r.PeerClocks(ctx)
			if err != nil {
				t.Fatalf("registry %d: PeerClocks: %v", i, err)
			}
			for _, p := range peers {
				j, ok := ids[p.WorkerID]
				if !ok {
					continue // the older version's key, or one the check below reports
				}
				if d := p.Offset - (offsets[j] - offsets[i]); d.Abs() <= tolerance {
					return false, fmt.Sprintf("registry %d sees peer %d off by %v", i, j, d)
				}
			}
		}
		return true, ""
	})
	for i, r := range regs {
		if _, err := r.Heartbeat(ctx, time.Now().UnixMilli()); err != nil {
			t.Fatalf("registry %d: Heartbeat: %v", i, err)
		}
	}
	readers := make([]leaftest.PeerClockReader, len(regs))
	for i, r := range regs {
		readers[i] = r
	}
	leaftest.CheckPeerClocks(t, ctx, readers, ids, offsets, tolerance)
}
