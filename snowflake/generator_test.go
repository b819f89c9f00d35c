package snowflake_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/snowflake"
)

// offsetClock is the real clock plus an offset a test steps, the way NTP
// steps a server's clock.
//
// A reading and a step exclude each other: a reader preempted between
// reading the real time and the offset would otherwise combine a stale time
// with a newer offset, a reading the stepped clock never showed (two steps
// back at once, in effect), and a test would fail for the clock's fault.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *offsetClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = d
}

func ctx(t *testing.T) context.Context { return t.Context() }
func ep(i int) leaf.Endpoint           { return leaftest.TestEndpoint(i) }
func localReg(t *testing.T, dir string) leaf.WorkerRegistry {
	t.Helper()
	r, err := local.New(local.Config{WorkerID: 7, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// bubbleLayout is Leaf's layout with an epoch before 2000-01-01, where the
// clock of a synctest bubble starts.
var bubbleLayout = snowflake.Layout{Epoch: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}

func settings(reg leaf.WorkerRegistry, clock *offsetClock) snowflake.Config {
	s := leaftest.FastSnowflake(reg, ep(0))
	s.Logger = testutil.Logger()
	if clock != nil {
		s.Now = clock.Now
	}
	return s
}

func start(t *testing.T, s snowflake.Config) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.New(ctx(t), s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

func TestHammerInMemoryPool(t *testing.T) {
	leaftest.HammerSnowflake(t, inmem.NewWorkerPool(5*time.Second).Open)
}

func TestLeaseHandoverInMemoryPool(t *testing.T) {
	pool := inmem.NewWorkerPool(2 * time.Second)
	link := pool.NewLink()
	leaftest.LeaseHandover(t, pool.Open, link.Open, link)
}

// issue draws n IDs from 4 goroutines and returns them with the errors met.
func issue(t *testing.T, g *snowflake.Generator, n int, seen map[int64]struct{}) (errs []error) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var left atomic.Int64
	left.Store(int64(n))
	for range 4 {
		wg.Go(func() {
			var ids []int64
			var myErrs []error
			for left.Add(-100) >= 0 {
				var err error
				ids, err = g.NextIDs(ctx(t), "", 100, ids)
				if err != nil {
					myErrs = append(myErrs, err)
					left.Add(100)
					if len(myErrs) > 1000 {
						break
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, myErrs...)
			for _, id := range ids {
				if _, dup := seen[id]; dup {
					t.Errorf("duplicate ID %d", id)
				}
				seen[id] = struct{}{}
			}
		})
	}
	wg.Wait()
	return errs
}

// The clock steps back 3 ms, 1 s and 1 h while IDs are issued: the small
// step is waited out, the large ones are refused with ErrClockBackwards
// until the clock is back, and over a million IDs none repeats.
func TestRollbackWhileIssuing(t *testing.T) {
	clock := new(offsetClock)
	g := start(t, settings(localReg(t, t.TempDir()), clock))
	seen := make(map[int64]struct{})
	const phase = 250_000

	if errs := issue(t, g, phase, seen); len(errs) > 0 {
		t.Fatalf("steady clock: %v", errs[0])
	}
	// Step back 3 ms every 5 ms while issuing. The pauses are real time on
	// purpose, as NTP's steps are: the clock is the real one plus the
	// offset, and steps less than 3 ms apart would add up to more than
	// MaxBackwards (5 ms) back, which is refused rather than waited out.
	// Nor can the test run in a synctest bubble: the generator yields until
	// the clock leaves a used-up millisecond, and a bubble's clock stands
	// still while a goroutine runs.
	stepping := make(chan struct{})
	go func() {
		defer close(stepping)
		for i := 1; i <= 20; i++ {
			time.Sleep(5 * time.Millisecond)
			clock.Set(time.Duration(-3*i) * time.Millisecond)
		}
	}()
	if errs := issue(t, g, 2*phase, seen); len(errs) > 0 {
		t.Fatalf("3ms back must be waited out, got %v", errs[0])
	}
	<-stepping
	if st := g.Status(); st.Rollbacks == 0 || st.MaxRollbackMs > 5 {
		t.Fatalf("after 3ms steps: %d rollbacks, largest %d ms; want some, none above 5", st.Rollbacks, st.MaxRollbackMs)
	}
	for _, back := range []time.Duration{time.Second, time.Hour} {
		clock.Set(-back)
		for range 100 {
			_, err := g.NextID(ctx(t), "")
			if !errors.Is(err, leaf.ErrClockBackwards) {
				t.Fatalf("clock %v back: NextID error %v, want ErrClockBackwards", back, err)
			}
		}
		if len(g.Degraded()) == 0 {
			t.Errorf("clock %v back: Degraded() is empty", back)
		}
		clock.Set(0)
		if errs := issue(t, g, phase, seen); len(errs) > 0 {
			t.Fatalf("after the clock returned from %v back: %v", back, errs[0])
		}
	}
	if len(seen) < 5*phase {
		t.Fatalf("%d IDs, want %d", len(seen), 5*phase)
	}
	st := g.Status()
	if st.Rollbacks < 3 || st.MaxRollbackMs < (59*time.Minute).Milliseconds() || st.RollbackMs <= st.MaxRollbackMs {
		t.Fatalf("status after rollbacks: %+v", st)
	}
	// A batch cut short by a rollback discards what it had issued, so the
	// count can exceed what the callers kept, never fall short of it.
	if st.Issued < uint64(len(seen)) {
		t.Fatalf("status counts %d IDs issued, the callers kept %d", st.Issued, len(seen))
	}
	t.Logf("%d unique IDs; %d rollbacks, largest %d ms", len(seen), st.Rollbacks, st.MaxRollbackMs)
}

// Restarts check the clock against the persisted high-water mark: a clock an
// hour behind refuses to start, a clock slightly behind is waited out, and
// after a crash (the mark a window ahead) no ID repeats.
func TestRollbackAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clock := new(offsetClock)
	seen := make(map[int64]struct{})
	var last int64

	g1 := start(t, settings(localReg(t, dir), clock))
	if errs := issue(t, g1, 100_000, seen); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	for id := range seen {
		last = max(last, id)
	}
	// A crash: copy the state as kill -9 would leave it, then stop using g1.
	crashDir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, "worker-7.properties"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashDir, "worker-7.properties"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g1.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}

	clock.Set(-time.Hour)
	_, err = snowflake.New(ctx(t), settings(localReg(t, dir), clock))
	if !errors.Is(err, leaf.ErrClockBackwards) || !strings.Contains(err.Error(), "refuses to start") {
		t.Fatalf("restart with the clock 1h back: %v, want a refusal wrapping ErrClockBackwards", err)
	}
	t.Logf("refusal: %v", err)

	// The crash left a mark a window (1s) ahead: a restart right away waits
	// for it, and its IDs are above every ID issued before the crash.
	clock.Set(0)
	g2 := start(t, settings(localReg(t, crashDir), clock))
	id, err := g2.NextID(ctx(t), "")
	if err != nil || id <= last {
		t.Fatalf("after crash restart: first ID %d (%v), want above %d", id, err, last)
	}
	if errs := issue(t, g2, 100_000, seen); len(errs) > 0 {
		t.Fatal(errs[0])
	}

	// A graceful restart 1.5 s back (under Window + StartupGrace, 2 s) waits.
	if err := g2.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	clock.Set(-1500 * time.Millisecond)
	g3 := start(t, settings(localReg(t, crashDir), clock))
	if errs := issue(t, g3, 100_000, seen); len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

// flaky wraps a registry and can refuse calls, as a registry that is down,
// or hang them until their deadline, as one behind a black hole.
type flaky struct {
	leaf.WorkerRegistry
	down, hang atomic.Bool
	hanging    atomic.Int32 // calls hanging right now
}

var errDown = errors.New("registry down")

func (f *flaky) fail(ctx context.Context) error {
	if f.hang.Load() {
		f.hanging.Add(1)
		defer f.hanging.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	}
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *flaky) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := f.fail(ctx); err != nil {
		return leaf.WorkerClaim{}, err
	}
	return f.WorkerRegistry.Register(ctx, ep, maxID)
}

func (f *flaky) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	if err := f.fail(ctx); err != nil {
		return time.Time{}, err
	}
	return f.WorkerRegistry.Heartbeat(ctx, mark)
}

// A registry that hangs (calls time out after 2 s, longer than the 1 s
// window) does not stop a worker with a cache from issuing: the cache keeps
// the high-water mark moving.
func TestHungRegistryKeepsIssuing(t *testing.T) {
	reg := &flaky{WorkerRegistry: localReg(t, t.TempDir())}
	s := settings(reg, nil)
	s.Cache = local.NewCache(filepath.Join(t.TempDir(), "workerID.properties"))
	s.RegistryTimeout = 2 * time.Second
	g := start(t, s)
	reg.hang.Store(true)
	// A request that waited on the hung registry would fail: an extension
	// of the mark waits for it at most extendBudget (1s) and then fails.
	// The deadline only bounds the test; it is generous because a request
	// may wait for the local cache file's fsync, which on a machine busy
	// with other builds took over 200ms.
	var last int64
	n := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); n++ {
		rctx, cancel := context.WithTimeout(ctx(t), 5*time.Second)
		id, err := g.NextID(rctx, "")
		cancel()
		if err != nil || id <= last {
			t.Fatalf("with the registry hanging: ID %d (%v) after %d", id, err, last)
		}
		last = id
	}
	if len(g.Degraded()) == 0 {
		t.Errorf("Degraded() is empty with the registry hanging")
	}
	t.Logf("%d IDs while the registry hung; degraded: %q", n, g.Degraded())
}

// With the registry unreachable at start-up, the cached worker ID is used
// only inside the cached lease and if the clock is past the cached mark.
func TestCacheFallback(t *testing.T) {
	t.Run("clock past the mark", func(t *testing.T) {
		cache := local.NewCache(filepath.Join(t.TempDir(), "workerID.properties"))
		if err := cache.Save(leaf.CachedClaim{WorkerID: 42, Mark: time.Now().Add(-time.Minute).UnixMilli(),
			LeaseUntil: time.Now().Add(time.Minute).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		reg := &flaky{WorkerRegistry: localReg(t, t.TempDir())}
		reg.down.Store(true)
		s := settings(reg, nil)
		s.Cache = cache
		g := start(t, s)
		st := g.Status()
		if st.WorkerID != 42 || !st.FromCache || len(g.Degraded()) == 0 {
			t.Fatalf("status %+v degraded %q, want worker 42 from the cache", st, g.Degraded())
		}
		id, err := g.NextID(ctx(t), "")
		if p, _ := g.Decode(id); err != nil || p.WorkerID != 42 {
			t.Fatalf("NextID = %d (%v), want worker 42", id, err)
		}
		// The mark keeps moving in the cache while the registry is down.
		cc, err := cache.Load()
		if err != nil || cc.Mark <= time.Now().UnixMilli() {
			t.Fatalf("cached mark %d (%v), want ahead of now", cc.Mark, err)
		}
		// When the registry returns, its ID (7) takes over.
		reg.down.Store(false)
		testutil.WaitFor(t, "the registry's ID to take over from the cache", func() bool { return !g.Status().FromCache })
		next, err := g.NextID(ctx(t), "")
		if p, _ := g.Decode(next); err != nil || p.WorkerID != 7 || next <= id {
			t.Fatalf("after the registry returned: ID %d worker %d (%v), want worker 7 above %d", next, p.WorkerID, err, id)
		}
	})
	t.Run("clock below the mark", func(t *testing.T) {
		cache := local.NewCache(filepath.Join(t.TempDir(), "workerID.properties"))
		if err := cache.Save(leaf.CachedClaim{WorkerID: 42, Mark: time.Now().Add(time.Hour).UnixMilli(),
			LeaseUntil: time.Now().Add(2 * time.Hour).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		reg := &flaky{WorkerRegistry: localReg(t, t.TempDir())}
		reg.down.Store(true)
		s := settings(reg, nil)
		s.Cache = cache
		if _, err := snowflake.New(ctx(t), s); !errors.Is(err, leaf.ErrClockBackwards) {
			t.Fatalf("New = %v, want ErrClockBackwards", err)
		}
	})
	// Past the cached lease, or with none (the last run released it), the
	// ID may be another server's by now: no start from the cache.
	for _, tc := range []struct {
		name  string
		until time.Duration // from now; 0: no lease cached
		want  string
	}{
		{"cached lease over", -time.Second, "its cached lease ended at"},
		{"cached lease ending within the margin", 100 * time.Millisecond, "its cached lease ended at"},
		{"no lease cached", 0, "the last run released it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := local.NewCache(filepath.Join(t.TempDir(), "workerID.properties"))
			cc := leaf.CachedClaim{WorkerID: 42, Mark: time.Now().Add(-time.Minute).UnixMilli()}
			if tc.until != 0 {
				cc.LeaseUntil = time.Now().Add(tc.until).UnixMilli()
			}
			if err := cache.Save(cc); err != nil {
				t.Fatal(err)
			}
			reg := &flaky{WorkerRegistry: localReg(t, t.TempDir())}
			reg.down.Store(true)
			s := settings(reg, nil)
			s.Cache = cache
			if _, err := snowflake.New(ctx(t), s); !errors.Is(err, errDown) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want the registry's error and %q", err, tc.want)
			}
		})
	}
	t.Run("no cache", func(t *testing.T) {
		reg := &flaky{WorkerRegistry: localReg(t, t.TempDir())}
		reg.down.Store(true)
		s := settings(reg, nil)
		s.Cache = local.NewCache(filepath.Join(t.TempDir(), "none", "workerID.properties"))
		if _, err := snowflake.New(ctx(t), s); !errors.Is(err, errDown) || !strings.Contains(err.Error(), "no cached worker ID") {
			t.Fatalf("New = %v, want the registry's error and no cache", err)
		}
	})
}

// A leased worker whose registry hangs keeps issuing until its lease runs
// out, then stops, but a request never waits on the hung registry: it is
// answered ErrNotReady within extendBudget (1s), not after maxExtends
// registry timeouts. The chaos test found requests hanging 9-14s on a dead
// etcd.
func TestHungLeasedRegistryAnswersPromptly(t *testing.T) {
	pool := inmem.NewWorkerPool(2 * time.Second) // runs out during the test
	reg, _ := pool.Open(ctx(t))
	f := &flaky{WorkerRegistry: reg}
	s := settings(f, nil)
	s.RegistryTimeout = 8 * time.Second
	g := start(t, s)
	f.hang.Store(true)
	var failed, issued int
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		t0 := time.Now()
		_, err := g.NextID(ctx(t), "")
		took := time.Since(t0)
		if err != nil {
			failed++
			if !errors.Is(err, leaf.ErrNotReady) || !strings.Contains(err.Error(), "lease") {
				t.Fatalf("NextID with the registry hung: %v, want ErrNotReady naming the lease", err)
			}
		} else {
			if failed > 0 {
				t.Fatal("an ID was issued after the lease had run out, with the registry still hung")
			}
			issued++
		}
		// 3s is three extendBudgets, the most a request can wait; the
		// registry's timeout is 8s.
		if took > 3*time.Second {
			t.Fatalf("NextID took %v with the registry hung (err %v)", took, err)
		}
	}
	if failed == 0 || issued == 0 {
		t.Fatalf("with the registry hung: %d IDs issued, %d refused; want IDs until the lease ran out, then refusals", issued, failed)
	}
	// The registry answers again: the heartbeat loop moves the mark and
	// requests succeed, without any request having to drive it.
	f.hang.Store(false)
	testutil.WaitFor(t, "an ID once the registry came back", func() bool {
		_, err := g.NextID(ctx(t), "")
		return err == nil
	})
}

// A leased worker whose registry stops answering stops issuing before its
// lease ends, by at least the lease margin. In a bubble the heartbeat that
// renews the lease before the cut happens at a known time, and every
// millisecond up to the expiry is tried.
func TestLeaseStopsIssuingBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := inmem.NewWorkerPool(time.Second)
		link := pool.NewLink()
		reg, _ := link.Open(ctx(t))
		s := settings(reg, nil)
		s.Layout = bubbleLayout
		g := start(t, s)
		first := g.Status()
		time.Sleep(s.HeartbeatInterval)
		synctest.Wait() // the heartbeat of this tick has renewed the lease
		renewed := g.Status()
		if !renewed.LastHeartbeat.After(first.LastHeartbeat) || !renewed.LeaseExpires.After(first.LeaseExpires) {
			t.Fatalf("no renewal: heartbeat %v -> %v, lease %v -> %v",
				first.LastHeartbeat, renewed.LastHeartbeat, first.LeaseExpires, renewed.LeaseExpires)
		}
		link.Stall()
		expires := renewed.LeaseExpires
		var lastOK time.Time
		for time.Now().Before(expires.Add(500 * time.Millisecond)) {
			if _, err := g.NextID(ctx(t), ""); err == nil {
				lastOK = time.Now()
			} else if !errors.Is(err, leaf.ErrNotReady) {
				t.Fatalf("NextID: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
		if lastOK.IsZero() || expires.Sub(lastOK) < s.LeaseMargin {
			t.Fatalf("last ID issued at %v, lease expired at %v: want it at least %v before", lastOK, expires, s.LeaseMargin)
		}
		t.Logf("stopped %v before the lease expired", expires.Sub(lastOK))
	})
}

// A used-up millisecond waits for the next one. The first millisecond
// starts at Leaf's random sequence; one that follows a used-up millisecond
// starts at 0, so saturating traffic gets all 4096 sequences.
func TestSequenceExhaustion(t *testing.T) {
	// Once frozen, the clock advances 1 ms per 20,000 readings: only the
	// spin after a used-up millisecond reads it that often.
	base := time.Now().Add(-10 * time.Second)
	var calls atomic.Int64
	var frozen atomic.Bool
	s := settings(localReg(t, t.TempDir()), nil)
	s.Now = func() time.Time {
		if frozen.Load() {
			return base.Add(time.Duration(calls.Add(1)/20000) * time.Millisecond)
		}
		return time.Now()
	}
	g := start(t, s)
	frozen.Store(true)
	ids, err := g.NextIDs(ctx(t), "", 10000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var perMs [][]int64 // sequences, one slice per millisecond in order
	lastMs := int64(-1)
	for _, id := range ids {
		p, _ := g.Decode(id)
		if p.Timestamp != lastMs {
			perMs = append(perMs, nil)
			lastMs = p.Timestamp
		}
		perMs[len(perMs)-1] = append(perMs[len(perMs)-1], p.Sequence)
	}
	if len(perMs) < 3 {
		t.Fatalf("10000 IDs in %d milliseconds, want at least 3", len(perMs))
	}
	first := perMs[0]
	if first[0] >= 100 || first[len(first)-1] != 4095 || int64(len(first)) != 4096-first[0] {
		t.Fatalf("first millisecond: sequences %d..%d (%d IDs), want a random start below 100 up to 4095",
			first[0], first[len(first)-1], len(first))
	}
	for i, seqs := range perMs[1 : len(perMs)-1] {
		if len(seqs) != 4096 || seqs[0] != 0 || seqs[4095] != 4095 {
			t.Fatalf("millisecond %d after a used-up one: sequences %d..%d (%d IDs), want 0..4095",
				i+1, seqs[0], seqs[len(seqs)-1], len(seqs))
		}
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	future := func() time.Time { return time.UnixMilli(snowflake.LeafEpoch - 1000) }
	for _, c := range []struct {
		name string
		mod  func(*snowflake.Config)
		want error
	}{
		{"no registry", func(s *snowflake.Config) { s.Registry = nil }, leaf.ErrInvalidArgument},
		{"bad endpoint", func(s *snowflake.Config) { s.Endpoint = leaf.Endpoint{IP: "x"} }, leaf.ErrInvalidArgument},
		{"64-bit layout", func(s *snowflake.Config) {
			s.Layout = snowflake.Layout{Epoch: 1, TimeBits: 42, WorkerBits: 10, SequenceBits: 12}
		}, leaf.ErrInvalidArgument},
		{"layout ends within its lifetime", func(s *snowflake.Config) {
			s.Layout = snowflake.Layout{Epoch: snowflake.LeafEpoch, TimeBits: 39, WorkerBits: 10, SequenceBits: 12}
		}, leaf.ErrInvalidArgument},
		{"clock before the epoch", func(s *snowflake.Config) { s.Now = future }, leaf.ErrClockBackwards},
		{"heartbeat not shorter than the window", func(s *snowflake.Config) { s.HeartbeatInterval = s.Window }, leaf.ErrInvalidArgument},
		{"worker ID above the layout", func(s *snowflake.Config) {
			s.Layout = snowflake.Layout{Epoch: snowflake.LeafEpoch, TimeBits: 41, WorkerBits: 2, SequenceBits: 12}
		}, leaf.ErrWorkerIDsExhausted},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := settings(localReg(t, dir), nil)
			c.mod(&s)
			g, err := snowflake.New(ctx(t), s)
			if err == nil {
				_ = g.Close(ctx(t))
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("New = %v, want %v", err, c.want)
			}
		})
	}
}

func TestClose(t *testing.T) {
	g := start(t, settings(localReg(t, t.TempDir()), nil))
	if err := g.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextID(ctx(t), ""); !errors.Is(err, leaf.ErrClosed) {
		t.Fatalf("NextID after Close: %v", err)
	}
	if err := g.Close(ctx(t)); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Close returns by its context's deadline even while the heartbeat loop is
// stuck in a registry call that hangs for RegistryTimeout (10s here):
// shutdown_timeout is a budget, not a hint.
func TestCloseWithHungRegistry(t *testing.T) {
	reg := &flaky{WorkerRegistry: localReg(t, t.TempDir())}
	s := settings(reg, nil)
	s.RegistryTimeout = 10 * time.Second
	g, err := snowflake.New(ctx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	reg.hang.Store(true)
	testutil.WaitFor(t, "a heartbeat stuck in the registry", func() bool { return reg.hanging.Load() > 0 })
	cctx, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = g.Close(cctx)
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("Close took %v with a 300ms budget", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the deadline's error", err)
	}
	if _, err := g.NextID(ctx(t), ""); !errors.Is(err, leaf.ErrClosed) {
		t.Fatalf("NextID after Close: %v", err)
	}
}

func benchGenerator(b *testing.B) *snowflake.Generator {
	r, err := local.New(local.Config{WorkerID: 1, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	s := leaftest.FastSnowflake(r, ep(0))
	s.Logger = testutil.Logger()
	g, err := snowflake.New(b.Context(), s)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close(b.Context()) })
	return g
}

// At the layout's end the generator stops with ErrNotReady instead of
// overflowing the time part into the worker bits or the sign.
func TestLayoutEnd(t *testing.T) {
	l := snowflake.Layout{TimeBits: 31, WorkerBits: 10, SequenceBits: 12}
	l.Epoch = time.Now().Add(1500*time.Millisecond).UnixMilli() - 1<<l.TimeBits
	s := settings(localReg(t, t.TempDir()), nil)
	s.Layout = l
	s.Lifetime = time.Nanosecond
	g := start(t, s)
	var last int64
	for {
		id, err := g.NextID(ctx(t), "")
		if err != nil {
			if !errors.Is(err, leaf.ErrNotReady) || time.Now().UnixMilli() < l.End() {
				t.Fatalf("NextID: %v at %d, layout ends at %d", err, time.Now().UnixMilli(), l.End())
			}
			break
		}
		p, derr := l.Decode(id)
		if derr != nil || id <= last || p.Timestamp >= l.End() || p.WorkerID != 7 {
			t.Fatalf("ID %d (%+v, %v) after %d; layout ends at %d", id, p, derr, last, l.End())
		}
		last = id
	}
}

// TestStatusCounts: Status counts every ID issued, singly or in batches, and
// reports the rate between the heartbeat loop's samples: in a bubble the
// samples are taken at known times, so the rate is exact.
func TestStatusCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := settings(localReg(t, t.TempDir()), nil)
		s.Layout = bubbleLayout
		g := start(t, s)
		for range 1000 {
			if _, err := g.NextID(ctx(t), ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := g.NextIDs(ctx(t), "", 500, nil); err != nil {
			t.Fatal(err)
		}
		if st := g.Status(); st.Issued != 1500 || st.Rate != 0 {
			t.Fatalf("Issued = %d, Rate = %v; want 1500 and no rate before any sample", st.Issued, st.Rate)
		}
		time.Sleep(s.HeartbeatInterval)
		synctest.Wait() // the loop has sampled 1500
		if _, err := g.NextIDs(ctx(t), "", 100, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(s.HeartbeatInterval)
		synctest.Wait()
		want := 100 / s.HeartbeatInterval.Seconds()
		if st := g.Status(); st.Issued != 1600 || math.Abs(st.Rate-want) > 1e-6 {
			t.Fatalf("Issued = %d, Rate = %v; want 1600 and %v IDs/s", st.Issued, st.Rate, want)
		}
	})
}

// A batch does not hold the lock while it waits for the next millisecond:
// with the clock frozen after the batch used up a millisecond, other callers
// (Status here, single IDs too) still get the lock; once the clock moves the
// batch completes, strictly increasing and unique with the single ID drawn
// meanwhile.
func TestBatchReleasesLockBetweenMilliseconds(t *testing.T) {
	var frozen atomic.Bool
	var base atomic.Int64 // Unix ms the frozen clock reads, plus steps
	s := settings(localReg(t, t.TempDir()), nil)
	s.Now = func() time.Time {
		if frozen.Load() {
			return time.UnixMilli(base.Load())
		}
		return time.Now()
	}
	g := start(t, s)
	base.Store(time.Now().UnixMilli() + 1)
	frozen.Store(true)

	type result struct {
		ids []int64
		err error
	}
	batch := make(chan result, 1)
	go func() {
		ids, err := g.NextIDs(ctx(t), "", 10000, nil)
		batch <- result{ids, err}
	}()
	// Until the batch has used up the frozen millisecond (at least 3,997 IDs
	// after a random start below 100), Status must keep answering.
	testutil.WaitFor(t, "the batch to use up the frozen millisecond", func() bool {
		issued := make(chan uint64, 1)
		go func() { issued <- g.Status().Issued }()
		select {
		case n := <-issued:
			return n >= 3997
		case <-time.After(2 * time.Second):
			t.Fatal("Status blocked: the batch holds the lock while it waits for the next millisecond")
			return false
		}
	})
	single := make(chan result, 1)
	go func() {
		id, err := g.NextID(ctx(t), "")
		single <- result{[]int64{id}, err}
	}()
	var b, one result
	for got := 0; got < 2; {
		base.Add(1)
		select {
		case b = <-batch:
			got++
		case one = <-single:
			got++
		case <-time.After(5 * time.Millisecond):
		}
	}
	if b.err != nil || one.err != nil {
		t.Fatalf("batch: %v, single: %v", b.err, one.err)
	}
	seen := map[int64]bool{one.ids[0]: true}
	for i, id := range b.ids {
		if seen[id] || (i > 0 && id <= b.ids[i-1]) {
			t.Fatalf("batch ID %d at %d is repeated or not increasing", id, i)
		}
		seen[id] = true
	}
}
