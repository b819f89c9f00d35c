package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
	s.MaxPeerSkew = -1
	start(t, s)
	if reg.calls != 0 {
		t.Errorf("PeerClocks called %d times with the check off", reg.calls)
	}
}

// A running server whose clock drifts from its peers' reports itself
// degraded, and healthy again once it agrees; it keeps issuing.
func TestPeerClockDriftAtRuntime(t *testing.T) {
	reg := &peered{WorkerRegistry: localReg(t, t.TempDir())}
	reg.set(nil, 0)
	s := settings(reg, nil)
	s.PeerCheckInterval = 50 * time.Millisecond
	g := start(t, s)
	if d := g.Degraded(); len(d) != 0 {
		t.Fatalf("degraded at start: %q", d)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !ok(); {
			if time.Now().After(end) {
				t.Fatalf("%s: status %+v, degraded %q", what, g.Status(), g.Degraded())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	reg.set(nil, 9*time.Second, 11*time.Second)
	waitFor("drift not reported", func() bool {
		d := g.Degraded()
		return len(d) == 1 && strings.Contains(d[0], "-10000ms off the average of 2 live peers")
	})
	if st := g.Status(); st.PeerSkewMs != -10000 || st.Peers != 2 {
		t.Errorf("status skew %dms peers %d, want -10000ms and 2", st.PeerSkewMs, st.Peers)
	}
	if _, err := g.NextID(ctx(t), ""); err != nil {
		t.Errorf("NextID while skewed: %v", err)
	}
	reg.set(nil, 100*time.Millisecond)
	waitFor("recovery not reported", func() bool { return len(g.Degraded()) == 0 })
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
		if err := c.Save(7, time.Now().Add(-time.Minute).UnixMilli()); err != nil {
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
	t.Run("started from the cache", func(t *testing.T) {
		reg := &inUse{WorkerRegistry: localReg(t, t.TempDir()), down: true}
		s := settings(reg, nil)
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
		var err error
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err = g.NextID(ctx(t), ""); err != nil {
				break
			}
		}
		if !errors.Is(err, leaf.ErrWorkerLost) {
			t.Fatalf("NextID after the registry said the claim is held elsewhere: %v, want ErrWorkerLost", err)
		}
		if st := g.Status(); st.WorkerID != -1 {
			t.Errorf("status worker %d, want -1 (lost)", st.WorkerID)
		}
	})
}
