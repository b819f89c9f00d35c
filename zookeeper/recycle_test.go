package zookeeper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

func openRecycle(t *testing.T, cfg Config) *RecycleRegistry {
	t.Helper()
	r, err := OpenRecycle(testutil.Context(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("OpenRecycle: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestRecycleLeaseExpiry: a holder cut off from ZooKeeper keeps its ID until
// its lease has run out (its session expiring first changes nothing); then
// another server gets the ID with the mark, and the old holder learns it
// lost it.
func TestRecycleLeaseExpiry(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	proxy := testutil.NewProxy(t, addr)
	ctx := testutil.Context(t, 20*time.Second)
	a := openRecycle(t, testConfig(proxy.Addr(), name))
	b := openRecycle(t, testConfig(addr, name))

	ca, err := a.Register(ctx, leaftest.TestEndpoint(0), 0)
	if err != nil || ca.WorkerID != 0 {
		t.Fatalf("A: Register = %+v, %v; want worker 0", ca, err)
	}
	markA := time.Now().UnixMilli() + 1500
	expA, err := a.Heartbeat(ctx, markA)
	if err != nil {
		t.Fatalf("A: Heartbeat: %v", err)
	}
	if d := time.Until(expA); d <= 0 || d > testLease {
		t.Fatalf("A: lease expires in %v, want within the lease %v", d, testLease)
	}

	proxy.Stall()
	stalled := time.Now()
	// B asks again and again: refused while A's lease lives, given the ID
	// once it has expired, never before.
	refusals := 0
	var cb leaf.WorkerClaim
	testutil.WaitForState(t, "B to get worker 0 once A's lease expired", func() (bool, string) {
		cb, err = b.Register(ctx, leaftest.TestEndpoint(1), 0)
		now := time.Now()
		if err == nil {
			if now.Before(expA) {
				t.Fatalf("B got worker %d at %v, before A's lease expires at %v", cb.WorkerID, now.Format(time.StampMilli), expA.Format(time.StampMilli))
			}
			return true, ""
		}
		if !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
			t.Fatalf("B: Register: %v, want ErrWorkerIDsExhausted while A holds the ID", err)
		}
		if now.After(expA.Add(10 * time.Second)) {
			t.Fatalf("B still refused %v after A's lease expired: %v", now.Sub(expA), err)
		}
		refusals++
		return false, fmt.Sprintf("refused %v after A's lease expired: %v", now.Sub(expA).Round(time.Millisecond), err)
	})
	if refusals == 0 {
		t.Fatal("B got the ID at the first try, while A held it")
	}
	if cb.WorkerID != 0 || cb.HighWater < markA {
		t.Fatalf("B: %+v; want worker 0 with A's mark %d", cb, markA)
	}
	t.Logf("B refused %d times, got worker 0 %v after the stall, %v after A's lease expiry",
		refusals, time.Since(stalled).Round(time.Millisecond), time.Since(expA).Round(time.Millisecond))

	proxy.Up()
	// Heartbeats fail while A reconnects, then tell it the ID is lost; none
	// succeeds.
	start := time.Now()
	testutil.WaitForState(t, "A to learn, reconnected, that B took the ID", func() (bool, string) {
		_, err := a.Heartbeat(ctx, time.Now().UnixMilli()+1500)
		if err == nil || time.Since(start) > 15*time.Second {
			t.Fatalf("A: Heartbeat after B took the ID: %v, want ErrWorkerLost", err)
		}
		if errors.Is(err, leaf.ErrWorkerLost) {
			t.Logf("A learnt in %v: %v", time.Since(start).Round(time.Millisecond), err)
			return true, ""
		}
		return false, fmt.Sprintf("Heartbeat: %v", err)
	})
	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("A: second Heartbeat: %v, want ErrWorkerLost", err)
	}
	// B's claim is untouched by A's attempts.
	if _, err := b.Heartbeat(ctx, time.Now().UnixMilli()+1000); err != nil {
		t.Errorf("B: Heartbeat: %v", err)
	}
	// A can register anew: the pool of one is B's now.
	if _, err := a.Register(ctx, leaftest.TestEndpoint(0), 0); !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
		t.Errorf("A: Register again: %v, want ErrWorkerIDsExhausted", err)
	}
}

// TestRecycleLayout checks the nodes a claim writes and that Release frees
// the ID at once, protected by its mark.
func TestRecycleLayout(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	ctx := testutil.Context(t, 30*time.Second)
	inuse, mark := Root+"/"+name+"/recycle/inuse/0", Root+"/"+name+"/recycle/mark/0"

	cfg := testConfig(addr, name)
	cfg.Holder = "host-a/1"
	a := openRecycle(t, cfg)
	ep := leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	before := time.Now()
	c, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || c.WorkerID != 0 || c.HighWater != 0 {
		t.Fatalf("Register = %+v, %v; want worker 0 without history", c, err)
	}
	if c.Expires.Before(before.Add(testLease)) || c.Expires.After(time.Now().Add(testLease)) {
		t.Errorf("Expires %v, want a lease after the call", c.Expires)
	}
	data, st, err := raw.Get(inuse)
	if err != nil {
		t.Fatalf("inuse node: %v", err)
	}
	if string(data) != `{"ip":"10.0.0.1","port":"8080"}` {
		t.Errorf("inuse data %s", data)
	}
	if st.EphemeralOwner == 0 || st.EphemeralOwner != a.c.conn.SessionID() {
		t.Errorf("inuse owner %#x, want the holder's session %#x", st.EphemeralOwner, a.c.conn.SessionID())
	}
	readMark := func(holder string) claimRecord {
		t.Helper()
		data, st, err := raw.Get(mark)
		if err != nil {
			t.Fatalf("mark node: %v", err)
		}
		if st.EphemeralOwner != 0 {
			t.Errorf("mark node is ephemeral")
		}
		var rec claimRecord
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("mark data %s: %v", data, err)
		}
		wantLease := testLease.Milliseconds()
		if holder == "" {
			wantLease = rec.LeaseMs // a released lease says nothing of its length
		}
		if rec.IP != ep.IP || rec.Port != "8080" || rec.Holder != holder || rec.LeaseMs != wantLease {
			t.Errorf("mark data %s, want holder %q", data, holder)
		}
		return rec
	}
	// The lease: the mark node, naming its holder, with the ID's mark.
	if rec := readMark("host-a/1"); rec.Timestamp != 0 || rec.Clock < before.UnixMilli() {
		t.Errorf("mark after Register: %+v, want the ID's mark (none) and the holder's clock", rec)
	}
	hb := time.Now().UnixMilli() + 500
	if _, err := a.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if rec := readMark("host-a/1"); rec.Timestamp != hb {
		t.Errorf("mark after Heartbeat: %d, want %d", rec.Timestamp, hb)
	}
	final := time.Now().UnixMilli() - 1
	if err := a.Release(ctx, final); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if rec := readMark(""); rec.Timestamp != final {
		t.Errorf("mark after Release: %d, want %d", rec.Timestamp, final)
	}
	if ok, _, err := raw.Exists(inuse); err != nil || ok {
		t.Errorf("inuse node after Release: exists %v, %v", ok, err)
	}
	if _, err := a.Heartbeat(ctx, hb); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Errorf("Heartbeat after Release: %v, want ErrWorkerLost", err)
	}

	// The mark has passed: the next server gets the ID at once, with it.
	b := openRecycle(t, testConfig(addr, name))
	c, err = b.Register(ctx, leaf.Endpoint{IP: "10.0.0.2", Port: 8080}, leaftest.MaxWorkerID)
	if err != nil || c.WorkerID != 0 || c.HighWater != final {
		t.Fatalf("after Release: %+v, %v; want worker 0 with high-water %d", c, err, final)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists(inuse); err != nil || ok {
		t.Errorf("inuse node after Close: exists %v, %v", ok, err)
	}
	if _, err := b.Register(ctx, ep, 0); !errors.Is(err, leaf.ErrClosed) {
		t.Errorf("Register after Close: %v, want ErrClosed", err)
	}
}

// TestRecycleTakeover: a holder whose mark another server rewrote has lost
// its ID; registering again frees the inuse node it still owns.
func TestRecycleTakeover(t *testing.T) {
	t.Parallel()
	addr := testutil.ZooKeeper(t)
	name := newName(t, addr, testutil.UniqueName())
	raw := rawConn(t, addr)
	ctx := testutil.Context(t, 30*time.Second)
	inuse, mark := Root+"/"+name+"/recycle/inuse/0", Root+"/"+name+"/recycle/mark/0"

	a := openRecycle(t, testConfig(addr, name))
	ep := leaftest.TestEndpoint(0)
	if c, err := a.Register(ctx, ep, leaftest.MaxWorkerID); err != nil || c.WorkerID != 0 {
		t.Fatalf("Register = %+v, %v", c, err)
	}
	future := time.Now().UnixMilli() + 60_000
	if _, err := raw.Set(mark, encode(leaftest.TestEndpoint(9), future), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("Heartbeat after another server wrote the mark: %v, want ErrWorkerLost", err)
	}
	if _, err := a.Heartbeat(ctx, time.Now().UnixMilli()); !errors.Is(err, leaf.ErrWorkerLost) {
		t.Fatalf("second Heartbeat: %v, want ErrWorkerLost", err)
	}
	// ID 0 is protected by the mark in the future: A gets 1, and its stale
	// inuse node of 0 is gone.
	c, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || c.WorkerID != 1 {
		t.Fatalf("Register after the loss = %+v, %v; want worker 1", c, err)
	}
	if ok, _, err := raw.Exists(inuse); err != nil || ok {
		t.Errorf("the lost claim's inuse node: exists %v, %v", ok, err)
	}
	if data, _, err := raw.Get(mark); err != nil || string(data) != string(encode(leaftest.TestEndpoint(9), future)) {
		t.Errorf("the other server's mark: %s, %v", data, err)
	}
	// Registering again gives the held claim up first.
	c2, err := a.Register(ctx, ep, leaftest.MaxWorkerID)
	if err != nil || c2.WorkerID != 1 {
		t.Fatalf("second Register = %+v, %v; want worker 1 again", c2, err)
	}
	// A stranger's inuse node, not ours, is left alone.
	if _, err := raw.Create(Root+"/"+name+"/recycle/inuse/2", []byte(`{}`), zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	b := openRecycle(t, testConfig(addr, name))
	if c, err := b.Register(ctx, leaftest.TestEndpoint(1), leaftest.MaxWorkerID); err != nil || c.WorkerID != 3 {
		t.Fatalf("B: Register = %+v, %v; want worker 3", c, err)
	}
}
