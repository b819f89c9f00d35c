package segment

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/doublebuf"
	"github.com/leafgo/leaf/internal/ratemeter"
	"github.com/leafgo/leaf/tagshape"
)

// This file routes the requests of periodic tags (leaf.TagShape.Period):
// each period is a row of its own in the store (leaf.PeriodStore), and
// here a buffer of its own. A request takes from the buffer of the period
// the generator's clock (Config.Now) is in, in the tag's time zone; the
// answer names the period. Nothing is reset on a timer: a new period is a
// new row, made by the first server that needs it, so servers whose clocks
// differ around the boundary issue from adjacent periods, and an ID is
// unique within its period.
//
// A periodic tag is a kind (kind.go): its shell's first load finds the
// period and hangs a periodic on the shell, which holds the buffers of at
// most two periods: the current one and the one before, for servers whose
// clocks step back across the boundary. A third period evicts the older of
// the two; the idle sweep gives evicted buffers' unused IDs back, as it
// does idle ones'.

// periodic is a periodic tag's state: its shape, its zone, and the buffers
// of its periods.
type periodic struct {
	g     *Generator
	tag   string
	shell *buffer
	shape leaf.TagShape
	loc   *time.Location
	enc   *encoder // each period's buffer's: the bound holds per period

	// cur is the period the last request was routed to: the hot path
	// compares its date with the clock's, without a lock.
	cur atomic.Pointer[period]

	// mu guards the fields below. Lock order: g.mu, then mu, then a
	// buffer's mu.
	mu      sync.Mutex
	live    [2]*period // the periods held, nil when free
	evicted []*period  // stopped, waiting for the sweep to give their IDs back
	retired counters   // the counters of periods no longer held
	rate    ratemeter.Meter
	// emptySince is when live last became empty (or the state was made);
	// the sweep drops the tag once it has been empty for IdleTimeout.
	emptySince time.Time
	dead       bool // dropped: requests look the tag up again
	// stopErr is the answer once stopAll dropped the state (the tag gone,
	// the generator closed), where looking again would find it again.
	stopErr error
}

// period is one period's buffer. y, m and d are the date of its start, as
// the period's kind keeps them (0 for the parts it does not have). from and
// until are the instants it spans, [from, until) in Unix nanoseconds, for
// the hot path's comparison; both 0 where the zone's rules make its edges
// uncertain (see bounds), and the hot path then compares dates.
type period struct {
	y           int
	m           time.Month
	d           int
	from, until int64
	key         string
	b           *buffer
}

func newPeriodic(g *Generator, shell *buffer, shape leaf.TagShape, enc *encoder) (*periodic, error) {
	loc, err := tagshape.Location(shape.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("tag %q: %w", shell.tag, err)
	}
	return &periodic{g: g, tag: shell.tag, shell: shell, shape: shape, loc: loc, enc: enc, emptySince: time.Now()}, nil
}

// date is the date of the period that holds t.
func (p *periodic) date(t time.Time) (int, time.Month, int) {
	y, m, d := t.In(p.loc).Date()
	switch p.shape.Period {
	case leaf.PeriodYear:
		return y, 0, 0
	case leaf.PeriodMonth:
		return y, m, 0
	}
	return y, m, d
}

// bounds are the instants [from, until) in Unix nanoseconds of the period
// whose date (p.date) is y, m, d: every instant from its first midnight to
// the next period's has that date. 0, 0 where that does not hold: a zone
// whose clock goes back across a midnight gives one date two spans, and a
// comparison of instants would then decide otherwise than p.date.
func (p *periodic) bounds(y int, m time.Month, d int) (int64, int64) {
	var start, end time.Time
	switch p.shape.Period {
	case leaf.PeriodYear:
		start, end = time.Date(y, 1, 1, 0, 0, 0, 0, p.loc), time.Date(y+1, 1, 1, 0, 0, 0, 0, p.loc)
	case leaf.PeriodMonth:
		start, end = time.Date(y, m, 1, 0, 0, 0, 0, p.loc), time.Date(y, m+1, 1, 0, 0, 0, 0, p.loc)
	default:
		start, end = time.Date(y, m, d, 0, 0, 0, 0, p.loc), time.Date(y, m, d+1, 0, 0, 0, 0, p.loc)
	}
	in := func(t time.Time) bool {
		ty, tm, td := p.date(t)
		return ty == y && tm == m && td == d
	}
	// Within one offset of the zone the date only grows with the instant,
	// so an offset's span whose first and last instants have the date has
	// it throughout. A year has a few offsets at most; 64 bounds the walk.
	t := start
	for range 64 {
		last := end
		if _, zend := t.ZoneBounds(); !zend.IsZero() && zend.Before(end) {
			last = zend
		}
		if !last.After(t) || !in(t) || !in(last.Add(-1)) {
			return 0, 0
		}
		if t = last; !t.Before(end) {
			return start.UnixNano(), end.UnixNano()
		}
	}
	return 0, 0
}

// fast is the period of now if it is the one the last request was routed
// to; nil otherwise.
func (p *periodic) fast(now time.Time) *period {
	c := p.cur.Load()
	if c == nil {
		return nil
	}
	if c.until != 0 {
		if n := now.UnixNano(); n < c.from || n >= c.until {
			return nil
		}
		return c
	}
	if y, m, d := p.date(now); y != c.y || m != c.m || d != c.d {
		return nil
	}
	return c
}

// current is the period of now, its buffer made if this server holds none
// for it. errRetired if the tag's state was dropped.
func (p *periodic) current(now time.Time) (*period, error) {
	if c := p.fast(now); c != nil {
		return c, nil
	}
	y, m, d := p.date(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		if p.stopErr != nil {
			return nil, p.stopErr
		}
		return nil, errRetired
	}
	for _, c := range p.live {
		if c != nil && c.y == y && c.m == m && c.d == d {
			p.cur.Store(c)
			return c, nil
		}
	}
	c := &period{y: y, m: m, d: d, key: tagshape.PeriodKey(p.shape.Period, now.In(p.loc))}
	c.from, c.until = p.bounds(y, m, d)
	c.b = newBuffer(p.g, p.tag, false)
	c.b.row = periodRow{p, c.key}
	c.b.enc.Store(p.enc)
	slot := 0
	switch {
	case p.live[0] == nil:
	case p.live[1] == nil:
		slot = 1
	default:
		// Two periods held: the older goes. Keys of one kind sort as
		// their periods do.
		if p.live[1].key < p.live[0].key {
			slot = 1
		}
		old := p.live[slot]
		old.b.ids.Stop(errRetired)
		p.evicted = append(p.evicted, old)
		p.g.s.Logger.Info("segment period evicted", "tag", p.tag, "period", old.key, "for", c.key)
	}
	p.live[slot] = c
	p.cur.Store(c)
	return c, nil
}

// stopAll stops every period's buffer with err, marks the state dropped,
// and returns the buffers, for a give-back.
func (p *periodic) stopAll(err error) []*buffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = true
	if p.stopErr == nil {
		p.stopErr = err
	}
	var out []*buffer
	for _, c := range p.all() {
		c.b.ids.Stop(err)
		out = append(out, c.b)
	}
	return out
}

// all lists the periods held and evicted. p.mu must be held.
func (p *periodic) all() []*period {
	out := slices.Clone(p.evicted)
	for _, c := range p.live {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// latest is the period held with the highest key, nil if none. p.mu must
// be held.
func (p *periodic) latest() *period {
	var out *period
	for _, c := range p.live {
		if c != nil && (out == nil || c.key > out.key) {
			out = c
		}
	}
	return out
}

// addCounters adds the tag's counters over all its periods to c.
func (p *periodic) addCounters(c *counters) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addCountersLocked(c)
}

func (p *periodic) addCountersLocked(c *counters) {
	c.merge(p.retired)
	for _, x := range p.all() {
		c.add(x.b)
	}
}

// sample records the tag's issued count, over all its periods, for its
// rate, and returns it.
func (p *periodic) sample(now time.Time) uint64 {
	var c counters
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addCountersLocked(&c)
	p.rate.Sample(now, c.issued)
	return c.issued
}

// status is the tag's status: the buffers of its latest period, the
// counters of all of them.
func (p *periodic) status(now time.Time) leaf.SegmentStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c counters
	p.addCountersLocked(&c)
	st := leaf.SegmentStatus{Tag: p.tag, SecondsLeft: -1}
	if l := p.latest(); l != nil {
		st = l.b.status(now)
	}
	c.fill(&st, &p.rate, now)
	return st
}

// sweep retires the idle periods' buffers (as the idle sweep retires a
// tag's), and gives them back with the evicted ones once g.mu is released;
// it drops the state once the tag has held no period for timeout. g.mu
// must be held.
func (p *periodic) sweep(now time.Time, timeout time.Duration) (bool, func(context.Context)) {
	giveBack, drop := p.sweepPeriods(now, timeout)
	if len(giveBack) == 0 {
		return drop, nil
	}
	return drop, func(ctx context.Context) { p.giveBack(ctx, giveBack) }
}

// release is a no-op: a periodic tag holds nothing in the store.
func (*periodic) release(context.Context) {}

// sweepPeriods is sweep's pass over the periods: the periods to give
// back, and whether the state is dropped.
func (p *periodic) sweepPeriods(now time.Time, timeout time.Duration) (giveBack []*period, drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.live {
		if c == nil {
			continue
		}
		c.b.mu.Lock()
		idle := c.b.retireIfIdleLocked(now, timeout)
		c.b.mu.Unlock()
		if idle {
			p.live[i] = nil
			p.evicted = append(p.evicted, c)
			if p.cur.Load() == c {
				p.cur.Store(nil)
			}
			if p.live[1-i] == nil {
				p.emptySince = now
			}
		}
	}
	giveBack = slices.Clone(p.evicted)
	if p.live[0] == nil && p.live[1] == nil && len(p.evicted) == 0 && now.Sub(p.emptySince) >= timeout {
		p.dead = true
		drop = true
	}
	return giveBack, drop
}

// giveBack gives back the unused IDs of periods evicted or idle, and
// retires them.
func (p *periodic) giveBack(ctx context.Context, periods []*period) {
	g := p.g
	for _, c := range periods {
		if g.s.GiveBack {
			if from, expect, ok := c.b.claimTail(); ok {
				if n, err := g.giveBack(ctx, c.b, from, expect); err != nil {
					g.s.Logger.Warn("segment give-back of a past period failed; its range is abandoned", "tag", p.tag, "period", c.key, "err", err)
				} else if n > 0 {
					g.s.Logger.Info("segment unused IDs of a past period given back", "tag", p.tag, "period", c.key, "from", from, "to", expect)
				}
			}
		}
		p.retire(c)
	}
}

// retire drops an evicted period, given back (or not), folding its
// counters into the tag's.
func (p *periodic) retire(c *period) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.evicted, c)
	if i < 0 {
		return
	}
	p.evicted = slices.Delete(p.evicted, i, i+1)
	p.retired.add(c.b)
}

// take takes from the buffer of the period the clock is in. A range of a
// periodic tag is refused for a forwarding server (takeForwarded): its
// IDs need their period's key.
func (p *periodic) take(ctx context.Context, n int64, waitUntil *time.Time, tk takeKind) (run, error) {
	switch tk {
	case takeForwarded:
		return run{}, fmt.Errorf("%w: tag %s is periodic: take its ranges with their period (NextRangePeriod)", leaf.ErrInvalidArgument, p.tag)
	case takeRange:
		if err := p.enc.rangeRefusal(); err != nil {
			return run{}, err
		}
	}
	for {
		c, err := p.current(p.g.s.Now())
		if err != nil {
			return run{}, err
		}
		start, end, err := c.b.take(ctx, n, waitUntil)
		if err == errRetired {
			continue // the period was evicted or idle: the clock's again
		}
		return run{start: start, end: end, key: c.key, enc: p.enc, shell: p.shell}, err
	}
}

// next is the hot path of a periodic tag's single ID: the period the last
// request was routed to, if the clock is still in it.
func (p *periodic) next(context.Context) (int64, string, bool, error) {
	c := p.fast(p.g.s.Now())
	if c == nil {
		return 0, "", false, nil
	}
	v, got := c.b.ids.Next()
	if got == doublebuf.None {
		return 0, "", false, nil
	}
	if got == doublebuf.PrefetchDue {
		c.b.ids.Prefetch()
	}
	// An encode error cannot happen (loads cut ranges at the bound); were
	// it to, the slow path answers it.
	if v, err := p.enc.encode(v); err == nil {
		return v, c.key, true, nil
	}
	return 0, "", false, nil
}
