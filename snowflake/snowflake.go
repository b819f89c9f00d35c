// Package snowflake is leaf's snowflake-mode generator: IDs made of
// milliseconds, a worker ID and a sequence (Java Leaf's layout by default),
// with a worker ID claimed from a leaf.WorkerRegistry.
//
// It differs from Java Leaf where Leaf can duplicate:
//
//   - A time high-water mark is persisted (to the registry and the local
//     cache) ahead of issuing: the generator never issues an ID stamped at or
//     after the mark it last persisted, and a new holder of the worker ID
//     refuses to start while its clock is below that mark. Leaf reports the
//     time behind its IDs, every 3 s, so a restart after a small rollback can
//     repeat IDs (Leaf#216).
//   - A registry unreachable at start-up is survived with the cached worker
//     ID only if the clock is past the cached mark (Leaf#97).
//   - A leased worker ID (zookeeper-recycle, etcd) stops issuing before its
//     lease can expire, so the registry may hand it to another server.
//   - Every wait is bounded: a clock going back while waiting for the next
//     millisecond is noticed (Leaf#153).
//
// One mutex guards the state; at 12 sequence bits the clock, not the lock,
// limits throughput (4,096,000 IDs/s).
package snowflake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/ratemeter"
)

// PeerClockReader is implemented by registries that see the other live
// servers and can measure their clocks (Meituan's leaf_temporary check).
// A registry that cannot, this time (a lazily opened one whose backend has
// no such listing), answers an error wrapping errors.ErrUnsupported.
type PeerClockReader interface {
	// PeerClocks returns every other live server's clock offset from this
	// server's clock. Called only while this server holds a claim.
	PeerClocks(ctx context.Context) ([]leaf.PeerClock, error)
}

// WorkerCache keeps a worker ID and its high-water mark on local disk, so a
// server can start while its registry is down. local.Cache implements it.
type WorkerCache interface {
	// Load returns the cached worker ID and mark (Unix ms); an error wrapping
	// fs.ErrNotExist when nothing is cached.
	Load() (workerID, mark int64, err error)
	// Save stores them durably before returning.
	Save(workerID, mark int64) error
}

// Settings configure a Generator. Registry and Endpoint are required; every
// other zero value means the default given.
type Settings struct {
	// Layout of the IDs; zero means LeafLayout.
	Layout Layout
	// Registry hands out the worker ID. The Generator does not close it.
	Registry leaf.WorkerRegistry
	// RegistryName is reported in Status ("zookeeper", "etcd", ...).
	RegistryName string
	// Endpoint is this server's ip:port as the registry knows it.
	Endpoint leaf.Endpoint
	// Cache, if set, receives the worker ID and every high-water mark of an
	// ID held without a lease, and provides the worker ID when the registry
	// is unreachable at start-up. Leave it nil for registries that lease IDs:
	// a cached leased ID may be someone else's by now.
	Cache WorkerCache
	// MaxBackwards is the largest clock step backwards that is waited out;
	// beyond it NextID fails with ErrClockBackwards. Default 5ms (Leaf's).
	// Negative: never wait.
	MaxBackwards time.Duration
	// NoRandomStart starts each millisecond's sequence at 0 instead of a
	// random number in [0, 100), which Leaf uses to spread IDs for id%n
	// sharding at low traffic.
	NoRandomStart bool
	// Window is how far ahead of the clock the high-water mark is persisted.
	// Default 3s. A restart waits out at most this long.
	Window time.Duration
	// HeartbeatInterval is how often the mark is moved forward and the lease
	// renewed. Default 1s; it must be shorter than Window.
	HeartbeatInterval time.Duration
	// StartupWait is how far the clock may be below the stored mark at
	// start-up and be waited out; further is a refusal to start. Default
	// Window plus one second, which covers a quick restart.
	StartupWait time.Duration
	// LeaseMargin: issuing stops this long before the lease expires, to allow
	// for clock drift between this server and the registry. Default 500ms.
	LeaseMargin time.Duration
	// RegistryTimeout bounds each registry call. Default 5s.
	RegistryTimeout time.Duration
	// Lifetime is how long the layout must last from now; a layout whose end
	// comes sooner is refused. Default 10 years.
	Lifetime time.Duration
	// ClaimWait is how much longer than RegistryTimeout the first Register
	// may take: a registry whose live claim for this endpoint is still held
	// by a previous run of this server (killed without releasing it) waits
	// for that claim to lapse. The registry knows the bound (its session
	// timeout or lease TTL); default 0.
	ClaimWait time.Duration
	// MaxPeerSkew is how far this server's clock may be from the average of
	// the live peers' clocks (registries that can list them implement
	// PeerClockReader). Beyond it New refuses to start with ErrClockSkew, and
	// a running worker reports itself degraded. Default 5s: well above the
	// measurement error (at most one heartbeat interval, on etcd), well below
	// what a broken time sync produces. Negative: no check.
	MaxPeerSkew time.Duration
	// PeerCheckInterval is how often a running worker compares its clock with
	// its peers'. Default 10s.
	PeerCheckInterval time.Duration
	// Now is the clock; nil means time.Now. Tests step it.
	Now    func() time.Time
	Logger *slog.Logger
}

func (s *Settings) defaults() error {
	if s.Layout == (Layout{}) {
		s.Layout = LeafLayout
	}
	if err := s.Layout.Validate(); err != nil {
		return err
	}
	if s.Registry == nil {
		return fmt.Errorf("%w: snowflake: no worker registry", leaf.ErrInvalidArgument)
	}
	if err := s.Endpoint.Validate(); err != nil {
		return err
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.MaxBackwards, 5*time.Millisecond)
	def(&s.Window, 3*time.Second)
	def(&s.HeartbeatInterval, time.Second)
	def(&s.StartupWait, s.Window+time.Second)
	def(&s.LeaseMargin, 500*time.Millisecond)
	def(&s.MaxPeerSkew, 5*time.Second)
	def(&s.PeerCheckInterval, 10*time.Second)
	def(&s.RegistryTimeout, 5*time.Second)
	def(&s.Lifetime, 10*365*24*time.Hour)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"window", s.Window}, {"heartbeat interval", s.HeartbeatInterval}, {"startup wait", s.StartupWait},
		{"lease margin", s.LeaseMargin}, {"registry timeout", s.RegistryTimeout}, {"lifetime", s.Lifetime}} {
		if d.v < 0 {
			return fmt.Errorf("%w: snowflake %s %v is negative", leaf.ErrInvalidArgument, d.name, d.v)
		}
	}
	if s.HeartbeatInterval >= s.Window {
		return fmt.Errorf("%w: snowflake heartbeat interval %v must be shorter than the window %v",
			leaf.ErrInvalidArgument, s.HeartbeatInterval, s.Window)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return nil
}

// Generator issues snowflake IDs. It is safe for concurrent use.
type Generator struct {
	s      Settings
	layout Layout
	maxSeq int64

	// hb serialises heartbeats (the loop, New, and extends on leased
	// registries): a channel of one token rather than a mutex, so that a
	// request waits for it no longer than its deadline.
	hb      chan struct{}
	cacheMu sync.Mutex // serialises cache writes and the limits they allow

	mu        sync.Mutex
	worker    int64 // the claimed ID; see lost
	last      int64 // Unix ms of the last ID issued (or the floor a claim imposes)
	seq       int64 // sequence of the last ID issued
	exhausted bool  // the last millisecond ran out of sequence: start the next at 0
	limit     int64 // no ID may be stamped at or after this Unix ms
	mark      int64 // highest mark ever sent for persistence; never lowered while running
	leased    bool
	leaseEnd  time.Time // issuing stops here: the lease's expiry less LeaseMargin
	fromCache bool      // registered from the cache; the registry has not confirmed yet
	lost      bool
	closed    bool
	inRoll    bool  // currently behind the last issued ID
	skewed    bool  // the last peer clock check measured more than MaxPeerSkew
	hbErr     error // the last heartbeat's error; nil once one succeeds
	status    leaf.WorkerStatus
	rate      ratemeter.Meter // samples of status.Issued, one per heartbeat

	stop chan struct{}
	done chan struct{}
}

var errLimit = errors.New("high-water mark reached")

// New claims a worker ID, checks the clock against the claim's high-water
// mark, persists the first mark and starts the heartbeat. It fails with
// ErrClockBackwards when the clock is further below the stored mark than
// StartupWait, and with the registry's error when the registry is
// unreachable and no usable cached ID exists.
func New(ctx context.Context, s Settings) (*Generator, error) {
	if err := s.defaults(); err != nil {
		return nil, err
	}
	g := &Generator{
		s:      s,
		layout: s.Layout,
		maxSeq: s.Layout.MaxSequence(),
		hb:     make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	g.status.Registry = s.RegistryName
	g.status.Endpoint = s.Endpoint.String()

	now := g.nowMs()
	if now < s.Layout.Epoch {
		return nil, fmt.Errorf("%w: the clock (%s) is before the layout's epoch (%s)",
			leaf.ErrClockBackwards, fmtMs(now), fmtMs(s.Layout.Epoch))
	}
	if end := s.Layout.End(); end-now < s.Lifetime.Milliseconds() {
		return nil, fmt.Errorf("%w: layout %s runs out at %s, less than the required lifetime %v from now",
			leaf.ErrInvalidArgument, s.Layout, fmtMs(end), s.Lifetime)
	}

	claim, fromCache, err := g.register(ctx, true)
	if err != nil {
		return nil, err
	}
	if !fromCache {
		if err := g.checkPeers(ctx, true); err != nil {
			g.releaseClaim(ctx, claim, false)
			return nil, err
		}
	}
	if err := g.waitForMark(ctx, claim); err != nil {
		g.releaseClaim(ctx, claim, fromCache)
		return nil, err
	}
	g.adopt(claim, fromCache)
	if err := g.heartbeat(ctx); err != nil {
		g.releaseClaim(ctx, claim, fromCache)
		return nil, fmt.Errorf("persist the first high-water mark: %w", err)
	}
	s.Logger.Info("snowflake worker started", "registry", s.RegistryName, "endpoint", s.Endpoint.String(),
		"worker_id", claim.WorkerID, "from_cache", fromCache, "layout", s.Layout.String())
	go g.loop()
	return g, nil
}

// register claims a worker ID from the registry, or from the cache when the
// registry cannot be reached.
func (g *Generator) register(ctx context.Context, allowCache bool) (leaf.WorkerClaim, bool, error) {
	maxID := g.layout.MaxWorkerID()
	timeout := g.s.RegistryTimeout
	if allowCache { // at start-up: a previous run's claim may need to lapse
		timeout += g.s.ClaimWait
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	claim, err := g.s.Registry.Register(rctx, g.s.Endpoint, maxID)
	cancel()
	if err == nil {
		if claim.WorkerID < 0 || claim.WorkerID > maxID {
			return claim, false, fmt.Errorf("%w: registry gave worker ID %d, outside the layout's [0, %d]",
				leaf.ErrWorkerIDsExhausted, claim.WorkerID, maxID)
		}
		if g.s.Cache != nil {
			// The cache may know a later mark than the registry, if the
			// registry was unreachable during the last run.
			if id, mark, err := g.s.Cache.Load(); err == nil && id == claim.WorkerID && mark > claim.HighWater {
				claim.HighWater = mark
			}
		}
		return claim, false, nil
	}
	// A registry that answered with a refusal is reachable: its word stands,
	// and the cache must not override it. Above all a live claim held by
	// another server: issuing under its worker ID would repeat its IDs.
	refused := errors.Is(err, leaf.ErrWorkerIDsExhausted) || errors.Is(err, leaf.ErrInvalidArgument) || errors.Is(err, leaf.ErrWorkerInUse)
	if !allowCache || g.s.Cache == nil || refused || ctx.Err() != nil {
		return claim, false, fmt.Errorf("register worker %s: %w", g.s.Endpoint, err)
	}
	id, mark, cerr := g.s.Cache.Load()
	if cerr != nil {
		return claim, false, fmt.Errorf("register worker %s: %w; and no cached worker ID to fall back on: %w", g.s.Endpoint, err, cerr)
	}
	if id < 0 || id > maxID {
		return claim, false, fmt.Errorf("%w: cached worker ID %d is outside the layout's [0, %d]", leaf.ErrWorkerIDsExhausted, id, maxID)
	}
	g.s.Logger.Warn("snowflake registry unreachable; starting with the cached worker ID",
		"worker_id", id, "cached_mark", fmtMs(mark), "err", err)
	return leaf.WorkerClaim{WorkerID: id, HighWater: mark}, true, nil
}

// checkPeers compares the clock with the live peers' average, where the
// registry can list them, and records the result in the status. At start-up
// a skew beyond MaxPeerSkew is a refusal (ErrClockSkew): a server whose
// clock is far off would stamp IDs far out of order with its peers' and,
// once its clock is corrected, wait out or refuse everything it had stamped
// ahead. At runtime it makes the worker degraded and is logged once per
// change. An error from the registry is logged and skips the check: the
// check guards the clock, it must not make the registry a harder dependency
// than it is.
func (g *Generator) checkPeers(ctx context.Context, starting bool) error {
	pr, ok := g.s.Registry.(PeerClockReader)
	if !ok || g.s.MaxPeerSkew < 0 {
		return nil
	}
	g.mu.Lock()
	skip := g.lost || g.fromCache || g.closed
	g.mu.Unlock()
	if skip && !starting {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, g.s.RegistryTimeout)
	peers, err := pr.PeerClocks(rctx)
	cancel()
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		if starting {
			g.s.Logger.Warn("snowflake peer clock check skipped: the registry could not list the live peers", "err", err)
		}
		return nil
	}
	var sum time.Duration
	for _, p := range peers {
		sum += p.Offset
	}
	var skew time.Duration // this clock minus the peers' average
	if len(peers) > 0 {
		skew = -sum / time.Duration(len(peers))
	}
	over := skew > g.s.MaxPeerSkew || -skew > g.s.MaxPeerSkew
	g.mu.Lock()
	was := g.skewed
	g.skewed = over
	g.status.Peers = len(peers)
	g.status.PeerSkewMs = skew.Milliseconds()
	g.status.PeerCheck = time.Now()
	g.mu.Unlock()
	switch {
	case over && starting:
		return fmt.Errorf("%w: this server's clock is %v off the average of %d live peers' clocks, more than snowflake.max_peer_skew (%v); fix its time synchronisation (or raise max_peer_skew) and start again",
			leaf.ErrClockSkew, skew.Round(time.Millisecond), len(peers), g.s.MaxPeerSkew)
	case over && !was:
		g.s.Logger.Error("snowflake clock has drifted from its peers", "skew", skew.Round(time.Millisecond), "peers", len(peers), "max_peer_skew", g.s.MaxPeerSkew)
	case !over && was:
		g.s.Logger.Info("snowflake clock agrees with its peers again", "skew", skew.Round(time.Millisecond), "peers", len(peers))
	case starting && len(peers) > 0:
		g.s.Logger.Info("snowflake clock checked against live peers", "skew", skew.Round(time.Millisecond), "peers", len(peers))
	}
	return nil
}

// waitForMark makes sure the clock has passed the claim's high-water mark,
// waiting for it when it is close (a quick restart), refusing when it is far.
func (g *Generator) waitForMark(ctx context.Context, claim leaf.WorkerClaim) error {
	for {
		behind := claim.HighWater - g.nowMs()
		if behind <= 0 {
			return nil
		}
		if time.Duration(behind)*time.Millisecond > g.s.StartupWait {
			return fmt.Errorf("%w: the clock (%s) is %v behind the high-water mark %s stored for worker %d; IDs up to that time may already exist, so the server refuses to start until the clock passes it",
				leaf.ErrClockBackwards, fmtMs(g.nowMs()), time.Duration(behind)*time.Millisecond, fmtMs(claim.HighWater), claim.WorkerID)
		}
		t := time.NewTimer(time.Duration(behind) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// releaseClaim gives back a claim New could not use.
func (g *Generator) releaseClaim(ctx context.Context, claim leaf.WorkerClaim, fromCache bool) {
	if fromCache {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.s.RegistryTimeout)
	defer cancel()
	_ = g.s.Registry.Release(rctx, max(claim.HighWater, g.mark))
}

// adopt makes claim the worker's identity. IDs continue to increase across a
// change of worker ID, because the time part dominates and last is kept; the
// claim's high-water mark becomes a floor for the next ID's time.
func (g *Generator) adopt(claim leaf.WorkerClaim, fromCache bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.worker = claim.WorkerID
	if floor := claim.HighWater - 1; floor > g.last {
		g.last = floor
		g.seq = g.maxSeq // the floor millisecond itself is not ours
	}
	g.leased = !claim.Expires.IsZero()
	g.leaseEnd = claim.Expires.Add(-g.s.LeaseMargin)
	g.fromCache = fromCache
	g.lost = false
	g.limit = 0 // until the first mark for this claim is persisted
}

func (g *Generator) nowMs() int64 { return g.s.Now().UnixMilli() }

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// Decode takes an ID apart with the generator's layout.
func (g *Generator) Decode(id int64) (leaf.SnowflakeParts, error) { return g.layout.Decode(id) }

// NextID issues one ID. The key is ignored, as in Leaf.
func (g *Generator) NextID(ctx context.Context, _ string) (int64, error) {
	// The clock is read under the lock: read before it, a reading could be
	// older than the last ID by the time the lock is ours, a false rollback.
	g.mu.Lock()
	t := g.s.Now()
	id, err := g.next(t, t.UnixMilli())
	g.mu.Unlock()
	if err == nil {
		return id, nil
	}
	var one [1]int64
	ids, err := g.fill(ctx, one[:0], 1, err)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextIDs appends n strictly increasing IDs to dst. A batch that fails part
// way returns dst unchanged; the IDs it had issued are never issued again.
func (g *Generator) NextIDs(ctx context.Context, _ string, n int, dst []int64) ([]int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return dst, err
	}
	return g.fill(ctx, slices.Grow(dst, n), len(dst)+n, nil)
}

// Bounds of one request's waits: small rollbacks are waited out for at most
// waitBudget in all (a clock stepping back again and again is not waited on
// for ever), and an exhausted high-water mark is extended at most
// maxExtends times, each waiting for the registry at most extendBudget.
const (
	waitBudget   = time.Second
	maxExtends   = 3
	extendBudget = time.Second
)

// fill issues IDs until dst holds want of them. prev is the error that
// stopped a fast path already, if any.
func (g *Generator) fill(ctx context.Context, dst []int64, want int, prev error) ([]int64, error) {
	start := len(dst)
	err := prev
	var waited time.Duration
	extends := 0
	for {
		if err != nil {
			var wb *waitBackwards
			var used *msUsedUp
			switch {
			case errors.As(err, &wb):
				if waited += wb.d; waited > waitBudget {
					return dst[:start], fmt.Errorf("%w: it kept stepping back for over %v", leaf.ErrClockBackwards, waitBudget)
				}
				if serr := sleep(ctx, wb.d); serr != nil {
					return dst[:start], serr
				}
			case errors.As(err, &used):
				if werr := g.waitPast(used.ms); werr != nil {
					return dst[:start], werr
				}
				// Less than a millisecond, as the spin under the lock it
				// replaces: no reason to fail a request that is late already.
				err = nil
				continue
			case errors.Is(err, errLimit):
				if extends++; extends > maxExtends {
					return dst[:start], fmt.Errorf("%w: the high-water mark does not keep ahead of the clock", leaf.ErrNotReady)
				}
				if herr := g.extend(ctx); herr != nil {
					return dst[:start], fmt.Errorf("%w: cannot persist the high-water mark ahead of the clock: %w", leaf.ErrNotReady, herr)
				}
			default:
				return dst[:start], err
			}
			// A wait that outlived the caller's deadline serves no one.
			if cerr := ctx.Err(); cerr != nil {
				return dst[:start], fmt.Errorf("%w: %w", leaf.ErrNotReady, cerr)
			}
		}
		// One clock reading serves a run of IDs up to the end of its
		// millisecond's sequence; the lock is not held across milliseconds.
		g.mu.Lock()
		t := g.s.Now()
		ms := t.UnixMilli()
		err = nil
		for len(dst) < want {
			var id int64
			if id, err = g.next(t, ms); err != nil {
				break
			}
			dst = append(dst, id)
		}
		g.mu.Unlock()
		if err == nil {
			return dst, nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// msUsedUp is returned by next when the sequence of millisecond ms is used
// up: the caller waits for the next millisecond without the lock, so that a
// large batch does not keep every other request waiting while the clock
// advances (a batch of 10,000 spans at least three milliseconds).
type msUsedUp struct{ ms int64 }

func (u *msUsedUp) Error() string { return "the sequence of " + fmtMs(u.ms) + " is used up" }

// waitPast waits, without the lock, until the clock leaves millisecond ms
// (forward, or back: next then deals with the rollback). It yields rather
// than sleeps: time.Sleep wakes no sooner than ~1.1ms here, which would cost
// a saturated worker a millisecond of sequence at every boundary, while a
// yield loop costs this goroutine's CPU for the rest of one millisecond at
// most and holds nothing another request needs. A clock that does not
// advance at all (a stuck clock, Leaf#153) is given up on after waitBudget.
func (g *Generator) waitPast(ms int64) error {
	began := time.Now()
	for i := 0; g.nowMs() == ms; i++ {
		if i%64 == 63 && time.Since(began) > waitBudget {
			return fmt.Errorf("%w: the clock has not advanced past %s", leaf.ErrNotReady, fmtMs(ms))
		}
		runtime.Gosched()
	}
	return nil
}

// waitBackwards is returned by next when the clock is behind the last ID by
// at most MaxBackwards: the caller waits d and tries again.
type waitBackwards struct{ d time.Duration }

func (w *waitBackwards) Error() string { return "clock behind by " + w.d.String() }

// next issues one ID stamped now (t's millisecond), or says why it cannot:
// msUsedUp when that millisecond's sequence is used up. Caller holds mu.
func (g *Generator) next(t time.Time, now int64) (int64, error) {
	if g.closed {
		return 0, fmt.Errorf("snowflake generator: %w", leaf.ErrClosed)
	}
	// A lease is timed on t's monotonic reading (when the clock is the real
	// one), so a wall clock stepping back cannot stretch it.
	if g.leased && !t.Before(g.leaseEnd) {
		return 0, g.limitError(now)
	}
	if now < g.last {
		back := g.last - now
		if !g.inRoll {
			g.inRoll = true
			g.status.Rollbacks++
			g.status.MaxRollbackMs = max(g.status.MaxRollbackMs, back)
			g.status.RollbackMs += back
			g.s.Logger.Warn("snowflake clock moved backwards", "by_ms", back, "worker_id", g.worker)
		}
		if time.Duration(back)*time.Millisecond <= g.s.MaxBackwards {
			return 0, &waitBackwards{time.Duration(back) * time.Millisecond}
		}
		return 0, fmt.Errorf("%w: by %dms, more than the %v waited out; no IDs until the clock passes %s",
			leaf.ErrClockBackwards, back, g.s.MaxBackwards, fmtMs(g.last))
	}
	g.inRoll = false
	if now >= g.limit {
		return 0, g.limitError(now)
	}
	if now == g.last {
		if g.seq < g.maxSeq {
			g.seq++
			return g.issue(now), nil
		}
		g.exhausted = true
		return 0, &msUsedUp{now}
	}
	// A new millisecond. After a used-up one, traffic is saturating: start
	// at 0 and keep the whole sequence space; otherwise a random start
	// spreads IDs for id%n sharding, as Leaf does.
	g.seq = 0
	if !g.exhausted && !g.s.NoRandomStart {
		g.seq = rand.Int64N(min(100, g.maxSeq+1))
	}
	g.exhausted = false
	g.last = now
	return g.issue(now), nil
}

func (g *Generator) issue(now int64) int64 {
	g.status.Issued++
	return g.layout.compose(now, g.worker, g.seq)
}

// limitError says why no ID may be stamped at now.
func (g *Generator) limitError(now int64) error {
	switch {
	case g.lost:
		return fmt.Errorf("%w: the worker ID was lost (lease expired or taken over); re-registering", leaf.ErrWorkerLost)
	case now >= g.layout.End():
		return fmt.Errorf("%w: the clock (%s) is past the layout's end (%s)", leaf.ErrNotReady, fmtMs(now), fmtMs(g.layout.End()))
	}
	return errLimit
}

// heartbeat moves the high-water mark to Window ahead of the clock and
// persists it (cache first, then registry), renewing the lease; on success
// IDs may be stamped up to the new mark. A lost or cache-only worker tries
// the registry again first.
func (g *Generator) heartbeat(ctx context.Context) error {
	select {
	case g.hb <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the heartbeat in flight: %w", ctx.Err())
	}
	defer func() { <-g.hb }()

	g.mu.Lock()
	closed, lost, fromCache, worker := g.closed, g.lost, g.fromCache, g.worker
	g.mu.Unlock()
	if closed {
		return fmt.Errorf("snowflake generator: %w", leaf.ErrClosed)
	}
	if lost || fromCache {
		claim, _, err := g.register(ctx, false)
		switch {
		case err != nil && lost:
			g.recordHeartbeat(time.Now(), err)
			return err
		case errors.Is(err, leaf.ErrWorkerInUse):
			// Started on the cached ID while the registry was down, and the
			// registry now says another live server holds it: stop at once.
			g.mu.Lock()
			g.lost = true
			g.mu.Unlock()
			g.s.Logger.Error("snowflake worker ID is held by another live server; stopped issuing", "worker_id", worker, "err", err)
			g.recordHeartbeat(time.Now(), err)
			return err
		case err != nil:
			// Still unreachable: carry on with the cached ID.
		case claim.HighWater > g.s.Now().UnixMilli()+g.s.StartupWait.Milliseconds():
			// IDs would wait far too long for this ID's mark; hand it back.
			g.releaseClaim(ctx, claim, false)
			err := fmt.Errorf("%w: re-registered worker %d has a high-water mark %s far ahead of the clock",
				leaf.ErrClockBackwards, claim.WorkerID, fmtMs(claim.HighWater))
			g.recordHeartbeat(time.Now(), err)
			return err
		default:
			if fromCache && claim.WorkerID != worker {
				g.s.Logger.Warn("snowflake registry is back and assigns another worker ID; switching",
					"cached_worker_id", worker, "worker_id", claim.WorkerID)
			} else {
				g.s.Logger.Info("snowflake worker registered", "worker_id", claim.WorkerID)
			}
			g.adopt(claim, false)
			fromCache, worker = false, claim.WorkerID
		}
	}

	g.mu.Lock()
	leased := g.leased
	g.mu.Unlock()

	t0 := time.Now()
	var mark int64
	var cacheErr, regErr error
	var expires time.Time
	if g.s.Cache != nil && !leased {
		mark, cacheErr = g.saveMark()
	} else {
		mark = g.nextMark()
	}
	if !fromCache {
		rctx, cancel := context.WithTimeout(ctx, g.s.RegistryTimeout)
		expires, regErr = g.s.Registry.Heartbeat(rctx, mark)
		cancel()
		if regErr != nil {
			regErr = fmt.Errorf("registry heartbeat: %w", regErr)
		}
	}

	g.mu.Lock()
	switch {
	case errors.Is(regErr, leaf.ErrWorkerLost):
		g.lost = true
		g.s.Logger.Error("snowflake worker ID lost; stopped issuing", "worker_id", worker, "err", regErr)
	case leased:
		// The registry is the only record that counts for a lease.
		if regErr == nil {
			g.leaseEnd = expires.Add(-g.s.LeaseMargin)
			g.allowUpTo(mark)
		}
	case g.s.Cache == nil && regErr == nil:
		// With a cache, saveMark has moved the limit already: the cache is
		// where a restart looks when the registry is down.
		g.allowUpTo(mark)
	}
	g.mu.Unlock()
	err := errors.Join(regErr, cacheErr)
	g.recordHeartbeat(t0, err)
	if leased || g.s.Cache == nil {
		return regErr
	}
	return cacheErr
}

// allowUpTo lets IDs be stamped up to (not at) mark, and never at or past the
// layout's end, where the time part would overflow. Caller holds mu.
func (g *Generator) allowUpTo(mark int64) {
	g.limit = max(g.limit, min(mark, g.layout.End()))
}

// nextMark moves the mark to Window ahead of the clock (or of the last ID,
// if the clock is behind it) and returns it. The mark never goes down while
// the generator runs: an ID may have been issued up to any mark sent.
func (g *Generator) nextMark() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mark = max(g.mark, max(g.s.Now().UnixMilli(), g.last+1)+g.s.Window.Milliseconds())
	return g.mark
}

// saveMark persists a new mark to the cache alone and lets IDs be issued up
// to it. For registries without leases the cache is what a restart trusts
// when the registry is down, so a registry that hangs never stops issuing.
func (g *Generator) saveMark() (int64, error) {
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	g.mu.Lock()
	worker := g.worker
	g.mu.Unlock()
	mark := g.nextMark()
	if err := g.s.Cache.Save(worker, mark); err != nil {
		return mark, fmt.Errorf("save worker cache: %w", err)
	}
	g.mu.Lock()
	if g.worker == worker && !g.leased && !g.lost {
		g.allowUpTo(mark)
	}
	g.mu.Unlock()
	return mark, nil
}

// extend moves the limit when an ID reaches it: through the cache alone when
// there is one (fast, and independent of the registry), else through a full
// heartbeat, which a request waits for at most extendBudget. While the
// heartbeats fail it does not try at all: the loop retries every interval,
// and a request that queued behind a registry call which the loop already
// knows to be failing would only wait RegistryTimeout to learn the same.
func (g *Generator) extend(ctx context.Context) error {
	g.mu.Lock()
	cacheOnly := g.s.Cache != nil && !g.leased && !g.lost
	failing := g.hbErr
	g.mu.Unlock()
	if cacheOnly {
		_, err := g.saveMark()
		return err
	}
	if failing != nil {
		return fmt.Errorf("the registry heartbeat is failing: %w", failing)
	}
	ctx, cancel := context.WithTimeout(ctx, extendBudget)
	defer cancel()
	return g.heartbeat(ctx)
}

func (g *Generator) recordHeartbeat(at time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status.LastHeartbeat = at
	g.hbErr = err
	if err != nil {
		g.status.HeartbeatFailures++
		g.status.HeartbeatError = err.Error()
	} else {
		g.status.HeartbeatError = ""
	}
}

// loop runs the heartbeat until Close.
func (g *Generator) loop() {
	defer close(g.done)
	t := time.NewTicker(g.s.HeartbeatInterval)
	defer t.Stop()
	failing := false
	nextPeerCheck := time.Now().Add(g.s.PeerCheckInterval)
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		if now := time.Now(); !now.Before(nextPeerCheck) {
			nextPeerCheck = now.Add(g.s.PeerCheckInterval)
			ctx, cancel := context.WithTimeout(context.Background(), g.s.RegistryTimeout)
			_ = g.checkPeers(ctx, false)
			cancel()
		}
		g.mu.Lock()
		g.rate.Sample(g.s.Now(), g.status.Issued)
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), g.s.RegistryTimeout)
		err := g.heartbeat(ctx)
		cancel()
		// One log line per change, not one per second.
		if err != nil && !failing {
			g.s.Logger.Warn("snowflake heartbeat failing", "err", err)
		} else if err == nil && failing {
			g.s.Logger.Info("snowflake heartbeat recovered")
		}
		failing = err != nil
	}
}

// Close stops issuing and the heartbeat, then stores the final high-water
// mark (just after the last ID issued) in the cache and the registry, and
// releases the claim: a leased ID returns to the pool. The registry itself
// is left open for its owner to close.
func (g *Generator) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	close(g.stop)
	// The loop may be inside a registry call that hangs for up to
	// RegistryTimeout; shutdown has its own budget. Skipping the release is
	// safe: the last mark persisted is ahead of every ID issued, as after a
	// crash, and a lease simply runs out.
	select {
	case <-g.done:
	case <-ctx.Done():
		return fmt.Errorf("release worker: waiting for the heartbeat loop: %w", ctx.Err())
	}

	select {
	case g.hb <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("release worker: waiting for the heartbeat in flight: %w", ctx.Err())
	}
	defer func() { <-g.hb }()
	g.mu.Lock()
	worker, lost, fromCache := g.worker, g.lost, g.fromCache
	final := g.last + 1 // no ID is stamped at or after it
	g.mu.Unlock()
	if lost {
		return nil
	}
	var errs []error
	if g.s.Cache != nil {
		if err := g.s.Cache.Save(worker, final); err != nil {
			errs = append(errs, fmt.Errorf("save worker cache: %w", err))
		}
	}
	if !fromCache {
		rctx, cancel := context.WithTimeout(ctx, g.s.RegistryTimeout)
		if err := g.s.Registry.Release(rctx, final); err != nil {
			errs = append(errs, fmt.Errorf("release worker %d: %w", worker, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// Status describes the worker.
func (g *Generator) Status() leaf.WorkerStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.status
	st.WorkerID, st.FromCache, st.HighWater = g.worker, g.fromCache, g.mark
	if g.lost {
		st.WorkerID = -1
	}
	if g.leased {
		st.LeaseExpires = g.leaseEnd.Add(g.s.LeaseMargin)
	}
	if st.Issued > 0 {
		st.LastIssued = g.last
	}
	st.Rate = g.rate.Rate(g.s.Now(), st.Issued)
	return st
}

// Degraded lists reasons the worker is not fully healthy; empty when it is.
func (g *Generator) Degraded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var r []string
	switch {
	case g.closed:
		r = append(r, "snowflake generator closed")
	case g.lost:
		r = append(r, "snowflake worker ID lost; re-registering")
	case g.fromCache:
		r = append(r, fmt.Sprintf("snowflake registry unreachable at start-up; issuing with the cached worker ID %d", g.worker))
	}
	if g.status.HeartbeatError != "" {
		r = append(r, "snowflake heartbeat failing: "+g.status.HeartbeatError)
	}
	if g.inRoll {
		r = append(r, fmt.Sprintf("snowflake clock is behind the last issued ID (%s)", fmtMs(g.last)))
	}
	if g.skewed {
		r = append(r, fmt.Sprintf("snowflake clock is %dms off the average of %d live peers, more than %v",
			g.status.PeerSkewMs, g.status.Peers, g.s.MaxPeerSkew))
	}
	return r
}
