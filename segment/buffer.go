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
	"github.com/leafgo/leaf/internal/backoff"
	"github.com/leafgo/leaf/internal/ratemeter"
)

// segment is one reserved range [start, max). value is the next ID to issue;
// it only ever grows (an atomic add per ID) and may overshoot max, which just
// means the range is exhausted. start, max, step and trigger never change once
// the segment is published.
type segment struct {
	value atomic.Int64
	// prefetched is set by the first request past trigger, so the next range
	// is requested once per segment.
	prefetched atomic.Bool
	start      int64
	max        int64
	trigger    int64 // once value passes it (10% used), the next range is loaded
	step       int
}

func newSegment(r leaf.Reservation) *segment {
	s := &segment{start: r.Start(), max: r.MaxID, step: r.Step}
	// A hand-edited row could put the range below 1; IDs are promised positive.
	if s.start < 1 {
		s.start = 1
	}
	s.value.Store(s.start)
	s.trigger = s.start + int64(r.Step)/10
	return s
}

// take claims up to n IDs with one atomic add and returns them as [start, end);
// end == start when the segment is exhausted.
func (s *segment) take(n int64) (int64, int64) {
	end := s.value.Add(n)
	start := end - n
	if start >= s.max {
		return start, start
	}
	return start, min(end, s.max)
}

// state reports the segment for status pages; nil reports zeros.
func (s *segment) state() leaf.RangeState {
	if s == nil {
		return leaf.RangeState{}
	}
	return leaf.RangeState{Start: s.start, Value: min(s.value.Load(), s.max), Max: s.max, Step: s.step}
}

func (s *segment) issued() uint64 {
	return uint64(min(s.value.Load(), s.max) - s.start)
}

// buffer is one tag's pair of segments. The hot path reads cur without a
// lock; everything else is guarded by mu.
type buffer struct {
	g   *Generator
	tag string
	cur atomic.Pointer[segment]

	mu       sync.Mutex
	slots    [2]*segment // slots[pos] is cur; slots[1-pos] the next range, if loaded
	pos      int
	loading  bool          // a load goroutine is running; at most one per tag
	notify   chan struct{} // closed and replaced after every load attempt
	gone     bool          // the tag was deleted; waiters get ErrTagNotFound
	lastErr  error         // the last load error, nil after a success
	step     int           // the step of the latest load
	minStep  int           // the stored step: the adaptive floor
	lastLoad time.Time     // when the latest range was reserved (injected clock)
	loads    uint64
	waits    uint64
	retired  uint64    // IDs issued from segments no longer held
	frozen   *segment  // the current range when Close or the idle sweep froze the buffer
	frozenAt int64     // its first unissued ID
	created  time.Time // wall clock; the refresh loop keeps buffers newer than its query
	// lookup says the first load must first ask the store whether the
	// name, which was not in the name set, has a row.
	lookup bool
	// dropped says the idle sweep froze the buffer and took it out of the
	// maps: requests that still hold it go back for a new one.
	dropped bool
	// seen is the activity count (issued + waits + loads) the idle sweep
	// saw last, at activeAt (wall clock).
	seen     uint64
	activeAt time.Time

	// For status and metrics only.
	loadErrors  uint64
	loadSeconds float64
	loadLatency []uint64 // per bucket of leaf.SegmentLoadBuckets, not cumulative
	givenBack   uint64
	rate        ratemeter.Meter // samples of issuedLocked
}

func newBuffer(g *Generator, tag string, lookup bool) *buffer {
	now := time.Now()
	return &buffer{g: g, tag: tag, notify: make(chan struct{}), created: now, activeAt: now, lookup: lookup}
}

// errRetired tells Generator.take that the buffer was dropped as idle after
// the request found it.
var errRetired = errors.New("segment buffer retired")

func isNotFound(err error) bool { return errors.Is(err, leaf.ErrTagNotFound) }

// prefetch starts loading the next range once per segment, when the segment
// is 10% used.
func (b *buffer) prefetch(s *segment) {
	if !s.prefetched.CompareAndSwap(false, true) {
		return
	}
	b.mu.Lock()
	b.startLoadLocked()
	b.mu.Unlock()
}

// startLoadLocked starts the load goroutine unless one is running or there is
// nothing to load (both slots full). b.mu must be held.
func (b *buffer) startLoadLocked() {
	if b.loading || b.gone || b.dropped || b.g.closed.Load() {
		return
	}
	if b.slots[b.pos] != nil && b.slots[1-b.pos] != nil {
		return
	}
	b.loading = true
	b.g.wg.Add(1)
	go b.load()
}

// load reserves a range, retrying with a jittered exponential backoff
// (RetryBackoff doubling to MaxRetryBackoff) while the store fails, until it
// succeeds, the tag turns out to be gone, or the generator closes.
func (b *buffer) load() {
	g := b.g
	defer g.wg.Done()
	// Jittered, so that the tags of every server do not all retry in step
	// when the store comes back.
	pause := backoff.Backoff{Base: g.s.RetryBackoff, Max: g.s.MaxRetryBackoff}
	for {
		g.mu.Lock()
		creates := g.creates
		g.mu.Unlock()
		b.mu.Lock()
		lookup := b.lookup
		b.mu.Unlock()
		var err error
		if lookup {
			// A name not in the name set: one read first, so that a name
			// nobody created costs no write transaction.
			if err = g.lookup(g.ctx, b.tag); err == nil {
				b.mu.Lock()
				b.lookup = false
				b.mu.Unlock()
				g.learn(b.tag)
			}
		}
		var (
			r    leaf.Reservation
			took time.Duration
		)
		if err == nil {
			began := time.Now()
			r, err = b.reserve(g.ctx)
			took = time.Since(began)
		}
		b.mu.Lock()
		if err == nil {
			b.recordLoadLocked(took)
			b.install(r)
			b.loading = false
			b.lastErr = nil
			b.wakeLocked()
			b.mu.Unlock()
			g.storeOK()
			g.promote(b)
			return
		}
		if isNotFound(err) {
			// Forgotten first, answered second: a waiter told "not found"
			// may create the tag at once, and its next request must find
			// neither this buffer nor a negative entry. Loading stays set
			// meanwhile, so requests queue behind this load.
			b.mu.Unlock()
			g.forgetMissing(b, creates)
			b.mu.Lock()
			b.lastErr = err
			b.loading = false
			b.gone = true
			b.wakeLocked()
			b.mu.Unlock()
			g.s.Logger.Debug("segment tag not found in store", "tag", b.tag)
			return
		}
		b.lastErr = err
		b.wakeLocked()
		if g.closed.Load() {
			b.loading = false
			b.mu.Unlock()
			return
		}
		b.loadErrors++
		b.mu.Unlock()
		g.storeFailed(err)
		d := pause.Next()
		g.s.Logger.Warn("segment load failed, retrying", "tag", b.tag, "retry_in", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-g.ctx.Done():
			t.Stop()
		}
	}
}

// reserve asks the store for the next range with the adaptive step.
func (b *buffer) reserve(ctx context.Context) (leaf.Reservation, error) {
	now := b.g.s.Now()
	b.mu.Lock()
	step, reason := b.nextStepLocked(now)
	prevStep := b.step
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, b.g.s.StoreTimeout)
	defer cancel()
	r, err := b.g.s.Store.Reserve(ctx, b.tag, step)
	if err != nil {
		return r, err
	}
	if r.Step <= 0 || r.MaxID-int64(r.Step) >= r.MaxID {
		return r, fmt.Errorf("reserve %q: store returned an invalid range (max_id %d, step %d)", b.tag, r.MaxID, r.Step)
	}
	if step > 0 && step != prevStep {
		b.g.s.Logger.Info("segment step changed", "tag", b.tag, "from", prevStep, "to", step, "reason", reason)
	}
	// One line per load: at the adaptive step's pace that is a few lines per
	// tag per quarter hour, and each marks a database write worth seeing.
	b.g.s.Logger.Info("segment loaded", "tag", b.tag, "start", r.Start(), "end", r.MaxID, "step", r.Step)
	return r, nil
}

// nextStepLocked applies SPEC §2: the first two loads use the stored step
// (0 asks the store for it); later ones double the step if the previous range
// lasted under 15 minutes (up to MaxStep), keep it up to 30 minutes, and halve
// it beyond that, never below the stored step.
func (b *buffer) nextStepLocked(now time.Time) (int, string) {
	if b.loads < 2 {
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

// install places a fresh range: as current if there is none, else as next.
func (b *buffer) install(r leaf.Reservation) {
	s := newSegment(r)
	b.loads++
	b.step = r.Step
	b.minStep = r.StoredStep
	b.lastLoad = b.g.s.Now()
	switch {
	case b.slots[b.pos] == nil:
		b.slots[b.pos] = s
		// After Close has frozen the buffer, a range that arrives is kept
		// for the give-back but never published to the hot path.
		if !b.g.closed.Load() {
			b.cur.Store(s)
		}
	case b.slots[1-b.pos] == nil:
		b.slots[1-b.pos] = s
	default:
		// Unreachable while one load runs at a time and loads start only with
		// a free slot; the range is dropped rather than overwrite a loaded one.
		b.g.s.Logger.Error("segment range loaded with both slots full; dropped", "tag", b.tag, "start", r.Start(), "end", r.MaxID)
	}
}

// recordLoadLocked adds a successful reserve call's duration to the latency
// histogram. b.mu must be held.
func (b *buffer) recordLoadLocked(d time.Duration) {
	if b.loadLatency == nil {
		b.loadLatency = make([]uint64, len(leaf.SegmentLoadBuckets))
	}
	sec := d.Seconds()
	b.loadSeconds += sec
	for i, le := range leaf.SegmentLoadBuckets {
		if sec <= le {
			b.loadLatency[i]++
			break
		}
	}
}

// issuedLocked counts the IDs issued from this buffer since it was made.
// b.mu must be held.
func (b *buffer) issuedLocked() uint64 {
	n := b.retired
	for _, s := range b.slots {
		switch {
		case s == nil:
		case s == b.frozen:
			// The freeze's swap moved value to max; what was issued
			// ends at frozenAt.
			n += uint64(b.frozenAt - s.start)
		default:
			n += s.issued()
		}
	}
	return n
}

// sample records the issued count for the rate.
func (b *buffer) sample(now time.Time) {
	b.mu.Lock()
	b.rate.Sample(now, b.issuedLocked())
	b.mu.Unlock()
}

func (b *buffer) wakeLocked() {
	close(b.notify)
	b.notify = make(chan struct{})
}

// take is the slow path: it switches to the next range when the current one
// is exhausted, and otherwise waits for the in-flight load until ctx is done.
// It returns a non-empty run [start, end) of at most n IDs.
//
// waitUntil is the request's wait budget, shared by the takes of one request
// (NextIDs may wait more than once): zero until the request first waits,
// then WaitTimeout from then on. The wait ends at it or at ctx's deadline,
// whichever comes first, so a caller's long deadline does not hold a
// request through a store outage.
func (b *buffer) take(ctx context.Context, n int64, waitUntil *time.Time) (int64, int64, error) {
	g := b.g
	var timeout <-chan time.Time // fires at *waitUntil
	for {
		if s := b.cur.Load(); s != nil {
			if start, end := s.take(n); end > start {
				if end > s.trigger && !s.prefetched.Load() {
					b.prefetch(s)
				}
				return start, end, nil
			}
		}
		b.mu.Lock()
		switch {
		case g.closed.Load():
			b.mu.Unlock()
			return 0, 0, fmt.Errorf("tag %q: %w", b.tag, leaf.ErrClosed)
		case b.gone:
			b.mu.Unlock()
			return 0, 0, fmt.Errorf("tag %q: %w", b.tag, leaf.ErrTagNotFound)
		case b.dropped:
			// Checked before any switch to the next range: a dropped
			// buffer's ranges are frozen or given back.
			b.mu.Unlock()
			return 0, 0, errRetired
		}
		cur, next := b.slots[b.pos], b.slots[1-b.pos]
		if cur != b.cur.Load() || (cur != nil && cur.value.Load() < cur.max) {
			// Someone switched or the range still has IDs: try again.
			b.mu.Unlock()
			continue
		}
		if next != nil {
			if cur != nil {
				b.retired += cur.issued()
			}
			b.slots[b.pos] = nil
			b.pos = 1 - b.pos
			b.cur.Store(next)
			b.mu.Unlock()
			continue
		}
		// Both buffers are empty: queue behind the in-flight load.
		b.startLoadLocked()
		wake, lastErr := b.notify, b.lastErr
		b.waits++
		b.mu.Unlock()
		if timeout == nil {
			if waitUntil.IsZero() {
				*waitUntil = time.Now().Add(g.s.WaitTimeout)
			}
			if dl, ok := ctx.Deadline(); !ok || waitUntil.Before(dl) {
				t := time.NewTimer(time.Until(*waitUntil))
				defer t.Stop()
				timeout = t.C
			}
		}
		expired := false
		select {
		case <-wake:
		case <-g.done:
		case <-ctx.Done():
			expired = true
		case <-timeout:
			expired = true
		}
		if expired {
			if lastErr != nil {
				return 0, 0, fmt.Errorf("tag %q: no IDs buffered and the store failed: %v: %w", b.tag, lastErr, leaf.ErrNotReady)
			}
			return 0, 0, fmt.Errorf("tag %q: no IDs buffered and the next range did not arrive in time: %w", b.tag, leaf.ErrNotReady)
		}
	}
}

// freeze stops issuing from the buffer: it pins the first unissued ID of the
// current range. Only cur is reachable without b.mu, and a closed generator
// never switches ranges, so this one swap is enough.
func (b *buffer) freeze() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.freezeLocked()
}

func (b *buffer) freezeLocked() {
	if cur := b.slots[b.pos]; cur != nil && b.frozen != cur {
		// Every add after the swap lands past max.
		b.frozen, b.frozenAt = cur, min(cur.value.Swap(cur.max), cur.max)
	}
}

// activityLocked counts what a request changes: IDs issued, waits, loads.
// b.mu must be held.
func (b *buffer) activityLocked() uint64 {
	return b.issuedLocked() + b.waits + b.loads
}

// idleLocked reports whether the buffer has seen no request for timeout,
// judged by the idle sweep's own samples of its activity: never while a
// load runs. b.mu must be held.
func (b *buffer) idleLocked(now time.Time, timeout time.Duration) bool {
	if b.dropped || b.gone {
		return false
	}
	if act := b.activityLocked(); act != b.seen || b.loading {
		b.seen, b.activeAt = act, now
		return false
	}
	return now.Sub(b.activeAt) >= timeout
}

// retireLocked freezes the buffer for the idle sweep, as Close does: the
// swap in freezeLocked is the last ID issued from the current range, the
// next range was never published, and no load starts again (dropped), so
// tail then names IDs nobody was given. b.mu must be held.
func (b *buffer) retireLocked() {
	b.dropped = true
	b.freezeLocked()
	b.wakeLocked()
}

// tail reports the unused end of the latest reservation, [from, expect), for
// the conditional give-back; ok is false when nothing can be given back. It
// runs after freeze and after the loads have stopped: a range that a load
// brought in after freeze was never issued from.
func (b *buffer) tail() (from, expect int64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, next := b.slots[b.pos], b.slots[1-b.pos]
	first := func() int64 {
		if cur == b.frozen {
			return b.frozenAt
		}
		return cur.start
	}
	switch {
	case next != nil:
		expect, from = next.max, next.start
		// Only when nobody reserved between the two ranges is cur's tail
		// contiguous with next and so part of what can be returned.
		if cur != nil && cur.max == next.start {
			from = first()
		}
	case cur != nil:
		expect, from = cur.max, first()
	default:
		return 0, 0, false
	}
	return from, expect, from < expect
}

// status snapshots the buffer for /cache, /v2/status and metrics; now is
// when, for the rate.
func (b *buffer) status(now time.Time) leaf.SegmentStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := leaf.SegmentStatus{
		Tag:       b.tag,
		InitOK:    b.loads > 0,
		NextReady: b.slots[1-b.pos] != nil,
		Pos:       b.pos,
		Loading:   b.loading,
		Step:      b.step,
		MinStep:   b.minStep,
		LastLoad:  b.lastLoad,
		Loads:     b.loads,
		Waits:     b.waits,
		Issued:    b.issuedLocked(),

		LoadErrors:  b.loadErrors,
		LoadSeconds: b.loadSeconds,
		GivenBack:   b.givenBack,
		SecondsLeft: -1,
	}
	if b.lastErr != nil {
		st.LoadError = b.lastErr.Error()
	}
	if b.loadLatency != nil {
		st.LoadLatency = make([]uint64, len(b.loadLatency))
		var sum uint64
		for i, n := range b.loadLatency {
			sum += n
			st.LoadLatency[i] = sum
		}
	}
	for i, s := range b.slots {
		st.Buffers[i] = s.state()
		st.Remaining += st.Buffers[i].Remaining()
	}
	st.Rate = b.rate.Rate(now, st.Issued)
	if st.Rate > 0 {
		st.SecondsLeft = float64(st.Remaining) / st.Rate
	}
	return st
}

// counters are a buffer's cumulative counters, kept by the generator for
// buffers it no longer holds.
type counters struct {
	issued, loads, loadErrors, waits, givenBack uint64
	loadSeconds                                 float64
	loadLatency                                 []uint64 // per bucket, not cumulative
}

// add adds b's counters. It takes b.mu.
func (c *counters) add(b *buffer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.issued += b.issuedLocked()
	c.loads += b.loads
	c.loadErrors += b.loadErrors
	c.waits += b.waits
	c.givenBack += b.givenBack
	c.loadSeconds += b.loadSeconds
	if c.loadLatency == nil {
		c.loadLatency = make([]uint64, len(leaf.SegmentLoadBuckets))
	}
	for i, n := range b.loadLatency {
		c.loadLatency[i] += n
	}
}

func (c counters) clone() counters {
	c.loadLatency = slices.Clone(c.loadLatency)
	if c.loadLatency == nil {
		c.loadLatency = make([]uint64, len(leaf.SegmentLoadBuckets))
	}
	return c
}
