package leaftest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// RegistryOpener opens a new client of one registry namespace (ZooKeeper
// path, etcd prefix, database). Every client it opens shares the namespace,
// as separate servers would; each has its own connection.
type RegistryOpener = func(ctx context.Context) (leaf.WorkerRegistry, error)

// RegistryTraits says what a registry promises beyond the interface.
type RegistryTraits struct {
	// Sticky: an endpoint gets its old worker ID back after Release or a
	// crash (zookeeper, mysql, local map); otherwise Release returns the ID
	// to a pool (zookeeper-recycle, etcd).
	Sticky bool
	// Leases: claims expire unless renewed (every registry but local), so a
	// crashed holder's claim passes on only after its lease.
	Leases bool
}

// TestEndpoint returns the i-th endpoint the suites register: 10.0.x.y:8080.
// A local registry's map must list the endpoints the suite uses (0..63).
func TestEndpoint(i int) leaf.Endpoint {
	return leaf.Endpoint{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: 8080}
}

// Suite sizes, from the snowflake issue: 16 registrations racing on an empty
// namespace, 20 times.
const (
	ColdStartNodes  = 16
	ColdStartRounds = 20
	// MaxWorkerID is the maxID of Leaf's layout (10 worker bits).
	MaxWorkerID = 1023
)

// TestWorkerRegistry runs the leaf.WorkerRegistry conformance suite.
// newNamespace makes a fresh, empty namespace for one subtest and returns its
// opener; it must register the namespace's removal with t.Cleanup. The
// subtests run in parallel.
func TestWorkerRegistry(t *testing.T, newNamespace func(t *testing.T) RegistryOpener, traits RegistryTraits) {
	var s registrySuite
	s.traits = traits
	cases := []struct {
		name string
		run  func(t *testing.T, newNamespace func(t *testing.T) RegistryOpener)
	}{
		{"ColdStart", s.coldStart},
		{"HighWaterAfterRelease", s.highWaterAfterRelease},
		{"HighWaterAfterCrash", s.highWaterAfterCrash},
		{"MaxID", s.maxID},
		{"InvalidInput", s.invalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newNamespace)
		})
	}
}

type registrySuite struct{ traits RegistryTraits }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openRegistry opens a client and closes it when the test ends.
func openRegistry(t *testing.T, open RegistryOpener) leaf.WorkerRegistry {
	t.Helper()
	r, err := open(ctxFor(t))
	if err != nil {
		t.Fatalf("open registry: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func register(t *testing.T, r leaf.WorkerRegistry, ep leaf.Endpoint, maxID int64) leaf.WorkerClaim {
	t.Helper()
	c, err := r.Register(ctxFor(t), ep, maxID)
	if err != nil {
		t.Fatalf("Register(%s, %d): %v", ep, maxID, err)
	}
	if c.WorkerID < 0 || c.WorkerID > maxID {
		t.Fatalf("Register(%s, %d) = worker %d, outside [0, %d]", ep, maxID, c.WorkerID, maxID)
	}
	return c
}

// coldStart races ColdStartNodes registrations on an empty namespace,
// ColdStartRounds times: every round must hand out distinct IDs.
func (s registrySuite) coldStart(t *testing.T, newNamespace func(t *testing.T) RegistryOpener) {
	rounds := ColdStartRounds
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		open := newNamespace(t)
		regs := make([]leaf.WorkerRegistry, ColdStartNodes)
		for i := range regs {
			regs[i] = openRegistry(t, open)
		}
		claims := make([]leaf.WorkerClaim, ColdStartNodes)
		errs := make([]error, ColdStartNodes)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range regs {
			wg.Go(func() {
				start.Wait()
				claims[i], errs[i] = regs[i].Register(ctxFor(t), TestEndpoint(i), MaxWorkerID)
			})
		}
		start.Done()
		wg.Wait()
		seen := make(map[int64]int)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: node %d: Register: %v", round, i, err)
			}
			id := claims[i].WorkerID
			if id < 0 || id > MaxWorkerID {
				t.Fatalf("round %d: node %d got worker %d, outside [0, %d]", round, i, id, MaxWorkerID)
			}
			if j, dup := seen[id]; dup {
				t.Fatalf("round %d: nodes %d and %d both got worker ID %d", round, j, i, id)
			}
			seen[id] = i
			if claims[i].HighWater > time.Now().UnixMilli() {
				t.Errorf("round %d: fresh worker %d has a high-water mark in the future: %d", round, id, claims[i].HighWater)
			}
		}
		for _, r := range regs {
			_ = r.Close()
		}
	}
}

// highWaterAfterRelease: a mark stored on Release comes back with the ID.
func (s registrySuite) highWaterAfterRelease(t *testing.T, newNamespace func(t *testing.T) RegistryOpener) {
	open := newNamespace(t)
	ep := TestEndpoint(0)
	r1 := openRegistry(t, open)
	c1 := register(t, r1, ep, MaxWorkerID)
	now := time.Now().UnixMilli()
	if _, err := r1.Heartbeat(ctxFor(t), now+3000); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	// The final mark is lower than the last heartbeat's: a holder that stops
	// may lower its mark to what it actually used.
	final := now + 2000
	if err := r1.Release(ctxFor(t), final); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_ = r1.Close()

	r2 := openRegistry(t, open)
	if s.traits.Sticky {
		c2 := register(t, r2, ep, MaxWorkerID)
		if c2.WorkerID != c1.WorkerID {
			t.Fatalf("same endpoint after Release: worker %d, had %d", c2.WorkerID, c1.WorkerID)
		}
		if c2.HighWater < final {
			t.Fatalf("high-water mark after Release: %d, want >= %d", c2.HighWater, final)
		}
		return
	}
	// Another endpoint may get the ID only with the mark, which lies in the
	// future: a leasing registry should rather pick another ID.
	c2 := register(t, r2, TestEndpoint(1), MaxWorkerID)
	if c2.WorkerID == c1.WorkerID && c2.HighWater < final {
		t.Fatalf("released worker %d handed out again with high-water %d, below the released mark %d", c1.WorkerID, c2.HighWater, final)
	}
}

// highWaterAfterCrash: a holder that stops without Release (a crash) leaves
// its last heartbeat's mark with the ID.
func (s registrySuite) highWaterAfterCrash(t *testing.T, newNamespace func(t *testing.T) RegistryOpener) {
	open := newNamespace(t)
	ep := TestEndpoint(0)
	r1 := openRegistry(t, open)
	c1 := register(t, r1, ep, MaxWorkerID)
	mark := time.Now().UnixMilli() + 3000
	exp, err := r1.Heartbeat(ctxFor(t), mark)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if s.traits.Leases != !exp.IsZero() {
		t.Fatalf("Heartbeat expiry %v; registry leases: %v", exp, s.traits.Leases)
	}
	if s.traits.Leases && !exp.After(time.Now()) {
		t.Fatalf("Heartbeat returned an expiry in the past: %v", exp)
	}
	_ = r1.Close() // no Release

	r2 := openRegistry(t, open)
	if s.traits.Sticky {
		c2 := register(t, r2, ep, MaxWorkerID)
		if c2.WorkerID != c1.WorkerID || c2.HighWater < mark {
			t.Fatalf("same endpoint after a crash: worker %d high-water %d, want worker %d high-water >= %d",
				c2.WorkerID, c2.HighWater, c1.WorkerID, mark)
		}
		return
	}
	c2 := register(t, r2, TestEndpoint(1), MaxWorkerID)
	if c2.WorkerID == c1.WorkerID && c2.HighWater < mark {
		t.Fatalf("crashed holder's worker %d handed out with high-water %d, below its mark %d", c1.WorkerID, c2.HighWater, mark)
	}
}

// maxID: IDs stay within maxID, and when none is left Register fails with
// ErrWorkerIDsExhausted.
func (s registrySuite) maxID(t *testing.T, newNamespace func(t *testing.T) RegistryOpener) {
	open := newNamespace(t)
	const maxID = 3
	seen := make(map[int64]bool)
	var exhausted error
	for i := 0; i < 8 && exhausted == nil; i++ {
		r := openRegistry(t, open)
		c, err := r.Register(ctxFor(t), TestEndpoint(i), maxID)
		switch {
		case errors.Is(err, leaf.ErrWorkerIDsExhausted):
			exhausted = err
		case err != nil:
			t.Fatalf("Register #%d: %v", i, err)
		case c.WorkerID < 0 || c.WorkerID > maxID:
			t.Fatalf("Register #%d with maxID %d: worker %d", i, maxID, c.WorkerID)
		case seen[c.WorkerID]:
			t.Fatalf("Register #%d: worker %d handed out twice", i, c.WorkerID)
		default:
			seen[c.WorkerID] = true
		}
	}
	if exhausted == nil {
		t.Fatalf("8 registrations with maxID %d never failed with ErrWorkerIDsExhausted (got %d IDs)", maxID, len(seen))
	}
	t.Logf("after %d IDs: %v", len(seen), exhausted)
}

func (s registrySuite) invalidInput(t *testing.T, newNamespace func(t *testing.T) RegistryOpener) {
	open := newNamespace(t)
	r := openRegistry(t, open)
	for _, c := range []struct {
		ep    leaf.Endpoint
		maxID int64
	}{
		{leaf.Endpoint{IP: "10.0.0.1", Port: 65536}, MaxWorkerID},
		{leaf.Endpoint{IP: "10.0.0.1", Port: 0}, MaxWorkerID},
		{leaf.Endpoint{IP: "not-an-ip/../x", Port: 8080}, MaxWorkerID},
		{TestEndpoint(0), -1},
	} {
		_, err := r.Register(ctxFor(t), c.ep, c.maxID)
		if !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Register(%q, %d) = %v, want ErrInvalidArgument", c.ep, c.maxID, err)
		}
	}
}

// PeerClockReader is a registry that measures its live peers' clocks
// (snowflake.PeerClockReader).
type PeerClockReader interface {
	PeerClocks(ctx context.Context) ([]leaf.PeerClock, error)
}

// CheckPeerClocks checks what each of regs, registered at TestEndpoint(i)
// with its clock offsets[i] from the real one, sees of the others: every
// other registry exactly once (ids maps a worker ID to its index), each at
// offsets[j]-offsets[i] within tolerance.
func CheckPeerClocks(t *testing.T, ctx context.Context, regs []PeerClockReader, ids map[int64]int, offsets []time.Duration, tolerance time.Duration) {
	t.Helper()
	for i, r := range regs {
		peers, err := r.PeerClocks(ctx)
		if err != nil {
			t.Fatalf("registry %d: PeerClocks: %v", i, err)
		}
		if len(peers) != len(regs)-1 {
			t.Fatalf("registry %d sees %d peers, want %d: %+v", i, len(peers), len(regs)-1, peers)
		}
		for _, p := range peers {
			j, ok := ids[p.WorkerID]
			if !ok || j == i || p.Endpoint != TestEndpoint(j).String() {
				t.Fatalf("registry %d: peer %+v is none of the others", i, p)
			}
			want := offsets[j] - offsets[i]
			if d := p.Offset - want; d > tolerance || d < -tolerance {
				t.Errorf("registry %d: peer %d's offset %v, want %v ± %v", i, j, p.Offset, want, tolerance)
			}
		}
	}
}

// IDClaimer is a registry that claims one given worker ID (the etcd and
// mysql registries' RegisterID).
type IDClaimer interface {
	RegisterID(ctx context.Context, ep leaf.Endpoint, id int64) (leaf.WorkerClaim, error)
}

// RegisterIDRace has 8 servers, each with its own registry client from
// open, race for worker ID 3: exactly one wins, the others are refused with
// leaf.ErrWorkerInUse (within a second: the losers do not wait out the
// winner's lease).
func RegisterIDRace(t *testing.T, open func(t *testing.T) IDClaimer) {
	const n = 8
	regs := make([]IDClaimer, n)
	for i := range regs {
		regs[i] = open(t)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, errs[i] = r.RegisterID(ctx, TestEndpoint(i), 3)
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, leaf.ErrWorkerInUse):
			t.Errorf("server %d: %v, want success or ErrWorkerInUse", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d servers claimed worker 3, want exactly one", won)
	}
}
