// Package segment is the double-buffered segment generator: it reserves
// ranges of IDs per tag from a leaf.SegmentStore and hands them out from
// memory.
//
// Each tag has two buffers. The current range is consumed with one atomic add
// per ID (no lock, no allocation); once 10% of it is used, one background load
// reserves the next range, so a slow or unreachable store does not stop
// issuing. Requests that find both buffers empty queue behind the in-flight
// load until their deadline or WaitTimeout, whichever comes first. The step
// adapts to traffic (SPEC §2), and a graceful Close returns the unused tail
// of the latest range to the store.
//
// Cost follows use, not the size of leaf_alloc. A tag nobody asked for costs
// its name in a sorted set of the store's tag names; its buffers, counters
// and rate meter are made at its first request and dropped again after
// IdleTimeout without one. A name not in the set is looked up in the store
// at most LookupRate times a second across all names, the rest answered
// "not found" at once, so made-up names cannot drive the store. The set is
// kept current by a refresh that, on stores with a change counter, reads
// one row unless tags were created or deleted.
//
// A tag's kind is decided once, at its first load: plain, periodic, or an
// extension's (Config.Kinds, extend.go: package ordered's ordered tags,
// which the core knows nothing of), and the generator asks the tag's
// state from then on, never checks which kind it is.
//
// IDs leave through three doors: NextIDPeriod (one ID, the hot path: one
// atomic add), NextIDsPeriod (a batch) and Take (a range whoever took it
// hands out). NextIDs, NextRange and NextRangePeriod are one-line forms
// of them; NextID is NextIDPeriod without the period, its few lines of hot
// path repeated because the call would cost a single ID a fifth of its
// time.
package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/doublebuf"
	"github.com/leafgo/leaf/internal/parallel"
	"github.com/leafgo/leaf/internal/ratemeter"
	"github.com/leafgo/leaf/internal/topn"
	"github.com/leafgo/leaf/tagshape"
)

// Config configures a Generator. Start from DefaultConfig and set Store;
// New refuses a Config that Validate refuses: no field has a hidden default.
type Config struct {
	// Store holds leaf_alloc. Required.
	Store leaf.SegmentStore
	// Logger receives one line per step change, load failure and tag event.
	Logger *slog.Logger
	// Now is the clock the adaptive step reads.
	Now func() time.Time
	// RefreshInterval is how often the tag list is re-read from the store.
	RefreshInterval time.Duration
	// HealthInterval is how often the store is pinged to report readiness.
	HealthInterval time.Duration
	// NegativeTTL is how long a tag the store does not know is answered
	// "not found" without asking the store again.
	NegativeTTL time.Duration
	// MaxStep caps the adaptive step, 1..leaf.MaxStep (it never doubles
	// past it; a stored step above it is used as is).
	MaxStep int
	// WaitTimeout caps how long a request waits for a range when both
	// buffers are empty: it waits until its context's deadline or for
	// WaitTimeout, whichever ends first (a caller's 60s deadline does not
	// make it wait 60s through a store outage), then gets ErrNotReady.
	WaitTimeout time.Duration
	// StoreTimeout bounds one store call.
	StoreTimeout time.Duration
	// RetryBackoff and MaxRetryBackoff pace the retries of a failed load:
	// jittered pauses below a bound that doubles from RetryBackoff up to
	// MaxRetryBackoff.
	RetryBackoff, MaxRetryBackoff time.Duration
	// GiveBack makes Close, and the idle sweep, return the unused tail of
	// a tag's latest range to the store (with a conditional update that
	// applies only if no one reserved since). Without it they abandon the
	// tail, as a crash would.
	GiveBack bool
	// FullRefreshEvery makes every FullRefreshEvery-th refresh read the
	// whole tag list even when the store's change counter
	// (leaf.SegmentVersioner) says no tag was created or deleted: rows that
	// other tools, Java Leaf or older servers insert or delete do not move
	// it. 1 lists at every refresh, as stores without the counter are.
	FullRefreshEvery int
	// IdleTimeout drops a tag's buffers, counters and rate meter after this
	// long without a request; the next request starts afresh with a new
	// range.
	IdleTimeout time.Duration
	// LookupRate is how many names not in the tag list may be looked up in
	// the store per second, shared by all names; requests for others are
	// answered ErrTagNotFound at once (ErrNotReady before the tag list was
	// first read). A tag created elsewhere serves here at the next refresh
	// at the latest.
	LookupRate float64
	// LookupBurst is how many lookups may run at once above LookupRate.
	LookupBurst int
	// LowBuffer makes Degraded report a tag whose buffered IDs last less
	// than this at the current rate (Status's SecondsLeft): the store must
	// answer within that time or requests for the tag start to wait. 0 turns
	// the check off.
	LowBuffer time.Duration
	// OpaqueKey is the key of opaque tags' permutations (see
	// tagshape), the same on every server; nil: this server refuses
	// to issue for opaque tags. It is secret: never logged or answered;
	// only its tagshape.KeyCheck is.
	OpaqueKey []byte
	// Kinds is an extension's tag kind (package ordered's ordered
	// tags), asked at each tag's first load whether the tag is its own;
	// nil: the core's kinds only (plain and periodic tags). See extend.go.
	Kinds Kinds
}

// DefaultConfig returns the settings a server runs with, but for Store,
// which the caller sets.
func DefaultConfig() Config {
	return Config{
		Logger:           slog.Default(),
		Now:              time.Now,
		RefreshInterval:  60 * time.Second,
		HealthInterval:   5 * time.Second,
		NegativeTTL:      5 * time.Second,
		MaxStep:          leaf.MaxStep,
		WaitTimeout:      time.Second,
		StoreTimeout:     10 * time.Second,
		RetryBackoff:     50 * time.Millisecond,
		MaxRetryBackoff:  2 * time.Second,
		GiveBack:         true,
		FullRefreshEvery: 10,
		IdleTimeout:      time.Hour,
		LookupRate:       20,
		LookupBurst:      10,
	}
}

// Validate reports the first setting New would refuse, wrapping
// leaf.ErrInvalidArgument.
func (s Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("segment: %w: "+format, append([]any{leaf.ErrInvalidArgument}, args...)...)
	}
	switch {
	case s.Store == nil:
		return bad("Config.Store is required")
	case s.Logger == nil:
		return bad("Config.Logger is nil (DefaultConfig sets slog.Default())")
	case s.Now == nil:
		return bad("Config.Now is nil (DefaultConfig sets time.Now)")
	case s.MaxStep < 1 || s.MaxStep > leaf.MaxStep:
		return bad("Config.MaxStep is %d, want 1..%d", s.MaxStep, leaf.MaxStep)
	case !(s.LookupRate > 0):
		return bad("Config.LookupRate is %v, want > 0 names a second", s.LookupRate)
	case s.FullRefreshEvery < 1:
		return bad("Config.FullRefreshEvery is %d, want >= 1 (1 lists the tags at every refresh)", s.FullRefreshEvery)
	case s.LookupBurst < 1:
		return bad("Config.LookupBurst is %d, want >= 1", s.LookupBurst)
	case s.LowBuffer < 0:
		return bad("Config.LowBuffer is %s, want >= 0 (0 turns the check off)", s.LowBuffer)
	case s.MaxRetryBackoff < s.RetryBackoff:
		return bad("Config.MaxRetryBackoff %s is below RetryBackoff %s", s.MaxRetryBackoff, s.RetryBackoff)
	}
	if s.OpaqueKey != nil {
		if err := tagshape.ValidateKey(s.OpaqueKey); err != nil {
			return fmt.Errorf("segment: Config.OpaqueKey: %w", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RefreshInterval", s.RefreshInterval},
		{"HealthInterval", s.HealthInterval},
		{"NegativeTTL", s.NegativeTTL},
		{"WaitTimeout", s.WaitTimeout},
		{"StoreTimeout", s.StoreTimeout},
		{"RetryBackoff", s.RetryBackoff},
		{"MaxRetryBackoff", s.MaxRetryBackoff},
		{"IdleTimeout", s.IdleTimeout},
	} {
		if d.v <= 0 {
			return bad("Config.%s is %s, want > 0", d.name, d.v)
		}
	}
	return nil
}

// Generator issues segment IDs. It is safe for concurrent use.
type Generator struct {
	s       Config
	admin   leaf.SegmentAdmin     // nil if the store has no admin
	vers    leaf.SegmentVersioner // nil if the store keeps no change counter
	shaper  leaf.TagShaper        // nil if the store keeps no shapes: every tag is plain
	periods leaf.PeriodStore      // nil if the store keeps no periods
	// keyCheck is tagshape.KeyCheck(s.OpaqueKey), "" without a key.
	keyCheck string

	// shapes caches the shapes TagShape read, *leaf.TagShape by tag (see
	// shapes.go).
	shapes sync.Map

	// hot maps tags in use to their buffers. It is replaced, never mutated,
	// so the hot path reads it without a lock. A tag's first request puts
	// its buffer in fresh, merged into hot in batches (and every second),
	// so that the first requests of many tags do not each copy the map.
	hot atomic.Pointer[map[string]*buffer]

	// mu guards the fields below. Lock order: g.mu before a buffer's mu.
	mu       sync.Mutex
	fresh    map[string]*buffer // in use, not yet in hot
	pending  map[string]*buffer // first load is a lookup of a name not in names
	negative map[string]time.Time
	names    nameSet // the store's tag names
	// lookupBudget paces the lookups of names not in names.
	lookupBudget tokenBucket
	// creates counts CreateTag calls: see rememberMissingLocked.
	creates uint64
	// retired holds the counters of buffers no longer held (dropped as
	// idle, or their tag deleted), so that Totals never goes down.
	retired counters

	// rate is the meter of Totals' Issued, sampled with the tags' own.
	rateMu sync.Mutex
	rate   ratemeter.Meter

	// refreshMu serialises refreshes and guards the fields below.
	refreshMu    sync.Mutex
	sinceListing int   // refreshes settled by the change counter since the latest listing
	version      int64 // the change counter as of that listing
	versionOK    bool

	tagCount atomic.Int64 // names.n, for TagCount without the lock
	listed   atomic.Bool  // a listing has succeeded: names is complete

	lookupCount, refused, dropped, listings, versionReads atomic.Uint64

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

// New validates the settings, lists the tags (a failure is logged and
// reported as degraded, not fatal: the store may come back), and starts the
// refresh, health, rate-sampling and idle-sweep loops.
func New(ctx context.Context, s Config) (*Generator, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		s:            s,
		fresh:        map[string]*buffer{},
		pending:      map[string]*buffer{},
		negative:     map[string]time.Time{},
		lookupBudget: newTokenBucket(s.LookupRate, s.LookupBurst),
		done:         make(chan struct{}),
	}
	g.admin, _ = s.Store.(leaf.SegmentAdmin)
	g.vers, _ = s.Store.(leaf.SegmentVersioner)
	g.shaper, _ = s.Store.(leaf.TagShaper)
	g.periods, _ = s.Store.(leaf.PeriodStore)
	if s.OpaqueKey != nil {
		g.keyCheck = tagshape.KeyCheck(s.OpaqueKey)
	}
	empty := map[string]*buffer{}
	g.hot.Store(&empty)
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if s.Kinds != nil {
		if err := s.Kinds.Attach(&Host{g}); err != nil {
			g.cancel()
			return nil, fmt.Errorf("segment: Config.Kinds: %w", err)
		}
	}
	if err := g.refresh(ctx); err != nil {
		s.Logger.Warn("segment: initial tag listing failed; retrying at each health check, looking tags up on demand meanwhile", "err", err)
	}
	g.wg.Add(4)
	go g.loop(s.RefreshInterval, g.refresh)
	go g.loop(s.HealthInterval, g.ping)
	go g.loop(sampleInterval, g.sample)
	go g.loop(min(s.IdleTimeout/2, time.Minute), g.sweep)
	return g, nil
}

// sampleInterval paces the samples behind each tag's IDs/s.
const sampleInterval = time.Second

// sample records every tag's issued count for its rate, and the sum for
// the rate of Totals; and moves the buffers made since the last sample
// into hot.
func (g *Generator) sample(context.Context) error {
	g.mu.Lock()
	g.mergeLocked()
	hot, issued := *g.hot.Load(), g.retired.issued
	g.mu.Unlock()
	now := g.s.Now()
	for _, b := range hot {
		if k := b.kind(); k != nil {
			issued += k.sample(now)
			continue
		}
		issued += b.sample(now)
	}
	g.rateMu.Lock()
	g.rate.Sample(now, issued)
	g.rateMu.Unlock()
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

// NextID returns the next ID for tag. For a periodic tag it is the next
// ID of the period the clock is in, which NextIDPeriod names: the number
// alone repeats across periods.
func (g *Generator) NextID(ctx context.Context, tag string) (int64, error) {
	// The hot path, as NextIDPeriod's: inlined here too, since a call
	// through NextIDPeriod costs the single ID a fifth of its time.
	b := (*g.hot.Load())[tag]
	if b != nil {
		if v, got := b.ids.Next(); got != doublebuf.None {
			if got == doublebuf.PrefetchDue {
				b.ids.Prefetch()
			}
			if e := b.enc.Load(); e != nil {
				return e.encode(v)
			}
			return v, nil
		}
	}
	id, _, err := g.nextSlow(ctx, tag, b)
	return id, err
}

// NextIDPeriod is NextID that also returns the key of the period the ID
// belongs to (yyyymmdd, yyyymm or yyyy, in the tag's time zone) for a
// periodic tag, "" for a plain one. Each ID is unique within its period.
func (g *Generator) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	// The hot path: a plain tag's shell.
	b := (*g.hot.Load())[tag]
	if b != nil {
		if v, got := b.ids.Next(); got != doublebuf.None {
			if got == doublebuf.PrefetchDue {
				b.ids.Prefetch()
			}
			if e := b.enc.Load(); e != nil {
				v, err := e.encode(v)
				return v, "", err
			}
			return v, "", nil
		}
	}
	return g.nextSlow(ctx, tag, b)
}

// nextSlow is one ID when the tag's shell b (nil: not in hot) has none to
// hand: its kind's hot path, else a take.
func (g *Generator) nextSlow(ctx context.Context, tag string, b *buffer) (int64, string, error) {
	if b != nil {
		if k := b.kind(); k != nil {
			if v, key, ok, err := k.next(ctx); ok {
				return v, key, err
			}
		}
	}
	var waitUntil time.Time
	r, err := g.take(ctx, tag, 1, &waitUntil, takeIDs)
	if err != nil {
		return 0, "", err
	}
	v, err := r.enc.encode(r.start)
	return v, r.key, err
}

// NextIDs appends n increasing IDs for tag to dst. They may span two ranges.
func (g *Generator) NextIDs(ctx context.Context, tag string, n int, dst []int64) ([]int64, error) {
	dst, _, err := g.NextIDsPeriod(ctx, tag, n, dst)
	return dst, err
}

// NextIDsPeriod is NextIDs that also returns the period key of a periodic
// tag (see NextIDPeriod): the n IDs all belong to that one period.
func (g *Generator) NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return dst, "", err
	}
	dst = slices.Grow(dst, n)
	first := len(dst)
	var (
		waitUntil time.Time // one budget for the whole batch
		last      run       // the latest take's
		// unsorted is set when a run starts below the run before it: the
		// next range of a store over several databases may come from one
		// that is behind the others.
		unsorted bool
	)
	for left := int64(n); left > 0; {
		r, err := g.take(ctx, tag, left, &waitUntil, takeIDs)
		if err != nil {
			return dst[:first], "", err
		}
		if len(dst) > first && (r.shell != last.shell || r.key != last.key) {
			// The tag's state was dropped and made again, or the clock
			// moved to another period, under the batch: it starts again,
			// its IDs all of one state and one period. Those taken are
			// lost, never reissued.
			dst, left, unsorted = dst[:first], int64(n), false
		}
		last = r
		if r.enc.isOpaque() {
			for id := r.start; id < r.end; id++ {
				v, err := r.enc.encode(id)
				if err != nil {
					return dst[:first], "", err
				}
				dst = append(dst, v)
			}
		} else {
			unsorted = unsorted || len(dst) > first && r.start < dst[len(dst)-1]
			for id := r.start; id < r.end; id++ {
				dst = append(dst, id)
			}
		}
		left -= r.end - r.start
	}
	if last.enc.isOpaque() || unsorted {
		// A batch's IDs increase, as every batch's do: the permutation
		// scatters them, and a range of another database may come below
		// the one before; their order within the batch tells nothing the
		// batch itself does not.
		slices.Sort(dst[first:])
	}
	return dst, last.key, nil
}

// NextRange leases a contiguous run [start, end) of at most n IDs from the
// current range, for clients that hand IDs out themselves. It is shorter than
// n when the current range has fewer left. An opaque tag's IDs come one by
// one: its ranges are refused with leaf.ErrOpaqueRange. An ordered tag's
// are refused with leaf.ErrOrderedTag: a client handing a range out would
// issue its IDs out of order (see Take by leaf.ByForwarder).
func (g *Generator) NextRange(ctx context.Context, tag string, n int) (int64, int64, error) {
	r, err := g.Take(ctx, tag, n, leaf.ByClient)
	return r.Start, r.End, err
}

// NextRangePeriod is NextRange that also returns the period key of a
// periodic tag (see NextIDPeriod): the range belongs to that one period.
func (g *Generator) NextRangePeriod(ctx context.Context, tag string, n int) (int64, int64, string, error) {
	r, err := g.Take(ctx, tag, n, leaf.ByClient)
	return r.Start, r.End, r.Period, err
}

// Take is the one entry point of the ranges: it claims a run of at most
// n IDs of tag, 1 <= n <= leaf.MaxRange, from the current range of one
// period, for use to hand out: leaf.ByClient by a client (NextRange), or
// leaf.ByForwarder by a server that forwarded the requests of a tag of an
// extension's kind (package ordered) and hands the run's IDs out at once.
// The run is shorter than n when the current range has fewer left; its
// IDs are the raw ones, which is why use refuses the tags whose IDs leave
// encoded. Single IDs and batches are NextIDPeriod and NextIDsPeriod,
// whose IDs leave encoded.
func (g *Generator) Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error) {
	tk := takeRange
	switch use {
	case leaf.ByClient:
	case leaf.ByForwarder:
		tk = takeForwarded
	default:
		return leaf.IDRange{}, fmt.Errorf("segment: %w: range use %d", leaf.ErrInvalidArgument, use)
	}
	if err := leaf.ValidateRangeCount(n); err != nil {
		return leaf.IDRange{}, err
	}
	var waitUntil time.Time
	r, err := g.take(ctx, tag, int64(n), &waitUntil, tk)
	if err != nil {
		return leaf.IDRange{}, err
	}
	return leaf.IDRange{Start: r.start, End: r.end, Period: r.key}, nil
}

// takeKind says what a take is for.
type takeKind uint8

const (
	takeIDs       takeKind = iota // IDs to answer
	takeRange                     // a range a client hands out (leaf.ByClient): refused for opaque and formatted tags, and by kinds that refuse it
	takeForwarded                 // a range a forwarding server hands out at once (leaf.ByForwarder): refused for opaque, formatted and periodic tags
)

// take claims up to n IDs of tag, from one range of one period; waitUntil
// is the request's wait budget (see buffer.take). It returns the raw IDs
// and the encoder they leave through (see run); a range refuses an opaque
// or formatted tag's, and a kind may refuse one (an ordered tag's range
// of kind takeRange).
func (g *Generator) take(ctx context.Context, tag string, n int64, waitUntil *time.Time, tk takeKind) (run, error) {
	for {
		b, err := g.buffer(tag)
		if err != nil {
			return run{}, err
		}
		if k := b.kind(); k != nil {
			r, err := k.take(ctx, n, waitUntil, tk)
			if err == errRetired {
				continue // the kind's state was dropped: look again
			}
			return r, err
		}
		if tk != takeIDs {
			if err := b.enc.Load().rangeRefusal(); err != nil {
				return run{}, err
			}
		}
		start, end, err := b.take(ctx, n, waitUntil)
		if err == errRetired || err == errKindFound {
			// The idle sweep dropped the buffer after this request found
			// it, or its first load found the tag's kind: the next look
			// finds what to take from.
			continue
		}
		if err == nil && tk != takeIDs {
			if refused := b.enc.Load().rangeRefusal(); refused != nil {
				// The first load found the tag opaque or formatted: the
				// range taken is lost, never handed out.
				return run{}, refused
			}
		}
		return run{start: start, end: end, enc: b.enc.Load(), shell: b}, err
	}
}

// buffer finds the tag's buffer or makes one: at once for a name in the
// name set (its first load reserves a range), after the lookup budget's
// consent for any other (its first load looks the name up first).
func (g *Generator) buffer(tag string) (*buffer, error) {
	if b := (*g.hot.Load())[tag]; b != nil {
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
	if b := (*g.hot.Load())[tag]; b != nil {
		return b, nil
	}
	if g.closed.Load() {
		// Close lists the buffers under g.mu after setting closed: a
		// buffer made now would escape its stop.
		return nil, fmt.Errorf("tag %q: %w", tag, leaf.ErrClosed)
	}
	if b := g.fresh[tag]; b != nil {
		return b, nil
	}
	if b := g.pending[tag]; b != nil {
		return b, nil
	}
	if g.names.has(tag) {
		b := newBuffer(g, tag, false)
		g.addLocked(b)
		return b, nil
	}
	if err := g.admitLookupLocked(tag); err != nil {
		return nil, err
	}
	b := newBuffer(g, tag, true)
	g.pending[tag] = b
	return b, nil
}

// addLocked makes b findable. A small hot map is copied at once; a large
// one when fresh has grown to an eighth of it (or at the next sample), so
// that the copies cost a constant per tag. g.mu must be held.
func (g *Generator) addLocked(b *buffer) {
	g.fresh[b.tag] = b
	if len(g.fresh) > len(*g.hot.Load())/8 {
		g.mergeLocked()
	}
}

// mergeLocked moves fresh into hot. g.mu must be held.
func (g *Generator) mergeLocked() {
	if len(g.fresh) == 0 {
		return
	}
	old := *g.hot.Load()
	m := make(map[string]*buffer, len(old)+len(g.fresh))
	maps.Copy(m, old)
	maps.Copy(m, g.fresh)
	clear(g.fresh)
	g.hot.Store(&m)
}

// removeLocked takes buffers out of every map, with one copy of hot, and
// keeps their counters in g.retired. g.mu must be held; it takes each
// buffer's mu.
func (g *Generator) removeLocked(bufs ...*buffer) {
	old := *g.hot.Load()
	var fromHot []*buffer
	for _, b := range bufs {
		switch {
		case g.pending[b.tag] == b:
			delete(g.pending, b.tag)
		case g.fresh[b.tag] == b:
			delete(g.fresh, b.tag)
		case old[b.tag] == b:
			fromHot = append(fromHot, b)
		default:
			continue // already gone: its counters are kept
		}
		g.retired.add(b)
	}
	if len(fromHot) == 0 {
		return
	}
	m := make(map[string]*buffer, len(old)+len(g.fresh))
	maps.Copy(m, old)
	maps.Copy(m, g.fresh)
	clear(g.fresh)
	for _, b := range fromHot {
		delete(m, b.tag)
	}
	g.hot.Store(&m)
}

// eachActiveLocked calls f for every buffer in use (hot and fresh). g.mu
// must be held.
func (g *Generator) eachActiveLocked(f func(*buffer)) {
	for _, b := range *g.hot.Load() {
		f(b)
	}
	for _, b := range g.fresh {
		f(b)
	}
}

// active lists the buffers in use.
func (g *Generator) active() []*buffer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.activeLocked()
}

// activeLocked lists the buffers in use. g.mu must be held.
func (g *Generator) activeLocked() []*buffer {
	out := make([]*buffer, 0, len(*g.hot.Load())+len(g.fresh))
	g.eachActiveLocked(func(b *buffer) { out = append(out, b) })
	return out
}

// promote makes a buffer whose lookup and first load succeeded findable by
// every request.
func (g *Generator) promote(b *buffer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[b.tag] != b {
		return
	}
	delete(g.pending, b.tag)
	g.addLocked(b)
}

// forget drops a buffer whose tag was deleted.
func (g *Generator) forget(b *buffer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(b)
}

// forgetMissing drops a buffer whose lookup or load found no row and caches
// the absence (see rememberMissingLocked). g.mu must not be held.
func (g *Generator) forgetMissing(b *buffer, createsAtStart uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(b)
	g.rememberMissingLocked(b.tag, createsAtStart)
}

func (g *Generator) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	if err := g.s.Store.Ping(pctx); err != nil {
		g.storeFailed(err)
		return err
	}
	g.storeOK()
	if !g.listed.Load() {
		// The listing at start failed: until one succeeds, names the
		// store has may be refused, so do not wait for the refresh.
		return g.refresh(ctx)
	}
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
// unreachable, a tag has no IDs buffered, or a tag's sequence is about to
// outgrow its ID format's width (see formatReason). Empty means healthy.
func (g *Generator) Degraded() []string {
	var reasons []string
	if f := g.storeErr.Load(); f != nil {
		reasons = append(reasons, fmt.Sprintf("segment store unreachable since %s: %v", f.since.UTC().Format(time.RFC3339), f.err))
	}
	if d, ok := g.s.Store.(leaf.DegradedStore); ok {
		reasons = append(reasons, d.Degraded()...)
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
		if r := g.formatReason(st); r != "" {
			reasons = append(reasons, r)
		}
	}
	return reasons
}

// Status reports the tags in use (those with state: requested since
// they were last dropped as idle), sorted by tag. TagCount counts the names
// known.
func (g *Generator) Status() []leaf.SegmentStatus {
	bufs := g.active()
	out := make([]leaf.SegmentStatus, 0, len(bufs))
	now := g.s.Now()
	for _, b := range bufs {
		out = append(out, b.tagStatus(now))
	}
	slices.SortFunc(out, func(a, b leaf.SegmentStatus) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

// Busiest reports, sorted by tag, the statuses of the n busiest tags in
// use (in leaf.Busier's order) and of those named in also that are in use.
// Every tag in use is ranked by its rate and IDs issued alone: only the
// few reported get a full status, so that a once-a-second caller (the
// monitor's history) costs little more with 100,000 tags in use than with
// ten.
func (g *Generator) Busiest(n int, also ...string) []leaf.SegmentStatus {
	bufs := g.active()
	now := g.s.Now()
	ranks := make([]leaf.SegmentStatus, len(bufs)) // Tag, Rate and Issued only
	for i, b := range bufs {
		if k := b.kind(); k != nil {
			ranks[i] = k.status(now) // a kind's rate spans its buffers
			continue
		}
		ranks[i].Tag = b.tag
		ranks[i].Rate, ranks[i].Issued = b.rank(now)
	}
	top := topn.New(n, func(a, b int) bool { return leaf.Busier(&ranks[a], &ranks[b]) })
	for i := range ranks {
		top.Offer(i)
	}
	out := make([]leaf.SegmentStatus, 0, top.Len()+len(also))
	pick := func(i int) {
		if bufs[i].kind() != nil {
			out = append(out, ranks[i]) // already full
			return
		}
		out = append(out, bufs[i].status(now))
	}
	for _, i := range top.Unordered() {
		pick(i)
	}
	if len(also) > 0 {
		named := make(map[string]bool, len(also))
		for _, tag := range also {
			named[tag] = true
		}
		for _, st := range out {
			delete(named, st.Tag) // already picked
		}
		for i, b := range bufs {
			if named[b.tag] {
				pick(i)
			}
		}
	}
	slices.SortFunc(out, func(a, b leaf.SegmentStatus) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

// TagCount is how many tag names the generator knows the store to hold:
// the last listing and the changes seen since. It takes no lock.
func (g *Generator) TagCount() int { return int(g.tagCount.Load()) }

// Totals sums the counters over every tag since the generator started;
// see leaf.SegmentTotals. The buffers in use and the counters of those
// dropped are read under one hold of g.mu, so that a buffer dropped
// meanwhile is counted once: the totals never go down.
func (g *Generator) Totals() leaf.SegmentTotals {
	g.mu.Lock()
	bufs := g.activeLocked()
	c := g.retired.clone()
	g.mu.Unlock()
	for _, b := range bufs {
		c.add(b)
	}
	g.rateMu.Lock()
	rate := g.rate.Rate(g.s.Now(), c.issued)
	g.rateMu.Unlock()
	return leaf.SegmentTotals{
		Known: g.TagCount(), Active: len(bufs),
		Issued: c.issued, Loads: c.loads, LoadErrors: c.loadErrors, Waits: c.waits, GivenBack: c.givenBack,
		LoadSeconds: c.loadTime.Seconds(), LoadLatency: loadHistogram(c.loadLatency), Rate: rate,
		Dropped: g.dropped.Load(), Lookups: g.lookupCount.Load(), Refused: g.refused.Load(),
		Listings: g.listings.Load(), VersionReads: g.versionReads.Load(),
	}
}

// The admin methods pass input to the store unchecked: every store validates
// tags, steps and starts before any SQL (the leaftest suite holds it to that).

var errNoAdmin = errors.New("segment store does not support tag administration")

// CreateTag adds a tag to the store; this server serves it at once (it
// joins the name set; a negative cache entry, if any, is dropped), others
// at their next refresh or lookup. a.MaxID 0 lets the store choose the start:
// above every ID issued under a deleted tag of the same name, else 1.
func (g *Generator) CreateTag(ctx context.Context, a leaf.Alloc) error {
	if g.admin == nil {
		return errNoAdmin
	}
	return g.create(a, func() error { return g.admin.CreateTag(ctx, a) }, leaf.TagShape{})
}

// create runs the store's create and makes the tag known here.
func (g *Generator) create(a leaf.Alloc, create func() error, shape leaf.TagShape) error {
	if err := create(); err != nil {
		return err
	}
	g.mu.Lock()
	g.creates++
	delete(g.negative, a.Tag)
	g.setNameLocked(a.Tag, true)
	g.mu.Unlock()
	start := any(a.MaxID)
	if a.MaxID == 0 {
		start = "default"
	}
	if shape.IsPlain() {
		g.s.Logger.Info("segment tag created", "tag", a.Tag, "start", start, "step", a.Step)
	} else {
		g.s.Logger.Info("segment tag created", "tag", a.Tag, "start", start, "step", a.Step, "shape", shape.String())
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

// drop ends this server's buffers for tag and takes it out of the name
// set: waiters get ErrTagNotFound and the next request looks the tag up in
// the store again.
func (g *Generator) drop(tag string) {
	g.mu.Lock()
	b := (*g.hot.Load())[tag]
	if b == nil {
		b = g.fresh[tag]
	}
	if b == nil {
		b = g.pending[tag]
	}
	if g.names.has(tag) {
		g.setNameLocked(tag, false)
	}
	g.mu.Unlock()
	if b != nil {
		stopTag(b, fmt.Errorf("tag %q: %w", tag, leaf.ErrTagNotFound))
		g.forget(b)
	}
}

// Close stops issuing, waits for background loads, (with GiveBack)
// returns each tag's unused IDs to the store with a conditional update that
// applies only if no one reserved since, and has the kinds release what
// they hold in the store (Kind.Release: the leases of the ordered tags this
// server owns, so that another server takes them over at once), then closes
// Config.Kinds. It does not close the store.
func (g *Generator) Close(ctx context.Context) error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	if g.s.Kinds != nil {
		// Deferred first, so run last: after the kinds' releases.
		defer g.s.Kinds.Close()
	}
	close(g.done)
	// The idle sweep checks closed under g.mu: a buffer it has not taken
	// out by now is frozen and given back here.
	g.mu.Lock()
	bufs := make([]*buffer, 0, len(*g.hot.Load())+len(g.fresh)+len(g.pending))
	g.eachActiveLocked(func(b *buffer) { bufs = append(bufs, b) })
	for _, b := range g.pending {
		bufs = append(bufs, b)
	}
	g.mu.Unlock()
	// Stop first: from here no ID leaves this generator. A periodic tag's
	// periods are given back each to its own row.
	var (
		all   []*buffer
		kinds []kind
	)
	for _, b := range bufs {
		all = append(all, stopTag(b, fmt.Errorf("tag %q: %w", b.tag, leaf.ErrClosed))...)
		if k := b.kind(); k != nil {
			kinds = append(kinds, k)
		}
	}
	bufs = all
	// What a kind holds in the store goes last, after its give-back (an
	// ordered tag's lease: while it is held, no other server reserves from
	// the tag's row, so the give-back lands and the next one continues
	// right above the last ID issued).
	defer parallel.Run(len(kinds), func(i int) { kinds[i].release(ctx) })
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
	if !g.s.GiveBack {
		return nil
	}
	type tail struct {
		b            *buffer
		from, expect int64
	}
	var tails []tail
	for _, b := range bufs {
		if from, expect, ok := b.claimTail(); ok {
			tails = append(tails, tail{b, from, expect})
		}
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	parallel.Run(len(tails), func(i int) {
		t := tails[i]
		ok, err := g.giveBackRange(ctx, t.b, t.from, t.expect)
		switch {
		case err != nil:
			mu.Lock()
			errs = append(errs, fmt.Errorf("give back %q: %w", t.b.tag, err))
			mu.Unlock()
		case ok:
			t.b.mu.Lock()
			t.b.givenBack += uint64(t.expect - t.from)
			t.b.mu.Unlock()
			if key := t.b.row.period(); key != "" {
				g.s.Logger.Info("segment unused IDs given back", "tag", t.b.tag, "period", key, "from", t.from, "to", t.expect)
				return
			}
			g.s.Logger.Info("segment unused IDs given back", "tag", t.b.tag, "from", t.from, "to", t.expect)
		default:
			g.s.Logger.Info("segment give-back skipped: another server reserved since", "tag", t.b.tag, "period", t.b.row.period())
		}
	})
	return errors.Join(errs...)
}

// Settings is the old name of Config.
//
// Deprecated: use Config; Settings goes in the release after the next.
type Settings = Config

// DefaultSettings is the old name of DefaultConfig.
//
// Deprecated: use DefaultConfig; DefaultSettings goes in the release after
// the next.
func DefaultSettings() Config { return DefaultConfig() }
