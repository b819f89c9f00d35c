package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

// checkLiveNode checks that p is an ephemeral node of session with the live
// record of ep and worker id, and returns its timestamp.
func checkLiveNode(t *testing.T, raw *zk.Conn, p string, session int64, ep leaf.Endpoint, id int64) int64 {
	t.Helper()
	data, st, err := raw.Get(p)
	if err != nil {
		t.Fatalf("live node %s: %v", p, err)
	}
	if st.EphemeralOwner == 0 || st.EphemeralOwner != session {
		t.Errorf("live node %s: owner %#x, want session %#x", p, st.EphemeralOwner, session)
	}
	var l live
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("live node %s: data %s: %v", p, data, err)
	}
	if l.IP != ep.IP || l.Port != fmt.Sprint(ep.Port) || l.WorkerID != id || l.Timestamp <= 0 {
		t.Errorf("live node %s: data %s, want endpoint %s, worker %d", p, data, ep, id)
	}
	return l.Timestamp
}

// leaseNode checks that our lease node of ep names holder, and returns its
// record.
func leaseNode(t *testing.T, raw *zk.Conn, name string, ep leaf.Endpoint, holder string) claimRecord {
	t.Helper()
	p := Root + "/" + name + "/lease/" + ep.String()
	data, _, err := raw.Get(p)
	if err != nil {
		t.Fatalf("lease node %s: %v", p, err)
	}
	rec, err := parseClaim(data)
	if err != nil || rec.Holder != holder || rec.IP != ep.IP || rec.Port != fmt.Sprint(ep.Port) || rec.LeaseMs != testLease.Milliseconds() {
		t.Errorf("lease node %s: %s (%v), want holder %q of %s, lease %v", p, data, err, holder, ep, testLease)
	}
	return rec
}

// renewing heartbeats r every 200ms, as a live server does, until the stop
// it returns is called or the test ends.
func renewing(t *testing.T, r leaf.WorkerRegistry) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				_, _ = r.Heartbeat(ctx, time.Now().UnixMilli()+3000)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestClaimSameEndpoint: a second process given the endpoint of a live one
// cannot take it while the first renews its lease: it fails with
// ErrWorkerInUse naming the holder, at once when its deadline comes before
// the lease could lapse, after ClaimWait otherwise. Once the first
// releases, it gets the same worker ID at once; once the first dies
// without a word, only after the lease has run out.
func TestClaimSameEndpoint(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	ctx := testutil.Context(t, 60*time.Second)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	node := Root + "/" + name + "/temporary/10.0.0.1:8080"

	cfgA, cfgB := testConfig(addr, name), testConfig(addr, name)
	cfgA.Holder, cfgB.Holder = "host-a/1", "host-b/2"
	a, b := openRegistry(t, cfgA), openRegistry(t, cfgB)
	ca, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("A: Register: %v", err)
	}
	if ca.Expires.IsZero() || ca.Resumed {
		t.Errorf("A: claim %+v, want a lease, not resumed", ca)
	}
	checkLiveNode(t, raw, node, a.c.conn.SessionID(), ep, ca.WorkerID)
	leaseNode(t, raw, name, ep, "host-a/1")
	stopA := renewing(t, a)

	// A caller whose deadline comes before the lease could lapse learns
	// at once.
	start := time.Now()
	_, err = b.Register(testutil.Context(t, 300*time.Millisecond), ep, leaftest.MaxWorkerID)
	if !errors.Is(err, leaf.ErrWorkerInUse) || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("B: Register bounded by 300ms: %v after %v, want ErrWorkerInUse at once", err, time.Since(start))
	}

	wait := b.ClaimWait()
	if wait < testLease || wait > testLease+3*time.Second {
		t.Errorf("ClaimWait %v with a lease of %v", wait, testLease)
	}
	start = time.Now()
	_, err = b.Register(ctx, ep, leaftest.MaxWorkerID)
	took := time.Since(start)
	if !errors.Is(err, leaf.ErrWorkerInUse) {
		t.Fatalf("B: Register of A's endpoint: %v, want ErrWorkerInUse", err)
	}
	for _, want := range []string{ep.String(), "host-a/1", "snowflake.endpoint", "stop the other server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("B: error %q does not name %q", err, want)
		}
	}
	t.Logf("B failed after %v: %v", took.Round(time.Millisecond), err)
	// A is untouched.
	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()); err != nil {
		t.Fatalf("A: Heartbeat: %v", err)
	}
	stopA()

	// Released: at once.
	if err := a.Release(ctx, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists(node); err != nil || ok {
		t.Errorf("live node after Release: exists %v, %v", ok, err)
	}
	start = time.Now()
	cb, err := b.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || cb.WorkerID != ca.WorkerID || cb.Resumed {
		t.Fatalf("B: Register after A's Release: %+v, %v; want worker %d", cb, err, ca.WorkerID)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("B: Register after A's Release took %v, want at once", took)
	}
	checkLiveNode(t, raw, node, b.c.conn.SessionID(), ep, ca.WorkerID)
	leaseNode(t, raw, name, ep, "host-b/2")

	// B dies without a word: A may take the endpoint only once B's lease
	// has run out, counted from B's last renewal.
	lastRenewal := time.Now()
	if _, err := b.Heartbeat(ctx, time.Now().UnixMilli()+3000); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	a2 := openRegistry(t, cfgA)
	ca2, err := a2.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || ca2.WorkerID != ca.WorkerID {
		t.Fatalf("A: Register after B died: %+v, %v; want worker %d", ca2, err, ca.WorkerID)
	}
	if since := time.Since(lastRenewal); since < testLease {
		t.Errorf("A took the endpoint %v after B's last renewal, before B's lease (%v) could have run out", since, testLease)
	}
}

// TestClaimResume: a restart of the holder itself (the same instance
// identity) takes its claim back at once, though its previous run died
// without releasing it and the lease has not run out; it is Resumed. Any
// other process still waits.
func TestClaimResume(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	ctx := testutil.Context(t, 30*time.Second)
	ep := leaftest.TestEndpoint(0)
	cfg := testConfig(addr, name)
	cfg.Holder = "host-a/1"
	cfg.Lease = time.Minute // would stop a restart for a minute without the identity
	a := openRegistry(t, cfg)
	c, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()+3000); err != nil {
		t.Fatal(err)
	}
	_ = a.Close() // kill -9

	other := cfg
	other.Holder = "host-b/2"
	if _, err := openRegistry(t, other).Register(testutil.Context(t, 2*time.Second), ep, leaftest.MaxWorkerID); !errors.Is(err, leaf.ErrWorkerInUse) {
		t.Fatalf("another identity during the lease: %v, want ErrWorkerInUse", err)
	}
	start := time.Now()
	c2, err := openRegistry(t, cfg).Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || c2.WorkerID != c.WorkerID || !c2.Resumed {
		t.Fatalf("restart with the same identity: %+v, %v; want worker %d, resumed", c2, err, c.WorkerID)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("restart with the same identity took %v, want at once", took)
	}
}

// TestClaimCutOff: a holder cut off from ZooKeeper keeps its lease until it
// runs out (its session expiring changes nothing); then another process
// with its endpoint takes it over. When the first comes back, its
// Heartbeat reports the claim lost, naming the new holder, and it cannot
// register again while the other renews.
func TestClaimCutOff(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	proxy := testutil.NewProxy(t, addr)
	ctx := testutil.Context(t, 60*time.Second)
	ep := leaf.Endpoint{IP: "", Port: 8080} // Java's endpoint on a host without IPv4

	cfgOld, cfgB := testConfig(proxy.Addr(), name), testConfig(addr, name)
	cfgOld.Holder, cfgB.Holder = "host-old/1", "host-b/2"
	old := openRegistry(t, cfgOld)
	c, err := old.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("old: Register: %v", err)
	}
	lastRenewal := time.Now()
	if _, err := old.Heartbeat(ctx, time.Now().UnixMilli()+3000); err != nil {
		t.Fatal(err)
	}
	proxy.Stall()

	b := openRegistry(t, cfgB)
	cb, err := b.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || cb.WorkerID != c.WorkerID {
		t.Fatalf("B: Register once the old lease ran out: %+v, %v; want worker %d", cb, err, c.WorkerID)
	}
	if since := time.Since(lastRenewal); since < testLease {
		t.Errorf("B took the endpoint %v after the old holder's last renewal, before its lease (%v) could have run out", since, testLease)
	}
	renewing(t, b)

	proxy.Up()
	// Heartbeats fail while the old holder reconnects, then tell it the
	// endpoint is lost; none succeeds.
	deadline := time.Now().Add(15 * time.Second)
	testutil.WaitForState(t, "the old holder to learn, reconnected, that B took the endpoint", func() (bool, string) {
		_, err = old.Heartbeat(ctx, time.Now().UnixMilli())
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("old: Heartbeat after B took the endpoint: %v, want ErrWorkerLost", err)
		}
		return errors.Is(err, leaf.ErrWorkerLost), fmt.Sprintf("Heartbeat: %v", err)
	})
	if !strings.Contains(err.Error(), "host-b/2") {
		t.Errorf("old: the loss %q does not name the new holder", err)
	}
	if _, err := old.Heartbeat(ctx, time.Now().UnixMilli()); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("old: second Heartbeat: %v, want ErrWorkerLost", err)
	}
	if _, err := old.Register(testutil.Context(t, 500*time.Millisecond), ep, leaftest.MaxWorkerID); !errors.Is(err, leaf.ErrWorkerInUse) {
		t.Errorf("old: Register again while B holds the endpoint: %v, want ErrWorkerInUse", err)
	}
	if _, err := b.Heartbeat(ctx, time.Now().UnixMilli()); err != nil {
		t.Errorf("B: Heartbeat: %v", err)
	}
}

// TestClaimAfterExpiry: a server whose session expired while its lease
// held renews the lease in its new session, makes its live node again at
// the next heartbeat and carries on.
func TestClaimAfterExpiry(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	proxy := testutil.NewProxy(t, addr)
	ctx := testutil.Context(t, 60*time.Second)
	ep := leaftest.TestEndpoint(0)
	node := Root + "/" + name + "/temporary/" + ep.String()

	a := openRegistry(t, testConfig(proxy.Addr(), name))
	c, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	first := a.c.conn.SessionID()
	proxy.Stall()
	deadline := time.Now().Add(15 * time.Second)
	testutil.WaitFor(t, "the live node "+node+" to go with its session", func() bool {
		ok, _, err := raw.Exists(node)
		if err != nil {
			t.Fatal(err)
		}
		if ok && time.Now().After(deadline) {
			t.Fatalf("live node %s outlived its session", node)
		}
		return !ok
	})
	proxy.Up()
	// Heartbeats fail while the registry reconnects, then succeed; none
	// says the worker ID is lost.
	deadline = time.Now().Add(15 * time.Second)
	testutil.WaitForState(t, "a Heartbeat to succeed after the session expired", func() (bool, string) {
		_, err = a.Heartbeat(ctx, time.Now().UnixMilli())
		if err != nil && (errors.Is(err, leaf.ErrWorkerLost) || time.Now().After(deadline)) {
			t.Fatalf("Heartbeat after the session expired: %v, want success", err)
		}
		return err == nil, fmt.Sprintf("Heartbeat: %v", err)
	})
	session := a.c.conn.SessionID()
	if session == first {
		t.Fatalf("session %#x did not change", session)
	}
	checkLiveNode(t, raw, node, session, ep, c.WorkerID)
}

// TestClaimDeleted: a lease node someone deleted is a lost claim (whoever
// deleted it may have let another process take the endpoint); registering
// again takes it back.
func TestClaimDeleted(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	ctx := testutil.Context(t, 30*time.Second)
	ep := leaftest.TestEndpoint(0)
	node := Root + "/" + name + "/temporary/" + ep.String()
	a := openRegistry(t, testConfig(addr, name))
	c, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(Root+"/"+name+"/lease/"+ep.String(), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("Heartbeat after the lease node was deleted: %v, want ErrWorkerLost", err)
	}
	if _, err := a.PeerClocks(ctx); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("PeerClocks after the loss: %v, want ErrWorkerLost", err)
	}
	c2, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || c2.WorkerID != c.WorkerID {
		t.Fatalf("Register again: %+v, %v; want worker %d", c2, err, c.WorkerID)
	}
	checkLiveNode(t, raw, node, a.c.conn.SessionID(), ep, c.WorkerID)
	// Registering under another endpoint moves the live node.
	ep2 := leaftest.TestEndpoint(1)
	c3, err := a.Register(ctx, ep2, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	checkLiveNode(t, raw, Root+"/"+name+"/temporary/"+ep2.String(), a.c.conn.SessionID(), ep2, c3.WorkerID)
	if ok, _, err := raw.Exists(node); err != nil || ok {
		t.Errorf("the first endpoint's live node: exists %v, %v", ok, err)
	}
}

func offsetClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// peerClocker is what both registries offer.
type peerClocker interface {
	leaf.WorkerRegistry
	PeerClocks(context.Context) ([]leaf.PeerClock, error)
}

// TestPeerClocks: servers of both registries whose clocks are set apart
// measure each other's offsets, however long ago each wrote its live node;
// a lone server sees none, and nodes that are not live records are skipped.
func TestPeerClocks(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	ctx := testutil.Context(t, 30*time.Second)
	const tolerance = 200 * time.Millisecond

	servers := []struct {
		ep      leaf.Endpoint
		offset  time.Duration
		recycle bool
	}{
		{leaftest.TestEndpoint(0), 0, false},
		{leaftest.TestEndpoint(1), 10 * time.Second, false},
		{leaf.Endpoint{IP: "", Port: 8080}, -3 * time.Second, false},
		{leaftest.TestEndpoint(3), 1500 * time.Millisecond, true},
	}
	regs := make([]peerClocker, len(servers))
	ids := make([]int64, len(servers))
	for i, s := range servers {
		cfg := testConfig(addr, name)
		cfg.Now = offsetClock(s.offset)
		if s.recycle {
			regs[i] = openRecycle(t, cfg)
		} else {
			regs[i] = openRegistry(t, cfg)
		}
		if _, err := regs[i].PeerClocks(ctx); !errors.Is(err, leaf.ErrWorkerLost) {
			t.Errorf("server %d: PeerClocks before Register: %v, want ErrWorkerLost", i, err)
		}
		c, err := regs[i].Register(ctx, s.ep, leaftest.MaxWorkerID)
		if err != nil {
			t.Fatalf("server %d: Register: %v", i, err)
		}
		ids[i] = c.WorkerID
		if i == 0 {
			if peers, err := regs[0].PeerClocks(ctx); err != nil || len(peers) != 0 {
				t.Fatalf("lone server: PeerClocks = %v, %v; want none", peers, err)
			}
		}
	}
	raw := rawConn(t, addr)
	for _, junk := range []string{"junk", "no-timestamp"} {
		data := map[string]string{"junk": "not json", "no-timestamp": `{"ip":"10.9.9.9","port":"1"}`}[junk]
		if _, err := raw.Create(Root+"/"+name+"/temporary/"+junk, []byte(data), zk.FlagEphemeral, openACL); err != nil {
			t.Fatal(err)
		}
	}
	// The peers' live nodes grow stale, by ZooKeeper's clock (a probe
	// node's modification time), well past the tolerance: the measurement
	// must not care.
	probe := Root + "/" + name + "/clock-probe"
	if _, err := raw.Create(probe, nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitForState(t, "the live nodes to be 500ms old", func() (bool, string) {
		st, err := raw.Set(probe, nil, -1)
		if err != nil {
			t.Fatal(err)
		}
		kids, _, err := raw.Children(Root + "/" + name + "/temporary")
		if err != nil {
			t.Fatal(err)
		}
		var newest int64
		for _, k := range kids {
			_, kst, err := raw.Get(Root + "/" + name + "/temporary/" + k)
			if err != nil {
				t.Fatal(err)
			}
			newest = max(newest, kst.Mtime)
		}
		age := time.Duration(st.Mtime-newest) * time.Millisecond
		return age >= 500*time.Millisecond, fmt.Sprintf("the newest live node is %v old", age)
	})

	for i, r := range regs {
		peers, err := r.PeerClocks(ctx)
		if err != nil {
			t.Fatalf("server %d: PeerClocks: %v", i, err)
		}
		slices.SortFunc(peers, func(a, b leaf.PeerClock) int { return strings.Compare(a.Endpoint, b.Endpoint) })
		var want []leaf.PeerClock
		for j, s := range servers {
			if j != i {
				want = append(want, leaf.PeerClock{Endpoint: s.ep.String(), WorkerID: ids[j], Offset: s.offset - servers[i].offset})
			}
		}
		slices.SortFunc(want, func(a, b leaf.PeerClock) int { return strings.Compare(a.Endpoint, b.Endpoint) })
		if len(peers) != len(want) {
			t.Fatalf("server %d: peers %+v, want %+v", i, peers, want)
		}
		for k, p := range peers {
			w := want[k]
			if p.Endpoint != w.Endpoint || p.WorkerID != w.WorkerID || (p.Offset-w.Offset).Abs() > tolerance {
				t.Errorf("server %d: peer %+v, want %+v within %v", i, p, w, tolerance)
			}
		}
		t.Logf("server %d (clock %+v): %+v", i, servers[i].offset, peers)
	}
}

// TestRecycleSameEndpoint: two leasing servers given one endpoint lease two
// IDs and each has a live node, so each sees the other's clock; a Registry
// of that endpoint is not barred by them.
func TestRecycleSameEndpoint(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	ctx := testutil.Context(t, 30*time.Second)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}

	cfgA, cfgB := testConfig(addr, name), testConfig(addr, name)
	cfgB.Now = offsetClock(2 * time.Second)
	a, b := openRecycle(t, cfgA), openRecycle(t, cfgB)
	ca, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if ca.WorkerID == cb.WorkerID {
		t.Fatalf("both leased worker %d", ca.WorkerID)
	}
	dir := Root + "/" + name + "/temporary/"
	checkLiveNode(t, raw, dir+liveName(ep, ca.WorkerID), a.c.conn.SessionID(), ep, ca.WorkerID)
	checkLiveNode(t, raw, dir+liveName(ep, cb.WorkerID), b.c.conn.SessionID(), ep, cb.WorkerID)

	for _, c := range []struct {
		who    string
		r      *RecycleRegistry
		peer   int64
		offset time.Duration
	}{
		{"A", a, cb.WorkerID, 2 * time.Second},
		{"B", b, ca.WorkerID, -2 * time.Second},
	} {
		peers, err := c.r.PeerClocks(ctx)
		if err != nil {
			t.Fatalf("%s: PeerClocks: %v", c.who, err)
		}
		if len(peers) != 1 || peers[0].Endpoint != ep.String() || peers[0].WorkerID != c.peer || (peers[0].Offset-c.offset).Abs() > 200*time.Millisecond {
			t.Errorf("%s: peers %+v, want worker %d at %v", c.who, peers, c.peer, c.offset)
		}
	}

	start := time.Now()
	r := openRegistry(t, testConfig(addr, name))
	cr, err := r.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil {
		t.Fatalf("Registry of the leasing servers' endpoint: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Registry of the leasing servers' endpoint took %v", took)
	}

	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists(dir + liveName(ep, ca.WorkerID)); err != nil || ok {
		t.Errorf("A's live node after Release: exists %v, %v", ok, err)
	}
	peers, err := b.PeerClocks(ctx)
	if err != nil || len(peers) != 1 || peers[0].WorkerID != cr.WorkerID || peers[0].Endpoint != ep.String() {
		t.Errorf("B: peers after A's Release: %+v, %v; want the Registry only", peers, err)
	}
}

// TestClaimRace: servers given one endpoint and started together on an
// empty tree (racing for its node as well as its live node): one registers,
// every other fails with ErrWorkerInUse.
func TestClaimRace(t *testing.T) {
	t.Parallel()
	const servers = 8
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	ep := leaftest.TestEndpoint(0)
	regs := make([]*Registry, servers)
	for i := range regs {
		regs[i] = openRegistry(t, testConfig(addr, name))
	}
	claims := make([]leaf.WorkerClaim, servers)
	errs := make([]error, servers)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i, r := range regs {
		wg.Go(func() {
			start.Wait()
			claims[i], errs[i] = r.Register(testutil.Context(t, time.Second), ep, leaftest.MaxWorkerID)
		})
	}
	start.Done()
	wg.Wait()
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			t.Logf("server %d registered worker %d", i, claims[i].WorkerID)
		case !errors.Is(err, leaf.ErrWorkerInUse):
			t.Errorf("server %d: %v, want ErrWorkerInUse", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d of %d servers with one endpoint registered, want 1", winners, servers)
	}
	// The losers created no node: each would have spent a worker ID.
	raw := rawConn(t, addr)
	nodes, _, err := raw.Children(Root + "/" + name + "/forever")
	if err != nil || len(nodes) != 1 {
		t.Errorf("nodes %v, %v; want the winner's alone", nodes, err)
	}
}
