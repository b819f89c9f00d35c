// Package segment is the double-buffered segment generator: it reserves
// ranges of IDs per tag from a leaf.SegmentStore and hands them out from
// memory.
//
// Each tag has two buffers. The current range is consumed with one atomic add
// per ID (no lock, no allocation); once 10% of it is used, one background load
// reserves the next range, so a slow or unreachable store does not stop
// issuing. Requests that find both buffers empty queue behind the in-flight
// load until their deadline or WaitTimeout, whichever comes first. The step adapts to traffic (SPEC §2), tags are
// discovered by a periodic refresh and on first request, and a graceful Close
// returns the unused tail of the latest range to the store.
package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
)

// Settings configure a Generator. The zero value of every field but Store is
// a sensible default.
type Settings struct {
	// Store holds leaf_alloc. Required.
	Store leaf.SegmentStore
	// Logger receives one line per step change, load failure and tag event.
	// Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock the adaptive step reads. Default: time.Now.
	Now func() time.Time
	// RefreshInterval is how often the tag list is re-read from the store.
	// Default: 60s.
	RefreshInterval time.Duration
	// HealthInterval is how often the store is pinged to report readiness.
	// Default: 5s.
	HealthInterval time.Duration
	// NegativeTTL is how long a tag the store does not know is answered
	// "not found" without asking the store again. Default: 5s.
	NegativeTTL time.Duration
	// MaxStep caps the adaptive step (it never doubles past it; a stored step
	// above it is used as is). Default: leaf.MaxStep (1,000,000).
	MaxStep int
	// WaitTimeout caps how long a request waits for a range when both
	// buffers are empty: it waits until its context's deadline or for
	// WaitTimeout, whichever ends first (a caller's 60s deadline does not
	// make it wait 60s through a store outage), then gets ErrNotReady.
	// Default: 1s.
	WaitTimeout time.Duration
	// StoreTimeout bounds one reserve call. Default: 10s.
	StoreTimeout time.Duration
	// RetryBackoff and MaxRetryBackoff pace the retries of a failed load.
	// Defaults: 50ms and 2s.
	RetryBackoff, MaxRetryBackoff time.Duration
	// NoGiveBack makes Close skip returning unused IDs to the store, as a
	// crash would.
	NoGiveBack bool
	// LowBuffer makes Degraded report a tag whose buffered IDs last less
	// than this at the current rate (Status's SecondsLeft): the store must
	// answer within that time or requests for the tag start to wait. 0 turns
	// the check off.
	LowBuffer time.Duration
}

func (s *Settings) applyDefaults() error {
	if s.Store == nil {
		return fmt.Errorf("segment: %w: Settings.Store is required", leaf.ErrInvalidArgument)
	}
	def := func(d *time.Duration, v time.Duration, name string) error {
		if *d < 0 {
			return fmt.Errorf("segment: %w: %s is negative (%s)", leaf.ErrInvalidArgument, name, *d)
		}
		if *d == 0 {
			*d = v
		}
		return nil
	}
	for _, f := range []struct {
		d    *time.Duration
		v    time.Duration
		name string
	}{
		{&s.RefreshInterval, 60 * time.Second, "RefreshInterval"},
		{&s.HealthInterval, 5 * time.Second, "HealthInterval"},
		{&s.NegativeTTL, 5 * time.Second, "NegativeTTL"},
		{&s.WaitTimeout, time.Second, "WaitTimeout"},
		{&s.StoreTimeout, 10 * time.Second, "StoreTimeout"},
		{&s.RetryBackoff, 50 * time.Millisecond, "RetryBackoff"},
		{&s.MaxRetryBackoff, 2 * time.Second, "MaxRetryBackoff"},
		{&s.LowBuffer, 0, "LowBuffer"},
	} {
		if err := def(f.d, f.v, f.name); err != nil {
			return err
		}
	}
	if s.MaxStep < 0 || s.MaxStep > leaf.MaxStep {
		return fmt.Errorf("segment: %w: MaxStep %d, want 1..%d", leaf.ErrInvalidArgument, s.MaxStep, leaf.MaxStep)
	}
	if s.MaxStep == 0 {
		s.MaxStep = leaf.MaxStep
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return nil
}

// Generator issues segment IDs. It is safe for concurrent use.
type Generator struct {
	s     Settings
	admin leaf.SegmentAdmin // nil if the store has no admin

	// tags maps each known tag to its buffer. It is replaced, never mutated,
	// so the hot path reads it without a lock.
	tags atomic.Pointer[map[string]*buffer]

	mu       sync.Mutex // guards changes to tags, pending, negative and creates
	pending  map[string]*buffer
	negative map[string]time.Time
	// creates counts CreateTag calls. A lookup that found no row records
	// the absence only if no tag was created since it began: else it could
	// record it after the CreateTag that should have cleared it (a client
	// told "not found" creates the tag at once), and the new tag would be
	// refused for NegativeTTL.
	creates uint64

	storeErr atomic.Pointer[storeFailure]

	ctx    context.Context // cancelled by Close: stops loads and loops
	cancel context.CancelFunc
	done   chan struct{}
	closed atomic.Bool
	wg     sync.WaitGroup
}

type storeFailure struct {
	err   error
	since time.Time
}

// maxNegative bounds the negative cache so random tag names cannot grow it
// without limit.
const maxNegative = 10000

// New validates the settings, reads the tag list (a failure is logged and
// reported as degraded, not fatal: the store may come back), and starts the
// refresh and health loops.
func New(ctx context.Context, s Settings) (*Generator, error) {
	if err := s.applyDefaults(); err != nil {
		return nil, err
	}
	g := &Generator{
		s:        s,
		pending:  map[string]*buffer{},
		negative: map[string]time.Time{},
		done:     make(chan struct{}),
	}
	g.admin, _ = s.Store.(leaf.SegmentAdmin)
	empty := map[string]*buffer{}
	g.tags.Store(&empty)
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := g.refresh(ctx); err != nil {
		s.Logger.Warn("segment: initial tag refresh failed; tags will be looked up on demand", "err", err)
	}
	g.wg.Add(3)
	go g.loop(s.RefreshInterval, g.refresh)
	go g.loop(s.HealthInterval, g.ping)
	go g.loop(sampleInterval, g.sample)
	return g, nil
}

// sampleInterval paces the samples behind each tag's IDs/s.
const sampleInterval = time.Second

// sample records every tag's issued count for its rate.
func (g *Generator) sample(context.Context) error {
	now := g.s.Now()
	for _, b := range *g.tags.Load() {
		b.sample(now)
	}
	return nil
}

func (g *Generator) loop(every time.Duration, f func(context.Context) error) {
	defer g.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-t.C:
			_ = f(g.ctx)
		}
	}
}

// NextID returns the next ID for tag.
func (g *Generator) NextID(ctx context.Context, tag string) (int64, error) {
	if b := (*g.tags.Load())[tag]; b != nil {
		if s := b.cur.Load(); s != nil {
			v := s.value.Add(1) - 1
			if v < s.max {
				if v >= s.trigger && !s.prefetched.Load() {
					b.prefetch(s)
				}
				return v, nil
			}
		}
	}
	var waitUntil time.Time
	start, _, err := g.take(ctx, tag, 1, &waitUntil)
	return start, err
}

// NextIDs appends n increasing IDs for tag to dst. They may span two ranges.
func (g *Generator) NextIDs(ctx context.Context, tag string, n int, dst []int64) ([]int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, n)
	var waitUntil time.Time // one budget for the whole batch
	for left := int64(n); left > 0; {
		start, end, err := g.take(ctx, tag, left, &waitUntil)
		if err != nil {
			return dst, err
		}
		for id := start; id < end; id++ {
			dst = append(dst, id)
		}
		left -= end - start
	}
	return dst, nil
}

// NextRange leases a contiguous run [start, end) of at most n IDs from the
// current range, for clients that hand IDs out themselves. It is shorter than
// n when the current range has fewer left.
func (g *Generator) NextRange(ctx context.Context, tag string, n int) (int64, int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return 0, 0, err
	}
	var waitUntil time.Time
	return g.take(ctx, tag, int64(n), &waitUntil)
}

// take claims up to n IDs of tag; waitUntil is the request's wait budget
// (see buffer.take).
func (g *Generator) take(ctx context.Context, tag string, n int64, waitUntil *time.Time) (int64, int64, error) {
	b, err := g.buffer(tag)
	if err != nil {
		return 0, 0, err
	}
	return b.take(ctx, n, waitUntil)
}

// buffer finds the tag's buffer, or makes a pending one whose first load is
// the store lookup for a tag this server has not seen.
func (g *Generator) buffer(tag string) (*buffer, error) {
	if b := (*g.tags.Load())[tag]; b != nil {
		return b, nil
	}
	if err := leaf.ValidateTag(tag); err != nil {
		return nil, err
	}
	if g.closed.Load() {
		return nil, fmt.Errorf("tag %q: %w", tag, leaf.ErrClosed)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := (*g.tags.Load())[tag]; b != nil {
		return b, nil
	}
	if b := g.pending[tag]; b != nil {
		return b, nil
	}
	if until, ok := g.negative[tag]; ok {
		if time.Now().Before(until) {
			return nil, fmt.Errorf("tag %q: %w", tag, leaf.ErrTagNotFound)
		}
		delete(g.negative, tag)
	}
	b := newBuffer(g, tag)
	g.pending[tag] = b
	return b, nil
}

// promote moves a pending buffer whose first load succeeded into tags.
func (g *Generator) promote(b *buffer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[b.tag] != b {
		return
	}
	delete(g.pending, b.tag)
	g.updateTags(func(m map[string]*buffer) { m[b.tag] = b })
}

// forget drops a buffer whose tag was deleted.
func (g *Generator) forget(b *buffer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropLocked(b)
}

// forgetMissing drops a buffer whose lookup found no row and caches the
// absence, unless a tag was created since the lookup began (g.creates was
// createsAtStart then). g.mu must not be held.
func (g *Generator) forgetMissing(b *buffer, createsAtStart uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropLocked(b)
	if g.creates != createsAtStart {
		return
	}
	if len(g.negative) >= maxNegative {
		now := time.Now()
		for t, until := range g.negative {
			if now.After(until) {
				delete(g.negative, t)
			}
		}
		if len(g.negative) >= maxNegative {
			clear(g.negative)
		}
	}
	g.negative[b.tag] = time.Now().Add(g.s.NegativeTTL)
}

// dropLocked removes b from the pending and served tags. g.mu must be held.
func (g *Generator) dropLocked(b *buffer) {
	if g.pending[b.tag] == b {
		delete(g.pending, b.tag)
	}
	if (*g.tags.Load())[b.tag] == b {
		g.updateTags(func(m map[string]*buffer) { delete(m, b.tag) })
	}
}

// updateTags replaces the tag map with an edited copy. g.mu must be held.
func (g *Generator) updateTags(edit func(map[string]*buffer)) {
	m := make(map[string]*buffer, len(*g.tags.Load())+1)
	for k, v := range *g.tags.Load() {
		m[k] = v
	}
	edit(m)
	g.tags.Store(&m)
}

// refresh re-reads the tag list: new tags get an empty buffer (loaded on first
// request, as Leaf does) and tags no longer in the store are dropped.
func (g *Generator) refresh(ctx context.Context) error {
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	list, err := g.s.Store.Tags(ctx)
	if err != nil {
		g.storeFailed(err)
		return fmt.Errorf("refresh tags: %w", err)
	}
	g.storeOK()
	inStore := make(map[string]bool, len(list))
	for _, t := range list {
		if leaf.ValidateTag(t) == nil {
			inStore[t] = true
		}
	}
	var dropped []*buffer
	g.mu.Lock()
	g.updateTags(func(m map[string]*buffer) {
		for t, b := range m {
			// A buffer made after the query began may be for a tag created
			// since; the next refresh decides.
			if !inStore[t] && b.created.Before(started) {
				delete(m, t)
				dropped = append(dropped, b)
			}
		}
		for t := range inStore {
			if m[t] == nil {
				if b := g.pending[t]; b != nil {
					delete(g.pending, t)
					m[t] = b
				} else {
					m[t] = newBuffer(g, t)
				}
				delete(g.negative, t)
			}
		}
	})
	g.mu.Unlock()
	for _, b := range dropped {
		b.mu.Lock()
		b.gone = true
		b.wakeLocked()
		b.mu.Unlock()
		g.s.Logger.Info("segment tag removed from store; dropped", "tag", b.tag)
	}
	return nil
}

func (g *Generator) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	if err := g.s.Store.Ping(ctx); err != nil {
		g.storeFailed(err)
		return err
	}
	g.storeOK()
	return nil
}

func (g *Generator) storeOK() {
	if g.storeErr.Load() != nil {
		if old := g.storeErr.Swap(nil); old != nil {
			g.s.Logger.Info("segment store reachable again", "down_for", time.Since(old.since).Round(time.Millisecond))
		}
	}
}

func (g *Generator) storeFailed(err error) {
	if g.ctx.Err() != nil {
		return
	}
	if old := g.storeErr.Load(); old != nil {
		g.storeErr.Store(&storeFailure{err: err, since: old.since})
		return
	}
	g.storeErr.Store(&storeFailure{err: err, since: time.Now()})
	g.s.Logger.Warn("segment store unreachable; issuing from buffers", "err", err)
}

// Degraded lists why the generator is not fully healthy: the store is
// unreachable, or a tag has no IDs buffered. Empty means healthy.
func (g *Generator) Degraded() []string {
	var reasons []string
	if f := g.storeErr.Load(); f != nil {
		reasons = append(reasons, fmt.Sprintf("segment store unreachable since %s: %v", f.since.UTC().Format(time.RFC3339), f.err))
	}
	for _, st := range g.Status() {
		switch {
		case st.LoadError != "" && st.Buffers[st.Pos].Remaining() == 0:
			reasons = append(reasons, fmt.Sprintf("tag %s: no IDs buffered: %s", st.Tag, st.LoadError))
		case g.s.LowBuffer > 0 && st.SecondsLeft >= 0 && st.SecondsLeft < g.s.LowBuffer.Seconds():
			next := "the next range is loaded"
			if !st.NextReady {
				next = "the next range has not arrived"
			}
			reasons = append(reasons, fmt.Sprintf("tag %s: buffered IDs last %.1fs at %.0f IDs/s (%d left; %s)",
				st.Tag, st.SecondsLeft, st.Rate, st.Remaining, next))
		}
	}
	return reasons
}

// Status reports every known tag's buffers, sorted by tag.
func (g *Generator) Status() []leaf.SegmentStatus {
	m := *g.tags.Load()
	out := make([]leaf.SegmentStatus, 0, len(m))
	now := g.s.Now()
	for _, b := range m {
		out = append(out, b.status(now))
	}
	slices.SortFunc(out, func(a, b leaf.SegmentStatus) int {
		switch {
		case a.Tag < b.Tag:
			return -1
		case a.Tag > b.Tag:
			return 1
		}
		return 0
	})
	return out
}

// Allocs lists the store's rows.
func (g *Generator) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	return g.s.Store.Allocs(ctx)
}

// Alloc reads one row of the store.
func (g *Generator) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	return g.s.Store.Alloc(ctx, tag)
}

// The admin methods pass input to the store unchecked: every store validates
// tags, steps and starts before any SQL (the leaftest suite holds it to that).

var errNoAdmin = errors.New("segment store does not support tag administration")

// CreateTag adds a tag to the store; it is served at once (the negative cache
// entry, if any, is dropped). a.MaxID 0 lets the store choose the start:
// above every ID issued under a deleted tag of the same name, else 1.
func (g *Generator) CreateTag(ctx context.Context, a leaf.Alloc) error {
	if g.admin == nil {
		return errNoAdmin
	}
	if err := g.admin.CreateTag(ctx, a); err != nil {
		return err
	}
	g.mu.Lock()
	g.creates++
	delete(g.negative, a.Tag)
	g.mu.Unlock()
	if a.MaxID == 0 {
		g.s.Logger.Info("segment tag created", "tag", a.Tag, "start", "default", "step", a.Step)
	} else {
		g.s.Logger.Info("segment tag created", "tag", a.Tag, "start", a.MaxID, "step", a.Step)
	}
	return nil
}

// SetStep changes a tag's stored step; this server's buffers adopt it as the
// adaptive floor at their next load.
func (g *Generator) SetStep(ctx context.Context, tag string, step int) error {
	if g.admin == nil {
		return errNoAdmin
	}
	if err := g.admin.SetStep(ctx, tag, step); err != nil {
		return err
	}
	g.s.Logger.Info("segment tag step set", "tag", tag, "step", step)
	return nil
}

// DeleteTag removes a tag from the store (which keeps its tombstone) and from
// this server's memory at once. Other servers drop it at their next refresh,
// or sooner when a load finds the row gone. IDs they still issue from their
// buffers meanwhile lie below the tombstone, so they stay unique even if the
// tag is created again.
func (g *Generator) DeleteTag(ctx context.Context, tag string) error {
	if g.admin == nil {
		return errNoAdmin
	}
	err := g.admin.DeleteTag(ctx, tag)
	if err != nil && !errors.Is(err, leaf.ErrTagNotFound) {
		return err
	}
	// Not found: another server deleted it first. This server may still
	// hold buffers for it; they go too, as they would at the next refresh.
	g.drop(tag)
	if err != nil {
		return err
	}
	g.s.Logger.Info("segment tag deleted", "tag", tag)
	return nil
}

// drop ends this server's buffers for tag: waiters get ErrTagNotFound and
// the next request looks the tag up in the store again.
func (g *Generator) drop(tag string) {
	g.mu.Lock()
	b := (*g.tags.Load())[tag]
	if b == nil {
		b = g.pending[tag]
	}
	g.mu.Unlock()
	if b != nil {
		b.mu.Lock()
		b.gone = true
		b.wakeLocked()
		b.mu.Unlock()
		g.forget(b)
	}
}

// Close stops issuing, waits for background loads, and (unless NoGiveBack)
// returns each tag's unused IDs to the store with a conditional update that
// applies only if no one reserved since. It does not close the store.
func (g *Generator) Close(ctx context.Context) error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(g.done)
	g.mu.Lock()
	bufs := make([]*buffer, 0, len(*g.tags.Load())+len(g.pending))
	for _, b := range *g.tags.Load() {
		bufs = append(bufs, b)
	}
	for _, b := range g.pending {
		bufs = append(bufs, b)
	}
	g.mu.Unlock()
	// Freeze first: from here no ID leaves this generator.
	for _, b := range bufs {
		b.freeze()
	}
	// Let in-flight loads finish their attempt, so a range reserved just now
	// is known and can be given back; ctx bounds the wait.
	stopped := make(chan struct{})
	go func() { g.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		g.cancel()
		<-stopped
	}
	g.cancel()
	if g.s.NoGiveBack {
		return nil
	}
	type tail struct {
		b            *buffer
		from, expect int64
	}
	var tails []tail
	for _, b := range bufs {
		if from, expect, ok := b.tail(); ok {
			tails = append(tails, tail{b, from, expect})
		}
	}
	var errs []error
	for _, t := range tails {
		ok, err := g.s.Store.GiveBack(ctx, t.b.tag, t.from, t.expect)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("give back %q: %w", t.b.tag, err))
		case ok:
			t.b.mu.Lock()
			t.b.givenBack += uint64(t.expect - t.from)
			t.b.mu.Unlock()
			g.s.Logger.Info("segment unused IDs given back", "tag", t.b.tag, "from", t.from, "to", t.expect)
		default:
			g.s.Logger.Info("segment give-back skipped: another server reserved since", "tag", t.b.tag)
		}
	}
	return errors.Join(errs...)
}
