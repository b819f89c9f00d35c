package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/doublebuf"
	"github.com/leafgo/leaf/internal/ratemeter"
)

// This file issues the IDs of ordered tags (leaf.OrderedStore): IDs that
// strictly increase in the order they are issued, across the cluster. One
// server at a time, the tag's owner, issues them, under a lease kept in
// the store; the others answer *leaf.NotOwnerError, naming the owner, and
// their transports forward to it (NextOrderedRange).
//
// An ordered tag is a kind (kind.go): its shell's first load reads the
// tag's lease and, finding the tag ordered, hangs the ordered state on the
// shell. A plain tag's hot path never looks at any of this.
//
// Why the IDs increase across owners:
//   - Every ownership (every lease taken, here or anywhere) issues from a
//     double buffer of its own, made after the lease was taken, and
//     reserves each of its ranges with the lease's fencing token
//     (leaf.OrderedStore.ReserveOwned): the store checks, in the reserve's
//     own transaction, that the lease is still this ownership's. Every
//     range a later owner reserves lies above every range an earlier one
//     reserved; an earlier owner's reserve after a takeover fails,
//     whatever any clock says, and its ownership ends as when a renewal
//     finds the lease lost.
//   - A server takes a lease over only when the row has no owner
//     (released), or when it has seen the very same lease (owner, token
//     and Version) unchanged for a whole lease on its own monotonic clock:
//     its OwnerLease, or what the lease had left if longer, counted from
//     when the read that first showed it was answered, not sent (the
//     owner's renewal may have landed in between). The store grants it
//     only if the row still holds that lease and, as a second line, the
//     lease ran out by the store's clock. A live owner renews every third
//     of its lease, which changes the Version: no candidate takes it over,
//     however far the store's clock is stepped.
//   - An owner counts its lease from the monotonic instant before it sent
//     the request that took or renewed it, less a margin, so it stops
//     issuing before a candidate, counting the same lease on its own
//     monotonic clock from later, may take over: the clocks need only run
//     at about the same rate, never agree.
//   - Each take of IDs is followed by a look at that deadline: IDs taken
//     after it (an owner paused, a renewal late) are discarded, never
//     issued. A range a paused owner reserves is therefore never issued
//     after its deadline either.
//   - A new ownership never takes over IDs buffered under an earlier one:
//     their buffer is stopped and dropped.
//
// Within one owner, IDs increase in take order: a take claims its IDs with
// one atomic add on the current range, and ranges are handed out in the
// order they were reserved, each above the one before. A batch that does
// not fit in what is left of a range takes the rest from the next one: its
// IDs increase, with a gap, and a request taken between its two parts gets
// IDs between them (it was in flight at the same time).
//
// A tag switched between plain and ordered (SetOrdered) changes on this
// server at once, on the others when they next ask the store about it: at
// their tag refresh (RefreshInterval), or at once for a server whose lease
// cache runs out or whose renewal or reserve finds the row gone. IDs
// issued before every server made the switch are not ordered with those
// after it. So with a switch to plain and back while a server owns the
// tag: the row made again has no owner, another server may take it at
// once, and the old owner issues what it has buffered below it until its
// next renewal (a third of the lease) or reserve finds its lease gone.
//
// What this cannot cover: the deadline is kept on the monotonic clock,
// which runs while a process is stopped (SIGSTOP) but not while its host
// or VM is suspended. An owner suspended past its lease, which another
// server took over meanwhile, wakes believing itself the owner: until its
// next renewal or reserve finds the lease lost, it may issue the IDs it
// had already buffered, below IDs the new owner issued. The reserve fence
// bounds that to the IDs already buffered (its two ranges at most): it
// reserves nothing more. Hosts that suspend should not own ordered tags.
//
// Watching costs time: a server that first reads a dead owner's lease
// waits a whole lease from then, so a takeover may come up to about one
// lease later than the lease's end by the store's clock. A server that was
// forwarding to the owner has been watching all along, and takes over
// about when the lease ends.

// errOwnershipEnded stops the buffer of an ownership that ended; takes
// that meet it look at the ownership again.
var errOwnershipEnded = errors.New("segment: the ownership of the ordered tag ended")

// Bounds of the lease cache of a tag another server owns: it is read
// again at most every maxLeaseCache, and at least minLeaseCache apart.
const (
	maxLeaseCache = time.Second
	minLeaseCache = 10 * time.Millisecond
)

// ordered is an ordered tag's state on this server.
type ordered struct {
	g     *Generator
	tag   string
	shell *buffer

	// cur is this server's ownership of the tag, nil when it has none: the
	// ordered hot path is one load of it.
	cur atomic.Pointer[ownership]
	// answer is what requests are told while this server does not own the
	// tag, until answer.until: read without the lock.
	answer atomic.Pointer[leaseAnswer]
	// notOwner counts the requests answered without issuing, for the idle
	// sweep.
	notOwner atomic.Uint64

	// mu guards the fields below. Lock order: g.mu, then mu, then a
	// buffer's mu.
	mu     sync.Mutex
	seen   leaf.TagLease // the lease as last read, acquired or renewed
	seenAt int64         // g.mono() when the request that answered seen was sent
	seenOK bool
	// watchedAt is the g.mono() instant the read that first showed seen
	// (the very same lease, leaf.TagLease.Same) was answered; watchFor is
	// how long from then it must stay the same before this server may
	// take it over (see takeAtLocked).
	watchedAt int64
	watchFor  time.Duration
	flight    chan struct{} // closed when the store call in flight ends
	// floor is the end of the highest range reserved here: a range below
	// it would be out of order (see admit).
	floor int64
	// toRelease is the ownership that stopAll ended, for release.
	toRelease *ownership
	retired   counters // the counters of ownerships that ended
	rate      ratemeter.Meter
	// seenAct and activeAt are the activity the idle sweep saw last, and
	// when (wall clock).
	seenAct  uint64
	activeAt time.Time
	dead     bool  // dropped: requests look the tag up again
	stopErr  error // their answer once dead
}

// leaseAnswer is what a request gets while this server does not own the
// tag: err, or a *leaf.NotOwnerError made from lease (read at seenAt)
// until this server may try to take it over.
type leaseAnswer struct {
	until  int64 // g.mono(): ask the store again from here
	err    error
	lease  leaf.TagLease
	seenAt int64
	takeAt int64 // g.mono(): this server may try to take lease over (takeAtLocked)
	// owner and url name the owner in a NotOwnerError: lease.Owner and
	// its URL, or both empty when the lease is an earlier process of this
	// very server, which is this one now: it is dead, and its lease must
	// run out. Worked out once here, not per request.
	owner, url string
}

// ownership is one lease of the tag this server took: its fencing token,
// its buffer and its deadline.
type ownership struct {
	o     *ordered
	token int64
	b     *buffer
	// deadline is the g.mono() instant from which no ID may be issued;
	// math.MinInt64 once the ownership ended. Only renewals move it, and
	// never once it ended.
	deadline atomic.Int64
	endOnce  sync.Once
}

// ended reports whether the ownership ended.
func (w *ownership) ended() bool { return w.deadline.Load() == math.MinInt64 }

// newOrdered is the state of an ordered tag whose lease was read by a
// request sent at sent and answered at answered.
func newOrdered(g *Generator, shell *buffer, l leaf.TagLease, sent, answered int64) *ordered {
	o := &ordered{g: g, tag: shell.tag, shell: shell, activeAt: time.Now()}
	o.observeLocked(l, sent, answered)
	return o
}

// observeLocked records an answer of the store about the lease (a read, a
// take, a renewal) to a request sent at sent and answered at answered. A
// lease other than the one seen before starts the watch anew, from the
// answer: the owner's renewal may have landed after the send. o.mu must be
// held, or o not yet shared.
func (o *ordered) observeLocked(l leaf.TagLease, sent, answered int64) {
	if !o.seenOK || !l.Same(o.seen) {
		o.watchedAt, o.watchFor = answered, max(o.g.s.OwnerLease, l.Left)
	}
	o.seen, o.seenAt, o.seenOK = l, sent, true
}

// takeAtLocked is the g.mono() instant from which this server may try to
// take over the lease it saw: at once when the lease has no owner or is
// this server's own (under which it issues nothing: it has no ownership
// when it asks); else once it has watched the very same lease for
// watchFor, a whole lease (this server's OwnerLease, or the time the lease
// had left when first seen, if longer: an owner configured with a longer
// lease is not cut short), and the lease should have run out by the
// store's clock, which the store checks too. o.mu must be held, or o not
// yet shared.
func (o *ordered) takeAtLocked() int64 {
	l := o.seen
	if !o.seenOK || l.Owner == "" || l.Owner == o.g.s.Owner {
		return math.MinInt64
	}
	return max(after(o.watchedAt, o.watchFor), after(o.seenAt, l.Left))
}

// after is the g.mono() instant d after at, saturated: a lease's Left may
// be anything a hand-written row says.
func after(at int64, d time.Duration) int64 {
	if d > 0 && at > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	if d < 0 && at < math.MinInt64-int64(d) {
		return math.MinInt64
	}
	return at + int64(d)
}

// mono is the generator's monotonic clock, in nanoseconds since New: the
// clock of lease deadlines, which a wall clock stepping cannot stretch.
func (g *Generator) mono() int64 { return int64(time.Since(g.epoch)) }

// leaseMargin is how long before its lease would run out an owner stops
// issuing: a tenth of the lease, at least 100ms, for the clocks' drift.
func (g *Generator) leaseMargin() time.Duration {
	return max(g.s.OwnerLease/10, 100*time.Millisecond)
}

// rangeRefusal is NextRange's answer for an ordered tag.
func (o *ordered) rangeRefusal() error {
	return fmt.Errorf("tag %s is ordered: a range would let a caller hand its IDs out of order; take IDs or batches: %w", o.tag, leaf.ErrOrderedTag)
}

// next is NextID for an ordered tag; errRetired sends the request the slow
// way, which looks the tag up again.
func (o *ordered) next(ctx context.Context) (int64, string, bool, error) {
	v, err := o.nextID(ctx)
	if err == errRetired {
		return 0, "", false, nil
	}
	return v, "", true, err
}

// take is a run of this server's ownership; a range for a client to hand
// out is refused.
func (o *ordered) take(ctx context.Context, n int64, waitUntil *time.Time, tk takeKind) (run, error) {
	if tk == takeRange {
		return run{}, o.rangeRefusal()
	}
	s, e, err := o.takeRun(ctx, n, waitUntil)
	return run{start: s, end: e, shell: o.shell}, err
}

// sweep drops the state of a tag idle for timeout: its ownership ends
// now, before the state leaves the maps (see convert), and its lease is
// released once g.mu is released; its unused IDs are abandoned.
func (o *ordered) sweep(now time.Time, timeout time.Duration) (bool, func(context.Context)) {
	if !o.idle(now, timeout) {
		return false, nil
	}
	stopTag(o.shell, errRetired)
	return true, o.release
}

// nextID is NextID for an ordered tag.
func (o *ordered) nextID(ctx context.Context) (int64, error) {
	if w := o.cur.Load(); w != nil {
		if v, got := w.b.ids.Next(); got != doublebuf.None {
			if got == doublebuf.PrefetchDue {
				w.b.ids.Prefetch()
			}
			if h := o.g.afterTake; h != nil {
				h(o.tag, v, v+1)
			}
			if o.g.mono() < w.deadline.Load() {
				return v, nil
			}
			return 0, o.lapsed(w)
		}
	}
	var waitUntil time.Time
	s, _, err := o.takeRun(ctx, 1, &waitUntil)
	return s, err
}

// takeRun takes a run [s, e) of at most n IDs from one range of this
// server's ownership, taking the lease first if it is free. The deadline is
// looked at after the take: IDs taken once it passed are never issued.
func (o *ordered) takeRun(ctx context.Context, n int64, waitUntil *time.Time) (int64, int64, error) {
	for tries := 0; ; tries++ {
		w, err := o.ownership(ctx, waitUntil)
		if err != nil {
			return 0, 0, err
		}
		s, e, err := w.b.take(ctx, n, waitUntil)
		if err == errOwnershipEnded {
			// Ended under the take: look again, once the end is done (end
			// stops the buffer before it clears o.cur, and waits out an end
			// in progress), so that the look does not find w again.
			w.end()
			if tries < 3 {
				continue
			}
			return 0, 0, fmt.Errorf("tag %q: this server's leases of the ordered tag keep ending: %w", o.tag, leaf.ErrNotReady)
		}
		if err != nil {
			return 0, 0, err
		}
		if h := o.g.afterTake; h != nil {
			h(o.tag, s, e)
		}
		if o.g.mono() >= w.deadline.Load() {
			return 0, 0, o.lapsed(w)
		}
		return s, e, nil
	}
}

// lapsed ends an ownership whose deadline passed between a take and its
// check (or that ended meanwhile), and is the answer of that take, whose
// IDs are discarded.
func (o *ordered) lapsed(w *ownership) error {
	o.mu.Lock()
	dead, stopErr := o.dead, o.stopErr
	o.mu.Unlock()
	if dead {
		// Dropped (switched plain, idle, closing): the caller looks the
		// tag up again, or gets why it cannot.
		return stopErr
	}
	if w.end() {
		o.g.s.Logger.Warn("segment ordered tag: lease ran out here before it was renewed; stopped issuing", "tag", o.tag, "token", w.token)
	}
	return fmt.Errorf("tag %q: this server's lease of the ordered tag ended (not renewed in time, lost, or the server stopping) before the IDs could be issued; they are discarded: %w (%w)",
		o.tag, leaf.ErrNotReady, leaf.ErrLeaseLost)
}

// ownership is this server's current ownership of the tag, taken if the
// lease is free: else the reason it has none, a *leaf.NotOwnerError when
// another server owns the tag. One store call runs at a time per tag;
// requests wait for it within their wait budget (see buffer.take).
func (o *ordered) ownership(ctx context.Context, waitUntil *time.Time) (*ownership, error) {
	for {
		if w := o.cur.Load(); w != nil {
			return w, nil
		}
		now := o.g.mono()
		if a := o.answer.Load(); a != nil && now < a.until {
			if err := o.decide(a, now); err != nil {
				return nil, err
			}
		}
		o.mu.Lock()
		if o.dead {
			err := o.stopErr
			o.mu.Unlock()
			return nil, err
		}
		if w := o.cur.Load(); w != nil {
			o.mu.Unlock()
			return w, nil
		}
		if a := o.answer.Load(); a != nil && now < a.until {
			if err := o.decide(a, now); err != nil {
				o.mu.Unlock()
				return nil, err
			}
		}
		ch := o.flight
		if ch == nil {
			ch = o.startFlightLocked()
		}
		o.mu.Unlock()
		if err := o.g.waitFlight(ctx, o.tag, ch, waitUntil); err != nil {
			return nil, err
		}
	}
}

// decide is a cached answer's error at now, nil when the store must be
// asked (this server may try to take the lease over).
func (o *ordered) decide(a *leaseAnswer, now int64) error {
	if a.err != nil {
		return a.err
	}
	own := o.g.s.Owner
	if a.lease.Owner != "" && a.lease.Owner != own && now < a.takeAt {
		o.notOwner.Add(1)
		return &leaf.NotOwnerError{Tag: o.tag, Owner: a.owner, URL: a.url, Retry: time.Duration(a.takeAt - now)}
	}
	if own == "" {
		o.notOwner.Add(1)
		return fmt.Errorf("tag %q is ordered and no server owns it; this server cannot take it: it has no owner identity (segment owner URL): %w", o.tag, leaf.ErrNotReady)
	}
	return nil
}

// OwnerUnreachable tells the generator that a request forwarded to the
// owner of an ordered tag, as a *leaf.NotOwnerError named it, failed: the
// owner did not answer, or answered that it closed or does not own the
// tag. The next request for the tag asks the store again rather than
// trusting the lease read up to a second ago (at most one read per 10ms),
// so that a graceful handover or a takeover is seen at once.
func (g *Generator) OwnerUnreachable(tag string) {
	b := g.find(tag)
	if b == nil {
		return
	}
	o, ok := b.kind().(*ordered)
	if !ok {
		return
	}
	if a := o.answer.Load(); a != nil && a.err == nil && g.mono()-a.seenAt >= int64(minLeaseCache) {
		o.answer.CompareAndSwap(a, nil)
	}
}

// waitFlight waits for a lease call to end, within the request's wait
// budget.
func (g *Generator) waitFlight(ctx context.Context, tag string, ch <-chan struct{}, waitUntil *time.Time) error {
	select {
	case <-ch:
		return nil
	default:
	}
	if waitUntil.IsZero() {
		*waitUntil = time.Now().Add(g.s.WaitTimeout)
	}
	t := time.NewTimer(time.Until(*waitUntil))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tag %q: the lease of the ordered tag is being read: %w (%w)", tag, leaf.ErrNotReady, ctx.Err())
	case <-t.C:
		return fmt.Errorf("tag %q: the store did not answer about the lease of the ordered tag in time: %w", tag, leaf.ErrNotReady)
	}
}

// startFlightLocked starts the store call that reads or takes the lease.
// It runs in the background, so that a request that gives up waiting does
// not cut it short for the others. o.mu must be held and o not dead.
func (o *ordered) startFlightLocked() chan struct{} {
	ch := make(chan struct{})
	o.flight = ch
	o.g.wg.Add(1)
	go func() {
		defer o.g.wg.Done()
		o.fly()
		o.mu.Lock()
		o.flight = nil
		o.mu.Unlock()
		close(ch)
	}()
	return ch
}

// fly reads the lease, or takes it when it may be free, and records the
// outcome: an ownership, or the answer for the requests.
func (o *ordered) fly() {
	g := o.g
	own := g.s.Owner
	ctx, cancel := context.WithTimeout(g.ctx, g.s.StoreTimeout)
	defer cancel()
	o.mu.Lock()
	watched, mayTake := o.seen, own != "" && g.mono() >= o.takeAtLocked()
	o.mu.Unlock()

	var (
		l   leaf.TagLease
		ok  = true
		err error
	)
	sent := g.mono()
	if !mayTake {
		// Another server holds the lease, as far as this one has seen: a
		// read, which takes no lock, tells whether it still does, and
		// counts towards the watch.
		l, ok, err = g.ordered.TagLease(ctx, o.tag)
		if err == nil && ok {
			o.mu.Lock()
			o.observeLocked(l, sent, g.mono())
			watched, mayTake = l, own != "" && g.mono() >= o.takeAtLocked()
			o.mu.Unlock()
		}
	}
	if err == nil && ok && mayTake {
		// Released, this server's own, or watched unrenewed for a whole
		// lease: take it, if the row still holds the lease watched.
		sent = g.mono()
		l, err = g.ordered.AcquireTag(ctx, o.tag, own, g.s.OwnerLease, watched)
	}
	if err == nil && own != "" && l.Owner == own && l.Token <= g.ownedToken(o.tag) {
		// The store still holds a lease this server took and has stopped
		// issuing under (its deadline passed first, or the tag's state
		// here was dropped). The state that ended it may yet release its
		// token: take a new one, so that no release can end this
		// ownership.
		if _, err = g.ordered.ReleaseTag(ctx, o.tag, own, l.Token); err == nil {
			sent = g.mono()
			l, err = g.ordered.AcquireTag(ctx, o.tag, own, g.s.OwnerLease, leaf.TagLease{})
		}
	}
	if isNotFound(err) {
		ok, err = false, nil
	}
	answered := g.mono()
	if err == nil && !ok {
		// The tag is no longer ordered (or gone): drop this state; the
		// requests look the tag up again.
		g.s.Logger.Info("segment tag is no longer ordered; dropped its ordered state", "tag", o.tag)
		g.convert(context.WithoutCancel(ctx), o.shell)
		return
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead {
		if err == nil && own != "" && l.Owner == own {
			// Taken as the state was dropped: no one here issues under
			// it, and another server need not wait for it to run out.
			o.mu.Unlock()
			_, _ = g.ordered.ReleaseTag(ctx, o.tag, own, l.Token)
			o.mu.Lock()
		}
		return
	}
	if err != nil {
		err = fmt.Errorf("tag %q: cannot read or take the lease of the ordered tag: %w (%w)", o.tag, leaf.ErrNotReady, err)
		o.answer.Store(&leaseAnswer{until: answered + int64(g.s.RetryBackoff), err: err})
		g.s.Logger.Warn("segment ordered tag: lease call failed", "tag", o.tag, "err", err)
		return
	}
	o.observeLocked(l, sent, answered)
	if own != "" && l.Owner == own {
		deadline := sent + int64(l.Left-g.leaseMargin())
		if deadline <= g.mono() {
			err := fmt.Errorf("tag %q: the lease taken had %s left, less than the margin: %w", o.tag, l.Left, leaf.ErrNotReady)
			o.answer.Store(&leaseAnswer{until: answered + int64(g.s.RetryBackoff), err: err})
			return
		}
		o.startLocked(l.Token, deadline)
		return
	}
	o.answer.Store(o.answerLocked(answered))
}

// answerLocked is the cached answer for the lease seen, which another
// server holds (or no one, where this server cannot take it), answered at
// answered: it stands until this server may try to take the lease over,
// at most maxLeaseCache. o.mu must be held, or o not yet shared.
func (o *ordered) answerLocked(answered int64) *leaseAnswer {
	l, takeAt := o.seen, o.takeAtLocked()
	wait := maxLeaseCache
	if o.g.s.Owner != "" {
		var left time.Duration
		if takeAt > answered {
			left = time.Duration(takeAt - answered)
		}
		wait = min(max(left, minLeaseCache), maxLeaseCache)
	}
	a := &leaseAnswer{until: answered + int64(wait), lease: l, seenAt: o.seenAt, takeAt: takeAt, owner: l.Owner, url: leaf.OwnerURL(l.Owner)}
	if own := o.g.s.Owner; own != "" && leaf.OwnerURL(own) == a.url {
		a.owner, a.url = "", ""
	}
	return a
}

// ownedToken is the highest fencing token of the tag this generator took.
func (g *Generator) ownedToken(tag string) int64 {
	if v, ok := g.tokens.Load(tag); ok {
		return v.(int64)
	}
	return 0
}

// startLocked starts an ownership with token, valid until deadline: a new
// buffer, which reserves its ranges from now on, and its renewals. o.mu
// must be held and o not dead.
func (o *ordered) startLocked(token, deadline int64) {
	g := o.g
	if token > g.ownedToken(o.tag) {
		g.tokens.Store(o.tag, token)
	}
	w := &ownership{o: o, token: token}
	b := newBuffer(g, o.tag, false)
	b.shapeRead = true // an ordered tag is plain: checked by readShape
	b.row, w.b = w, b
	w.deadline.Store(deadline)
	o.answer.Store(nil)
	o.cur.Store(w)
	g.renewer.add(w)
	b.ids.Fill()
	g.s.Logger.Info("segment ordered tag: this server owns it", "tag", o.tag, "token", token)
}

// admit checks a range reserved for an ownership of this tag: it must lie
// above every range reserved here before, else issuing from it would break
// the order (a store that hands out ranges below earlier ones).
func (o *ordered) admit(start, end int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if start < o.floor {
		return fmt.Errorf("tag %q: the store reserved [%d, %d), below IDs reserved before (up to %d): it is not issued, as the tag is ordered", o.tag, start, end, o.floor)
	}
	o.floor = end
	return nil
}

// extend moves the deadline to d, unless the ownership ended.
func (w *ownership) extend(d int64) {
	for {
		old := w.deadline.Load()
		if old == math.MinInt64 || w.deadline.CompareAndSwap(old, d) {
			return
		}
	}
}

// end ends the ownership: nothing is issued under it from now on, its
// buffer is stopped and dropped (never reused: a later ownership reserves
// anew), and its renewals stop. It reports whether this call ended it.
func (w *ownership) end() bool {
	first := false
	w.endOnce.Do(func() {
		first = true
		w.deadline.Store(math.MinInt64)
		w.b.ids.Stop(errOwnershipEnded)
		o := w.o
		o.mu.Lock()
		if o.cur.CompareAndSwap(w, nil) {
			o.retired.add(w.b)
		}
		o.mu.Unlock()
	})
	return first
}

// lost ends an ownership whose lease a renewal or a reserve found lost:
// another server may own the tag now.
func (w *ownership) lost(err error) {
	if w.end() {
		w.o.g.s.Logger.Error("segment ordered tag: lease lost; stopped issuing", "tag", w.o.tag, "token", w.token, "err", err)
	}
}

// stopAll drops the state (requests get err), ends the ownership, and
// returns its buffer, for a give-back.
func (o *ordered) stopAll(err error) []*buffer {
	o.mu.Lock()
	o.dead = true
	if o.stopErr == nil {
		o.stopErr = err
	}
	o.answer.Store(nil)
	w := o.cur.Load()
	o.mu.Unlock()
	if w == nil || !w.end() {
		return nil
	}
	o.mu.Lock()
	o.toRelease = w
	o.mu.Unlock()
	return []*buffer{w.b}
}

// release ends in the store the lease of the ownership stopAll ended, so
// that another server takes over at once rather than when it runs out.
func (o *ordered) release(ctx context.Context) {
	o.mu.Lock()
	w := o.toRelease
	o.toRelease = nil
	o.mu.Unlock()
	if w == nil {
		return
	}
	g := o.g
	ctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	ok, err := g.ordered.ReleaseTag(ctx, o.tag, g.s.Owner, w.token)
	switch {
	case err != nil:
		g.s.Logger.Warn("segment ordered tag: lease release failed; another server takes over when it runs out", "tag", o.tag, "token", w.token, "err", err)
	case ok:
		g.s.Logger.Info("segment ordered tag: lease released", "tag", o.tag, "token", w.token)
	}
}

// addCounters adds the tag's counters, over all its ownerships, to c.
func (o *ordered) addCounters(c *counters) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addCountersLocked(c)
}

func (o *ordered) addCountersLocked(c *counters) {
	c.merge(o.retired)
	if w := o.cur.Load(); w != nil {
		c.add(w.b)
	}
}

// sample records the tag's issued count for its rate, and returns it.
func (o *ordered) sample(now time.Time) uint64 {
	var c counters
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addCountersLocked(&c)
	o.rate.Sample(now, c.issued)
	return c.issued
}

// status is the tag's status: its ownership's buffers while this server
// owns it, the counters of all its ownerships here.
func (o *ordered) status(now time.Time) leaf.SegmentStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	var c counters
	o.addCountersLocked(&c)
	st := leaf.SegmentStatus{Tag: o.tag}
	w := o.cur.Load()
	if w != nil {
		st = w.b.status(now)
		st.Owner, st.OwnerToken = o.g.s.Owner, w.token
	} else if o.seenOK && o.seen.Left-time.Duration(o.g.mono()-o.seenAt) > 0 {
		st.Owner, st.OwnerToken = o.seen.Owner, o.seen.Token
	}
	if a := o.answer.Load(); w == nil && a != nil && a.err != nil {
		st.LoadError = a.err.Error()
	}
	st.Ordered = true
	c.fill(&st, &o.rate, now)
	return st
}

// idle reports whether the tag has seen no request for timeout: no ID
// issued, no wait, no load, no answer given. g.mu must be held.
func (o *ordered) idle(now time.Time, timeout time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	var c counters
	o.addCountersLocked(&c)
	act := c.issued + c.waits + c.loads + o.notOwner.Load()
	if act != o.seenAct || o.flight != nil {
		o.seenAct, o.activeAt = act, now
		return false
	}
	return now.Sub(o.activeAt) >= timeout
}

// convert drops a tag's state whose ordered flag changed (or may have):
// its buffers are stopped, an ownership ended before the state leaves the
// maps (so that no later state of the tag here overlaps it) and its lease
// released. Requests in flight and later ones look the tag up again. A
// plain buffer's unused IDs are abandoned, as a crash abandons them.
func (g *Generator) convert(ctx context.Context, b *buffer) {
	g.mu.Lock()
	stopTag(b, errRetired)
	g.removeLocked(b)
	g.mu.Unlock()
	if k := b.kind(); k != nil {
		k.release(ctx)
	}
}

// SetOrdered marks a tag ordered or plain in the store (leaf.OrderedStore)
// and drops this server's state of the tag if it was of the other kind:
// the next request reads the tag afresh. Other servers switch when they
// next ask the store (see Config.RefreshInterval): IDs issued before
// every server switched are not ordered with those after. Only a plain
// tag can be ordered: a tag with a period, a format or opaque IDs is
// refused with leaf.ErrOrderedTag.
func (g *Generator) SetOrdered(ctx context.Context, tag string, ordered bool) error {
	if g.ordered == nil {
		return errNoOrdered
	}
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if ordered && g.shaper != nil {
		shape, err := g.shaper.TagShape(ctx, tag)
		if err != nil {
			return err
		}
		if !shape.IsPlain() {
			return fmt.Errorf("tag %s has the shape %s; only a plain tag can be ordered: %w", tag, shape, leaf.ErrOrderedTag)
		}
	}
	if err := g.ordered.SetOrdered(ctx, tag, ordered); err != nil {
		return err
	}
	b := g.find(tag)
	// A plain buffer may be reading the tag's lease as it stood before:
	// it is dropped whatever it found. An ordered state that raced the
	// other way finds the row gone at its next lease call.
	if is, known := isOrdered(b); known && is != ordered {
		g.convert(ctx, b)
	}
	g.s.Logger.Info("segment tag ordered flag set", "tag", tag, "ordered", ordered)
	return nil
}

var errNoOrdered = errors.New("segment store does not support ordered tags")

// isOrdered is what the tag's state here says of its ordered flag; known
// is false for no state, and for a periodic tag, which cannot be ordered.
func isOrdered(b *buffer) (is, known bool) {
	if b == nil {
		return false, false
	}
	switch b.kind().(type) {
	case nil:
		return false, true
	case *ordered:
		return true, true
	}
	return false, false
}

// find is the tag's buffer in any map, nil if it has none.
func (g *Generator) find(tag string) *buffer {
	if b := (*g.hot.Load())[tag]; b != nil {
		return b
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := g.fresh[tag]; b != nil {
		return b
	}
	return g.pending[tag]
}

// refreshOrdered asks the store which of the tags in use are ordered and
// drops the state of those whose ordered flag differs: the next request
// reads them afresh. The question names the tags in use, never lists the
// table: its cost follows this server's traffic, however many tags are
// ordered.
func (g *Generator) refreshOrdered(ctx context.Context) error {
	if g.ordered == nil {
		return nil
	}
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	started := time.Now()
	var tags []string
	for _, b := range g.active() {
		if _, known := isOrdered(b); known {
			tags = append(tags, b.tag)
		}
	}
	if len(tags) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	ordered, err := g.ordered.OrderedTagsIn(lctx, tags)
	if err != nil {
		g.storeFailed(err)
		return fmt.Errorf("refresh ordered tags: %w", err)
	}
	set := make(map[string]bool, len(ordered))
	for _, t := range ordered {
		set[t] = true
	}
	var change []*buffer
	g.mu.Lock()
	g.eachActiveLocked(func(b *buffer) {
		// A buffer made after the question was asked reads the lease
		// itself.
		if !b.created.Before(started) {
			return
		}
		if is, known := isOrdered(b); known && is != set[b.tag] {
			change = append(change, b)
		}
	})
	for _, b := range change {
		stopTag(b, errRetired)
	}
	g.removeLocked(change...)
	g.mu.Unlock()
	for _, b := range change {
		if k := b.kind(); k != nil {
			k.release(ctx)
			g.s.Logger.Info("segment tag is no longer ordered; dropped its ordered state", "tag", b.tag)
			continue
		}
		g.s.Logger.Info("segment tag became ordered; dropped its plain buffers", "tag", b.tag)
	}
	return nil
}

// readLease reads the lease of the tag whose shape readShape read, on the
// first load of its buffer. Finding the tag ordered, it hangs the ordered
// state on the buffer and stops it with errKindFound; an ordered tag with
// a shape is refused for good.
func (b *buffer) readLease(ctx context.Context, shape leaf.TagShape) error {
	g := b.g
	sent := g.mono()
	sctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	l, ok, err := g.ordered.TagLease(sctx, b.tag)
	cancel()
	answered := g.mono()
	if err != nil {
		return fmt.Errorf("read the lease of tag %q: %w", b.tag, err)
	}
	if !ok {
		return nil
	}
	if !shape.IsPlain() {
		err := fmt.Errorf("tag %s is ordered but has the shape %s; an ordered tag must be plain (no period, format or opaque IDs): %w",
			b.tag, shape, leaf.ErrOrderedTag)
		b.ids.Stop(err)
		g.s.Logger.Error("segment ordered tag cannot issue", "tag", b.tag, "err", err)
		return err
	}
	o := newOrdered(g, b, l, sent, answered)
	if l.Owner != "" && l.Owner != g.s.Owner {
		// Another's lease, even one run out by the store's clock: the
		// watch starts now.
		o.answer.Store(o.answerLocked(answered))
	}
	g.s.Logger.Info("segment tag is ordered", "tag", b.tag, "owner", l.Owner, "token", l.Token)
	return b.found(o)
}
