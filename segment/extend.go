package segment

import (
	"context"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/doublebuf"
	"github.com/leafgo/leaf/internal/ratemeter"
)

// This file is the extension point of the core: a tag kind the core knows
// nothing of (package ordered's ordered tags) plugs in through Config.Kinds.
// At a tag's first load, once its shape is read, the core asks the Kinds
// whether the tag is theirs; a Kind they answer becomes the tag's state, as
// a periodic tag's does (kind.go), and from then on the generator asks it
// for the tag's IDs, status and counters. The kind builds its buffers from
// the tag's shell (NewBuffer), each reserving from a Row of the kind's: the
// double buffer, the adaptive step, the checks of what the store returned
// and the counters stay the core's, in one place.

// Kinds is an extension's tag kind, given to a generator in Config.Kinds.
// Its methods are called by the generator, never concurrently with
// Attach or after Close.
type Kinds interface {
	// Attach is called once by New, before the generator's first refresh
	// and request: host is the generator's side of the extension point.
	// An error fails New.
	Attach(host *Host) error
	// Find is asked at the first load of a tag's shell, once the tag's
	// shape is read (the zero TagShape on a store without shapes): a Kind
	// takes the tag over, nil leaves it to the core. An error fails the
	// load, which is retried; to refuse the tag for good, Find stops the
	// shell first (Buffer.Stop).
	Find(ctx context.Context, shell *Buffer, shape leaf.TagShape) (Kind, error)
	// Refresh runs with each of the generator's tag refreshes; an error
	// marks the store failing, as a failed refresh of the names does.
	Refresh(ctx context.Context) error
	// Close runs last in the generator's Close: after every tag stopped,
	// gave its unused IDs back and released what it held (Kind.Release).
	Close()
}

// Kind is the state of one tag of an extension's kind: it issues the
// tag's IDs from buffers of its own (NewBuffer).
type Kind interface {
	// Next is the hot path of one ID: ok false sends the request the slow
	// way (Take); else id, or err, is the answer.
	Next(ctx context.Context) (id int64, ok bool, err error)
	// Take claims a run [start, end) of at most n IDs from one range:
	// use is who hands a range out (leaf.ByClient, leaf.ByForwarder), 0
	// for IDs the generator answers. waitUntil is the request's wait
	// budget, shared by its takes (see Buffer.Take). ErrRetired: the state
	// was dropped, and the generator looks the tag up again.
	Take(ctx context.Context, n int64, waitUntil *time.Time, use leaf.RangeUse) (start, end int64, err error)
	// Status is the tag's status. Sample records its issued count for its
	// rate and returns it. AddCounters adds its counters, over all its
	// buffers, to c.
	Status(now time.Time) leaf.SegmentStatus
	Sample(now time.Time) uint64
	AddCounters(c *Counters)
	// StopAll stops the state's buffers with err (requests get err, or
	// look the tag up again for ErrRetired) and returns those whose unused
	// IDs may be given back.
	StopAll(err error) []*Buffer
	// Sweep is the idle sweep's look at the state, under the generator's
	// lock: drop says the tag's state goes (its shell already stopped),
	// and after, if not nil, runs once the lock is released.
	Sweep(now time.Time, timeout time.Duration) (drop bool, after func(context.Context))
	// Release ends in the store what a stopped state still holds there,
	// so that another server takes over at once.
	Release(ctx context.Context)
}

// Row is the row of leaf_alloc a kind's buffer reserves its ranges from
// and gives their unused tail back to.
type Row interface {
	Reserve(ctx context.Context, step int) (leaf.Reservation, error)
	GiveBack(ctx context.Context, from, expect int64) (bool, error)
	// Admit checks a range about to be issued: an error drops the range
	// unissued, and the load ends without it.
	Admit(start, end int64) error
}

// ErrRetired is a Kind's answer that its state was dropped after the
// request found it: the generator looks the tag up again.
var ErrRetired = errRetired

// Host is the generator's side of the extension point.
type Host struct{ g *Generator }

// Config is the generator's configuration: the kinds read its clocks,
// timeouts and logger, so that one server is configured in one place.
func (h *Host) Config() Config { return h.g.s }

// Context is cancelled once the generator's Close stopped its loads.
func (h *Host) Context() context.Context { return h.g.ctx }

// Done is closed as the generator's Close starts: loops stop.
func (h *Host) Done() <-chan struct{} { return h.g.done }

// Shell is the shell of tag in use here, nil if it has none.
func (h *Host) Shell(tag string) *Buffer { return h.g.find(tag) }

// Shells are the shells of the tags in use here.
func (h *Host) Shells() []*Buffer { return h.g.active() }

// Tag is the name of the tag the buffer issues.
func (b *Buffer) Tag() string { return b.tag }

// Kind is the extension's state of the tag whose shell b is, nil if it has
// none; plain reports a tag the core issues from its shell: not
// periodic, and not of an extension's kind.
func (b *Buffer) Kind() (k Kind, plain bool) {
	switch k := b.kind().(type) {
	case nil:
		return nil, true
	case extKind:
		return k.Kind, false
	}
	return nil, false
}

// Created is when the shell was made: a refresh that asked the store
// before then knows nothing of it.
func (b *Buffer) Created() time.Time { return b.created }

// Drop stops the tag whose shell b is and forgets it: its buffers are
// stopped with ErrRetired, its state leaves the maps, and its kind's
// Release runs. Requests in flight and later ones look the tag up again.
// A buffer's unused IDs are abandoned, as a crash abandons them.
func (b *Buffer) Drop(ctx context.Context) { b.g.convert(ctx, b) }

// NewBuffer is a buffer of the tag whose shell b is, reserving from r:
// the kind fills it (Fill), takes from it and stops it.
func (b *Buffer) NewBuffer(r Row) *Buffer {
	nb := newBuffer(b.g, b.tag, false)
	nb.shapeRead = true // the shell read the shape
	nb.row = extRow{r, b}
	return nb
}

// Next takes one ID from the current range, without waiting: ok is false
// when it holds none (Take waits for one). It starts the next range's
// load when due.
func (b *Buffer) Next() (id int64, ok bool) {
	v, got := b.ids.Next()
	if got == doublebuf.PrefetchDue {
		b.ids.Prefetch()
	}
	return v, got != doublebuf.None
}

// Take claims a run [start, end) of at most n IDs from one range, waiting
// for a range within the request's wait budget: WaitTimeout after the
// request first waited (*waitUntil, set then) or ctx's deadline, whichever
// comes first.
func (b *Buffer) Take(ctx context.Context, n int64, waitUntil *time.Time) (start, end int64, err error) {
	return b.take(ctx, n, waitUntil)
}

// Fill starts the buffer's first load.
func (b *Buffer) Fill() { b.ids.Fill() }

// Stop stops the buffer: requests get err, and no load starts again. On a
// tag's shell it stops the tag, its kind's buffers too.
func (b *Buffer) Stop(err error) {
	if b.row.shell() == b {
		stopTag(b, err)
		return
	}
	b.ids.Stop(err)
}

// Status is the buffer's status at now.
func (b *Buffer) Status(now time.Time) leaf.SegmentStatus { return b.status(now) }

// Add adds b's counters to c.
func (c *Counters) Add(b *Buffer) { c.add(b) }

// Merge adds o's counters to c.
func (c *Counters) Merge(o *Counters) { c.merge(*o) }

// Issued is how many IDs were issued.
func (c *Counters) Issued() uint64 { return c.issued }

// Activity is what an idle sweep watches: IDs issued, waits and loads.
func (c *Counters) Activity() uint64 { return c.issued + c.waits + c.loads }

// Fill sets the counters of st, the status of a tag whose state spans
// several buffers, to c's, and its rate and time until dry to rate's
// over c.
func (c *Counters) Fill(st *leaf.SegmentStatus, rate *ratemeter.Meter, now time.Time) {
	c.fill(st, rate, now)
}

// extKind is an extension's Kind as the core's kind.
type extKind struct {
	Kind
	shell *buffer
}

func (e extKind) next(ctx context.Context) (int64, string, bool, error) {
	id, ok, err := e.Next(ctx)
	return id, "", ok, err
}

func (e extKind) take(ctx context.Context, n int64, waitUntil *time.Time, tk takeKind) (run, error) {
	var use leaf.RangeUse
	switch tk {
	case takeRange:
		use = leaf.ByClient
	case takeForwarded:
		use = leaf.ByForwarder
	}
	s, end, err := e.Take(ctx, n, waitUntil, use)
	return run{start: s, end: end, shell: e.shell}, err
}

func (e extKind) status(now time.Time) leaf.SegmentStatus { return e.Status(now) }
func (e extKind) sample(now time.Time) uint64             { return e.Sample(now) }
func (e extKind) addCounters(c *counters)                 { e.AddCounters(c) }
func (e extKind) stopAll(err error) []*buffer             { return e.StopAll(err) }
func (e extKind) release(ctx context.Context)             { e.Release(ctx) }
func (e extKind) sweep(now time.Time, timeout time.Duration) (bool, func(context.Context)) {
	return e.Sweep(now, timeout)
}

// extRow is a kind's Row as the core's row.
type extRow struct {
	Row
	sh *buffer
}

func (r extRow) reserve(ctx context.Context, step int) (leaf.Reservation, error) {
	return r.Reserve(ctx, step)
}
func (r extRow) giveBack(ctx context.Context, from, expect int64) (bool, error) {
	return r.GiveBack(ctx, from, expect)
}
func (r extRow) admit(start, end int64) error { return r.Admit(start, end) }
func (r extRow) shell() *buffer               { return r.sh }
func (extRow) period() string                 { return "" }

// findKind asks the extension's kinds about a shell whose shape was just
// read: a Kind they answer becomes the tag's state (errKindFound).
func (b *buffer) findKind(ctx context.Context, shape leaf.TagShape) error {
	k, err := b.g.s.Kinds.Find(ctx, b, shape)
	if err != nil {
		return err
	}
	if k == nil {
		return nil
	}
	return b.found(extKind{k, b})
}
