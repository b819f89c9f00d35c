package segment

import (
	"context"
	"errors"
	"time"

	"github.com/leafgo/leaf"
)

// A tag's entry in the generator's maps is its buffer, the shell. A plain
// tag's shell issues its IDs. The shell's first load reads the tag's shape
// and, finding the tag periodic (periodic.go) or of an extension's kind
// (Config.Kinds, extend.go), decides its kind once: it hangs the kind's
// state on the shell, stops the shell with errKindFound, and from then on
// the generator asks the kind, never checks which one it is.

// kind is the state of a tag whose IDs come from buffers of its own rather
// than from its shell: one per period for a periodic tag; an extension's
// Kind (extKind) keeps its own.
type kind interface {
	// next is the hot path of one ID: ok false sends the request the slow
	// way (take); else id and key (a period's), or err, are the answer.
	next(ctx context.Context) (id int64, key string, ok bool, err error)
	// take claims up to n IDs for a take of kind tk, from one range of one
	// period: the raw run [start, end), the period's key and the encoder
	// the IDs leave through. errRetired: the state was dropped, and the
	// tag is looked up again.
	take(ctx context.Context, n int64, waitUntil *time.Time, tk takeKind) (run, error)
	// status is the tag's status; sample records its issued count for its
	// rate and returns it; addCounters adds its counters, over all its
	// buffers, to c.
	status(now time.Time) leaf.SegmentStatus
	sample(now time.Time) uint64
	addCounters(c *counters)
	// stopAll stops the state's buffers with err (requests get err, or
	// look the tag up again for errRetired) and returns them, for a
	// give-back.
	stopAll(err error) []*buffer
	// sweep is the idle sweep's look at the state, under g.mu: drop says
	// the tag's state goes (stopped already), and after, if not nil, runs
	// once g.mu is released (a give-back, what a kind releases).
	sweep(now time.Time, timeout time.Duration) (drop bool, after func(context.Context))
	// release ends in the store what a stopped state still holds there,
	// so that another server takes over at once.
	release(ctx context.Context)
}

// run is what a take claimed: the raw IDs [start, end), the key of their
// period ("" but for a periodic tag), the encoder they leave through, and
// the tag's shell they came through: a batch whose takes come through
// another shell, or from another period, starts again.
type run struct {
	start, end int64
	key        string
	enc        *encoder
	shell      *buffer
}

// errKindFound stops the shell of a tag whose first load found it periodic
// or of an extension's kind: takes that meet it look the tag up again, and ask its kind.
var errKindFound = errors.New("segment: the tag's kind was found")

// kindRef holds a kind in an atomic.Pointer.
type kindRef struct{ k kind }

// kind is the tag's kind, nil for a plain tag (or one whose shape was not
// read yet).
func (b *buffer) kind() kind {
	if r := b.kindOf.Load(); r != nil {
		return r.k
	}
	return nil
}

// found records the kind the shell's first load found, makes the shell
// findable, and stops it: errKindFound is the load's answer.
func (b *buffer) found(k kind) error {
	b.kindOf.Store(&kindRef{k})
	b.g.promote(b)
	b.ids.Stop(errKindFound)
	return errKindFound
}

// stopTag stops a tag's shell and, for a tag of a kind, the kind's
// buffers; it returns every buffer stopped.
func stopTag(b *buffer, err error) []*buffer {
	b.ids.Stop(err)
	out := []*buffer{b}
	if k := b.kind(); k != nil {
		out = append(out, k.stopAll(err)...)
	}
	return out
}
