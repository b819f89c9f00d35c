package snowflake

import (
	"fmt"
	"math"
	"time"

	"github.com/leafgo/leaf"
)

// Layout is how an ID's 63 usable bits are split, high to low: milliseconds
// since Epoch, worker ID, sequence. The sign bit is always 0.
type Layout struct {
	// Epoch is the zero of the time part, Unix milliseconds.
	Epoch        int64
	TimeBits     int
	WorkerBits   int
	SequenceBits int
}

// LeafEpoch is Java Leaf's twepoch: 2010-11-04 01:42:54.657 UTC.
const LeafEpoch = 1288834974657

// LeafLayout is Java Leaf's layout: 41 bits of milliseconds since LeafEpoch
// (until 2080-07-10), 10 bits of worker ID, 12 bits of sequence.
var LeafLayout = Layout{Epoch: LeafEpoch, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}

// JSSafeEpoch is the js-safe layout's epoch: 2026-01-01T00:00:00Z. A recent
// epoch is what buys the layout its life in 53 bits.
const JSSafeEpoch = 1767225600000

// MaxJSSafeID is JavaScript's Number.MAX_SAFE_INTEGER, 2^53 - 1: the largest
// integer a JSON.parse in a browser reads back exactly.
const MaxJSSafeID = 1<<53 - 1

// JSSafeLayout keeps every ID at or below MaxJSSafeID for its whole life, so
// that JavaScript clients can hold IDs as numbers: 40 bits of milliseconds
// since JSSafeEpoch (the last 2060-11-03T19:53:47.775Z), 5 bits of worker ID
// (32 workers), 8 bits of sequence (256 IDs per millisecond per worker).
// Of Leaf's layout it gives up the 10 bits above 53: 1 of time (the recent
// epoch makes up for it), 5 of worker ID and 4 of sequence.
var JSSafeLayout = Layout{Epoch: JSSafeEpoch, TimeBits: 40, WorkerBits: 5, SequenceBits: 8}

// Layout names: the presets, and the name of every other layout.
const (
	LayoutLeaf   = "leaf"
	LayoutJSSafe = "js-safe"
	LayoutCustom = "custom"
)

// presets are the named layouts, by name.
var presets = map[string]Layout{LayoutLeaf: LeafLayout, LayoutJSSafe: JSSafeLayout}

// Preset returns the layout of a preset name: "leaf" or "js-safe". Any other
// name, "custom" included, is ErrInvalidArgument: it names no numbers.
func Preset(name string) (Layout, error) {
	if l, ok := presets[name]; ok {
		return l, nil
	}
	return Layout{}, fmt.Errorf("%w: no layout preset %q; the presets are %s and %s", leaf.ErrInvalidArgument, name, LayoutLeaf, LayoutJSSafe)
}

// Name is the preset the layout is ("leaf", "js-safe"), or "custom".
func (l Layout) Name() string {
	for name, p := range presets {
		if l == p {
			return name
		}
	}
	return LayoutCustom
}

// Validate checks the widths: every part at least 1 bit (the worker part may
// be 0 bits: one worker), at most 63 bits in all so IDs stay positive, and a
// non-negative epoch early enough that End fits in an int64.
func (l Layout) Validate() error {
	switch {
	case l.Epoch < 0:
		return fmt.Errorf("%w: layout epoch %d is before 1970", leaf.ErrInvalidArgument, l.Epoch)
	case l.TimeBits < 1 || l.SequenceBits < 1 || l.WorkerBits < 0:
		return fmt.Errorf("%w: layout %d/%d/%d bits: time and sequence need at least 1 bit, worker at least 0",
			leaf.ErrInvalidArgument, l.TimeBits, l.WorkerBits, l.SequenceBits)
	case l.TimeBits+l.WorkerBits+l.SequenceBits > 63:
		return fmt.Errorf("%w: layout %d+%d+%d = %d bits; at most 63 fit in a positive int64",
			leaf.ErrInvalidArgument, l.TimeBits, l.WorkerBits, l.SequenceBits, l.TimeBits+l.WorkerBits+l.SequenceBits)
	case l.Epoch > math.MaxInt64-1<<l.TimeBits:
		// End, and every timestamp Decode computes, would overflow int64.
		return fmt.Errorf("%w: layout epoch %d is too late: epoch + 2^%d ms does not fit in an int64",
			leaf.ErrInvalidArgument, l.Epoch, l.TimeBits)
	}
	return nil
}

// MaxWorkerID is the largest worker ID the layout can hold.
func (l Layout) MaxWorkerID() int64 { return 1<<l.WorkerBits - 1 }

// MaxSequence is the largest sequence number within one millisecond.
func (l Layout) MaxSequence() int64 { return 1<<l.SequenceBits - 1 }

// MaxID is the largest ID the layout can produce: the last millisecond of
// its life, the largest worker ID and sequence.
func (l Layout) MaxID() int64 {
	return int64(uint64(1)<<(l.TimeBits+l.WorkerBits+l.SequenceBits) - 1)
}

// End is the first Unix millisecond the layout cannot encode: its time part
// would overflow into the sign bit (or past TimeBits).
func (l Layout) End() int64 { return l.Epoch + 1<<l.TimeBits }

// String describes the layout, e.g. "41/10/12 bits, epoch 2010-11-04T01:42:54.657Z".
func (l Layout) String() string {
	return fmt.Sprintf("%d/%d/%d bits, epoch %s", l.TimeBits, l.WorkerBits, l.SequenceBits,
		time.UnixMilli(l.Epoch).UTC().Format(time.RFC3339Nano))
}

// Compose builds an ID from a Unix millisecond, a worker ID and a sequence
// number, checking that each fits.
func (l Layout) Compose(ms, worker, seq int64) (int64, error) {
	if ms < l.Epoch || ms >= l.End() {
		return 0, fmt.Errorf("%w: time %d ms outside the layout's [%d, %d)", leaf.ErrInvalidArgument, ms, l.Epoch, l.End())
	}
	if worker < 0 || worker > l.MaxWorkerID() {
		return 0, fmt.Errorf("%w: worker ID %d outside [0, %d]", leaf.ErrInvalidArgument, worker, l.MaxWorkerID())
	}
	if seq < 0 || seq > l.MaxSequence() {
		return 0, fmt.Errorf("%w: sequence %d outside [0, %d]", leaf.ErrInvalidArgument, seq, l.MaxSequence())
	}
	return l.compose(ms, worker, seq), nil
}

// compose is Compose without the checks, for the hot path.
func (l Layout) compose(ms, worker, seq int64) int64 {
	return (ms-l.Epoch)<<(l.WorkerBits+l.SequenceBits) | worker<<l.SequenceBits | seq
}

// Decode takes an ID apart. IDs the layout cannot hold (zero, negative, bits
// above its width) are ErrInvalidArgument.
func (l Layout) Decode(id int64) (leaf.SnowflakeParts, error) {
	if id <= 0 {
		return leaf.SnowflakeParts{}, fmt.Errorf("%w: snowflake ID %d is not positive", leaf.ErrInvalidArgument, id)
	}
	low := l.WorkerBits + l.SequenceBits
	if total := low + l.TimeBits; total < 63 && id>>total != 0 {
		return leaf.SnowflakeParts{}, fmt.Errorf("%w: snowflake ID %d has bits above the layout's %d", leaf.ErrInvalidArgument, id, total)
	}
	return leaf.SnowflakeParts{
		ID:        id,
		Timestamp: id>>low + l.Epoch,
		WorkerID:  id >> l.SequenceBits & l.MaxWorkerID(),
		Sequence:  id & l.MaxSequence(),
	}, nil
}
