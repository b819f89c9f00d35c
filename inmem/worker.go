// Package inmem holds an in-memory worker-ID registry for tests of the
// snowflake generator: a real, concurrency-safe implementation that passes
// the registries' leaftest suite, with faults a test can inject (a pool
// that is down, a client's link that stalls).
//
// It held an in-memory segment store too, which re-implemented the SQL
// stores' tombstones, shapes, periods and leases and had to behave exactly
// as they do. Generator and transport tests now run on the embedded SQLite
// store (package sqlite, through internal/testutil.Store), wrapped by
// internal/faultstore where they inject faults: one truth for stores.
package inmem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leafgo/leaf"
)

// WorkerPool is an in-memory worker-ID registry with leases, shared by the
// clients it opens, as a ZooKeeper or etcd namespace is shared by servers.
// Its semantics are those of the leasing registries: an ID is reused only
// after its holder's lease and high-water mark have both expired.
type WorkerPool struct {
	ttl time.Duration

	mu      sync.Mutex
	holders map[int64]*poolClient // by worker ID
	marks   map[int64]int64       // high-water mark per worker ID, Unix ms
	expires map[int64]time.Time
	down    bool
}

// NewWorkerPool returns an empty pool whose leases last ttl.
func NewWorkerPool(ttl time.Duration) *WorkerPool {
	return &WorkerPool{ttl: ttl, holders: map[int64]*poolClient{}, marks: map[int64]int64{}, expires: map[int64]time.Time{}}
}

// SetDown makes every call fail as an unreachable registry would (true) or
// work again (false). Leases keep running out meanwhile.
func (p *WorkerPool) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

var errPoolDown = errors.New("inmem worker pool: unreachable")

// Open returns a new client of the pool; it has the leaf.WorkerRegistry
// signature of an opener.
func (p *WorkerPool) Open(context.Context) (leaf.WorkerRegistry, error) {
	return &poolClient{pool: p, id: -1}, nil
}

// poolClient is one server's view of a WorkerPool.
type poolClient struct {
	pool *WorkerPool
	id   int64 // -1 before Register
	link *Link // nil: a direct client
}

// expireLocked drops leases that ran out.
func (p *WorkerPool) expireLocked(now time.Time) {
	for id, exp := range p.expires {
		if !now.Before(exp) {
			delete(p.holders, id)
			delete(p.expires, id)
		}
	}
}

func (c *poolClient) Register(_ context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || c.link.isDown() {
		return leaf.WorkerClaim{}, errPoolDown
	}
	now := time.Now()
	p.expireLocked(now)
	for id := int64(0); id <= maxID; id++ {
		if p.holders[id] != nil || p.marks[id] > now.UnixMilli() {
			continue
		}
		p.holders[id] = c
		p.expires[id] = now.Add(p.ttl)
		c.id = id
		return leaf.WorkerClaim{WorkerID: id, HighWater: p.marks[id], Expires: p.expires[id]}, nil
	}
	return leaf.WorkerClaim{}, fmt.Errorf("%w: all %d worker IDs are leased or behind their marks", leaf.ErrWorkerIDsExhausted, maxID+1)
}

func (c *poolClient) Heartbeat(_ context.Context, mark int64) (time.Time, error) {
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || c.link.isDown() {
		return time.Time{}, errPoolDown
	}
	now := time.Now()
	p.expireLocked(now)
	if c.id < 0 || p.holders[c.id] != c {
		return time.Time{}, fmt.Errorf("%w: worker %d is no longer held by this client", leaf.ErrWorkerLost, c.id)
	}
	p.marks[c.id] = max(p.marks[c.id], mark)
	p.expires[c.id] = now.Add(p.ttl)
	return p.expires[c.id], nil
}

func (c *poolClient) Release(_ context.Context, mark int64) error {
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || c.link.isDown() {
		return errPoolDown
	}
	if c.id < 0 || p.holders[c.id] != c {
		return fmt.Errorf("%w: worker %d is no longer held by this client", leaf.ErrWorkerLost, c.id)
	}
	p.marks[c.id] = mark
	delete(p.holders, c.id)
	delete(p.expires, c.id)
	return nil
}

func (c *poolClient) Close() error { return nil }

// Link is a connection to the pool that a test can cut: clients opened
// through it fail as if the network to the registry hung, while clients
// opened directly (Open) go on working.
type Link struct {
	pool *WorkerPool
	mu   sync.Mutex
	down bool
}

// NewLink returns a working link to the pool.
func (p *WorkerPool) NewLink() *Link { return &Link{pool: p} }

// Stall cuts the link; Up restores it.
func (l *Link) Stall() { l.mu.Lock(); l.down = true; l.mu.Unlock() }

// Up restores the link.
func (l *Link) Up() { l.mu.Lock(); l.down = false; l.mu.Unlock() }

func (l *Link) isDown() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down
}

// Open returns a client of the pool whose calls go through the link.
func (l *Link) Open(context.Context) (leaf.WorkerRegistry, error) {
	return &poolClient{pool: l.pool, id: -1, link: l}, nil
}
