package snowflake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/ratemeter"
)

// issueLog is what the worker reads back from the issuer.
type issueLog interface {
	// lastMs is the millisecond of the last ID issued; once a grant that
	// stops issuing is published, the value it returns is final.
	lastMs() int64
	// issuedCount is how many IDs were issued, for the rate.
	issuedCount() uint64
}

// claimState is where the worker's claim on its worker ID stands.
type claimState int

const (
	// claimCached: started on the cached worker ID while the registry was
	// unreachable; the registry has not confirmed it yet.
	claimCached claimState = iota
	claimRegistered
	// claimLost: the registry says the ID is no longer ours (lease expired,
	// taken over, or held by another live server); re-registering.
	claimLost
)

// worker owns the claim on a worker ID: it registers it, persists the
// high-water mark ahead of the clock (cache and registry), renews the
// lease, re-registers a lost or cached ID, checks the clock against the
// peers', and releases the claim at Close. It publishes what the issuer may
// stamp as a grant, and reads back from the issuer only what it issued.
type worker struct {
	s      Config
	issued issueLog // set before start
	grants atomic.Pointer[grant]

	// hb serialises heartbeats (the loop, start, and extends on leased
	// registries): a channel of one token rather than a mutex, so that a
	// request waits for it no longer than its deadline.
	hb      chan struct{}
	cacheMu sync.Mutex // serialises cache writes and the limits they allow

	mu     sync.Mutex
	state  claimState
	closed bool
	claim  leaf.WorkerClaim // the claim held; its HighWater is the issuer's floor
	limit  int64            // the grant's limit: the lowest of the marks that count (limitLocked)
	mark   int64            // highest window mark ever made; never lowered while running
	// cacheMark and regMark are the marks last persisted under the claim in
	// the cache and in the registry. A leased registry's covers the whole
	// lease (leaseUntil + Window), so that whoever takes the ID after the
	// lease starts above everything this server could stamp; the cache's
	// is a Window ahead, what a restart of this server trusts.
	cacheMark, regMark int64
	// leaseEnd: issuing stops here, the lease's expiry less LeaseMargin (a
	// monotonic reading). leaseUntil is the same expiry on the generator's
	// wall clock (Unix ms), for the cache; ttl is the lease's length as the
	// registry last granted it, which the next renewal's mark must cover.
	leaseEnd   time.Time
	leaseUntil int64
	ttl        time.Duration
	skewed     bool         // the last peer clock check measured more than MaxPeerSkew
	readings   peerReadings // the peers' readings at the last check, to tell live ones from stale
	hbErr      error        // the last heartbeat's error; nil once one succeeds
	status     leaf.WorkerStatus
	rate       ratemeter.Meter // samples of the issued count, one per heartbeat

	stop chan struct{}
	done chan struct{}
}

// errNotStarted is the grant of a worker that has no claim yet.
var errNotStarted = fmt.Errorf("%w: the snowflake worker has not claimed a worker ID yet", leaf.ErrNotReady)

func newWorker(s Config) *worker {
	w := &worker{
		s:    s,
		hb:   make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	w.status.Registry = s.RegistryName
	w.status.Endpoint = s.Endpoint.String()
	w.grants.Store(&grant{stop: errNotStarted})
	return w
}

// current is the grant in force.
func (w *worker) current() *grant { return w.grants.Load() }

// publishLocked replaces the grant with one built from the worker's state.
// Caller holds mu, so that grants are published in the order of the
// changes they reflect.
func (w *worker) publishLocked() {
	gr := &grant{
		worker:   w.claim.WorkerID,
		floor:    w.claim.HighWater,
		limit:    w.limit,
		leased:   w.leased(),
		leaseEnd: w.leaseEnd,
	}
	switch {
	case w.closed:
		gr.stop = errClosed
	case w.state == claimLost:
		gr.stop = errLost
	}
	w.grants.Store(gr)
}

// leased: the claim lapses unless renewed. Caller holds mu.
func (w *worker) leased() bool { return !w.claim.Expires.IsZero() }

// start claims a worker ID, checks the clock against the peers' and the
// claim's high-water mark, persists the first mark and starts the
// heartbeat loop.
func (w *worker) start(ctx context.Context) error {
	claim, fromCache, err := w.register(ctx, true)
	if err != nil {
		return err
	}
	if !fromCache {
		if err := w.checkPeers(ctx, true); err != nil {
			w.releaseClaim(ctx, claim, false)
			return err
		}
	}
	if err := w.waitForMark(ctx, claim); err != nil {
		w.releaseClaim(ctx, claim, fromCache)
		return err
	}
	w.adopt(claim, fromCache)
	if err := w.heartbeat(ctx); err != nil {
		w.releaseClaim(ctx, claim, fromCache)
		return fmt.Errorf("persist the first high-water mark: %w", err)
	}
	w.s.Logger.Info("snowflake worker started", "registry", w.s.RegistryName, "endpoint", w.s.Endpoint.String(),
		"worker_id", claim.WorkerID, "from_cache", fromCache, "layout", w.s.Layout.String())
	go w.loop()
	return nil
}

// register claims a worker ID from the registry, or from the cache when the
// registry cannot be reached and the cached lease has not run out.
func (w *worker) register(ctx context.Context, allowCache bool) (leaf.WorkerClaim, bool, error) {
	maxID := w.s.Layout.MaxWorkerID()
	timeout := w.s.RegistryTimeout
	if allowCache { // at start-up: a previous run's claim may need to lapse
		timeout += w.s.ClaimWait
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	claim, err := w.s.Registry.Register(rctx, w.s.Endpoint, maxID)
	cancel()
	if err == nil {
		if claim.WorkerID < 0 || claim.WorkerID > maxID {
			return claim, false, fmt.Errorf("%w: registry gave worker ID %d, outside the layout's [0, %d]",
				leaf.ErrWorkerIDsExhausted, claim.WorkerID, maxID)
		}
		if w.s.Cache != nil {
			if c, err := w.s.Cache.Load(); err == nil && c.WorkerID == claim.WorkerID {
				switch {
				case claim.Resumed:
					// Our own claim, held by no one since: our cache
					// knows what we stamped, to within a Window; the
					// registry's mark covers our whole lease.
					claim.HighWater = c.Mark
				case c.Mark > claim.HighWater:
					// The cache may know a later mark than the registry,
					// if the registry was unreachable during the last run.
					claim.HighWater = c.Mark
				}
			}
		}
		return claim, false, nil
	}
	// A registry that answered with a refusal is reachable: its word stands,
	// and the cache must not override it. Above all a live claim held by
	// another server: issuing under its worker ID would repeat its IDs.
	refused := errors.Is(err, leaf.ErrWorkerIDsExhausted) || errors.Is(err, leaf.ErrInvalidArgument) || errors.Is(err, leaf.ErrWorkerInUse)
	if !allowCache || w.s.Cache == nil || refused || ctx.Err() != nil {
		return claim, false, fmt.Errorf("register worker %s: %w", w.s.Endpoint, err)
	}
	c, cerr := w.s.Cache.Load()
	if cerr != nil {
		return claim, false, fmt.Errorf("register worker %s: %w; and no cached worker ID to fall back on: %w", w.s.Endpoint, err, cerr)
	}
	if c.WorkerID < 0 || c.WorkerID > maxID {
		return claim, false, fmt.Errorf("%w: cached worker ID %d is outside the layout's [0, %d]", leaf.ErrWorkerIDsExhausted, c.WorkerID, maxID)
	}
	// The cached ID is ours only inside the lease the registry last
	// granted: past it, another process may hold it.
	left := time.Duration(c.LeaseUntil-w.nowMs()) * time.Millisecond
	if c.LeaseUntil == 0 || left <= w.s.LeaseMargin {
		why := "the last run released it (or held no lease)"
		if c.LeaseUntil != 0 {
			why = "its cached lease ended at " + fmtMs(c.LeaseUntil)
		}
		return claim, false, fmt.Errorf("register worker %s: %w; the cached worker ID %d cannot be used: %s, so another server may hold it now",
			w.s.Endpoint, err, c.WorkerID, why)
	}
	w.s.Logger.Warn("snowflake registry unreachable; starting with the cached worker ID inside its cached lease",
		"worker_id", c.WorkerID, "cached_mark", fmtMs(c.Mark), "lease_until", fmtMs(c.LeaseUntil), "err", err)
	return leaf.WorkerClaim{WorkerID: c.WorkerID, HighWater: c.Mark, Expires: time.Now().Add(left)}, true, nil
}

// checkPeers compares the clock with the live peers' average, where the
// registry can list them, and records the result in the status. At start-up
// a skew beyond MaxPeerSkew is a refusal (ErrClockSkew): a server whose
// clock is far off would stamp IDs far out of order with its peers' and,
// once its clock is corrected, wait out or refuse everything it had stamped
// ahead. At runtime it makes the worker degraded and is logged once per
// change. Only live readings count: a peer whose published reading did not
// move since the last listing is left out (see liveSince), and a skew found
// at start-up is confirmed by a second listing before it refuses.
func (w *worker) checkPeers(ctx context.Context, starting bool) error {
	pr, ok := w.s.Registry.(PeerClockReader)
	if !ok || w.s.MaxPeerSkew == 0 {
		return nil
	}
	w.mu.Lock()
	skip := w.state != claimRegistered || w.closed
	prev := w.readings
	w.mu.Unlock()
	if skip && !starting {
		return nil
	}
	cur, err := w.listPeers(ctx, pr, starting)
	if err != nil {
		return nil
	}
	live, stale := cur.liveSince(prev)
	skew := averageSkew(live)
	over := skew > w.s.MaxPeerSkew || -skew > w.s.MaxPeerSkew
	if over && starting {
		// One listing cannot tell a skewed clock from peers whose
		// readings are old: after a registry outage their keys come back
		// with what they published before it, and the age reads as skew.
		// A refusal needs readings seen to move since a first listing.
		first := cur
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(peerConfirmWait(w.s.HeartbeatInterval)):
		}
		if cur, err = w.listPeers(ctx, pr, starting); err != nil {
			return nil
		}
		live, stale = cur.liveSince(first)
		skew = averageSkew(live)
		over = len(live) > 0 && (skew > w.s.MaxPeerSkew || -skew > w.s.MaxPeerSkew)
	}
	w.mu.Lock()
	was := w.skewed
	w.skewed = over
	w.readings = cur
	w.status.Peers = len(live)
	w.status.PeerSkewMs = skew.Milliseconds()
	w.status.PeerCheck = time.Now()
	w.mu.Unlock()
	if stale > 0 && starting {
		w.s.Logger.Warn("snowflake peer clock check left out peers whose published clock did not move: their servers are not heartbeating (stopped, or cut off from the registry) or the registry is recovering",
			"stale_peers", stale, "live_peers", len(live))
	}
	switch {
	case over && starting:
		return fmt.Errorf("%w: this server's clock is %v off the average of %d live peers' clocks, more than snowflake.max_peer_skew (%v); fix its time synchronisation (or raise max_peer_skew) and start again",
			leaf.ErrClockSkew, skew.Round(time.Millisecond), len(live), w.s.MaxPeerSkew)
	case over && !was:
		w.s.Logger.Error("snowflake clock has drifted from its peers", "skew", skew.Round(time.Millisecond), "peers", len(live), "max_peer_skew", w.s.MaxPeerSkew)
	case !over && was:
		w.s.Logger.Info("snowflake clock agrees with its peers again", "skew", skew.Round(time.Millisecond), "peers", len(live))
	case starting && len(live) > 0:
		w.s.Logger.Info("snowflake clock checked against live peers", "skew", skew.Round(time.Millisecond), "peers", len(live))
	}
	return nil
}

// listPeers reads the peers' clocks. An error from the registry is logged
// (at start-up) and skips the check: the check guards the clock, it must not
// make the registry a harder dependency than it is.
func (w *worker) listPeers(ctx context.Context, pr PeerClockReader, starting bool) (peerReadings, error) {
	rctx, cancel := context.WithTimeout(ctx, w.s.RegistryTimeout)
	peers, err := pr.PeerClocks(rctx)
	cancel()
	if err != nil {
		if starting && !errors.Is(err, errors.ErrUnsupported) {
			w.s.Logger.Warn("snowflake peer clock check skipped: the registry could not list the live peers", "err", err)
		}
		return nil, err
	}
	at := w.s.Now()
	out := make(peerReadings, len(peers))
	for _, p := range peers {
		out[peerKey{p.Endpoint, p.WorkerID}] = peerReading{offset: p.Offset, reading: at.Add(p.Offset)}
	}
	return out, nil
}

// peerConfirmWait is how long a starting server waits before listing the
// peers again to confirm a skew: two of their heartbeats (they run with the
// same interval as ours), so a live peer has published at least once since.
func peerConfirmWait(heartbeat time.Duration) time.Duration { return 2*heartbeat + heartbeat/2 }

type peerKey struct {
	endpoint string
	worker   int64
}

// peerReading is a peer's clock offset from ours and, from it, our estimate
// of the reading it published.
type peerReading struct {
	offset  time.Duration
	reading time.Time
}

type peerReadings map[peerKey]peerReading

// liveSince keeps the peers whose published reading moved since prev (or
// that prev does not hold: a first listing counts every peer). A peer that
// heartbeats publishes at least once between two checks, so its reading
// advances by about the time between them (or jumps, if its clock was
// stepped); a stale reading does not move at all, its offset only grows. It
// returns the live offsets and how many were left out.
func (cur peerReadings) liveSince(prev peerReadings) (live []time.Duration, stale int) {
	for k, r := range cur {
		p, seen := prev[k]
		if moved := r.reading.Sub(p.reading); seen && moved.Abs() < minAdvance(r, p) {
			stale++
			continue
		}
		live = append(live, r.offset)
	}
	return live, stale
}

// minAdvance is a quarter of the time between two listings: a live reading
// moves by at least the gap less one heartbeat (at most half the gap when
// the listings are peerConfirmWait or more apart), a stale one by the
// listings' measurement error only.
func minAdvance(cur, prev peerReading) time.Duration {
	gap := cur.reading.Add(-cur.offset).Sub(prev.reading.Add(-prev.offset))
	return gap / 4
}

// averageSkew is this clock minus the average of the peers' (offsets of
// their clocks from ours).
func averageSkew(offsets []time.Duration) time.Duration {
	if len(offsets) == 0 {
		return 0
	}
	var sum time.Duration
	for _, o := range offsets {
		sum += o
	}
	return -sum / time.Duration(len(offsets))
}

// maxStartupLag is how far the clock may be below a claim's mark and be
// waited out.
func (w *worker) maxStartupLag() time.Duration { return w.s.Window + w.s.StartupGrace }

// waitForMark makes sure the clock has passed the claim's high-water mark,
// waiting for it when it is close (a quick restart), refusing when it is far.
func (w *worker) waitForMark(ctx context.Context, claim leaf.WorkerClaim) error {
	for {
		behind := claim.HighWater - w.nowMs()
		if behind <= 0 {
			return nil
		}
		if time.Duration(behind)*time.Millisecond > w.maxStartupLag() {
			return fmt.Errorf("%w: the clock (%s) is %v behind the high-water mark %s stored for worker %d; IDs up to that time may already exist, so the server refuses to start until the clock passes it",
				leaf.ErrClockBackwards, fmtMs(w.nowMs()), time.Duration(behind)*time.Millisecond, fmtMs(claim.HighWater), claim.WorkerID)
		}
		if err := sleep(ctx, time.Duration(behind)*time.Millisecond); err != nil {
			return err
		}
	}
}

// releaseClaim gives back a claim that start or a re-registration could not
// use.
func (w *worker) releaseClaim(ctx context.Context, claim leaf.WorkerClaim, fromCache bool) {
	if fromCache {
		return
	}
	w.mu.Lock()
	mark := max(claim.HighWater, w.mark)
	w.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.s.RegistryTimeout)
	defer cancel()
	_ = w.s.Registry.Release(rctx, mark)
}

// adopt makes claim the worker's identity. IDs continue to increase across a
// change of worker ID, because the time part dominates and the issuer keeps
// its last millisecond; the claim's high-water mark becomes a floor for the
// next ID's time. Nothing may be issued under it until its first mark is
// persisted. A claim taken from the cache brings the cached lease, and the
// mark the registry holds for it (the lease's end plus a Window).
func (w *worker) adopt(claim leaf.WorkerClaim, fromCache bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claim = claim
	w.state = claimRegistered
	w.limit, w.cacheMark, w.regMark = 0, 0, 0
	w.leaseEnd, w.leaseUntil, w.ttl = time.Time{}, 0, 0
	if w.leased() {
		w.ttl = max(time.Until(claim.Expires), 0)
		w.leaseEnd = claim.Expires.Add(-w.s.LeaseMargin)
		w.leaseUntil = w.nowMs() + w.ttl.Milliseconds()
	}
	if fromCache {
		w.state = claimCached
		w.regMark = w.leaseUntil + w.s.Window.Milliseconds()
	}
	w.publishLocked()
}

// limitLocked moves the grant's limit to what the persisted marks allow,
// never past the layout's end, where the time part would overflow. A leased
// claim counts the registry's mark (whoever takes the ID next starts above
// it) and the cache's when there is one (a restart of this server trusts
// it); a claim without a lease counts the cache's when there is one, else
// the registry's. Caller holds mu.
func (w *worker) limitLocked() {
	lim := w.regMark
	switch {
	case w.s.Cache != nil && w.leased():
		lim = min(lim, w.cacheMark)
	case w.s.Cache != nil:
		lim = w.cacheMark
	}
	w.limit = max(w.limit, min(lim, w.s.Layout.End()))
	w.publishLocked()
}

func (w *worker) nowMs() int64 { return w.s.Now().UnixMilli() }

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// heartbeat moves the high-water mark to Window ahead of the clock and
// persists it (cache first, then registry), renewing the lease; on success
// IDs may be stamped up to the new limit (limitLocked). A leased claim sends
// the registry a mark that covers the lease this renewal grants. A lost or
// cache-only worker tries the registry again first.
func (w *worker) heartbeat(ctx context.Context) error {
	select {
	case w.hb <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the heartbeat in flight: %w", ctx.Err())
	}
	defer func() { <-w.hb }()

	w.mu.Lock()
	closed, state, id := w.closed, w.state, w.claim.WorkerID
	w.mu.Unlock()
	if closed {
		return errClosed
	}
	if state != claimRegistered {
		var err error
		if state, err = w.reregister(ctx, state, id); err != nil {
			w.recordHeartbeat(time.Now(), err)
			return err
		}
	}

	w.mu.Lock()
	leased, id, ttl := w.leased(), w.claim.WorkerID, w.ttl
	w.mu.Unlock()

	// The lease this renewal grants starts no earlier than now, on both
	// clocks: t0 for the monotonic end, t0ms for the marks.
	t0, t0ms := time.Now(), w.nowMs()
	var mark int64
	var cacheErr, regErr error
	if w.s.Cache != nil {
		mark, cacheErr = w.saveMark()
	} else {
		mark = w.nextMark()
	}
	send, until := mark, int64(0)
	var expires time.Time
	if state == claimRegistered {
		if leased {
			until = t0ms + ttl.Milliseconds()
			send = max(mark, until+w.s.Window.Milliseconds())
		}
		rctx, cancel := context.WithTimeout(ctx, w.s.RegistryTimeout)
		expires, regErr = w.s.Registry.Heartbeat(rctx, send)
		cancel()
		if regErr == nil && leased && expires.IsZero() {
			regErr = fmt.Errorf("%w: the registry renewed a leased claim without an expiry", leaf.ErrWorkerLost)
		}
		if regErr != nil {
			regErr = fmt.Errorf("registry heartbeat: %w", regErr)
		}
	}

	w.mu.Lock()
	switch {
	case errors.Is(regErr, leaf.ErrWorkerLost):
		w.state = claimLost
		w.publishLocked()
		w.s.Logger.Error("snowflake worker ID lost; stopped issuing", "worker_id", id, "err", regErr)
	case regErr == nil && state == claimRegistered && w.claim.WorkerID == id:
		w.regMark = max(w.regMark, send)
		if leased {
			// The mark sent covers the lease up to t0 + ttl: never issue
			// past it, even if the registry granted longer.
			end := t0.Add(ttl)
			if expires.Before(end) {
				end = expires
			}
			w.leaseEnd = end.Add(-w.s.LeaseMargin)
			w.leaseUntil = until
			if d := expires.Sub(t0); d > 0 {
				w.ttl = d
			}
		}
		w.limitLocked()
	}
	w.mu.Unlock()
	err := errors.Join(regErr, cacheErr)
	w.recordHeartbeat(t0, err)
	if w.s.Cache == nil || leased {
		return regErr
	}
	return cacheErr
}

// reregister tries the registry again for a worker whose claim is lost or
// only cached, and returns the state to carry on in; an error when the
// heartbeat must stop here. Caller holds the heartbeat token.
func (w *worker) reregister(ctx context.Context, state claimState, id int64) (claimState, error) {
	claim, _, err := w.register(ctx, false)
	switch {
	case err != nil && state == claimLost:
		return state, err
	case errors.Is(err, leaf.ErrWorkerInUse):
		// Started on the cached ID while the registry was down, and the
		// registry now says another live server holds it: stop at once.
		w.mu.Lock()
		w.state = claimLost
		w.publishLocked()
		w.mu.Unlock()
		w.s.Logger.Error("snowflake worker ID is held by another live server; stopped issuing", "worker_id", id, "err", err)
		return claimLost, err
	case err != nil:
		// Still unreachable: carry on with the cached ID.
		return state, nil
	case claim.HighWater > w.nowMs()+w.maxStartupLag().Milliseconds():
		// IDs would wait far too long for this ID's mark; hand it back.
		w.releaseClaim(ctx, claim, false)
		return state, fmt.Errorf("%w: re-registered worker %d has a high-water mark %s far ahead of the clock",
			leaf.ErrClockBackwards, claim.WorkerID, fmtMs(claim.HighWater))
	}
	if state == claimCached && claim.WorkerID != id {
		w.s.Logger.Warn("snowflake registry is back and assigns another worker ID; switching",
			"cached_worker_id", id, "worker_id", claim.WorkerID)
	} else {
		w.s.Logger.Info("snowflake worker registered", "worker_id", claim.WorkerID)
	}
	w.adopt(claim, false)
	return claimRegistered, nil
}

// nextMark moves the mark to Window ahead of the clock (or of the last ID,
// or the claim's floor, if the clock is behind them) and returns it. The
// mark never goes down while the worker runs: an ID may have been issued up
// to any mark sent.
func (w *worker) nextMark() int64 {
	last := w.issued.lastMs()
	w.mu.Lock()
	defer w.mu.Unlock()
	from := max(w.s.Now().UnixMilli(), last+1, w.claim.HighWater)
	w.mark = max(w.mark, from+w.s.Window.Milliseconds())
	return w.mark
}

// saveMark persists a new mark to the cache alone, with the lease's end as
// last granted, and lets IDs be issued up to what the marks allow. The
// cache moves the limit without the registry, so a registry that hangs
// never stops issuing: for ever without a lease, until its end with one.
func (w *worker) saveMark() (int64, error) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	w.mu.Lock()
	id, until := w.claim.WorkerID, w.leaseUntil
	w.mu.Unlock()
	mark := w.nextMark()
	if err := w.s.Cache.Save(leaf.CachedClaim{WorkerID: id, Mark: mark, LeaseUntil: until}); err != nil {
		return mark, fmt.Errorf("save worker cache: %w", err)
	}
	w.mu.Lock()
	if w.claim.WorkerID == id && w.state != claimLost {
		w.cacheMark = max(w.cacheMark, mark)
		w.limitLocked()
	}
	w.mu.Unlock()
	return mark, nil
}

// extend moves the limit when an ID reaches it: through the cache alone when
// that is enough (fast, and independent of the registry), else through a
// full heartbeat. While the heartbeats fail it does not try the registry at
// all: the loop retries every interval, and a request that queued behind a
// registry call which the loop already knows to be failing would only wait
// out ctx to learn the same.
func (w *worker) extend(ctx context.Context) error {
	w.mu.Lock()
	lost, leased, id := w.state == claimLost, w.leased(), w.claim.WorkerID
	leaseOver := leased && !time.Now().Before(w.leaseEnd)
	failing := w.hbErr
	w.mu.Unlock()
	if w.s.Cache != nil && !lost && !leaseOver {
		if _, err := w.saveMark(); err != nil {
			return err
		}
		if w.current().limit > w.nowMs() {
			return nil
		}
	}
	err := failing
	if err != nil {
		err = fmt.Errorf("the registry heartbeat is failing: %w", err)
	} else {
		err = w.heartbeat(ctx)
	}
	if err != nil && leaseOver {
		w.mu.Lock()
		until := w.leaseUntil
		w.mu.Unlock()
		return fmt.Errorf("%w: the lease on worker %d ran out at %s and the registry has not renewed it: %w", leaf.ErrLeaseExpired, id, fmtMs(until), err)
	}
	return err
}

func (w *worker) recordHeartbeat(at time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status.LastHeartbeat = at
	w.hbErr = err
	if err != nil {
		w.status.HeartbeatFailures++
		w.status.HeartbeatError = err.Error()
	} else {
		w.status.HeartbeatError = ""
	}
}

// loop runs the heartbeat until close.
func (w *worker) loop() {
	defer close(w.done)
	t := time.NewTicker(w.s.HeartbeatInterval)
	defer t.Stop()
	failing := false
	nextPeerCheck := time.Now().Add(w.s.PeerCheckInterval)
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if now := time.Now(); !now.Before(nextPeerCheck) {
			nextPeerCheck = now.Add(w.s.PeerCheckInterval)
			ctx, cancel := context.WithTimeout(context.Background(), w.s.RegistryTimeout)
			_ = w.checkPeers(ctx, false)
			cancel()
		}
		n := w.issued.issuedCount()
		w.mu.Lock()
		w.rate.Sample(w.s.Now(), n)
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), w.s.RegistryTimeout)
		err := w.heartbeat(ctx)
		cancel()
		// One log line per change, not one per second.
		if err != nil && !failing {
			w.s.Logger.Warn("snowflake heartbeat failing", "err", err)
		} else if err == nil && failing {
			w.s.Logger.Info("snowflake heartbeat recovered")
		}
		failing = err != nil
	}
}

// close stops issuing and the heartbeat, then stores the final high-water
// mark (just after the last ID issued) in the cache and the registry, and
// releases the claim: a leased ID returns to the pool.
func (w *worker) close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.publishLocked()
	w.mu.Unlock()
	close(w.stop)
	// The loop may be inside a registry call that hangs for up to
	// RegistryTimeout; shutdown has its own budget. Skipping the release is
	// safe: the last mark persisted is ahead of every ID issued, as after a
	// crash, and a lease simply runs out.
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("release worker: waiting for the heartbeat loop: %w", ctx.Err())
	}

	select {
	case w.hb <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("release worker: waiting for the heartbeat in flight: %w", ctx.Err())
	}
	defer func() { <-w.hb }()
	// The closed grant is published: the issuer's last millisecond is final.
	last := w.issued.lastMs()
	w.mu.Lock()
	id, state, until, failing := w.claim.WorkerID, w.state, w.leaseUntil, w.hbErr
	// No ID is stamped at or after final; nor, under this claim, before the
	// claim's mark.
	final := max(last+1, w.claim.HighWater)
	w.mu.Unlock()
	if state == claimLost {
		return nil
	}
	// With the registry failing (or never reached), the claim is not
	// released: it stays ours until its lease runs out, and the cache
	// keeps that lease, so that a restart while the registry is still down
	// starts on it. Otherwise the lease is given up in the cache first: a
	// restart that finds the registry down must not take the ID back from
	// the cache once the registry may hand it to someone else (a Release
	// that timed out may have been applied).
	release := state == claimRegistered && failing == nil
	if release {
		until = 0
	}
	var errs []error
	if w.s.Cache != nil {
		if err := w.s.Cache.Save(leaf.CachedClaim{WorkerID: id, Mark: final, LeaseUntil: until}); err != nil {
			errs = append(errs, fmt.Errorf("save worker cache: %w", err))
		}
	}
	if release {
		rctx, cancel := context.WithTimeout(ctx, w.s.RegistryTimeout)
		if err := w.s.Registry.Release(rctx, final); err != nil {
			errs = append(errs, fmt.Errorf("release worker %d: %w", id, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// fillStatus fills the worker's part of st; st.Issued is the issuer's count,
// for the rate.
func (w *worker) fillStatus(st *leaf.WorkerStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.status
	st.Registry, st.Endpoint = s.Registry, s.Endpoint
	st.LastHeartbeat, st.HeartbeatError, st.HeartbeatFailures = s.LastHeartbeat, s.HeartbeatError, s.HeartbeatFailures
	st.Peers, st.PeerSkewMs, st.PeerCheck = s.Peers, s.PeerSkewMs, s.PeerCheck
	st.WorkerID, st.FromCache, st.HighWater = w.claim.WorkerID, w.state == claimCached, w.mark
	if w.state == claimLost {
		st.WorkerID = -1
	}
	if w.leased() {
		st.LeaseExpires = w.leaseEnd.Add(w.s.LeaseMargin)
	}
	st.Rate = w.rate.Rate(w.s.Now(), st.Issued)
}

// degraded lists the worker's reasons it is not fully healthy, and the peer
// clock's apart: the generator lists the issuer's between them.
func (w *worker) degraded() (claim []string, peers string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		claim = append(claim, "snowflake generator closed")
	case w.state == claimLost:
		claim = append(claim, "snowflake worker ID lost; re-registering")
	case w.state == claimCached:
		claim = append(claim, fmt.Sprintf("snowflake registry unreachable at start-up, issuing on the cached worker ID %d until its cached lease ends at %s",
			w.claim.WorkerID, fmtMs(w.leaseUntil)))
	}
	if w.status.HeartbeatError != "" {
		// The lease's state in the summary, the cause after ": ", which
		// /readyz leaves out.
		why := "snowflake heartbeat failing"
		if w.leased() && w.state != claimLost {
			if left := time.Until(w.leaseEnd); left > 0 {
				why += fmt.Sprintf(", issuing until the lease ends in %v", left.Round(time.Second))
			} else {
				why += ", the lease has run out and no IDs are issued until a renewal succeeds"
			}
		}
		claim = append(claim, why+": "+w.status.HeartbeatError)
	}
	if w.skewed {
		peers = fmt.Sprintf("snowflake clock is %dms off the average of %d live peers, more than %v",
			w.status.PeerSkewMs, w.status.Peers, w.s.MaxPeerSkew)
	}
	return claim, peers
}
