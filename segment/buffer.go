package segment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/doublebuf"
	"github.com/leafgo/leaf/internal/ratemeter"
	"github.com/leafgo/leaf/stripe"
)

// A Buffer is one row's pair of ranges: the double buffer (ids) hands out
// the IDs; the Buffer adds what the segment needs on top: the lookup of a
// name not in the name set, the adaptive step, the give-back, and the
// counters behind status and metrics, which mu guards. A tag's own buffer,
// the one the generator finds it by, is its shell; a periodic tag's
// periods and an extension kind's states have buffers of their own (see
// extend.go for what an extension may do with them).
type Buffer struct {
	ids doublebuf.Buffer // embedded: the hot path reads one pointer less
	g   *Generator
	tag string
	// kindOf is set on the tag's own buffer (the shell), once its first
	// load found the tag periodic or of an extension's kind, and the
	// shell stopped: the IDs come from the kind's buffers (see kind.go).
	kindOf atomic.Pointer[kindRef]
	// tailClaimed is set by the one claimTail that may give the unused
	// tail back.
	tailClaimed atomic.Bool
	// row is the row the buffer reserves from (see row.go): the tag's own
	// for its shell, set when the buffer is made.
	row row
	// enc, set before the first range is delivered, encodes and bounds
	// the IDs of an opaque or formatted tag (see opaque.go); nil for a
	// plain tag, whose IDs leave as they are.
	enc atomic.Pointer[encoder]

	mu       sync.Mutex
	step     int       // the step of the latest load
	minStep  int       // the stored step: the adaptive floor
	lastLoad time.Time // when the latest range was reserved (injected clock)
	created  time.Time // wall clock; the refresh loop keeps buffers newer than its query
	// lookup says the first load must first ask the store whether the
	// name, which was not in the name set, has a row.
	lookup bool
	// shapeRead says the tag's shape was read and found plain.
	shapeRead bool
	// usedUp is set once a reservation started past the tag's bound (see
	// opaque.go): every load fails with it, without asking the store.
	usedUp error
	// striped is set once a range came from one database of several: its
	// IDs are runs of a stripe, and what follows the last ID handed out is
	// not a range of the row's numbers to give back.
	striped bool
	// seen is the activity count (issued + waits + loads) the idle sweep
	// saw last, at activeAt (wall clock).
	seen     uint64
	activeAt time.Time

	// For status and metrics only.
	// loadTime is the time spent in successful reserve calls, summed as
	// integer nanoseconds: a sum of floats depends on the order it adds in,
	// and the totals, which add the same durations in another order once a
	// buffer is dropped, would go down by a rounding.
	loadTime    time.Duration
	loadLatency []uint64 // per bucket of loadBuckets, not cumulative
	givenBack   uint64
	rate        ratemeter.Meter // samples of the issued count
}

// buffer and counters are the names inside the package.
type (
	buffer   = Buffer
	counters = Counters
)

// prefetchAt is the share of a range used when the next one is loaded.
const prefetchAt = 0.1

func newBuffer(g *Generator, tag string, lookup bool) *buffer {
	now := time.Now()
	b := &buffer{g: g, tag: tag, created: now, activeAt: now, lookup: lookup}
	b.row = tagRow{b}
	b.ids.Init(doublebuf.Config{
		Load:            b.load,
		Context:         g.ctx,
		Group:           &g.wg,
		Prefetch:        prefetchAt,
		RetryBackoff:    g.s.RetryBackoff,
		MaxRetryBackoff: g.s.MaxRetryBackoff,
		Retrying:        b.retrying,
		WaitTimeout:     g.s.WaitTimeout,
		NotReady:        b.notReady,
		Permanent:       func(err error) bool { return errors.Is(err, errUsedUp) },
	})
	return b
}

// errRetired tells Generator.take that the buffer was dropped as idle after
// the request found it.
var errRetired = errors.New("segment buffer retired")

func isNotFound(err error) bool { return errors.Is(err, leaf.ErrTagNotFound) }

// load is the double buffer's loader: it reserves the next range (after a
// lookup, for a name not in the name set). The double buffer retries it
// with a jittered exponential backoff (RetryBackoff doubling to
// MaxRetryBackoff) while the store fails, until it succeeds, the tag turns
// out to be gone (load stops the buffer), or the generator closes.
func (b *buffer) load(ctx context.Context, deliver func(doublebuf.Range) error) error {
	g := b.g
	g.mu.Lock()
	creates := g.creates
	g.mu.Unlock()
	b.mu.Lock()
	lookup, usedUp := b.lookup, b.usedUp
	b.mu.Unlock()
	if usedUp != nil {
		return usedUp
	}
	var err error
	if lookup {
		// A name not in the name set: one read first, so that a name
		// nobody created costs no write transaction.
		if err = g.lookup(ctx, b.tag); err == nil {
			b.mu.Lock()
			b.lookup = false
			b.mu.Unlock()
			g.learn(b.tag)
		}
	}
	if err == nil && b.row.shell() == b {
		if err = b.readShape(ctx); errors.Is(err, errKindFound) {
			return err
		}
	}
	if err == nil {
		began := time.Now()
		var r leaf.Reservation
		if r, err = b.reserve(ctx); err == nil {
			b.mu.Lock()
			b.recordLoadLocked(time.Since(began))
			b.step, b.minStep, b.lastLoad = r.Step, r.StoredStep, g.s.Now()
			b.mu.Unlock()
			g.storeOK()
			g.promote(b)
			return b.deliver(r, deliver)
		}
	}
	if isNotFound(err) {
		// Forgotten first, answered second: a waiter told "not found" may
		// create the tag at once, and its next request must find neither
		// this buffer nor a negative entry. The load is still in flight
		// meanwhile, so requests queue behind it. A period's row is
		// missing only with its tag's: the whole tag goes.
		tagBuf := b.row.shell()
		g.forgetMissing(tagBuf, creates)
		notFound := fmt.Errorf("tag %q: %w", b.tag, leaf.ErrTagNotFound)
		stopTag(tagBuf, notFound)
		b.ids.Stop(notFound)
		g.s.Logger.Debug("segment tag not found in store", "tag", b.tag)
	}
	return err
}

// deliver hands the IDs of r to the double buffer: one range, or from a
// store spread over several databases the runs of its stripe, in
// increasing order. A hand-edited row could put the range below 1; IDs are
// promised positive. Once stopped (Close), the buffer keeps the ranges for
// the give-back.
func (b *buffer) deliver(r leaf.Reservation, deliver func(doublebuf.Range) error) error {
	if r.Stripe.Striped() {
		b.mu.Lock()
		b.striped = true
		b.mu.Unlock()
	}
	e := b.enc.Load()
	var err error
	first := true
	stripe.Reserved(r, func(start, end int64) bool {
		start = max(start, 1)
		if start >= end {
			return true
		}
		if e != nil && end-1 > e.bound {
			if start > e.bound {
				if first {
					// The IDs still buffered are issued; then every take
					// gets this error, and no load reserves again.
					err = e.exhausted(b.row.period())
					b.mu.Lock()
					b.usedUp = err
					b.mu.Unlock()
					b.g.s.Logger.Error("segment tag cannot issue", "tag", b.tag, "period", b.row.period(), "err", err)
				}
				return false
			}
			end = e.bound + 1 // the rest of the reservation is never issued
		}
		first = false
		if err = b.row.admit(start, end); err != nil {
			return false // the row said why, where it needed saying
		}
		if derr := deliver(doublebuf.Range{Start: start, End: end, Step: r.Step}); derr != nil {
			if !errors.Is(derr, doublebuf.ErrStopped) {
				err = derr
			}
			return false
		}
		return true
	})
	return err
}

// readShape reads the shape of the tag on the first load of its buffer,
// before anything is reserved from the tag's row, and asks Config.Kinds
// whether the tag is theirs: a periodic tag's row is never reserved from,
// nor the row of a tag of an extension's kind but through its Rows.
// Finding a period, or an extension's Kind, it hangs the kind's state on
// the buffer and stops it with errKindFound. A store without shapes holds
// plain tags only.
func (b *buffer) readShape(ctx context.Context) error {
	g := b.g
	b.mu.Lock()
	read := b.shapeRead
	b.mu.Unlock()
	if read || g.shaper == nil && g.s.Kinds == nil {
		return nil
	}
	var shape leaf.TagShape
	if g.shaper != nil {
		sctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
		var err error
		shape, err = g.shaper.TagShape(sctx, b.tag)
		cancel()
		if err != nil {
			return fmt.Errorf("read the shape of tag %q: %w", b.tag, err)
		}
		g.rememberShape(b.tag, shape)
	}
	if g.s.Kinds != nil {
		if err := b.findKind(ctx, shape); err != nil {
			return err
		}
	}
	enc, err := g.newEncoder(b.tag, shape)
	if err != nil {
		// No key, or another key than the tag's: retrying would not
		// help, and issuing would risk IDs another server also issues.
		b.ids.Stop(err)
		g.s.Logger.Error("segment opaque tag cannot issue", "tag", b.tag, "err", err)
		return err
	}
	if shape.Period == leaf.PeriodNone {
		b.enc.Store(enc)
		b.mu.Lock()
		b.shapeRead = true
		b.mu.Unlock()
		return nil
	}
	var p *periodic
	if g.periods == nil {
		err = fmt.Errorf("tag %q is periodic, but the segment store keeps no periods: %w", b.tag, leaf.ErrNotReady)
	} else if p, err = newPeriodic(g, b, shape, enc); err != nil {
		err = fmt.Errorf("%w (%w)", leaf.ErrNotReady, err)
	}
	if err != nil {
		// Retrying would not help: the requests get the error until the
		// tag is dropped (deleted, or the server restarted).
		b.ids.Stop(err)
		g.s.Logger.Error("segment periodic tag cannot issue", "tag", b.tag, "err", err)
		return err
	}
	g.s.Logger.Info("segment tag is periodic", "tag", b.tag, "period", string(shape.Period), "time_zone", p.loc.String())
	return b.found(p)
}

// retrying reports a failed load that the double buffer retries in d.
func (b *buffer) retrying(err error, d time.Duration) {
	b.g.storeFailed(err)
	b.g.s.Logger.Warn("segment load failed, retrying", "tag", b.tag, "retry_in", d, "err", err)
}

// notReady is the error of a request that gave up waiting for a range.
func (b *buffer) notReady(loadErr, _ error) error {
	if loadErr != nil {
		return fmt.Errorf("tag %q: no IDs buffered and the store failed: %v: %w", b.tag, loadErr, leaf.ErrNotReady)
	}
	return fmt.Errorf("tag %q: no IDs buffered and the next range did not arrive in time: %w", b.tag, leaf.ErrNotReady)
}

// reserve asks the store for the next range with the adaptive step.
func (b *buffer) reserve(ctx context.Context) (leaf.Reservation, error) {
	now := b.g.s.Now()
	loads := b.ids.Stats().Loads
	b.mu.Lock()
	step, reason := b.nextStepLocked(now, loads)
	prevStep := b.step
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, b.g.s.StoreTimeout)
	defer cancel()
	r, err := b.row.reserve(ctx, step)
	if err != nil {
		return r, err
	}
	if r.Step <= 0 || r.MaxID-int64(r.Step) >= r.MaxID {
		return r, fmt.Errorf("reserve %q: store returned an invalid range (max_id %d, step %d)", b.tag, r.MaxID, r.Step)
	}
	if r.Stripe.Striped() && r.Start() < 0 {
		return r, fmt.Errorf("reserve %q: store returned a range of numbers below 0 (max_id %d, step %d)", b.tag, r.MaxID, r.Step)
	}
	if err := stripe.Validate(r.Stripe); err != nil {
		return r, fmt.Errorf("reserve %q: store returned an invalid stripe: %w", b.tag, err)
	}
	if r.MaxID-1 > stripe.MaxNumber(r.Stripe) {
		return r, fmt.Errorf("reserve %q: the range ends at %d, past the last number (%d) whose ID fits in 64 bits", b.tag, r.MaxID, stripe.MaxNumber(r.Stripe))
	}
	if step > 0 && step != prevStep {
		b.g.s.Logger.Info("segment step changed", "tag", b.tag, "from", prevStep, "to", step, "reason", reason)
	}
	// One line per load: at the adaptive step's pace that is a few lines per
	// tag per quarter hour, and each marks a database write worth seeing.
	switch key := b.row.period(); {
	case key != "":
		b.g.s.Logger.Info("segment loaded", "tag", b.tag, "period", key, "start", r.Start(), "end", r.MaxID, "step", r.Step)
	case r.Stripe.Striped():
		// start and end are the database's numbers, not IDs.
		b.g.s.Logger.Info("segment loaded", "tag", b.tag, "database", r.Stripe.Index, "start", r.Start(), "end", r.MaxID, "step", r.Step,
			"first_id", stripe.ID(r.Stripe, r.Start()), "last_id", stripe.ID(r.Stripe, r.MaxID-1))
	default:
		b.g.s.Logger.Info("segment loaded", "tag", b.tag, "start", r.Start(), "end", r.MaxID, "step", r.Step)
	}
	return r, nil
}

// nextStepLocked applies SPEC §2: the first two loads use the stored step
// (0 asks the store for it); later ones double the step if the previous range
// lasted under 15 minutes (up to MaxStep), keep it up to 30 minutes, and halve
// it beyond that, never below the stored step.
func (b *buffer) nextStepLocked(now time.Time, loads uint64) (int, string) {
	if loads < 2 {
		return 0, "stored step"
	}
	d := now.Sub(b.lastLoad)
	next := b.step
	reason := "held"
	switch {
	case d < 15*time.Minute:
		if next*2 <= b.g.s.MaxStep {
			next *= 2
			reason = "previous range lasted under 15m"
		}
	case d < 30*time.Minute:
	default:
		if next/2 >= b.minStep {
			next /= 2
			reason = "previous range lasted over 30m"
		}
	}
	if next < b.minStep {
		next, reason = b.minStep, "raised to the stored step"
	}
	return next, reason
}

// recordLoadLocked adds a successful reserve call's duration to the latency
// histogram. b.mu must be held.
func (b *buffer) recordLoadLocked(d time.Duration) {
	if b.loadLatency == nil {
		b.loadLatency = make([]uint64, len(loadBuckets))
	}
	b.loadTime += d
	for i, le := range loadBuckets {
		if d <= le {
			b.loadLatency[i]++
			break
		}
	}
}

// sample records the issued count for the rate, and returns it.
func (b *buffer) sample(now time.Time) uint64 {
	st := b.ids.Stats()
	b.mu.Lock()
	b.rate.Sample(now, st.Issued)
	b.mu.Unlock()
	return st.Issued
}

// take is the slow path of the double buffer (see doublebuf.Buffer.Take).
// waitUntil is the request's wait budget, shared by the takes of one request
// (NextIDs may wait more than once): the wait ends at WaitTimeout after the
// request first waited or at ctx's deadline, whichever comes first, so a
// caller's long deadline does not hold a request through a store outage.
func (b *buffer) take(ctx context.Context, n int64, waitUntil *time.Time) (int64, int64, error) {
	return b.ids.Take(ctx, n, waitUntil)
}

// idleLocked reports whether the buffer has seen no request for timeout,
// judged by the idle sweep's own samples of its activity (IDs issued, waits,
// loads): never while a load runs. b.mu must be held.
func (b *buffer) idleLocked(now time.Time, timeout time.Duration, st doublebuf.Stats) bool {
	if st.Stopped {
		return false
	}
	if act := st.Issued + st.Waits + st.Loads; act != b.seen || st.Loading {
		b.seen, b.activeAt = act, now
		return false
	}
	return now.Sub(b.activeAt) >= timeout
}

// retireIfIdleLocked stops the buffer for the idle sweep if it is idle, as Close
// stops it: the freeze pins the last ID issued from the current range, the
// next range was never published, and no load starts again, so tail then
// names IDs nobody was given. b.mu must be held.
func (b *buffer) retireIfIdleLocked(now time.Time, timeout time.Duration) bool {
	return b.ids.StopIf(errRetired, func(st doublebuf.Stats) bool { return b.idleLocked(now, timeout, st) })
}

// claimTail reports the unused end of the latest reservation, [from,
// expect), for the conditional give-back; ok is false when nothing can be
// given back. It runs after the buffer stopped and its loads ended: a range
// that a load brought in after the stop was never issued from. A tail is
// claimed once: the idle sweep and Close may both find a buffer (a past
// period's, say), and a second give-back of one tail would succeed if
// another server had since reserved exactly that range, handing it out twice.
func (b *buffer) claimTail() (from, expect int64, ok bool) {
	if !b.tailClaimed.CompareAndSwap(false, true) {
		return 0, 0, false
	}
	st := b.ids.Stats()
	cur, next := st.Leases[st.Pos], st.Leases[1-st.Pos]
	switch {
	case next.Held:
		expect, from = next.End, next.Start
		// Only when nobody reserved between the two ranges is cur's tail
		// contiguous with next and so part of what can be returned.
		if cur.Held && cur.End == next.Start {
			from = cur.Start + cur.Issued
		}
	case cur.Held:
		expect, from = cur.End, cur.Start+cur.Issued
	default:
		return 0, 0, false
	}
	return from, expect, from < expect
}

// rank is the buffer's IDs/s and IDs issued, what the busiest tags are
// ranked by, without the rest of its status.
func (b *buffer) rank(now time.Time) (float64, uint64) {
	issued := b.ids.Stats().Issued
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate.Rate(now, issued), issued
}

// status snapshots the buffer for /cache, /v2/status and metrics; now is
// when, for the rate.
func (b *buffer) status(now time.Time) leaf.SegmentStatus {
	ids := b.ids.Stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	st := leaf.SegmentStatus{
		Tag:       b.tag,
		Period:    b.row.period(),
		InitOK:    ids.Loads > 0,
		NextReady: ids.Leases[1-ids.Pos].Held,
		Pos:       ids.Pos,
		Loading:   ids.Loading,
		Step:      b.step,
		MinStep:   b.minStep,
		LastLoad:  b.lastLoad,
		Loads:     ids.Loads,
		Waits:     ids.Waits,
		Issued:    ids.Issued,

		LoadErrors:  ids.LoadErrors,
		LoadSeconds: b.loadTime.Seconds(),
		GivenBack:   b.givenBack,
		SecondsLeft: -1,
	}
	if ids.LastErr != nil {
		st.LoadError = ids.LastErr.Error()
	}
	st.LoadLatency = loadHistogram(b.loadLatency)
	for i, l := range ids.Leases {
		if l.Held {
			st.Buffers[i] = leaf.RangeState{Start: l.Start, Value: l.Next, Max: l.End, Step: l.Step}
		}
		st.Remaining += st.Buffers[i].Remaining()
	}
	st.Rate = b.rate.Rate(now, st.Issued)
	if st.Rate > 0 {
		st.SecondsLeft = float64(st.Remaining) / st.Rate
	}
	return st
}

// tagStatus is the status of the tag whose shell b is: its kind's, or the
// shell's own.
func (b *buffer) tagStatus(now time.Time) leaf.SegmentStatus {
	if k := b.kind(); k != nil {
		return k.status(now)
	}
	return b.status(now)
}

// Counters are a buffer's cumulative counters, kept by the generator for
// buffers it no longer holds.
type Counters struct {
	issued, loads, loadErrors, waits, givenBack uint64
	loadTime                                    time.Duration
	loadLatency                                 []uint64 // per bucket, not cumulative
}

// add adds b's counters, for a tag of a kind those of all the kind's
// buffers (a periodic tag's periods, an extension kind's buffers).
// It takes b.mu (and the kind's lock).
func (c *counters) add(b *buffer) {
	if k := b.kind(); k != nil {
		k.addCounters(c)
		return
	}
	ids := b.ids.Stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	c.issued += ids.Issued
	c.loads += ids.Loads
	c.loadErrors += ids.LoadErrors
	c.waits += ids.Waits
	c.givenBack += b.givenBack
	c.loadTime += b.loadTime
	if c.loadLatency == nil {
		c.loadLatency = make([]uint64, len(loadBuckets))
	}
	for i, n := range b.loadLatency {
		c.loadLatency[i] += n
	}
}

// fill sets the counters of st, the status of a tag whose state spans
// several buffers (a periodic tag's periods, an extension kind's buffers),
// to c, and its rate and time until dry to rate's over c.
func (c *counters) fill(st *leaf.SegmentStatus, rate *ratemeter.Meter, now time.Time) {
	st.Issued, st.Loads, st.Waits, st.LoadErrors = c.issued, c.loads, c.waits, c.loadErrors
	st.LoadSeconds, st.GivenBack, st.LoadLatency = c.loadTime.Seconds(), c.givenBack, loadHistogram(c.loadLatency)
	st.Rate, st.SecondsLeft = rate.Rate(now, c.issued), -1
	if st.Rate > 0 {
		st.SecondsLeft = float64(st.Remaining) / st.Rate
	}
}

// merge adds o to c.
func (c *counters) merge(o counters) {
	c.issued += o.issued
	c.loads += o.loads
	c.loadErrors += o.loadErrors
	c.waits += o.waits
	c.givenBack += o.givenBack
	c.loadTime += o.loadTime
	if c.loadLatency == nil {
		c.loadLatency = make([]uint64, len(loadBuckets))
	}
	for i, n := range o.loadLatency {
		c.loadLatency[i] += n
	}
}

func (c counters) clone() counters {
	c.loadLatency = slices.Clone(c.loadLatency)
	if c.loadLatency == nil {
		c.loadLatency = make([]uint64, len(loadBuckets))
	}
	return c
}
