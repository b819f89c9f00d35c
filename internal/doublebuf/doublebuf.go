// Package doublebuf hands out IDs from ranges leased in the background, two
// leases at a time. It is the one mechanism behind the segment generator's
// buffers (leases reserved from the store) and the client's Buffered (leases
// from the servers); what differs between them (what a load does, how big a
// lease is, which errors end a load) comes in through Config.
//
// The current lease is consumed with one atomic add per ID: no lock, no
// allocation. The caller that takes the ID at the lease's prefetch mark
// starts one background load of the next lease and yields its processor
// once, so that the loader runs at once even when every processor is busy
// handing out IDs. At most one load runs at a time. Callers that find no ID
// at hand queue behind that load until it delivers, their context ends, or
// the wait budget is spent. A failed load is retried with a jittered
// backoff; a permanent error ends it and is the answer of the callers that
// waited.
//
// A lease is one range [start, end) or several, handed out in turn in the
// order they arrive: a source may cap how many IDs one request carries. Each
// range is handed out as soon as it arrives, so a caller that ran out of IDs
// waits for one range, not for the whole lease.
//
// Every ID is handed out at most once: a take claims its IDs with one atomic
// add on the range's next ID, and that counter only grows. An add that runs
// past the end, or wraps past the largest int64, claims nothing.
package doublebuf

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf/internal/backoff"
)

// Range is one range of IDs [Start, End) that a Load leased.
type Range struct {
	Start, End int64
	// Step is the owner's note of the size the source reserved the range
	// with, reported back by Stats; the buffer does not read it.
	Step int
}

// Config is what a Buffer's owner provides.
type Config struct {
	// Load leases the next lease: it hands each range to deliver as it
	// arrives, one or more, non-empty, not below 0, and returns once the
	// lease is complete. deliver refuses an invalid range, and returns
	// ErrStopped (keeping the range) once the buffer is stopped, which ends
	// the lease; Load must not call it after returning. A Load that
	// delivered some ranges has loaded a (maybe shorter) lease, whatever it
	// returns; one that delivered none failed with the error it returns,
	// and is retried unless Permanent says otherwise.
	//
	// Load runs in the load goroutine, one call at a time, without the
	// buffer's lock, with Context. It may call Stop, for instance when the
	// source says the IDs are gone for good.
	Load func(ctx context.Context, deliver func(Range) error) error
	// Context is Load's; when it is done the retries stop. Default:
	// context.Background().
	Context context.Context
	// Group, if set, counts the load goroutines, so that the owner can wait
	// for them to end (after Stop, and with Context cancelled if the load
	// in flight should not finish).
	Group *sync.WaitGroup
	// Prefetch is the share of a lease, in [0, 1], handed out when the next
	// one is loaded: 0.1 loads it once 10% of the current lease is used.
	Prefetch float64
	// RetryBackoff and MaxRetryBackoff pace the retries of a failed load:
	// each pause is drawn below a bound that starts at RetryBackoff and
	// doubles up to MaxRetryBackoff (full jitter).
	RetryBackoff, MaxRetryBackoff time.Duration
	// Permanent reports a load error not worth retrying: the load ends,
	// the callers that waited for it get the error, and the next take that
	// finds no IDs starts a new load. Nil: every error is retried.
	Permanent func(error) bool
	// Retrying, if set, is told of each failed load before the pause that
	// precedes its retry (for logs and health).
	Retrying func(err error, in time.Duration)
	// WaitTimeout bounds how long one request waits for IDs, in all of its
	// takes, counted from its first wait. A wait also ends with the
	// request's context.
	WaitTimeout time.Duration
	// CallerDeadlineWins makes a request whose context has a deadline wait
	// until that deadline, however far: WaitTimeout then bounds only
	// requests without one (a library honours its caller's deadline). When
	// false, a wait ends at WaitTimeout or at the deadline, whichever comes
	// first (a server does not hold a request through a store outage).
	CallerDeadlineWins bool
	// NotReady makes the error of a take that gave up waiting: loadErr is
	// the latest load's error (nil if none failed), cause ctx.Err() or
	// context.DeadlineExceeded when WaitTimeout ended the wait. Required.
	NotReady func(loadErr, cause error) error
}

// ErrStopped is what deliver answers once the buffer is stopped.
var ErrStopped = errors.New("doublebuf: buffer stopped")

// noTrigger is the trigger of the ranges of a lease that do not hold its
// prefetch mark: no ID is below 0.
const noTrigger = -1

// cursor is one published range: next is the next ID to hand out. It only
// grows, one atomic add per take, and may run past end, which only means the
// range is used up. start, end and step never change; frozen and frozenAt
// are guarded by the buffer's mu.
type cursor struct {
	next       atomic.Int64
	start, end int64
	// trigger is the ID whose taker starts the next load: exactly one take
	// claims it, so no flag is needed to load once per lease. It is placed
	// when the lease is complete (see completeLocked).
	trigger atomic.Int64
	step    int

	frozen   bool
	frozenAt int64 // the first ID not handed out, pinned by freeze
}

// take claims up to n IDs with one atomic add and returns them as [s, e);
// ok is false when the range is used up. The check on s < start catches an
// add that wrapped past the largest int64; e < s one whose end did.
func (c *cursor) take(n int64) (s, e int64, ok bool) {
	e = c.next.Add(n)
	s = e - n
	if s >= c.end || s < c.start {
		return 0, 0, false
	}
	if e > c.end || e < s {
		e = c.end
	}
	return s, e, true
}

func (c *cursor) usedUp() bool {
	v := c.next.Load()
	return v >= c.end || v < c.start
}

// freeze stops the range: every add after the swap lands at or past end, so
// frozenAt is the last word on what was handed out.
func (c *cursor) freeze() {
	if c.frozen {
		return
	}
	v := c.next.Swap(c.end)
	if v < c.start || v > c.end {
		v = c.end
	}
	c.frozen, c.frozenAt = true, v
}

// issued counts the IDs handed out from the range.
func (c *cursor) issued() int64 {
	if c.frozen {
		return c.frozenAt - c.start
	}
	v := c.next.Load()
	if v < c.start || v > c.end {
		v = c.end
	}
	return v - c.start
}

// lease is what one load brought: its ranges in the order they arrived,
// handed out in turn. parts[at] is the one being handed out. parts grows
// while the load runs.
type lease struct {
	parts []*cursor
	at    int
}

func (l *lease) issued() (n int64) {
	for _, c := range l.parts {
		n += c.issued()
	}
	return n
}

// addLocked checks a delivered range and appends it. b.mu must be held.
func (l *lease) addLocked(r Range) (*cursor, error) {
	if r.Start < 0 || r.End <= r.Start {
		return nil, fmt.Errorf("doublebuf: the load delivered the invalid range [%d, %d)", r.Start, r.End)
	}
	for _, c := range l.parts {
		if r.Start < c.end && c.start < r.End {
			return nil, fmt.Errorf("doublebuf: the load delivered [%d, %d), which overlaps [%d, %d) of the same lease", r.Start, r.End, c.start, c.end)
		}
	}
	c := &cursor{start: r.Start, end: r.End, step: r.Step}
	c.next.Store(r.Start)
	c.trigger.Store(noTrigger)
	l.parts = append(l.parts, c)
	return c, nil
}

// Buffer hands out the IDs of two leases. It is safe for concurrent use.
type Buffer struct {
	// cur is the range handed out from: the only field the hot path reads.
	cur atomic.Pointer[cursor]
	_   [56]byte // keep cur off the cache line of the fields below

	cfg   Config
	group *sync.WaitGroup

	mu      sync.Mutex
	slots   [2]*lease // slots[pos] is the current lease; slots[1-pos] the next, once loaded
	pos     int
	loading bool          // a load goroutine runs; at most one
	notify  chan struct{} // closed and replaced when a load ends, or at Stop
	stopped chan struct{} // closed by Stop
	stopErr error         // what takes answer once stopped
	lastErr error         // the latest load's error; nil after a success

	loads, loadErrors, waits uint64
	leased                   uint64 // IDs in the ranges delivered
	ranges                   uint64 // ranges delivered
	retired                  uint64 // IDs handed out from leases no longer held
}

// New returns a Buffer that loads nothing until a take needs IDs or Fill.
func New(cfg Config) *Buffer {
	b := new(Buffer)
	b.Init(cfg)
	return b
}

// Init prepares a zero Buffer, for owners that embed one: the hot path then
// reads one pointer less. It must be called once, before any other method,
// and the Buffer not copied after.
func (b *Buffer) Init(cfg Config) {
	if cfg.Load == nil || cfg.NotReady == nil {
		panic("doublebuf: Config.Load and Config.NotReady are required")
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	b.cfg, b.group, b.notify, b.stopped = cfg, cfg.Group, make(chan struct{}), make(chan struct{})
	if b.group == nil {
		b.group = new(sync.WaitGroup)
	}
}

// Next hands out one ID from the current range: one atomic add, no lock,
// no allocation. It leaves the prefetch to its caller (see Got) so that it
// stays small enough to inline into the caller's hot path:
//
//	if id, got := b.Next(); got != doublebuf.None {
//		if got == doublebuf.PrefetchDue {
//			b.Prefetch()
//		}
//		return id, nil
//	}
//	start, _, err := b.Take(ctx, 1, nil)
func (b *Buffer) Next() (id int64, got Got) {
	if c := b.cur.Load(); c != nil {
		if v := c.next.Add(1) - 1; v < c.end && v >= c.start {
			if v == c.trigger.Load() {
				return v, PrefetchDue
			}
			return v, Taken
		}
	}
	return 0, None
}

// Got is what Next got.
type Got uint8

const (
	// None: no ID at hand (no range yet, used up, or stopped); Take waits
	// for one or says why.
	None Got = iota
	// Taken: one ID.
	Taken
	// PrefetchDue: the ID at the prefetch mark. The caller must call Prefetch.
	PrefetchDue
)

// Prefetch starts the load of the next lease and yields the processor to
// it; Next's caller calls it for the ID at the prefetch mark.
func (b *Buffer) Prefetch() { b.prefetch() }

// Take claims a non-empty run [start, end) of at most n IDs, n >= 1, from
// one range. When both leases are used up it queues behind the load (and
// starts one if none runs) until the load lands, ctx ends, or the wait
// budget is spent (see Config.WaitTimeout), then answers NotReady's error.
//
// until is the request's wait budget, shared by its takes: zero until the
// request first waits, then the instant its waits end. Nil gives this take
// a budget of its own.
func (b *Buffer) Take(ctx context.Context, n int64, until *time.Time) (start, end int64, err error) {
	if until == nil {
		until = new(time.Time)
	}
	var timer *time.Timer
	start, end, err = b.take(ctx, n, until, &timer)
	if timer != nil {
		timer.Stop()
	}
	return start, end, err
}

func (b *Buffer) take(ctx context.Context, n int64, until *time.Time, timer **time.Timer) (int64, int64, error) {
	var timeout <-chan time.Time
	waited := false // a load ended while this take waited
	for {
		if c := b.cur.Load(); c != nil {
			if s, e, ok := c.take(n); ok {
				if t := c.trigger.Load(); s <= t && t < e {
					b.prefetch()
				}
				return s, e, nil
			}
		}
		b.mu.Lock()
		if err := b.stopErr; err != nil {
			b.mu.Unlock()
			return 0, 0, err
		}
		if b.advanceLocked() {
			loading := b.loading
			b.mu.Unlock()
			if loading {
				// Takes have caught up with a lease still arriving range
				// by range: let the loader run before they catch up
				// again. When every P hands out IDs, it otherwise waits
				// for a preemption per step of its request.
				runtime.Gosched()
			}
			continue
		}
		// Both leases are used up. A load that failed for good while this
		// take waited is its answer; otherwise queue behind the load in
		// flight, starting one if there is none.
		if waited && !b.loading && b.lastErr != nil {
			err := b.lastErr
			b.mu.Unlock()
			return 0, 0, err
		}
		b.startLoadLocked()
		b.waits++
		wake := b.notify
		b.mu.Unlock()
		if *timer == nil {
			if until.IsZero() {
				*until = time.Now().Add(b.cfg.WaitTimeout)
			}
			dl, hasDeadline := ctx.Deadline()
			bounded := !hasDeadline // WaitTimeout ends the wait unless the deadline does
			if !b.cfg.CallerDeadlineWins && hasDeadline {
				bounded = until.Before(dl)
			}
			if bounded {
				*timer = time.NewTimer(time.Until(*until))
				timeout = (*timer).C
			}
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

func (b *Buffer) notReady(cause error) error {
	b.mu.Lock()
	loadErr := b.lastErr
	b.mu.Unlock()
	return b.cfg.NotReady(loadErr, cause)
}

// advanceLocked moves on from a used-up range: to the next range of the
// lease, else to the next lease. It reports whether there may be IDs to take
// now. b.mu must be held and the buffer not stopped.
func (b *Buffer) advanceLocked() bool {
	l := b.slots[b.pos]
	if l != nil {
		if !l.parts[l.at].usedUp() {
			return true // another take moved on meanwhile
		}
		if l.at+1 < len(l.parts) {
			l.at++
			b.cur.Store(l.parts[l.at])
			return true
		}
	}
	next := b.slots[1-b.pos]
	if next == nil {
		return false
	}
	if l != nil {
		b.retired += uint64(l.issued())
		b.slots[b.pos] = nil
	}
	b.pos = 1 - b.pos
	b.cur.Store(next.parts[next.at])
	return true
}

// Fill starts loading a lease in the background, unless a load runs or
// both leases are held: for owners that lease ahead of the first take.
func (b *Buffer) Fill() {
	b.mu.Lock()
	b.startLoadLocked()
	b.mu.Unlock()
}

// prefetch starts the load of the next lease for the take that claimed the
// prefetch mark.
func (b *Buffer) prefetch() {
	b.mu.Lock()
	started := b.startLoadLocked()
	b.mu.Unlock()
	if started {
		// Let the loader send its request now. When every P is busy handing
		// out IDs, a new goroutine otherwise waits for this one to block,
		// which it does only once the leases are used up.
		runtime.Gosched()
	}
}

// startLoadLocked starts the load goroutine unless one runs, the buffer is
// stopped, or both slots are full, and reports whether it did. b.mu must be
// held.
func (b *Buffer) startLoadLocked() bool {
	if b.loading || b.stopErr != nil || (b.slots[0] != nil && b.slots[1] != nil) {
		return false
	}
	b.loading = true
	b.group.Add(1)
	go b.load()
	return true
}

// load runs Load until it delivers, fails for good, or the buffer stops,
// pausing between attempts.
func (b *Buffer) load() {
	defer b.group.Done()
	pause := backoff.Backoff{Base: b.cfg.RetryBackoff, Max: b.cfg.MaxRetryBackoff}
	for {
		var l *lease // the lease being delivered; nil until its first range
		deliver := func(r Range) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			fresh := l == nil
			if fresh {
				l = &lease{}
			}
			if _, err := l.addLocked(r); err != nil {
				if fresh {
					l = nil
				}
				return err
			}
			b.leased += uint64(r.End - r.Start)
			b.ranges++
			switch {
			case fresh:
				b.installLocked(l)
			case b.stopErr == nil && b.slots[b.pos] == l:
				b.advanceLocked() // the current lease was used up: on to the new range
			}
			b.wakeLocked()
			if b.stopErr != nil {
				return ErrStopped
			}
			return nil
		}
		err := b.cfg.Load(b.cfg.Context, deliver)
		b.mu.Lock()
		if l != nil {
			b.loads++
			b.loading, b.lastErr = false, nil
			b.completeLocked(l)
			b.wakeLocked()
			b.mu.Unlock()
			return
		}
		if err == nil {
			err = errors.New("doublebuf: the load delivered no range")
		}
		b.lastErr = err
		if b.stopErr != nil {
			b.endLoadLocked()
			return
		}
		b.loadErrors++
		if b.cfg.Permanent != nil && b.cfg.Permanent(err) {
			b.endLoadLocked()
			return
		}
		b.mu.Unlock()
		d := pause.Next()
		if b.cfg.Retrying != nil {
			b.cfg.Retrying(err, d)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-b.cfg.Context.Done():
			t.Stop()
			b.mu.Lock()
			b.endLoadLocked()
			return
		case <-b.stopped:
			t.Stop()
			b.mu.Lock()
			b.endLoadLocked()
			return
		}
	}
}

// completeLocked places the prefetch mark of a lease whose load is over, at
// Prefetch of its IDs. If takes have passed the mark already (the lease
// became current while it loaded), the next load starts now. b.mu must be
// held, and loading already false.
func (b *Buffer) completeLocked(l *lease) {
	if b.stopErr != nil {
		return
	}
	var total int64
	for _, c := range l.parts {
		total += c.end - c.start
	}
	mark := min(max(int64(float64(total)*b.cfg.Prefetch), 0), total-1)
	for i, c := range l.parts {
		if n := c.end - c.start; mark >= n {
			mark -= n
			continue
		}
		c.trigger.Store(c.start + mark)
		// A take that claimed the mark before the store did not see it;
		// its add is visible now.
		if i < l.at || c.next.Load() > c.start+mark {
			b.startLoadLocked()
		}
		return
	}
}

// endLoadLocked ends a load that brought nothing and unlocks b.mu.
func (b *Buffer) endLoadLocked() {
	b.loading = false
	b.wakeLocked()
	b.mu.Unlock()
}

// installLocked places a lease at its first range: as current if there is
// none, else as next, moving on to it if the current one is used up. A stopped buffer keeps the
// lease (Stats reports it: the segment gives its IDs back) but never hands
// it out. b.mu must be held.
func (b *Buffer) installLocked(l *lease) {
	switch {
	case b.slots[b.pos] == nil:
		b.slots[b.pos] = l
		if b.stopErr == nil {
			b.cur.Store(l.parts[0])
		}
	case b.slots[1-b.pos] == nil:
		b.slots[1-b.pos] = l
		if b.stopErr == nil {
			b.advanceLocked()
		}
	default:
		// Unreachable: a load starts only with a free slot, and only one
		// runs. Dropping the lease only skips its IDs.
	}
}

func (b *Buffer) wakeLocked() {
	close(b.notify)
	b.notify = make(chan struct{})
}

// Stop ends handing out IDs: takes answer err from now on (the first Stop's
// err stays), waiting takes wake up, and no load starts again; a load in
// flight ends after its attempt, and a lease it brings is kept, never handed
// out. The current range is frozen: an ID not handed out by now never is,
// and Stats counts exactly those that were.
func (b *Buffer) Stop(err error) {
	b.mu.Lock()
	b.stopLocked(err)
	b.mu.Unlock()
}

// StopIf stops the buffer as Stop does if cond, called with the buffer's
// statistics under its lock (so that no take can start a load between the
// check and the stop), says so, and reports whether it did. cond must not
// call the Buffer.
func (b *Buffer) StopIf(err error, cond func(Stats) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !cond(b.statsLocked()) {
		return false
	}
	b.stopLocked(err)
	return true
}

func (b *Buffer) stopLocked(err error) {
	if b.stopErr == nil {
		b.stopErr = err
		close(b.stopped)
	}
	if l := b.slots[b.pos]; l != nil {
		l.parts[l.at].freeze()
	}
	b.wakeLocked()
}

// Stats is a snapshot of a Buffer.
type Stats struct {
	Loads      uint64 // leases loaded
	LoadErrors uint64 // load attempts that failed (not counting those ended by Stop)
	Waits      uint64 // times a take found no IDs and waited
	Leased     uint64 // IDs in the ranges delivered (those of a lease in flight too)
	Ranges     uint64 // ranges delivered (those of a lease in flight too)
	Issued     uint64 // IDs handed out
	Loading    bool   // a load runs
	Stopped    bool
	LastErr    error // the latest load's error; nil after a success
	// Leases are the two slots; Leases[Pos] is the current lease.
	Pos    int
	Leases [2]LeaseState
}

// LeaseState describes a lease held; the zero value an empty slot.
type LeaseState struct {
	Held       bool
	Start, End int64 // the first range's start, the last range's end
	// Next is the next ID of the range being handed out; its end once the
	// range is used up or frozen.
	Next   int64
	Issued int64 // IDs handed out from the lease
	Left   int64 // IDs left to hand out
	Step   int   // the first range's Step
}

// Stats snapshots the buffer.
func (b *Buffer) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.statsLocked()
}

func (b *Buffer) statsLocked() Stats {
	st := Stats{
		Loads: b.loads, LoadErrors: b.loadErrors, Waits: b.waits, Leased: b.leased, Ranges: b.ranges, Issued: b.retired,
		Loading: b.loading, Stopped: b.stopErr != nil, LastErr: b.lastErr, Pos: b.pos,
	}
	for i, l := range b.slots {
		if l == nil {
			continue
		}
		first, last := l.parts[0], l.parts[len(l.parts)-1]
		ls := LeaseState{Held: true, Start: first.start, End: last.end, Step: first.step}
		for k, c := range l.parts {
			n := c.issued()
			ls.Issued += n
			if k >= l.at && !c.frozen && b.stopErr == nil {
				ls.Left += c.end - c.start - n
			}
		}
		cur := l.parts[l.at]
		ls.Next = cur.start + cur.issued()
		if cur.frozen {
			ls.Next = cur.end
		}
		st.Leases[i] = ls
		st.Issued += uint64(ls.Issued)
	}
	return st
}
