package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/snowflake"
)

// peered wraps a registry with a peer listing the test sets: the offsets of
// the peers' clocks from ours, or an error.
type peered struct {
	leaf.WorkerRegistry
	mu      sync.Mutex
	offsets []time.Duration
	err     error
	calls   int
}

func (p *peered) set(err error, offsets ...time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offsets, p.err = offsets, err
}

func (p *peered) PeerClocks(context.Context) ([]leaf.PeerClock, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	var out []leaf.PeerClock
	for i, o := range p.offsets {
		out = append(out, leaf.PeerClock{Endpoint: fmt.Sprintf("10.0.0.%d:8080", i+1), WorkerID: int64(i + 1), Offset: o})
	}
	return out, nil
}

// A starting server compares its clock with the live peers' average and
// refuses beyond MaxPeerSkew; the measured skew is in the message.
func TestPeerClockCheckAtStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		offsets []time.Duration // peers' clocks minus ours
		refuse  bool
		skewMs  int64
	}{
		{name: "no peers"},
		{name: "peers agree", offsets: []time.Duration{20 * time.Millisecond, -10 * time.Millisecond}, skewMs: -5},
		// This server 10s ahead: the peers are 10s behind it.
		{name: "10s ahead", offsets: []time.Duration{-10 * time.Second, -10 * time.Second}, refuse: true},
		{name: "1s ahead", offsets: []time.Duration{-time.Second, -time.Second}, skewMs: 1000},
		{name: "6s behind the average", offsets: []time.Duration{4 * time.Second, 8 * time.Second}, refuse: true},
		// One peer far off does not make the average pass the threshold.
		{name: "one odd peer", offsets: []time.Duration{0, 0, 0, 12 * time.Second}, skewMs: -3000},
		{name: "listing unsupported", err: fmt.Errorf("lazy: %w", errors.ErrUnsupported)},
		{name: "listing fails", err: errors.New("registry hiccup")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &peered{WorkerRegistry: localReg(t, t.TempDir())}
			reg.set(tc.err, tc.offsets...)
			g, err := snowflake.New(ctx(t), settings(reg, nil))
			if tc.refuse {
				if !errors.Is(err, leaf.ErrClockSkew) || !strings.Contains(err.Error(), "max_peer_skew") {
					t.Fatalf("New = %v, want ErrClockSkew naming max_peer_skew", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = g.Close(context.Background()) })
			st := g.Status()
			if st.PeerSkewMs != tc.skewMs || st.Peers != len(tc.offsets) {
				t.Errorf("status skew %dms peers %d, want %dms and %d", st.PeerSkewMs, st.Peers, tc.skewMs, len(tc.offsets))
			}
			if tc.err == nil && st.PeerCheck.IsZero() {
				t.Errorf("status has no peer check time")
			}
			if _, err := g.NextID(ctx(t), ""); err != nil {
				t.Errorf("NextID: %v", err)
			}
		})
	}
}

// A peer check can be turned off.
func TestPeerClockCheckOff(t *testing.T) {
	reg := &peered{WorkerRegistry: localReg(t, t.TempDir())}
	reg.set(nil, time.Hour)
	s := settings(reg, nil)
	s.MaxPeerSkew = 0
	start(t, s)
	if reg.calls != 0 {
		t.Errorf("PeerClocks called %d times with the check off", reg.calls)
	}
}

// A running server whose clock drifts from its peers' reports itself
// degraded at the next check, and healthy again at the one after it agrees;
// it keeps issuing. In a bubble each check runs at a known tick.
func TestPeerClockDriftAtRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &peered{WorkerRegistry: localReg(t, t.TempDir())}
		reg.set(nil, 0)
		s := settings(reg, nil)
		s.Layout = bubbleLayout
		s.PeerCheckInterval = s.HeartbeatInterval / 2 // every tick
		g := start(t, s)
		if d := g.Degraded(); len(d) != 0 {
			t.Fatalf("degraded at start: %q", d)
		}
		nextCheck := func() {
			time.Sleep(s.HeartbeatInterval)
			synctest.Wait()
		}
		reg.set(nil, 9*time.Second, 11*time.Second)
		nextCheck()
		if d := g.Degraded(); len(d) != 1 || !strings.Contains(d[0], "-10000ms off the average of 2 live peers") {
			t.Fatalf("drift not reported: degraded %q", d)
		}
		if st := g.Status(); st.PeerSkewMs != -10000 || st.Peers != 2 {
			t.Errorf("status skew %dms peers %d, want -10000ms and 2", st.PeerSkewMs, st.Peers)
		}
		if _, err := g.NextID(ctx(t), ""); err != nil {
			t.Errorf("NextID while skewed: %v", err)
		}
		reg.set(nil, 100*time.Millisecond)
		nextCheck()
		if d := g.Degraded(); len(d) != 0 {
			t.Fatalf("recovery not reported: degraded %q", d)
		}
	})
}

// inUse is a registry whose endpoint claim another live server holds.
type inUse struct {
	leaf.WorkerRegistry
	mu   sync.Mutex
	held bool
	down bool
}

func (r *inUse) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	r.mu.Lock()
	held, down := r.held, r.down
	r.mu.Unlock()
	switch {
	case down:
		return leaf.WorkerClaim{}, errDown
	case held:
		return leaf.WorkerClaim{}, fmt.Errorf("%w: endpoint %s is claimed by another session", leaf.ErrWorkerInUse, ep)
	}
	return r.WorkerRegistry.Register(ctx, ep, maxID)
}

func (r *inUse) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	if down {
		return time.Time{}, errDown
	}
	return r.WorkerRegistry.Heartbeat(ctx, mark)
}

// A live claim held by another server is a refusal, never a reason to fall
// back on the cached worker ID; and a server that started from its cache
// while the registry was down stops issuing when the registry comes back
// and says another live server holds the claim.
func TestWorkerInUse(t *testing.T) {
	cacheWith := func(t *testing.T) *local.Cache {
		c := local.NewCache(filepath.Join(t.TempDir(), "workerID.properties"))
		if err := c.Save(leaf.CachedClaim{WorkerID: 7, Mark: time.Now().Add(-time.Minute).UnixMilli(),
			LeaseUntil: time.Now().Add(time.Minute).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("at start", func(t *testing.T) {
		reg := &inUse{WorkerRegistry: localReg(t, t.TempDir()), held: true}
		s := settings(reg, nil)
		s.Cache = cacheWith(t)
		if g, err := snowflake.New(ctx(t), s); !errors.Is(err, leaf.ErrWorkerInUse) {
			if g != nil {
				_ = g.Close(context.Background())
			}
			t.Fatalf("New = %v, want ErrWorkerInUse", err)
		}
	})
	// The registry says so at the next heartbeat, and issuing stops then,
	// not when the mark the cache allowed runs out: in a bubble, the next
	// heartbeat is one tick away.
	t.Run("started from the cache", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			reg := &inUse{WorkerRegistry: localReg(t, t.TempDir()), down: true}
			s := settings(reg, nil)
			s.Layout = bubbleLayout
			s.Cache = cacheWith(t)
			g := start(t, s)
			if !g.Status().FromCache {
				t.Fatalf("not started from the cache: %+v", g.Status())
			}
			if _, err := g.NextID(ctx(t), ""); err != nil {
				t.Fatalf("NextID from the cache: %v", err)
			}
			reg.mu.Lock()
			reg.down, reg.held = false, true
			reg.mu.Unlock()
			time.Sleep(s.HeartbeatInterval)
			synctest.Wait()
			if _, err := g.NextID(ctx(t), ""); !errors.Is(err, leaf.ErrWorkerLost) {
				t.Fatalf("NextID after the registry said the claim is held elsewhere: %v, want ErrWorkerLost", err)
			}
			if st := g.Status(); st.WorkerID != -1 {
				t.Errorf("status worker %d, want -1 (lost)", st.WorkerID)
			}
		})
	})
}

// frozenPeers lists peers that are either live (their clock runs at a
// constant offset from ours) or stale: they stopped publishing, so their
// reading stays where it was, as a registry shows them after an outage
// until they heartbeat again.
type frozenPeers struct {
	leaf.WorkerRegistry
	mu     sync.Mutex
	live   []time.Duration // offsets of live peers' clocks from ours
	frozen []time.Time     // readings of stale peers
	calls  int
}

func (p *frozenPeers) PeerClocks(context.Context) ([]leaf.PeerClock, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	now := time.Now()
	var out []leaf.PeerClock
	for i, o := range p.live {
		out = append(out, leaf.PeerClock{Endpoint: fmt.Sprintf("10.0.1.%d:8080", i+1), WorkerID: int64(100 + i), Offset: o})
	}
	for i, r := range p.frozen {
		out = append(out, leaf.PeerClock{Endpoint: fmt.Sprintf("10.0.2.%d:8080", i+1), WorkerID: int64(200 + i), Offset: r.Sub(now)})
	}
	return out, nil
}

func (p *frozenPeers) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for _, o := range p.live {
		p.frozen = append(p.frozen, now.Add(o))
	}
	p.live = nil
}

// Readings that do not move are not clocks: a server starting while its
// peers' readings are old (the registry is back from an outage, the peers
// have not heartbeated yet) is not refused for the readings' age, and a
// skew is refused only once a second listing has confirmed it on readings
// that moved. In a bubble the confirmation's wait is exact.
func TestPeerClockStaleReadings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		live   []time.Duration
		stale  []time.Duration // age of each stale reading at start
		refuse bool
		peers  int
		skewMs int64
	}{
		{name: "all stale", stale: []time.Duration{20 * time.Second, 30 * time.Second}},
		{name: "stale and live", live: []time.Duration{100 * time.Millisecond}, stale: []time.Duration{20 * time.Second}, peers: 1, skewMs: -100},
		{name: "live and skewed", live: []time.Duration{-10 * time.Second, -10 * time.Second}, stale: []time.Duration{time.Minute}, refuse: true},
		{name: "live within bounds", live: []time.Duration{-3 * time.Second}, stale: []time.Duration{time.Minute}, peers: 1, skewMs: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := &frozenPeers{WorkerRegistry: localReg(t, t.TempDir()), live: tc.live}
				for _, age := range tc.stale {
					reg.frozen = append(reg.frozen, time.Now().Add(-age))
				}
				s := settings(reg, nil)
				s.Layout = bubbleLayout
				g, err := snowflake.New(ctx(t), s)
				if tc.refuse {
					if !errors.Is(err, leaf.ErrClockSkew) || !strings.Contains(err.Error(), fmt.Sprintf("of %d live peers", len(tc.live))) {
						t.Fatalf("New = %v, want ErrClockSkew over the %d live peers", err, len(tc.live))
					}
					if reg.calls != 2 {
						t.Errorf("refused after %d listings, want 2 (one to confirm)", reg.calls)
					}
					return
				}
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				t.Cleanup(func() { _ = g.Close(context.Background()) })
				if st := g.Status(); st.Peers != tc.peers || st.PeerSkewMs != tc.skewMs {
					t.Errorf("status peers %d skew %dms, want %d and %dms", st.Peers, st.PeerSkewMs, tc.peers, tc.skewMs)
				}
				if d := g.Degraded(); len(d) != 0 {
					t.Errorf("degraded: %q", d)
				}
			})
		})
	}
}

// A peer that stops publishing while this server runs drops out of the
// check instead of turning the server degraded as its reading ages past
// MaxPeerSkew.
func TestPeerClockPeerStopsPublishing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &frozenPeers{WorkerRegistry: localReg(t, t.TempDir()), live: []time.Duration{0, 0}}
		s := settings(reg, nil)
		s.Layout = bubbleLayout
		s.PeerCheckInterval = s.HeartbeatInterval
		g := start(t, s)
		if st := g.Status(); st.Peers != 2 {
			t.Fatalf("peers at start %d, want 2", st.Peers)
		}
		reg.freeze()
		for range 3 * s.MaxPeerSkew / s.HeartbeatInterval {
			time.Sleep(s.HeartbeatInterval)
			synctest.Wait()
		}
		if st := g.Status(); st.Peers != 0 || st.PeerSkewMs != 0 {
			t.Errorf("status peers %d skew %dms after the peers stopped, want 0 and 0", st.Peers, st.PeerSkewMs)
		}
		if d := g.Degraded(); len(d) != 0 {
			t.Errorf("degraded by stale readings: %q", d)
		}
	})
}
