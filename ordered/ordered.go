package ordered

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/ratemeter"
	"github.com/leafgo/leaf/segment"
)

// This file issues the IDs of ordered tags (leaf.OrderedStore): IDs that
// strictly increase in the order they are issued, across the cluster. One
// server at a time, the tag's owner, issues them, under a lease kept in
// the store; the others answer *leaf.NotOwnerError, naming the owner, and
// their transports forward to it (package ordered/forward), which
// answers with the generator's Take by leaf.ByForwarder.
//
// An ordered tag is a kind of the segment generator's (segment.Kinds):
// its shell's first load asks Find, which reads the tag's lease and,
// finding the tag ordered, answers the tag's state. A plain tag's hot path
// never looks at any of this.
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
// their tag refresh (segment.Config.RefreshInterval), or at once for a server whose lease
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
var errOwnershipEnded = errors.New("ordered: the ownership of the ordered tag ended")

// Bounds of the lease cache of a tag another server owns: it is read
// again at most every maxLeaseCache, and at least minLeaseCache apart.
const (
	maxLeaseCache = time.Second
	minLeaseCache = 10 * time.Millisecond
)

// state is an ordered tag's state on this server: its segment.Kind.
type state struct {
	t     *Tags
	tag   string
	shell *segment.Buffer

	// cur is this server's ownership of the tag, nil when it has none: the
	// ordered hot path is one load of it.
	cur atomic.Pointer[ownership]
	// answer is what requests are told while this server does not own the
	// tag, until answer.until: read without the lock.
	answer atomic.Pointer[leaseAnswer]
	// notOwner counts the requests answered without issuing, for the idle
	// sweep.
	notOwner atomic.Uint64

	// mu guards the fields below. Lock order: the generator's lock,
	// then mu, then a buffer's.
	mu     sync.Mutex
	seen   leaf.TagLease // the lease as last read, acquired or renewed
	seenAt int64         // t.mono() when the request that answered seen was sent
	seenOK bool
	// watchedAt is the t.mono() instant the read that first showed seen
	// (the very same lease, leaf.TagLease.Same) was answered; watchFor is
	// how long from then it must stay the same before this server may
	// take it over (see takeAtLocked).
	watchedAt int64
	watchFor  time.Duration
	flight    chan struct{} // closed when the store call in flight ends
	// floor is the end of the highest range reserved here: a range below
	// it would be out of order (see admit).
	floor int64
	// toRelease is the ownership that StopAll ended, for Release.
	toRelease *ownership
	retired   segment.Counters // the counters of ownerships that ended
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
	until  int64 // t.mono(): ask the store again from here
	err    error
	lease  leaf.TagLease
	seenAt int64
	takeAt int64 // t.mono(): this server may try to take lease over (takeAtLocked)
	// owner and url name the owner in a NotOwnerError: lease.Owner and
	// its URL, or both empty when the lease is an earlier process of this
	// very server, which is this one now: it is dead, and its lease must
	// run out. Worked out once here, not per request.
	owner, url string
}

// ownership is one lease of the tag this server took: its fencing token,
// its buffer and its deadline.
type ownership struct {
	o     *state
	token int64
	b     *segment.Buffer
	// deadline is the t.mono() instant from which no ID may be issued;
	// math.MinInt64 once the ownership ended. Only renewals move it, and
	// never once it ended.
	deadline atomic.Int64
	endOnce  sync.Once
}

// ended reports whether the ownership ended.
func (w *ownership) ended() bool { return w.deadline.Load() == math.MinInt64 }

// newOrdered is the state of an ordered tag whose lease was read by a
// request sent at sent and answered at answered.
func newState(t *Tags, shell *segment.Buffer, l leaf.TagLease, sent, answered int64) *state {
	o := &state{t: t, tag: shell.Tag(), shell: shell, activeAt: time.Now()}
	o.observeLocked(l, sent, answered)
	return o
}

// observeLocked records an answer of the store about the lease (a read, a
// take, a renewal) to a request sent at sent and answered at answered. A
// lease other than the one seen before starts the watch anew, from the
// answer: the owner's renewal may have landed after the send. o.mu must be
// held, or o not yet shared.
func (o *state) observeLocked(l leaf.TagLease, sent, answered int64) {
	if !o.seenOK || !l.Same(o.seen) {
		o.watchedAt, o.watchFor = answered, max(o.t.s.OwnerLease, l.Left)
	}
	o.seen, o.seenAt, o.seenOK = l, sent, true
}

// takeAtLocked is the t.mono() instant from which this server may try to
// take over the lease it saw: at once when the lease has no owner or is
// this server's own (under which it issues nothing: it has no ownership
// when it asks); else once it has watched the very same lease for
// watchFor, a whole lease (this server's OwnerLease, or the time the lease
// had left when first seen, if longer: an owner configured with a longer
// lease is not cut short), and the lease should have run out by the
// store's clock, which the store checks too. o.mu must be held, or o not
// yet shared.
func (o *state) takeAtLocked() int64 {
	l := o.seen
	if !o.seenOK || l.Owner == "" || l.Owner == o.t.s.Owner {
		return math.MinInt64
	}
	return max(after(o.watchedAt, o.watchFor), after(o.seenAt, l.Left))
}

// after is the t.mono() instant d after at, saturated: a lease's Left may
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

// mono is the monotonic clock of the leases, in nanoseconds since New: the
// clock of lease deadlines, which a wall clock stepping cannot stretch.
func (t *Tags) mono() int64 { return int64(time.Since(t.epoch)) }

// leaseMargin is how long before its lease would run out an owner stops
// issuing: a tenth of the lease, at least 100ms, for the clocks' drift.
func (t *Tags) leaseMargin() time.Duration {
	return max(t.s.OwnerLease/10, 100*time.Millisecond)
}

// rangeRefusal is the answer to a range a client would hand out.
func (o *state) rangeRefusal() error {
	return fmt.Errorf("tag %s is ordered: a range would let a caller hand its IDs out of order; take IDs or batches: %w", o.tag, leaf.ErrOrderedTag)
}

// Next is NextID for an ordered tag; segment.ErrRetired sends the request
// the slow way, which looks the tag up again.
func (o *state) Next(ctx context.Context) (int64, bool, error) {
	v, err := o.nextID(ctx)
	if err == segment.ErrRetired {
		return 0, false, nil
	}
	return v, true, err
}

// Take is a run of this server's ownership; a range for a client to hand
// out is refused.
func (o *state) Take(ctx context.Context, n int64, waitUntil *time.Time, use leaf.RangeUse) (int64, int64, error) {
	if use == leaf.ByClient {
		return 0, 0, o.rangeRefusal()
	}
	return o.takeRun(ctx, n, waitUntil)
}

// Sweep drops the state of a tag idle for timeout: its ownership ends
// now, before the state leaves the maps (see Buffer.Drop), and its lease
// is released once the generator's lock is released; its unused IDs are
// abandoned.
func (o *state) Sweep(now time.Time, timeout time.Duration) (bool, func(context.Context)) {
	if !o.idle(now, timeout) {
		return false, nil
	}
	o.shell.Stop(segment.ErrRetired)
	return true, o.Release
}

// nextID is NextID for an ordered tag.
func (o *state) nextID(ctx context.Context) (int64, error) {
	if w := o.cur.Load(); w != nil {
		if v, ok := w.b.Next(); ok {
			if h := o.t.afterTake; h != nil {
				h(o.tag, v, v+1)
			}
			if o.t.mono() < w.deadline.Load() {
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
func (o *state) takeRun(ctx context.Context, n int64, waitUntil *time.Time) (int64, int64, error) {
	for tries := 0; ; tries++ {
		w, err := o.ownership(ctx, waitUntil)
		if err != nil {
			return 0, 0, err
		}
		s, e, err := w.b.Take(ctx, n, waitUntil)
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
		if h := o.t.afterTake; h != nil {
			h(o.tag, s, e)
		}
		if o.t.mono() >= w.deadline.Load() {
			return 0, 0, o.lapsed(w)
		}
		return s, e, nil
	}
}

// lapsed ends an ownership whose deadline passed between a take and its
// check (or that ended meanwhile), and is the answer of that take, whose
// IDs are discarded.
func (o *state) lapsed(w *ownership) error {
	o.mu.Lock()
	dead, stopErr := o.dead, o.stopErr
	o.mu.Unlock()
	if dead {
		// Dropped (switched plain, idle, closing): the caller looks the
		// tag up again, or gets why it cannot.
		return stopErr
	}
	if w.end() {
		o.t.s.Logger.Warn("segment ordered tag: lease ran out here before it was renewed; stopped issuing", "tag", o.tag, "token", w.token)
	}
	return fmt.Errorf("tag %q: this server's lease of the ordered tag ended (not renewed in time, lost, or the server stopping) before the IDs could be issued; they are discarded: %w (%w)",
		o.tag, leaf.ErrNotReady, leaf.ErrLeaseLost)
}

// ownership is this server's current ownership of the tag, taken if the
// lease is free: else the reason it has none, a *leaf.NotOwnerError when
// another server owns the tag. One store call runs at a time per tag;
// requests wait for it within their wait budget (see buffer.take).
func (o *state) ownership(ctx context.Context, waitUntil *time.Time) (*ownership, error) {
	for {
		if w := o.cur.Load(); w != nil {
			return w, nil
		}
		now := o.t.mono()
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
		if err := o.t.waitFlight(ctx, o.tag, ch, waitUntil); err != nil {
			return nil, err
		}
	}
}

// decide is a cached answer's error at now, nil when the store must be
// asked (this server may try to take the lease over).
func (o *state) decide(a *leaseAnswer, now int64) error {
	if a.err != nil {
		return a.err
	}
	own := o.t.s.Owner
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
func (t *Tags) OwnerUnreachable(tag string) {
	o := t.state(tag)
	if o == nil {
		return
	}
	if a := o.answer.Load(); a != nil && a.err == nil && t.mono()-a.seenAt >= int64(minLeaseCache) {
		o.answer.CompareAndSwap(a, nil)
	}
}

// state is the ordered state of tag here, nil if it has none.
func (t *Tags) state(tag string) *state {
	sh := t.host.Shell(tag)
	if sh == nil {
		return nil
	}
	k, _ := sh.Kind()
	o, _ := k.(*state)
	return o
}

// waitFlight waits for a lease call to end, within the request's wait
// budget.
func (t *Tags) waitFlight(ctx context.Context, tag string, ch <-chan struct{}, waitUntil *time.Time) error {
	select {
	case <-ch:
		return nil
	default:
	}
	if waitUntil.IsZero() {
		*waitUntil = time.Now().Add(t.s.WaitTimeout)
	}
	tm := time.NewTimer(time.Until(*waitUntil))
	defer tm.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tag %q: the lease of the ordered tag is being read: %w (%w)", tag, leaf.ErrNotReady, ctx.Err())
	case <-tm.C:
		return fmt.Errorf("tag %q: the store did not answer about the lease of the ordered tag in time: %w", tag, leaf.ErrNotReady)
	}
}

// startFlightLocked starts the store call that reads or takes the lease.
// It runs in the background, so that a request that gives up waiting does
// not cut it short for the others. o.mu must be held and o not dead.
func (o *state) startFlightLocked() chan struct{} {
	ch := make(chan struct{})
	o.flight = ch
	o.t.wg.Add(1)
	go func() {
		defer o.t.wg.Done()
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
func (o *state) fly() {
	t := o.t
	own := t.s.Owner
	ctx, cancel := context.WithTimeout(t.ctx, t.s.StoreTimeout)
	defer cancel()
	o.mu.Lock()
	watched, mayTake := o.seen, own != "" && t.mono() >= o.takeAtLocked()
	o.mu.Unlock()

	var (
		l   leaf.TagLease
		ok  = true
		err error
	)
	sent := t.mono()
	if !mayTake {
		// Another server holds the lease, as far as this one has seen: a
		// read, which takes no lock, tells whether it still does, and
		// counts towards the watch.
		l, ok, err = t.store.TagLease(ctx, o.tag)
		if err == nil && ok {
			o.mu.Lock()
			o.observeLocked(l, sent, t.mono())
			watched, mayTake = l, own != "" && t.mono() >= o.takeAtLocked()
			o.mu.Unlock()
		}
	}
	if err == nil && ok && mayTake {
		// Released, this server's own, or watched unrenewed for a whole
		// lease: take it, if the row still holds the lease watched.
		sent = t.mono()
		l, err = t.store.AcquireTag(ctx, o.tag, own, t.s.OwnerLease, watched)
	}
	if err == nil && own != "" && l.Owner == own && l.Token <= t.ownedToken(o.tag) {
		// The store still holds a lease this server took and has stopped
		// issuing under (its deadline passed first, or the tag's state
		// here was dropped). The state that ended it may yet release its
		// token: take a new one, so that no release can end this
		// ownership.
		if _, err = t.store.ReleaseTag(ctx, o.tag, own, l.Token); err == nil {
			sent = t.mono()
			l, err = t.store.AcquireTag(ctx, o.tag, own, t.s.OwnerLease, leaf.TagLease{})
		}
	}
	if isNotFound(err) {
		ok, err = false, nil
	}
	answered := t.mono()
	if err == nil && !ok {
		// The tag is no longer ordered (or gone): drop this state; the
		// requests look the tag up again.
		t.s.Logger.Info("segment tag is no longer ordered; dropped its ordered state", "tag", o.tag)
		o.shell.Drop(context.WithoutCancel(ctx))
		return
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead {
		if err == nil && own != "" && l.Owner == own {
			// Taken as the state was dropped: no one here issues under
			// it, and another server need not wait for it to run out.
			o.mu.Unlock()
			_, _ = t.store.ReleaseTag(ctx, o.tag, own, l.Token)
			o.mu.Lock()
		}
		return
	}
	if err != nil {
		err = fmt.Errorf("tag %q: cannot read or take the lease of the ordered tag: %w (%w)", o.tag, leaf.ErrNotReady, err)
		o.answer.Store(&leaseAnswer{until: answered + int64(t.s.RetryBackoff), err: err})
		t.s.Logger.Warn("segment ordered tag: lease call failed", "tag", o.tag, "err", err)
		return
	}
	o.observeLocked(l, sent, answered)
	if own != "" && l.Owner == own {
		deadline := sent + int64(l.Left-t.leaseMargin())
		if deadline <= t.mono() {
			err := fmt.Errorf("tag %q: the lease taken had %s left, less than the margin: %w", o.tag, l.Left, leaf.ErrNotReady)
			o.answer.Store(&leaseAnswer{until: answered + int64(t.s.RetryBackoff), err: err})
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
func (o *state) answerLocked(answered int64) *leaseAnswer {
	l, takeAt := o.seen, o.takeAtLocked()
	wait := maxLeaseCache
	if o.t.s.Owner != "" {
		var left time.Duration
		if takeAt > answered {
			left = time.Duration(takeAt - answered)
		}
		wait = min(max(left, minLeaseCache), maxLeaseCache)
	}
	a := &leaseAnswer{until: answered + int64(wait), lease: l, seenAt: o.seenAt, takeAt: takeAt, owner: l.Owner, url: leaf.OwnerURL(l.Owner)}
	if own := o.t.s.Owner; own != "" && leaf.OwnerURL(own) == a.url {
		a.owner, a.url = "", ""
	}
	return a
}

// ownedToken is the highest fencing token of the tag these Tags took.
func (t *Tags) ownedToken(tag string) int64 {
	if v, ok := t.tokens.Load(tag); ok {
		return v.(int64)
	}
	return 0
}

// startLocked starts an ownership with token, valid until deadline: a new
// buffer, which reserves its ranges from now on, and its renewals. o.mu
// must be held and o not dead.
func (o *state) startLocked(token, deadline int64) {
	t := o.t
	if token > t.ownedToken(o.tag) {
		t.tokens.Store(o.tag, token)
	}
	w := &ownership{o: o, token: token}
	w.b = o.shell.NewBuffer(w)
	w.deadline.Store(deadline)
	o.answer.Store(nil)
	o.cur.Store(w)
	t.renewer.add(w)
	w.b.Fill()
	t.s.Logger.Info("segment ordered tag: this server owns it", "tag", o.tag, "token", token)
}

// admit checks a range reserved for an ownership of this tag: it must lie
// above every range reserved here before, else issuing from it would break
// the order (a store that hands out ranges below earlier ones).
func (o *state) admit(start, end int64) error {
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
		w.b.Stop(errOwnershipEnded)
		o := w.o
		o.mu.Lock()
		if o.cur.CompareAndSwap(w, nil) {
			o.retired.Add(w.b)
		}
		o.mu.Unlock()
	})
	return first
}

// lost ends an ownership whose lease a renewal or a reserve found lost:
// another server may own the tag now.
func (w *ownership) lost(err error) {
	if w.end() {
		w.o.t.s.Logger.Error("segment ordered tag: lease lost; stopped issuing", "tag", w.o.tag, "token", w.token, "err", err)
	}
}

// StopAll drops the state (requests get err), ends the ownership, and
// returns its buffer, for a give-back.
func (o *state) StopAll(err error) []*segment.Buffer {
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
	return []*segment.Buffer{w.b}
}

// Release ends in the store the lease of the ownership StopAll ended, so
// that another server takes over at once rather than when it runs out.
func (o *state) Release(ctx context.Context) {
	o.mu.Lock()
	w := o.toRelease
	o.toRelease = nil
	o.mu.Unlock()
	if w == nil {
		return
	}
	t := o.t
	ctx, cancel := context.WithTimeout(ctx, t.s.StoreTimeout)
	defer cancel()
	ok, err := t.store.ReleaseTag(ctx, o.tag, t.s.Owner, w.token)
	if err == nil {
		// The store holds no lease of this token any more, and no
		// release of it is left to land: a later state of the tag has
		// nothing to guard against (see fly), and the map stays as large
		// as the tags this server owns, not all it ever owned.
		t.tokens.CompareAndDelete(o.tag, w.token)
	}
	switch {
	case err != nil:
		t.s.Logger.Warn("segment ordered tag: lease release failed; another server takes over when it runs out", "tag", o.tag, "token", w.token, "err", err)
	case ok:
		t.s.Logger.Info("segment ordered tag: lease released", "tag", o.tag, "token", w.token)
	}
}

// AddCounters adds the tag's counters, over all its ownerships, to c.
func (o *state) AddCounters(c *segment.Counters) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addCountersLocked(c)
}

func (o *state) addCountersLocked(c *segment.Counters) {
	c.Merge(&o.retired)
	if w := o.cur.Load(); w != nil {
		c.Add(w.b)
	}
}

// Sample records the tag's issued count for its rate, and returns it.
func (o *state) Sample(now time.Time) uint64 {
	var c segment.Counters
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addCountersLocked(&c)
	o.rate.Sample(now, c.Issued())
	return c.Issued()
}

// Status is the tag's status: its ownership's buffers while this server
// owns it, the counters of all its ownerships here.
func (o *state) Status(now time.Time) leaf.SegmentStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	var c segment.Counters
	o.addCountersLocked(&c)
	st := leaf.SegmentStatus{Tag: o.tag}
	w := o.cur.Load()
	if w != nil {
		st = w.b.Status(now)
		st.Owner, st.OwnerToken = o.t.s.Owner, w.token
	} else if o.seenOK && o.seen.Left-time.Duration(o.t.mono()-o.seenAt) > 0 {
		st.Owner, st.OwnerToken = o.seen.Owner, o.seen.Token
	}
	if a := o.answer.Load(); w == nil && a != nil && a.err != nil {
		st.LoadError = a.err.Error()
	}
	st.Ordered = true
	c.Fill(&st, &o.rate, now)
	return st
}

// idle reports whether the tag has seen no request for timeout: no ID
// issued, no wait, no load, no answer given. The generator's lock is held.
func (o *state) idle(now time.Time, timeout time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	var c segment.Counters
	o.addCountersLocked(&c)
	act := c.Activity() + o.notOwner.Load()
	if act != o.seenAct || o.flight != nil {
		o.seenAct, o.activeAt = act, now
		return false
	}
	return now.Sub(o.activeAt) >= timeout
}

// SetOrdered marks a tag ordered or plain in the store and drops this
// server's state of the tag if it was of the other kind: the next request
// reads the tag afresh. Other servers switch when they next ask the store
// (see segment.Config.RefreshInterval): IDs issued before every server
// switched are not ordered with those after. Only a plain tag can be
// ordered: a tag with a period, a format or opaque IDs is refused with
// leaf.ErrOrderedTag.
func (t *Tags) SetOrdered(ctx context.Context, tag string, ordered bool) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if ordered && t.shaper != nil {
		shape, err := t.shaper.TagShape(ctx, tag)
		if err != nil {
			return err
		}
		if !shape.IsPlain() {
			return fmt.Errorf("tag %s has the shape %s; only a plain tag can be ordered: %w", tag, shape, leaf.ErrOrderedTag)
		}
	}
	if err := t.store.SetOrdered(ctx, tag, ordered); err != nil {
		return err
	}
	// A plain buffer may be reading the tag's lease as it stood before:
	// it is dropped whatever it found. An ordered state that raced the
	// other way finds the row gone at its next lease call.
	if t.host != nil {
		if sh := t.host.Shell(tag); sh != nil {
			if is, known := isOrdered(sh); known && is != ordered {
				sh.Drop(ctx)
			}
		}
	}
	t.s.Logger.Info("segment tag ordered flag set", "tag", tag, "ordered", ordered)
	return nil
}

// isOrdered is what the tag's state here says of its ordered flag; known
// is false for a periodic tag (or another kind's), which cannot be
// ordered.
func isOrdered(sh *segment.Buffer) (is, known bool) {
	k, plain := sh.Kind()
	if plain {
		return false, true
	}
	_, is = k.(*state)
	return is, is
}

// Refresh asks the store which of the tags in use are ordered and drops
// the state of those whose ordered flag differs: the next request reads
// them afresh. The question names the tags in use, never lists the table:
// its cost follows this server's traffic, however many tags are ordered.
func (t *Tags) Refresh(ctx context.Context) error {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	started := time.Now()
	var (
		tags   []string
		shells []*segment.Buffer
	)
	for _, sh := range t.host.Shells() {
		// A shell made after the question was asked reads the lease
		// itself.
		if _, known := isOrdered(sh); known && sh.Created().Before(started) {
			tags, shells = append(tags, sh.Tag()), append(shells, sh)
		}
	}
	if len(tags) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, t.s.StoreTimeout)
	defer cancel()
	ordered, err := t.store.OrderedTagsIn(lctx, tags)
	if err != nil {
		return fmt.Errorf("refresh ordered tags: %w", err)
	}
	set := make(map[string]bool, len(ordered))
	for _, tag := range ordered {
		set[tag] = true
	}
	for _, sh := range shells {
		is, known := isOrdered(sh)
		if !known || is == set[sh.Tag()] {
			continue
		}
		sh.Drop(ctx)
		if is {
			t.s.Logger.Info("segment tag is no longer ordered; dropped its ordered state", "tag", sh.Tag())
			continue
		}
		t.s.Logger.Info("segment tag became ordered; dropped its plain buffers", "tag", sh.Tag())
	}
	return nil
}

// Find reads the lease of a tag whose shape its shell's first load read.
// Finding the tag ordered, it answers the tag's state; an ordered tag with
// a shape is refused for good.
func (t *Tags) Find(ctx context.Context, shell *segment.Buffer, shape leaf.TagShape) (segment.Kind, error) {
	tag := shell.Tag()
	sent := t.mono()
	sctx, cancel := context.WithTimeout(ctx, t.s.StoreTimeout)
	l, ok, err := t.store.TagLease(sctx, tag)
	cancel()
	answered := t.mono()
	if err != nil {
		return nil, fmt.Errorf("read the lease of tag %q: %w", tag, err)
	}
	if !ok {
		return nil, nil
	}
	if !shape.IsPlain() {
		err := fmt.Errorf("tag %s is ordered but has the shape %s; an ordered tag must be plain (no period, format or opaque IDs): %w",
			tag, shape, leaf.ErrOrderedTag)
		shell.Stop(err)
		t.s.Logger.Error("segment ordered tag cannot issue", "tag", tag, "err", err)
		return nil, err
	}
	o := newState(t, shell, l, sent, answered)
	if l.Owner != "" && l.Owner != t.s.Owner {
		// Another's lease, even one run out by the store's clock: the
		// watch starts now.
		o.answer.Store(o.answerLocked(answered))
	}
	t.s.Logger.Info("segment tag is ordered", "tag", tag, "owner", l.Owner, "token", l.Token)
	return o, nil
}
