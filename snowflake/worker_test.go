package snowflake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/local"
)

// The worker tests run in synctest bubbles, whose clock starts at
// 2000-01-01: the layout's epoch is before that.
var bubbleLayout = Layout{Epoch: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}

// fakeLog is the issuer as the worker sees it.
type fakeLog struct {
	last atomic.Int64
	n    atomic.Uint64
}

func (f *fakeLog) lastMs() int64       { return f.last.Load() }
func (f *fakeLog) issuedCount() uint64 { return f.n.Load() }

// recorder passes calls to a registry and records the marks that were
// persisted (heartbeats and releases the registry accepted).
type recorder struct {
	leaf.WorkerRegistry
	mu    sync.Mutex
	marks []int64
}

func (r *recorder) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	exp, err := r.WorkerRegistry.Heartbeat(ctx, mark)
	if err == nil {
		r.mu.Lock()
		r.marks = append(r.marks, mark)
		r.mu.Unlock()
	}
	return exp, err
}

func (r *recorder) persisted() (n int, highest int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.marks {
		highest = max(highest, m)
	}
	return len(r.marks), highest
}

func testSettings(reg leaf.WorkerRegistry) Config {
	s := DefaultConfig()
	s.Layout, s.Registry, s.RegistryName = bubbleLayout, reg, "test"
	s.Endpoint = leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
	s.Window, s.HeartbeatInterval, s.RegistryTimeout = time.Second, 100*time.Millisecond, time.Second
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return s
}

// startWorker starts a worker on s with a fake issuer, closed at the end of
// the test (inside the bubble).
func startWorker(t *testing.T, s Config) (*worker, *fakeLog) {
	t.Helper()
	w := newWorker(s)
	log := new(fakeLog)
	w.issued = log
	if err := w.start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = w.close(context.Background()) })
	return w, log
}

// Each heartbeat persists, with the lease it renews, a mark a window past
// that lease's end (whoever takes the ID after the lease starts above all
// this server could stamp), and only then lets the issuer stamp up to it;
// the lease's end in the grant is the registry's expiry less the margin. In
// a bubble the heartbeats happen at exact times, so the test checks every
// one.
func TestWorkerHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := inmem.NewWorkerPool(2 * time.Second)
		client, _ := pool.Open(t.Context())
		reg := &recorder{WorkerRegistry: client}
		s := testSettings(reg)
		w, _ := startWorker(t, s)
		for beat := 1; beat <= 10; beat++ {
			if beat > 1 {
				time.Sleep(s.HeartbeatInterval)
				synctest.Wait() // the heartbeat the tick started is done
			}
			now := time.Now()
			gr := w.current()
			n, persisted := reg.persisted()
			if n != beat {
				t.Fatalf("beat %d: %d marks persisted", beat, n)
			}
			if want := now.Add(2*time.Second + s.Window).UnixMilli(); gr.limit != want || persisted != want {
				t.Fatalf("beat %d: grant limit %d, persisted %d; want both %d (now + lease + window)", beat, gr.limit, persisted, want)
			}
			if want := now.Add(2*time.Second - s.LeaseMargin); !gr.leased || !gr.leaseEnd.Equal(want) {
				t.Fatalf("beat %d: grant lease end %v (leased %v), want %v", beat, gr.leaseEnd, gr.leased, want)
			}
			if gr.stop != nil || gr.worker != 0 {
				t.Fatalf("beat %d: grant %+v", beat, gr)
			}
		}
		if st := w.statusForTest(); st.LastHeartbeat.IsZero() || st.HeartbeatFailures != 0 {
			t.Errorf("status %+v", st)
		}
	})
}

func (w *worker) statusForTest() leaf.WorkerStatus {
	var st leaf.WorkerStatus
	w.fillStatus(&st)
	return st
}

// A leased worker cut off from its registry keeps the grant's lease end
// where the last renewal put it, before the registry's expiry; the ID goes
// to another server only after that; when the link returns, the worker
// learns it lost the ID and the grant stops all issuing at once.
func TestWorkerLeaseCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 2 * time.Second
		pool := inmem.NewWorkerPool(ttl)
		link := pool.NewLink()
		client, _ := link.Open(t.Context())
		s := testSettings(client)
		s.Layout.WorkerBits = 0 // one worker ID: the other server can only take ours
		w, _ := startWorker(t, s)

		time.Sleep(s.HeartbeatInterval)
		synctest.Wait()
		lastRenewal := time.Now()
		link.Stall()
		leaseEnd := w.current().leaseEnd
		if want := lastRenewal.Add(ttl - s.LeaseMargin); !leaseEnd.Equal(want) {
			t.Fatalf("lease end %v, want %v", leaseEnd, want)
		}

		other, _ := pool.Open(t.Context())
		var taken time.Time
		for taken.IsZero() {
			time.Sleep(10 * time.Millisecond)
			if gr := w.current(); !gr.leaseEnd.Equal(leaseEnd) {
				t.Fatalf("lease end moved to %v with the link cut", gr.leaseEnd)
			}
			_, err := other.Register(t.Context(), leaf.Endpoint{IP: "10.0.0.2", Port: 8080}, 0)
			switch {
			case err == nil:
				taken = time.Now()
			case !errors.Is(err, leaf.ErrWorkerIDsExhausted):
				t.Fatalf("other server: %v", err)
			}
		}
		if !leaseEnd.Before(taken) || taken.Sub(leaseEnd) < s.LeaseMargin {
			t.Fatalf("the other server took the ID at %v; the grant allowed issuing until %v", taken, leaseEnd)
		}

		link.Up()
		time.Sleep(s.HeartbeatInterval)
		synctest.Wait()
		if gr := w.current(); !errors.Is(gr.stop, leaf.ErrWorkerLost) {
			t.Fatalf("grant after the link returned: %+v, want stopped with ErrWorkerLost", gr)
		}
		if st := w.statusForTest(); st.WorkerID != -1 {
			t.Errorf("status worker %d, want -1", st.WorkerID)
		}
	})
}

// Close releases the claim with the mark just after the last ID issued,
// and never below the claim's own mark: a worker that issued nothing under
// a claim hands back the mark it was given, not 1.
func TestWorkerCloseReleasesFinalMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := inmem.NewWorkerPool(2 * time.Second)
		open := func() leaf.WorkerRegistry { c, _ := pool.Open(t.Context()); return c }
		s := testSettings(open())
		s.Layout.WorkerBits = 0

		w1, log1 := startWorker(t, s)
		lastIssued := time.Now().UnixMilli() + 200 // a clock that ran ahead, say
		log1.last.Store(lastIssued)
		if err := w1.close(t.Context()); err != nil {
			t.Fatal(err)
		}

		time.Sleep(300 * time.Millisecond) // the pool hands the ID out once the clock passes its mark
		s.Registry = open()
		w2, _ := startWorker(t, s)
		if got := w2.current().floor; got != lastIssued+1 {
			t.Fatalf("second claim's mark %d, want %d (last issued + 1)", got, lastIssued+1)
		}
		if err := w2.close(t.Context()); err != nil {
			t.Fatal(err)
		}

		c, err := open().Register(t.Context(), s.Endpoint, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.HighWater != lastIssued+1 {
			t.Fatalf("after a close with nothing issued: mark %d, want the claim's %d", c.HighWater, lastIssued+1)
		}
	})
}

// inUseAfter is a registry that is unreachable until the test says it is
// back, and then reports the endpoint's claim held by another live server.
type inUseAfter struct {
	leaf.WorkerRegistry
	back atomic.Bool
}

func (r *inUseAfter) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if !r.back.Load() {
		return leaf.WorkerClaim{}, errors.New("registry down")
	}
	return leaf.WorkerClaim{}, fmt.Errorf("%w: endpoint %s is claimed by another session", leaf.ErrWorkerInUse, ep)
}

// A worker started on its cached ID while the registry was down moves the
// mark through the cache; when the registry comes back and says another
// live server holds the claim, the grant stops issuing at the next
// heartbeat, not when the cached mark runs out.
func TestWorkerCachedThenInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := inmem.NewWorkerPool(2 * time.Second)
		client, _ := pool.Open(t.Context())
		reg := &inUseAfter{WorkerRegistry: client}
		cache := local.NewCache(filepath.Join(t.TempDir(), "workerID.properties"))
		if err := cache.Save(leaf.CachedClaim{WorkerID: 42, Mark: time.Now().Add(-time.Minute).UnixMilli(),
			LeaseUntil: time.Now().Add(time.Minute).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		s := testSettings(reg)
		s.Cache = cache
		w, _ := startWorker(t, s)
		gr := w.current()
		if gr.worker != 42 || gr.stop != nil || gr.limit != time.Now().Add(s.Window).UnixMilli() {
			t.Fatalf("grant from the cache: %+v", gr)
		}
		if cc, err := cache.Load(); err != nil || cc.Mark != gr.limit {
			t.Fatalf("cached mark %d (%v), want the grant's limit %d", cc.Mark, err, gr.limit)
		}

		reg.back.Store(true)
		time.Sleep(s.HeartbeatInterval)
		synctest.Wait()
		if gr := w.current(); !errors.Is(gr.stop, leaf.ErrWorkerLost) {
			t.Fatalf("grant after the registry said in use: %+v, want stopped", gr)
		}
		if d, _ := w.degraded(); len(d) == 0 {
			t.Error("not degraded")
		}
	})
}

// Config are refused with a precise error, naming the field.
func TestSettingsValidate(t *testing.T) {
	reg, _ := inmem.NewWorkerPool(time.Second).Open(context.Background())
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" accepts
	}{
		{"defaults", func(*Config) {}, ""},
		{"MaxBackwards 0 never waits", func(s *Config) { s.MaxBackwards = 0 }, ""},
		{"MaxPeerSkew 0 turns the check off", func(s *Config) { s.MaxPeerSkew = 0 }, ""},
		{"no random start", func(s *Config) { s.RandomStart = false }, ""},
		{"zero layout", func(s *Config) { s.Layout = Layout{} }, "Config.Layout"},
		{"no registry", func(s *Config) { s.Registry = nil }, "Config.Registry is nil"},
		{"bad endpoint", func(s *Config) { s.Endpoint = leaf.Endpoint{IP: "x"} }, "Config.Endpoint"},
		{"negative MaxBackwards", func(s *Config) { s.MaxBackwards = -1 }, "Config.MaxBackwards -1ns is negative"},
		{"negative MaxPeerSkew", func(s *Config) { s.MaxPeerSkew = -time.Second }, "Config.MaxPeerSkew -1s is negative"},
		{"zero Window", func(s *Config) { s.Window = 0 }, "Config.Window is 0"},
		{"zero HeartbeatInterval", func(s *Config) { s.HeartbeatInterval = 0 }, "Config.HeartbeatInterval is 0"},
		{"heartbeat not shorter than the window", func(s *Config) { s.HeartbeatInterval = s.Window }, "shorter than the Window"},
		{"zero RegistryTimeout", func(s *Config) { s.RegistryTimeout = 0 }, "Config.RegistryTimeout is 0"},
		{"zero PeerCheckInterval", func(s *Config) { s.PeerCheckInterval = 0 }, "Config.PeerCheckInterval is 0"},
		{"negative LeaseMargin", func(s *Config) { s.LeaseMargin = -time.Millisecond }, "Config.LeaseMargin"},
		{"negative StartupGrace", func(s *Config) { s.StartupGrace = -time.Millisecond }, "Config.StartupGrace"},
		{"negative ClaimWait", func(s *Config) { s.ClaimWait = -time.Millisecond }, "Config.ClaimWait"},
		{"negative Lifetime", func(s *Config) { s.Lifetime = -time.Hour }, "Config.Lifetime"},
		{"no clock", func(s *Config) { s.Now = nil }, "Config.Now is nil"},
		{"no logger", func(s *Config) { s.Logger = nil }, "Config.Logger is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultConfig()
			s.Registry, s.Endpoint = reg, leaf.Endpoint{IP: "10.0.0.1", Port: 8080}
			tc.mod(&s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.want == "":
			case !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate = %v, want ErrInvalidArgument saying %q", err, tc.want)
			}
		})
	}
}

func TestHeartbeatFor(t *testing.T) {
	for _, tc := range []struct {
		window, ttl, want time.Duration
	}{
		{3 * time.Second, 0, time.Second},                                        // Leaf's defaults: a second
		{3 * time.Second, 10 * time.Second, time.Second},                         // a lease long enough changes nothing
		{3 * time.Second, 2 * time.Second, 500 * time.Millisecond},               // a short lease: a quarter of it
		{600 * time.Millisecond, 0, 200 * time.Millisecond},                      // a short window: a third of it
		{600 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond}, // both short: the shorter
	} {
		if got := HeartbeatFor(tc.window, tc.ttl); got != tc.want {
			t.Errorf("HeartbeatFor(%v, %v) = %v, want %v", tc.window, tc.ttl, got, tc.want)
		}
	}
}
