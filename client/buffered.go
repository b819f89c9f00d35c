package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/backoff"
)

// Defaults of the buffer options.
const (
	// DefaultRangeSize is the size of each lease: the most the servers give
	// in one range (leaf.MaxBatch).
	DefaultRangeSize = leaf.MaxBatch
	// DefaultPrefetch is how much of the current lease is used when the
	// next one is requested.
	DefaultPrefetch = 0.2
	// DefaultWaitTimeout bounds the wait for a lease of a call whose
	// context has no deadline.
	DefaultWaitTimeout = 5 * time.Second
)

// Pacing of a Buffered's retries of a failed lease: each pause is drawn
// below a bound that starts at firstLoadBackoff and doubles up to
// maxLoadBackoff (full jitter).
const (
	firstLoadBackoff = 50 * time.Millisecond
	maxLoadBackoff   = 2 * time.Second
)

// BufferOption configures a Buffered.
type BufferOption func(*bufferConfig) error

type bufferConfig struct {
	size     int           // the size of the first lease, and the floor of the adaptive size
	lifetime time.Duration // > 0: the size adapts, see WithAdaptiveRange
	prefetch float64
	wait     time.Duration
}

// WithRangeSize sets how many IDs each lease asks for, 1..leaf.MaxBatch; a
// server may give fewer. Larger leases mean fewer requests, and more IDs
// skipped when the process exits (the unused rest of two leases). Default:
// DefaultRangeSize (10,000).
func WithRangeSize(n int) BufferOption {
	return func(c *bufferConfig) error {
		if err := leaf.ValidateCount(n); err != nil {
			return fmt.Errorf("WithRangeSize: %w", err)
		}
		c.size = n
		return nil
	}
}

// WithAdaptiveRange makes the lease size follow the traffic: it starts at
// the range size (WithRangeSize), doubles (up to leaf.MaxBatch) each time a
// lease is used up in less than lifetime, and halves (never below the range
// size) each time one lasts more than four times lifetime. Off by default:
// every lease asks for the range size.
func WithAdaptiveRange(lifetime time.Duration) BufferOption {
	return func(c *bufferConfig) error {
		if lifetime <= 0 {
			return fmt.Errorf("%w: WithAdaptiveRange(%s), want > 0", leaf.ErrInvalidArgument, lifetime)
		}
		c.lifetime = lifetime
		return nil
	}
}

// WithPrefetch sets the share of the current lease, in (0, 1], that is used
// when the next lease is requested in the background. Default:
// DefaultPrefetch (0.2, as Tinyid: the next lease has 80% of the current
// one's lifetime to arrive).
func WithPrefetch(f float64) BufferOption {
	return func(c *bufferConfig) error {
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: WithPrefetch(%v), want (0, 1]", leaf.ErrInvalidArgument, f)
		}
		c.prefetch = f
		return nil
	}
}

// WithWaitTimeout bounds how long a call whose context has no deadline
// waits for a lease when none is left. Default: DefaultWaitTimeout (5s).
func WithWaitTimeout(d time.Duration) BufferOption {
	return func(c *bufferConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithWaitTimeout(%s), want > 0", leaf.ErrInvalidArgument, d)
		}
		c.wait = d
		return nil
	}
}

// Buffered hands out the segment IDs of one tag from ranges leased from the
// servers (Client.Range), as Tinyid's client does: one request per lease
// instead of one per ID. It is safe for concurrent use.
//
// It holds up to two leases: the current one, from which Next takes IDs
// with one atomic add (no lock, no allocation), and the next one, leased in
// the background once the current one is 20% used (WithPrefetch), through
// the Client's failover. A call that finds both used up waits for the lease
// in flight, until its context is done.
//
// Guarantees: no ID is handed out twice, by this Buffered or by any other
// client or server of the cluster, since each lease is a range the servers
// never give out again; a retried lease request only skips IDs. Order: the
// IDs of one lease are handed out in increasing order, so the IDs one
// goroutine gets increase while they come from one lease, and from lease to
// lease as long as the leases come from one server. Leases from different
// servers interleave: across a lease switch the IDs may go back. The unused
// IDs of the leases held are skipped for good when the Buffered is closed or
// the process exits.
type Buffered struct {
	// cur is the current lease: the only field the hot path reads.
	cur atomic.Pointer[lease]
	_   [56]byte // keep cur off the cache line of the fields below

	c    *Client
	tag  string
	cfg  bufferConfig
	ctx  context.Context // cancelled by Close: stops the loader
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	ready   *lease        // the next lease, once leased
	loading bool          // a loader goroutine is running; at most one
	closed  bool          // Close was called
	notify  chan struct{} // closed and replaced when a load ends (or Close)
	loadErr error         // the latest load's error; nil after a success
	size    int           // IDs the next lease asks for
	since   time.Time     // when cur became current, for the adaptive size
	stats   BufferedStats
}

// BufferedStats counts a Buffered's activity since it was made.
type BufferedStats struct {
	Leases     uint64 // ranges leased
	LeasedIDs  uint64 // IDs in them
	Waits      uint64 // times a call found no lease and waited for one
	LoadErrors uint64 // lease requests that failed (after the client's own retries)
	RangeSize  int    // IDs the next lease asks for
}

// Stats reports the counters.
func (b *Buffered) Stats() BufferedStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stats
	st.RangeSize = b.size
	return st
}

// lease is one range [start, end) leased from a server. next is the next ID
// to hand out: it only grows (one atomic add per ID) and may run past end,
// which only means the lease is used up. Nothing else changes once the lease
// is published, except prefetched.
type lease struct {
	next       atomic.Int64
	start, end int64
	trigger    int64 // once next passes it, the next lease is requested
	prefetched atomic.Bool
}

func newLease(start, end int64, prefetch float64) *lease {
	l := &lease{start: start, end: end}
	l.next.Store(start)
	l.trigger = start + int64(float64(end-start)*prefetch)
	return l
}

// take claims up to n IDs with one atomic add and returns them as [s, e);
// e <= s when the lease is used up. The check on start also catches an add
// that overflowed past the largest int64.
func (l *lease) take(n int64) (s, e int64) {
	e = l.next.Add(n)
	s = e - n
	if s >= l.end || s < l.start {
		return 0, 0
	}
	return s, min(e, l.end)
}

// usedUp reports whether no ID is left.
func (l *lease) usedUp() bool {
	n := l.next.Load()
	return n >= l.end || n < l.start
}

// Buffered returns a buffered source of tag's segment IDs, and starts
// leasing its first range in the background. Close it when done.
func (c *Client) Buffered(tag string, opts ...BufferOption) (*Buffered, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return nil, fmt.Errorf("leaf client: %w", err)
	}
	cfg := bufferConfig{size: DefaultRangeSize, prefetch: DefaultPrefetch, wait: DefaultWaitTimeout}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("leaf client: %w", err)
		}
	}
	b := &Buffered{c: c, tag: tag, cfg: cfg, size: cfg.size, notify: make(chan struct{})}
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.mu.Lock()
	b.startLoadLocked()
	b.mu.Unlock()
	return b, nil
}

// Next hands out one ID. While the current lease lasts it costs one atomic
// add and never waits (the one call per lease that passes the prefetch mark
// also starts the background lease and yields its processor once, see
// prefetch); otherwise it switches to the next lease, or waits for one until
// ctx is done (or WithWaitTimeout, if ctx has no deadline).
func (b *Buffered) Next(ctx context.Context) (int64, error) {
	if l := b.cur.Load(); l != nil {
		if v := l.next.Add(1) - 1; v < l.end && v >= l.start {
			if v >= l.trigger && !l.prefetched.Load() {
				b.prefetch(l)
			}
			return v, nil
		}
	}
	s, _, err := b.take(ctx, 1)
	return s, err
}

// NextIDs hands out n IDs, 1 <= n <= leaf.MaxBatch. They come in runs
// taken from one lease each, so they increase within a run but, like the
// IDs of successive Next calls, not always from one run to the next.
func (b *Buffered) NextIDs(ctx context.Context, n int) ([]int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return nil, fmt.Errorf("leaf client: %w", err)
	}
	ids := make([]int64, 0, n)
	for left := int64(n); left > 0; {
		s, e, err := b.take(ctx, left)
		if err != nil {
			return nil, err
		}
		for id := s; id < e; id++ {
			ids = append(ids, id)
		}
		left -= e - s
	}
	return ids, nil
}

// prefetch starts leasing the next range, once per lease.
func (b *Buffered) prefetch(l *lease) {
	if !l.prefetched.CompareAndSwap(false, true) {
		return
	}
	b.mu.Lock()
	started := b.cur.Load() == l && b.startLoadLocked()
	b.mu.Unlock()
	if started {
		// Let the loader send its request now. When every P is busy
		// handing out IDs, a new goroutine otherwise waits for this one to
		// block, which it does only once the leases are used up.
		runtime.Gosched()
	}
}

// take is the slow path: it claims a non-empty run [s, e) of at most n IDs,
// switching to the next lease when the current one is used up, and
// otherwise waiting for the lease in flight.
func (b *Buffered) take(ctx context.Context, n int64) (s, e int64, err error) {
	var timeout <-chan time.Time // WaitTimeout, for a ctx without a deadline
	waited := false              // a load has ended since this call began waiting
	for {
		if l := b.cur.Load(); l != nil {
			if s, e := l.take(n); e > s {
				if e > l.trigger && !l.prefetched.Load() {
					b.prefetch(l)
				}
				return s, e, nil
			}
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return 0, 0, fmt.Errorf("leaf client: buffered tag %q: %w", b.tag, leaf.ErrClosed)
		}
		if cur := b.cur.Load(); cur != nil && !cur.usedUp() {
			b.mu.Unlock() // another caller switched leases meanwhile
			continue
		}
		if b.ready != nil {
			b.promoteLocked(b.ready)
			b.ready = nil
			b.mu.Unlock()
			continue
		}
		// Both leases are used up. A load that failed for good (a 4xx, such
		// as an unknown tag) while this call waited is its answer; otherwise
		// queue behind the load in flight, starting one if there is none.
		if waited && !b.loading && b.loadErr != nil {
			err := b.loadErr
			b.mu.Unlock()
			return 0, 0, err
		}
		b.startLoadLocked()
		b.stats.Waits++
		wake := b.notify
		b.mu.Unlock()
		if _, ok := ctx.Deadline(); !ok && timeout == nil {
			t := time.NewTimer(b.cfg.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wake:
			waited = true
		case <-ctx.Done():
			return 0, 0, b.notReady(ctx.Err())
		case <-timeout:
			return 0, 0, b.notReady(context.DeadlineExceeded)
		}
	}
}

// notReady is the error of a call that gave up waiting for a lease.
func (b *Buffered) notReady(why error) error {
	b.mu.Lock()
	loadErr := b.loadErr
	b.mu.Unlock()
	if loadErr != nil {
		return fmt.Errorf("leaf client: buffered tag %q: no IDs left and leasing more fails (%v): %w (%w)", b.tag, loadErr, leaf.ErrNotReady, why)
	}
	return fmt.Errorf("leaf client: buffered tag %q: no IDs left and the next lease did not arrive in time: %w (%w)", b.tag, leaf.ErrNotReady, why)
}

// promoteLocked makes l the current lease and, with WithAdaptiveRange,
// sizes the next lease by how long the previous one lasted. b.mu must be
// held.
func (b *Buffered) promoteLocked(l *lease) {
	now := time.Now()
	if b.cfg.lifetime > 0 && b.cur.Load() != nil {
		switch lasted := now.Sub(b.since); {
		case lasted < b.cfg.lifetime:
			b.size = min(2*b.size, leaf.MaxBatch)
		case lasted > 4*b.cfg.lifetime:
			b.size = max(b.size/2, b.cfg.size)
		}
	}
	b.since = now
	b.cur.Store(l)
}

// startLoadLocked starts the loader unless it runs already or there is no
// room for a lease, and reports whether it did. b.mu must be held.
func (b *Buffered) startLoadLocked() bool {
	if b.loading || b.closed || b.ready != nil {
		return false
	}
	b.loading = true
	b.wg.Add(1)
	go b.load()
	return true
}

// wakeLocked wakes the callers waiting for a lease. b.mu must be held.
func (b *Buffered) wakeLocked() {
	close(b.notify)
	b.notify = make(chan struct{})
}

// load leases one range through the client's failover, and retries with a
// jittered backoff while that fails, until it succeeds, a server refuses for good
// (4xx), or Close. A lease is placed as current if the current one is used
// up, else as next.
func (b *Buffered) load() {
	defer b.wg.Done()
	pause := backoff.Backoff{Base: firstLoadBackoff, Max: maxLoadBackoff}
	for {
		b.mu.Lock()
		size := b.size
		b.mu.Unlock()
		s, e, err := b.c.Range(b.ctx, b.tag, size)
		b.mu.Lock()
		if b.closed {
			b.loading = false
			b.mu.Unlock()
			return
		}
		if err == nil {
			l := newLease(s, e, b.cfg.prefetch)
			b.stats.Leases++
			b.stats.LeasedIDs += uint64(e - s)
			if cur := b.cur.Load(); cur == nil || cur.usedUp() {
				b.promoteLocked(l)
			} else {
				b.ready = l
			}
			b.loading, b.loadErr = false, nil
			b.wakeLocked()
			b.mu.Unlock()
			return
		}
		b.loadErr = err
		b.stats.LoadErrors++
		var se *Error
		if errors.As(err, &se) && !se.retryable() {
			b.loading = false
			b.wakeLocked()
			b.mu.Unlock()
			b.c.log.Warn("leaf client: leasing IDs refused", "tag", b.tag, "err", err)
			return
		}
		b.mu.Unlock()
		d := pause.Next()
		b.c.log.Warn("leaf client: leasing IDs failed; retrying", "tag", b.tag, "retry_in", d, "err", err)
		if sleep(b.ctx, d) != nil {
			b.mu.Lock()
			b.loading = false
			b.mu.Unlock()
			return
		}
	}
}

// Close stops handing out IDs and stops the background leasing; calls
// after it, and calls waiting for a lease, fail with leaf.ErrClosed. The
// unused IDs of the leases held are skipped, never handed out. Close waits
// for the loader to stop and is safe to call more than once.
func (b *Buffered) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	if l := b.cur.Load(); l != nil {
		// Every add from now on lands at or past end: the hot path turns to
		// the slow path, which sees closed. IDs below end not yet handed out
		// are skipped.
		l.next.Store(l.end)
	}
	b.ready = nil
	b.wakeLocked()
	b.stop()
	b.mu.Unlock()
	b.wg.Wait()
	return nil
}
