package ordered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/segment"
)

// Config configures the ordered tags of one segment generator. Start from
// DefaultConfig and set Store and Owner.
type Config struct {
	// Store keeps the leases of ordered tags: the generator's store.
	// Required.
	Store leaf.OrderedStore
	// Owner is this server instance's identity as the owner of ordered
	// tags: its advertised base URL, '#' and a nonce of the process
	// ("http://10.0.0.7:8080#5f2c…"; see leaf.TagLease.Owner), which the
	// other servers forward to. It must differ between processes, and
	// between generators of one process. Empty: this server takes no
	// ordered tag; it answers the owner's *leaf.NotOwnerError while there
	// is one, else an error wrapping leaf.ErrNotReady.
	Owner string
	// OwnerLease is the lease an owner takes on an ordered tag, renewed
	// every third of it; one that cannot renew stops issuing a margin (a
	// tenth, at least 100ms) before its lease runs out. A server takes
	// another's lease over once it saw it unrenewed this long (or for what
	// it had left, if longer; see ordered.go): an owner that dies holds
	// the tag up to a lease after its last renewal for a server that was
	// watching, about two for one that was not.
	OwnerLease time.Duration
}

// Bounds of Config.OwnerLease: a lease shorter than the minimum leaves
// the renewals too little room; a dead owner holds its tags for a lease.
const (
	MinOwnerLease = 500 * time.Millisecond
	MaxOwnerLease = 10 * time.Minute
)

// maxOwnerLen bounds Config.Owner, as the stores' owner column does.
const maxOwnerLen = 255

// DefaultConfig returns the settings a server runs with, but for Store
// and Owner, which the caller sets.
func DefaultConfig() Config {
	return Config{OwnerLease: 10 * time.Second}
}

// Validate reports the first setting New would refuse, wrapping
// leaf.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ordered: %w: "+format, append([]any{leaf.ErrInvalidArgument}, args...)...)
	}
	switch {
	case c.Store == nil:
		return bad("Config.Store is required")
	case c.OwnerLease < MinOwnerLease || c.OwnerLease > MaxOwnerLease:
		return bad("Config.OwnerLease is %s, want %s..%s", c.OwnerLease, MinOwnerLease, MaxOwnerLease)
	case len(c.Owner) > maxOwnerLen:
		return bad("Config.Owner is %d bytes, at most %d", len(c.Owner), maxOwnerLen)
	case c.Owner != "" && leaf.OwnerURL(c.Owner) == "":
		return bad("Config.Owner %q has no URL before '#'", c.Owner)
	case strings.ContainsFunc(c.Owner, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return bad("Config.Owner %q holds a space or a control character", c.Owner)
	}
	return nil
}

// Tags are the ordered tags of one segment generator: the segment.Kinds
// that a generator is given in segment.Config.Kinds. They take, renew and
// release the tags' leases, and issue an owned tag's IDs through the
// generator's buffers, each range fenced by the lease's token.
type Tags struct {
	s      settings
	store  leaf.OrderedStore
	shaper leaf.TagShaper // nil if the store keeps no shapes
	host   *segment.Host
	seg    leaf.SegmentStore // the generator's store: the give-backs

	// epoch is the origin of mono, the clock of the leases.
	epoch   time.Time
	renewer *renewer // renews the leases of the tags owned here
	// tokens holds, by tag, the highest fencing token of a lease these
	// Tags took (int64), until its release landed: see state.fly and
	// state.Release.
	tokens sync.Map
	// afterTake, set by tests before any request, runs between a take and
	// the look at its deadline: a pause there.
	afterTake func(tag string, start, end int64)

	refreshMu sync.Mutex // serialises refreshes

	ctx  context.Context // the generator's: cancelled once it stopped
	done <-chan struct{} // closed as the generator starts to close
	wg   sync.WaitGroup  // the lease calls and the renewer
}

// settings are Config's and those of the generator's Config the leases
// read.
type settings struct {
	Owner                                   string
	OwnerLease                              time.Duration
	StoreTimeout, RetryBackoff, WaitTimeout time.Duration
	Logger                                  *slog.Logger
}

// ownersInUse holds the Owner of every Tags attached and not closed yet.
var ownersInUse sync.Map

// New validates c and returns the ordered tags, to give a generator in
// segment.Config.Kinds.
func New(c Config) (*Tags, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t := &Tags{s: settings{Owner: c.Owner, OwnerLease: c.OwnerLease}, store: c.Store, epoch: time.Now()}
	t.shaper, _ = c.Store.(leaf.TagShaper)
	return t, nil
}

var errAttached = errors.New("ordered: the Tags are attached to another generator already; each generator needs Tags of its own")

// Attach is segment.Kinds' Attach: it reads the generator's timeouts and
// logger, and starts the renewals.
func (t *Tags) Attach(h *segment.Host) error {
	if t.host != nil {
		return errAttached
	}
	if own := t.s.Owner; own != "" {
		// Two generators of one process (a reload, a test) given one
		// identity would both renew one lease and both issue.
		if _, taken := ownersInUse.LoadOrStore(own, struct{}{}); taken {
			return fmt.Errorf("ordered: %w: Config.Owner %q is the identity of another generator of this process that is not closed;"+
				" each needs its own (a nonce after '#')", leaf.ErrInvalidArgument, own)
		}
	}
	gc := h.Config()
	t.s.StoreTimeout, t.s.RetryBackoff, t.s.WaitTimeout, t.s.Logger = gc.StoreTimeout, gc.RetryBackoff, gc.WaitTimeout, gc.Logger
	t.host, t.seg, t.ctx, t.done = h, gc.Store, h.Context(), h.Done()
	t.renewer = newRenewer(t)
	t.wg.Add(1)
	go t.renewer.run()
	return nil
}

// Close is segment.Kinds' Close: it waits for the renewals and lease calls
// to end, and frees the owner identity.
func (t *Tags) Close() {
	t.wg.Wait()
	if t.s.Owner != "" {
		ownersInUse.Delete(t.s.Owner)
	}
}

func isNotFound(err error) bool { return errors.Is(err, leaf.ErrTagNotFound) }

// An ownership is the row of an ordered tag as one lease of it sees it
// (a segment.Row): every reserve is fenced by the lease's token, in the
// reserve's transaction, so that once another server took the lease over
// it reserves nothing, whatever this server's clock says of the lease.

// Reserve reserves the next range, fenced by the lease's token.
func (w *ownership) Reserve(ctx context.Context, step int) (leaf.Reservation, error) {
	t := w.o.t
	r, err := t.store.ReserveOwned(ctx, w.o.tag, t.s.Owner, w.token, step)
	if errors.Is(err, leaf.ErrLeaseLost) {
		w.lost(err)
	}
	return r, err
}

// GiveBack is on the tag's row: while the lease is held (it is released
// after the give-back), no other owner reserves from it.
func (w *ownership) GiveBack(ctx context.Context, from, expect int64) (bool, error) {
	return w.o.t.seg.GiveBack(ctx, w.o.tag, from, expect)
}

// Admit refuses a range of an ownership that ended (a late load: it is
// never issued, and must not raise the floor the current ownership's
// ranges are admitted by), and one below a range reserved before (see
// state.admit).
func (w *ownership) Admit(start, end int64) error {
	if w.o.cur.Load() != w {
		return errOwnershipEnded
	}
	if err := w.o.admit(start, end); err != nil {
		w.o.t.s.Logger.Error("segment ordered tag: range refused", "tag", w.o.tag, "err", err)
		return err
	}
	return nil
}

// NewGenerator starts a segment generator on cfg with the ordered tags of
// c, c.Store defaulting to cfg.Store: the wiring of a server that serves
// ordered tags, in one call.
func NewGenerator(ctx context.Context, cfg segment.Config, c Config) (*segment.Generator, *Tags, error) {
	if c.Store == nil {
		ostore, ok := cfg.Store.(leaf.OrderedStore)
		if !ok {
			return nil, nil, fmt.Errorf("ordered: %w: the segment store (%T) keeps no ordered tags (leaf.OrderedStore)", leaf.ErrInvalidArgument, cfg.Store)
		}
		c.Store = ostore
	}
	t, err := New(c)
	if err != nil {
		return nil, nil, err
	}
	cfg.Kinds = t
	g, err := segment.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return g, t, nil
}
