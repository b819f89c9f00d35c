package leaftest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/snowflake"
)

// FastSnowflake returns generator settings with short timings for tests: a
// 1 s window, a heartbeat every 100 ms.
func FastSnowflake(reg leaf.WorkerRegistry, ep leaf.Endpoint) snowflake.Config {
	s := snowflake.DefaultConfig()
	s.Registry, s.RegistryName, s.Endpoint = reg, "test", ep
	s.Window, s.HeartbeatInterval, s.RegistryTimeout = time.Second, 100*time.Millisecond, time.Second
	// The first registration gets more than one registry call's second: on
	// a busy machine an etcd transaction took longer, and the generator
	// failed to start (ordinal TestHammer under scripts/stress-tests.sh).
	s.ClaimWait = 5 * time.Second
	s.Logger = quietLogger()
	return s
}

// StartSnowflake opens a registry client and starts a generator on it; both
// are closed when the test ends.
func StartSnowflake(t *testing.T, open RegistryOpener, s snowflake.Config) *snowflake.Generator {
	t.Helper()
	if s.Registry == nil {
		s.Registry = openRegistry(t, open)
	}
	g, err := snowflake.New(ctxFor(t), s)
	if err != nil {
		t.Fatalf("snowflake.New(%s): %v", s.Endpoint, err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// HammerSnowflake runs 4 generators, each with its own registry client and
// registry-assigned worker ID, × 8 goroutines (see HammerGenerators).
func HammerSnowflake(t *testing.T, open RegistryOpener) {
	gens := make([]*snowflake.Generator, 4)
	workers := make(map[int64]bool)
	for i := range gens {
		gens[i] = StartSnowflake(t, open, FastSnowflake(nil, TestEndpoint(i)))
		w := gens[i].Status().WorkerID
		if workers[w] {
			t.Fatalf("two generators hold worker ID %d", w)
		}
		workers[w] = true
	}
	HammerGenerators(t, gens)
}

// HammerGenerators draws 400,000 IDs (40,000 with -short) from running
// generators, 8 goroutines each mixing single IDs and batches, and checks
// that all IDs are unique, that each goroutine's IDs strictly increase, and
// that each ID carries its generator's worker ID.
func HammerGenerators(t *testing.T, gens []*snowflake.Generator) {
	const goroutines = 8
	total := 400_000
	if testing.Short() {
		total = 40_000
	}
	per := total / (len(gens) * goroutines)
	results := make([][]int64, len(gens)*goroutines)
	errs := make(chan error, len(gens)*goroutines)
	var wg sync.WaitGroup
	for gi, g := range gens {
		for k := range goroutines {
			wg.Go(func() {
				ids := make([]int64, 0, per)
				for len(ids) < per {
					var err error
					if len(ids)%3 == 0 { // mix single IDs and batches
						ids, err = g.NextIDs(ctxFor(t), "", min(100, per-len(ids)), ids)
					} else {
						var id int64
						id, err = g.NextID(ctxFor(t), "")
						ids = append(ids, id)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				results[gi*goroutines+k] = ids
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("issuing: %v", err)
	}
	seen := make(map[int64]struct{}, total)
	workers := make([]int64, len(gens))
	for r, ids := range results {
		g := gens[r/goroutines]
		w := g.Status().WorkerID
		workers[r/goroutines] = w
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("generator %d goroutine %d: ID %d after %d", r/goroutines, r%goroutines, id, ids[i-1])
			}
			p, err := g.Decode(id)
			if err != nil || p.WorkerID != w {
				t.Fatalf("ID %d decodes to %+v (%v), want worker %d", id, p, err, w)
			}
			if _, dup := seen[id]; dup {
				t.Fatalf("duplicate ID %d", id)
			}
			seen[id] = struct{}{}
		}
	}
	t.Logf("%d generators × %d goroutines: %d unique IDs, workers %v", len(gens), goroutines, len(seen), workers)
}

// Stallable is a connection to a registry that a test can cut off (a TCP
// proxy: Stall holds the connections open and passes nothing).
type Stallable interface {
	Stall()
	Up()
}

// LeaseHandover shows that a leased worker ID moves between servers without
// overlap. Generator A holds the only worker ID of a 0-bit-worker layout
// through a connection the test cuts; generator B, on a direct connection,
// can start only once A's lease has expired, and by then A has stopped
// issuing. B's IDs are all above A's. When A's connection returns, A learns
// it lost the ID and stays stopped.
//
// cutOff's clients and direct's must lease for at most a few seconds.
func LeaseHandover(t *testing.T, direct, cutOff RegistryOpener, link Stallable) {
	oneWorker := snowflake.Layout{Epoch: snowflake.LeafEpoch, TimeBits: 41, WorkerBits: 0, SequenceBits: 12}
	sa := FastSnowflake(nil, TestEndpoint(0))
	sa.Layout = oneWorker
	a := StartSnowflake(t, cutOff, sa)

	var (
		aLast   atomic.Int64 // Unix ns of A's last successful ID
		aIDs    []int64
		aErr    error
		stopA   = make(chan struct{})
		aDone   = make(chan struct{})
		started = time.Now()
	)
	go func() {
		defer close(aDone)
		for {
			select {
			case <-stopA:
				return
			default:
			}
			id, err := a.NextID(context.Background(), "")
			if err != nil {
				aErr = err
				time.Sleep(time.Millisecond)
				continue
			}
			aLast.Store(time.Now().UnixNano())
			aIDs = append(aIDs, id)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	link.Stall()
	cut := time.Now()

	sb := FastSnowflake(nil, TestEndpoint(1))
	sb.Layout = oneWorker
	// Room to watch A's lease lapse, for registries that take a lapsed
	// claim only after watching it unchanged for a lease.
	sb.ClaimWait = 15 * time.Second
	var b *snowflake.Generator
	deadline := time.Now().Add(30 * time.Second)
	for b == nil {
		if time.Now().After(deadline) {
			t.Fatalf("B could not take the worker ID within 30s of A's cut-off")
		}
		reg := openRegistry(t, direct)
		sb.Registry = reg
		g, err := snowflake.New(ctxFor(t), sb)
		switch {
		case err == nil:
			b = g
			t.Cleanup(func() { _ = g.Close(context.Background()) })
		case errors.Is(err, leaf.ErrWorkerIDsExhausted):
			_ = reg.Close()
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("B: snowflake.New: %v", err)
		}
	}
	bStart := time.Now()
	bID, err := b.NextID(ctxFor(t), "")
	if err != nil {
		t.Fatalf("B: NextID: %v", err)
	}
	close(stopA)
	<-aDone

	if len(aIDs) == 0 {
		t.Fatalf("A issued nothing before the cut-off")
	}
	if last := time.Unix(0, aLast.Load()); !last.Before(bStart) {
		t.Fatalf("A issued an ID at %v, after B took its worker ID at %v", last, bStart)
	}
	if aErr == nil {
		t.Fatalf("A never stopped issuing")
	}
	if bID <= slices.Max(aIDs) {
		t.Fatalf("B's first ID %d is not above A's last %d", bID, slices.Max(aIDs))
	}
	t.Logf("A issued %d IDs, stopped with %q; cut at +%v, B started at +%v",
		len(aIDs), aErr, cut.Sub(started).Round(time.Millisecond), bStart.Sub(started).Round(time.Millisecond))

	// A's connection returns: its heartbeat learns the ID is gone, and it
	// cannot get one back while B holds the only one.
	link.Up()
	testutil.WaitFor(t, "A to report its worker ID lost", func() bool { return a.Status().WorkerID < 0 })
	if _, err := a.NextID(ctxFor(t), ""); !errors.Is(err, leaf.ErrWorkerLost) && !errors.Is(err, leaf.ErrNotReady) {
		t.Fatalf("A after losing its ID: %v, want ErrWorkerLost", err)
	}
}
