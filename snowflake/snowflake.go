// Package snowflake is leaf's snowflake-mode generator: IDs made of
// milliseconds, a worker ID and a sequence (Java Leaf's layout by default;
// JSSafeLayout keeps them below 2^53 for JavaScript), with a worker ID
// claimed from a leaf.WorkerRegistry.
//
// It differs from Java Leaf where Leaf can duplicate:
//
//   - A time high-water mark is persisted (to the registry and the local
//     cache) ahead of issuing: the generator never issues an ID stamped at or
//     after the mark it last persisted, and a new holder of the worker ID
//     refuses to start while its clock is below that mark. Leaf reports the
//     time behind its IDs, every 3 s, so a restart after a small rollback can
//     repeat IDs (Leaf#216).
//   - A registry unreachable at start-up is survived with the cached worker
//     ID only if the clock is past the cached mark (Leaf#97).
//   - Every claim but the local registry's is a lease: the worker stops
//     issuing before it can run out, so the registry may hand the ID to
//     another process afterwards, and the mark it persists with each renewal
//     covers the whole lease, so that whoever takes the ID starts above
//     everything it could have stamped. Through a registry outage shorter
//     than the lease it goes on issuing, its marks kept in the local cache.
//   - Every wait is bounded: a clock going back while waiting for the next
//     millisecond is noticed (Leaf#153).
//
// A Generator is two parts. The worker (worker.go) owns the claim on the
// worker ID: registration, the heartbeat that persists the mark and renews
// the lease, re-registration, the peer clock check, the release. It
// publishes a grant: the worker ID, the floor and limit of the milliseconds
// that may be stamped, the lease's end, or why nothing may be. The issuer
// (issuer.go) owns the sequence and stamps IDs within the grant it reads,
// asking the worker to extend it when an ID reaches its limit.
package snowflake

import (
	"context"
	"fmt"
	"slices"

	"github.com/leafgo/leaf"
)

// Generator issues snowflake IDs. It is safe for concurrent use.
type Generator struct {
	layout Layout
	w      *worker
	is     *issuer
}

// New claims a worker ID, checks the clock against the claim's high-water
// mark, persists the first mark and starts the heartbeat. It fails with
// ErrInvalidArgument for settings Validate refuses, with ErrClockBackwards
// when the clock is further below the stored mark than Window plus
// StartupGrace, and with the registry's error when the registry is
// unreachable and no usable cached ID exists.
func New(ctx context.Context, s Config) (*Generator, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	now := s.Now().UnixMilli()
	if now < s.Layout.Epoch {
		return nil, fmt.Errorf("%w: the clock (%s) is before the layout's epoch (%s)",
			leaf.ErrClockBackwards, fmtMs(now), fmtMs(s.Layout.Epoch))
	}
	if end := s.Layout.End(); end-now < s.Lifetime.Milliseconds() {
		return nil, fmt.Errorf("%w: layout %s runs out at %s, less than the required lifetime %v from now",
			leaf.ErrInvalidArgument, s.Layout, fmtMs(end), s.Lifetime)
	}
	w := newWorker(s)
	is := newIssuer(s, w)
	w.issued = is
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	return &Generator{layout: s.Layout, w: w, is: is}, nil
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// Decode takes an ID apart with the generator's layout.
func (g *Generator) Decode(id int64) (leaf.SnowflakeParts, error) { return g.layout.Decode(id) }

// NextID issues one ID. The key is ignored, as in Leaf.
func (g *Generator) NextID(ctx context.Context, _ string) (int64, error) {
	return g.is.nextID(ctx)
}

// NextIDs appends n strictly increasing IDs to dst. A batch that fails part
// way returns dst unchanged; the IDs it had issued are never issued again.
func (g *Generator) NextIDs(ctx context.Context, _ string, n int, dst []int64) ([]int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return dst, err
	}
	return g.is.fill(ctx, slices.Grow(dst, n), len(dst)+n, nil)
}

// Close stops issuing and the heartbeat, then stores the final high-water
// mark (just after the last ID issued) in the cache and the registry, and
// releases the claim: a leased ID returns to the pool. The registry itself
// is left open for its owner to close.
func (g *Generator) Close(ctx context.Context) error { return g.w.close(ctx) }

// Status describes the worker.
func (g *Generator) Status() leaf.WorkerStatus {
	st := leaf.WorkerStatus{Layout: g.layout.Name()}
	g.is.status(&st)
	g.w.fillStatus(&st)
	return st
}

// Degraded lists reasons the worker is not fully healthy; empty when it is.
func (g *Generator) Degraded() []string {
	r, peers := g.w.degraded()
	if roll := g.is.degraded(); roll != "" {
		r = append(r, roll)
	}
	if peers != "" {
		r = append(r, peers)
	}
	return r
}
