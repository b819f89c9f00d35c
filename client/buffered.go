package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/doublebuf"
)

// Defaults and bounds of the buffer options.
const (
	// DefaultRangeSize is the size of the first lease, and the least a
	// lease shrinks to.
	DefaultRangeSize = leaf.MaxBatch
	// DefaultMaxRangeSize caps the adaptive lease size: 10 of the longest
	// range one request carries (leaf.MaxRange), a lease of a tenth of a
	// second at 100M IDs/s, so that the next one arrives well before the
	// current one is used up even where the loader waits for a busy CPU.
	DefaultMaxRangeSize = 10 * leaf.MaxRange
	// MaxRangeSize is the largest lease size the options accept.
	MaxRangeSize = 100 * leaf.MaxRange
	// DefaultLeaseLifetime is how long a lease should last at the rate
	// observed: while leases last less, the next is what would last it (at
	// least twice the last); the size halves when they last over four
	// times as long.
	DefaultLeaseLifetime = time.Second
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
	size     int  // the size of the first lease, and the floor of the adaptive size
	sizeSet  bool // WithRangeSize was given
	maxSize  int  // the cap of the adaptive size
	lifetime time.Duration
	prefetch float64
	wait     time.Duration
}

// validSize checks a lease size option.
func validSize(opt string, n int) error {
	if n < 1 || n > MaxRangeSize {
		return fmt.Errorf("%w: %s(%d), want 1..%d", leaf.ErrInvalidCount, opt, n, MaxRangeSize)
	}
	return nil
}

// WithRangeSize sets the size of the first lease, and the least the lease
// size shrinks to, 1..MaxRangeSize. Default: DefaultRangeSize (10,000). A
// server gives at most what is left of its current segment, and the lease
// asks again for the rest; a server older than leaf.MaxRange ranges gives at
// most leaf.MaxBatch a request. Larger leases mean fewer waits, and more IDs
// skipped when the process exits (the unused rest of two leases). For a
// fixed size, as before the size adapted, set WithMaxRangeSize to the same
// value.
func WithRangeSize(n int) BufferOption {
	return func(c *bufferConfig) error {
		if err := validSize("WithRangeSize", n); err != nil {
			return err
		}
		c.size, c.sizeSet = n, true
		return nil
	}
}

// WithMaxRangeSize caps the adaptive lease size, 1..MaxRangeSize. Default:
// DefaultMaxRangeSize (1,000,000). Below the range size it lowers the range
// size to it, unless WithRangeSize set one, which is then an error.
func WithMaxRangeSize(n int) BufferOption {
	return func(c *bufferConfig) error {
		if err := validSize("WithMaxRangeSize", n); err != nil {
			return err
		}
		c.maxSize = n
		return nil
	}
}

// WithAdaptiveRange sets how long a lease should last at the rate the
// Buffered observes (IDs handed out per second since the previous lease
// was asked for): while a lease of the current size would last less, the
// next one is as large as would last that long at that rate, and at least
// twice as large (up to WithMaxRangeSize); the size halves (never below
// WithRangeSize) when one would last more than four times as long, as after
// an idle spell. Default: DefaultLeaseLifetime (1s).
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
// servers (Client.NextRange), as Tinyid's client does: one request per range
// instead of one per ID. It is safe for concurrent use.
//
// It holds up to two leases: the current one, from which Next takes IDs
// with one atomic add (no lock, no allocation), and the next one, leased in
// the background once the current one is 20% used (WithPrefetch), through
// the Client's failover. A call that finds both used up waits for the lease
// in flight, until its context is done. The lease size follows the rate
// (WithAdaptiveRange): from 10,000 IDs (WithRangeSize) up to 1,000,000
// (WithMaxRangeSize), so that the next lease arrives before the current one
// is used up. A lease is one range request when the server's current
// segment holds it, else several, one after the other, each handed out as
// soon as it arrives.
//
// Guarantees: no ID is handed out twice, by this Buffered or by any other
// client or server of the cluster, since each range is one the servers
// never give out again; a retried lease request only skips IDs. Order: the
// IDs of a range are handed out in increasing order, and the ranges in the
// order they were leased, so the IDs one goroutine gets increase as long as
// the ranges come from one server. Ranges from different servers
// interleave: across a range switch the IDs may go back. The unused IDs of
// the leases held are skipped for good when the Buffered is closed or the
// process exits.
type Buffered struct {
	ids doublebuf.Buffer // first: Next reads nothing else

	c    *Client
	tag  string
	cfg  bufferConfig
	ctx  context.Context // cancelled by Close: stops the loader
	stop context.CancelFunc
	wg   sync.WaitGroup
	now  func() time.Time

	mu     sync.Mutex
	closed bool
	size   int    // IDs the next lease asks for
	sized  uint64 // leases loaded when size was last set: a retry keeps it
	// rangeMax is the most one range request asks for: leaf.MaxRange,
	// leaf.MaxBatch once a server has refused more.
	rangeMax int
	// lastAt is when size was last set, and lastIssued the IDs handed out
	// by then: the rate is measured from there.
	lastAt     time.Time
	lastIssued uint64
}

// BufferedStats counts a Buffered's activity since it was made.
type BufferedStats struct {
	Leases     uint64 // leases loaded, each one range or more
	Ranges     uint64 // ranges leased (successful range requests), a lease in flight's too
	LeasedIDs  uint64 // IDs in them
	Issued     uint64 // IDs handed out
	Waits      uint64 // times a call found no lease and waited for one
	LoadErrors uint64 // leases that failed (every range request of the attempt, after the client's own retries)
	RangeSize  int    // IDs the next lease asks for
	Loading    bool   // a lease is in flight: its ranges so far are counted, the lease not yet
}

// Stats reports the counters.
func (b *Buffered) Stats() BufferedStats {
	st := b.ids.Stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	return BufferedStats{
		Leases: st.Loads, Ranges: st.Ranges, LeasedIDs: st.Leased, Issued: st.Issued,
		Waits: st.Waits, LoadErrors: st.LoadErrors, RangeSize: b.size, Loading: st.Loading,
	}
}

// Buffered returns a buffered source of tag's segment IDs, and starts
// leasing its first range in the background. Close it when done.
func (c *Client) Buffered(tag string, opts ...BufferOption) (*Buffered, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return nil, fmt.Errorf("leaf client: %w", err)
	}
	cfg := bufferConfig{size: DefaultRangeSize, maxSize: DefaultMaxRangeSize, lifetime: DefaultLeaseLifetime,
		prefetch: DefaultPrefetch, wait: DefaultWaitTimeout}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("leaf client: %w", err)
		}
	}
	if cfg.size > cfg.maxSize {
		if cfg.sizeSet {
			return nil, fmt.Errorf("leaf client: %w: WithRangeSize(%d) is above WithMaxRangeSize(%d)", leaf.ErrInvalidArgument, cfg.size, cfg.maxSize)
		}
		cfg.size = cfg.maxSize
	}
	b := &Buffered{c: c, tag: tag, cfg: cfg, size: cfg.size, rangeMax: leaf.MaxRange, now: time.Now}
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.ids.Init(doublebuf.Config{
		Load:               b.load,
		Context:            b.ctx,
		Group:              &b.wg,
		Prefetch:           cfg.prefetch,
		RetryBackoff:       firstLoadBackoff,
		MaxRetryBackoff:    maxLoadBackoff,
		Permanent:          func(err error) bool { return refused(err) || errors.Is(err, ErrPeriodicTag) },
		Retrying:           b.retrying,
		WaitTimeout:        cfg.wait,
		CallerDeadlineWins: true,
		NotReady:           b.notReady,
	})
	b.ids.Fill()
	return b, nil
}

// NextID hands out one ID. While the current lease lasts it costs one atomic
// add and never waits (the one call per lease that passes the prefetch mark
// also starts the background lease and yields its processor once);
// otherwise it switches to the next lease, or waits for one until ctx is
// done (or WithWaitTimeout, if ctx has no deadline).
func (b *Buffered) NextID(ctx context.Context) (int64, error) {
	if id, got := b.ids.Next(); got != doublebuf.None {
		if got == doublebuf.PrefetchDue {
			b.ids.Prefetch()
		}
		return id, nil
	}
	s, _, err := b.ids.Take(ctx, 1, nil)
	return s, err
}

// NextIDs hands out n IDs, 1 <= n <= leaf.MaxBatch. They come in runs
// taken from one range each, so they increase within a run but, like the
// IDs of successive Next calls, not always from one run to the next. The
// wait for leases, if any, is bounded as one Next's is.
func (b *Buffered) NextIDs(ctx context.Context, n int) ([]int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return nil, fmt.Errorf("leaf client: %w", err)
	}
	ids := make([]int64, 0, n)
	var until time.Time // one wait budget for the whole batch
	for left := int64(n); left > 0; {
		s, e, err := b.ids.Take(ctx, left, &until)
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

// ErrPeriodicTag is what a Buffered of a periodic tag answers: the tag's
// IDs restart each period, so a buffer would hand out the IDs of a period
// past once the period turned. Use Client.NextIDPeriod or
// NextIDsPeriod, whose answers name the period.
var ErrPeriodicTag = fmt.Errorf("%w: a periodic tag's IDs cannot be buffered; use NextIDPeriod", leaf.ErrInvalidArgument)

// refused reports a lease error no retry can fix: a 4xx, such as an
// unknown tag.
func refused(err error) bool {
	var se *Error
	return errors.As(err, &se) && !se.retryable()
}

// load is the double buffer's loader: it leases the next lease, sized by
// leaseSize, in ranges of up to rangeMax, one request after the other so
// that a lease from one server increases, each range handed out as it
// arrives. A request that fails after the first cuts the lease short; the
// next lease asks again.
func (b *Buffered) load(ctx context.Context, deliver func(doublebuf.Range) error) error {
	size := b.leaseSize()
	ranges := 0
	for left := size; left > 0; {
		b.mu.Lock()
		most := b.rangeMax
		b.mu.Unlock()
		s, e, period, err := b.c.NextRangePeriod(ctx, b.tag, min(left, most))
		if err != nil && most > leaf.MaxBatch && min(left, most) > leaf.MaxBatch && errors.Is(err, leaf.ErrInvalidCount) {
			// A server from before ranges longer than a batch: ask as
			// it allows from now on.
			b.mu.Lock()
			b.rangeMax = leaf.MaxBatch
			b.mu.Unlock()
			continue
		}
		if err == nil && period != "" {
			// The IDs repeat from one period to the next: a lease would
			// hand out a past period's IDs after the period turned.
			b.c.log.Warn("leaf client: a periodic tag cannot be buffered", "tag", b.tag)
			b.ids.Stop(fmt.Errorf("leaf client: tag %s: %w", b.tag, ErrPeriodicTag))
			return fmt.Errorf("leaf client: tag %s: %w", b.tag, ErrPeriodicTag)
		}
		if errors.Is(err, leaf.ErrOrderedTag) {
			// A cache of an ordered tag's IDs would hand them out of order.
			b.c.log.Warn("leaf client: an ordered tag cannot be buffered", "tag", b.tag)
			err = fmt.Errorf("leaf client: tag %s: %w", b.tag, ErrOrderedTag)
			b.ids.Stop(err)
			return err
		}
		if errors.Is(err, ErrFormattedTag) {
			// The lease would hand out bare numbers, not the tag's IDs.
			b.c.log.Warn("leaf client: a formatted tag cannot be buffered", "tag", b.tag)
			err = fmt.Errorf("leaf client: tag %s: %w", b.tag, err)
			b.ids.Stop(err)
			return err
		}
		if err != nil {
			if ranges == 0 {
				if refused(err) {
					b.c.log.Warn("leaf client: leasing IDs refused", "tag", b.tag, "err", err)
				}
				return err
			}
			b.c.log.Debug("leaf client: lease cut short", "tag", b.tag, "ranges", ranges, "err", err)
			break
		}
		ranges++
		if err := deliver(doublebuf.Range{Start: s, End: e}); err != nil {
			break // closed
		}
		left -= int(e - s)
	}
	return nil
}

// leaseSize adapts the lease size to the rate, once per lease: the IDs
// handed out since the previous lease was sized, over the time since, tell
// how long a lease of the current size lasts. Retries of a failed lease
// keep the size.
func (b *Buffered) leaseSize() int {
	st := b.ids.Stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !b.lastAt.IsZero() && st.Loads == b.sized {
		return b.size
	}
	first := b.lastAt.IsZero()
	elapsed, n := now.Sub(b.lastAt), st.Issued-b.lastIssued
	b.sized, b.lastAt, b.lastIssued = st.Loads, now, st.Issued
	if first {
		return b.size
	}
	var lasts time.Duration
	switch {
	case n > 0:
		lasts = time.Duration(float64(elapsed) * float64(b.size) / float64(n))
	case elapsed > 4*b.cfg.lifetime:
		lasts = elapsed // nothing handed out for long: idle
	default:
		return b.size // too soon to tell
	}
	switch {
	case lasts < b.cfg.lifetime:
		// Straight to what lasts the lifetime at the rate seen, not one
		// doubling per lease: under a saturating load each lease too
		// small is a wait, and doubling from 10,000 takes ten of them.
		want := float64(n) / float64(elapsed) * float64(b.cfg.lifetime)
		b.size = int(min(max(2*float64(b.size), want), float64(b.cfg.maxSize)))
	case lasts > 4*b.cfg.lifetime:
		b.size = max(b.size/2, b.cfg.size)
	}
	return b.size
}

// retrying reports a failed lease that the double buffer retries in d.
func (b *Buffered) retrying(err error, d time.Duration) {
	b.c.log.Warn("leaf client: leasing IDs failed; retrying", "tag", b.tag, "retry_in", d, "err", err)
}

// notReady is the error of a call that gave up waiting for a lease.
func (b *Buffered) notReady(loadErr, why error) error {
	if loadErr != nil {
		return fmt.Errorf("leaf client: buffered tag %q: no IDs left and leasing more fails (%v): %w (%w)", b.tag, loadErr, leaf.ErrNotReady, why)
	}
	return fmt.Errorf("leaf client: buffered tag %q: no IDs left and the next lease did not arrive in time: %w (%w)", b.tag, leaf.ErrNotReady, why)
}

// Close stops handing out IDs and stops the background leasing; calls
// after it, and calls waiting for a lease, fail with leaf.ErrClosed. The
// unused IDs of the leases held are skipped, never handed out. Close waits
// for the loader to stop and is safe to call more than once.
func (b *Buffered) Close() error {
	b.mu.Lock()
	closed := b.closed
	b.closed = true
	b.mu.Unlock()
	if closed {
		return nil
	}
	b.ids.Stop(fmt.Errorf("leaf client: buffered tag %q: %w", b.tag, leaf.ErrClosed))
	b.stop()
	b.wg.Wait()
	return nil
}
