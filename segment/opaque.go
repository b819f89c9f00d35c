package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// This file issues the IDs of opaque and formatted tags. An opaque tag's
// buffers hold raw IDs, as every tag's do, and each ID is encoded as it
// leaves the generator: the store, the give-back and the status keep raw
// numbers, and only answers carry opaque ones. Ranges are refused: a client
// handing a range out would hand out raw IDs.
//
// A tag whose IDs have a bound (the permutation's width, a format's width)
// never issues a raw ID past it: a reservation is cut at the bound, and
// one that starts past it makes every later load fail with exhausted's error,
// once the IDs buffered are issued. A
// periodic tag's bound holds per period, since its sequence restarts.

// encoder is what a tag's shape does to its raw IDs, made once when the
// tag's state is, never per request.
type encoder struct {
	perm  *tagshape.Perm // nil: IDs leave as they are
	bound int64          // the largest raw ID the tag may issue
	tag   string
	spec  string // the format's spec, for a bound that is the format's width
	bits  int
	// formatted: the tag has an ID format, so its numbers are not its IDs
	// and no range of them is leased.
	formatted bool
}

// newEncoder reads a shape for the generator: nil for a tag whose IDs
// leave unchanged and unbounded. Errors wrap leaf.ErrNotReady: the tag
// cannot issue on this server until it is configured as the others are.
func (g *Generator) newEncoder(tag string, shape leaf.TagShape) (*encoder, error) {
	bound := int64(math.MaxInt64)
	if shape.Format.Width > 0 {
		bound = tagshape.MaxSeq(shape.Format)
	}
	formatted := !shape.Format.IsPlain()
	spec := tagshape.Spec(shape.Format, shape.Period != leaf.PeriodNone)
	if shape.OpaqueBits == 0 {
		if bound == math.MaxInt64 && !formatted {
			return nil, nil
		}
		return &encoder{bound: bound, tag: tag, spec: spec, formatted: formatted}, nil
	}
	key := g.s.OpaqueKey
	switch {
	case len(key) == 0:
		return nil, fmt.Errorf("opaque tag %s needs segment.opaque_key on this server: %w", tag, leaf.ErrNotReady)
	case shape.KeyCheck != g.keyCheck:
		// The guard against two servers issuing colliding IDs: under
		// another key the same raw IDs map to other opaque ones, some of
		// which the tag's own permutation also produces.
		return nil, fmt.Errorf("tag %s was created with another opaque key (check %s; this server's is %s); configure the same segment.opaque_key on every server: %w",
			tag, shape.KeyCheck, g.keyCheck, leaf.ErrNotReady)
	case bound < tagshape.MaxOpaque(shape.OpaqueBits):
		return nil, fmt.Errorf("opaque tag %s: its format holds sequences up to %d, below the %d-bit permutation's %d: %w",
			tag, bound, shape.OpaqueBits, tagshape.MaxOpaque(shape.OpaqueBits), leaf.ErrNotReady)
	}
	perm, err := tagshape.NewPerm(key, tag, shape.OpaqueBits)
	if err != nil {
		return nil, fmt.Errorf("opaque tag %s: %w (%w)", tag, leaf.ErrNotReady, err)
	}
	return &encoder{perm: perm, bound: perm.Max(), tag: tag, bits: shape.OpaqueBits, spec: spec, formatted: formatted}, nil
}

// isOpaque reports whether e encodes IDs; e may be nil.
func (e *encoder) isOpaque() bool { return e != nil && e.perm != nil }

// encode maps a raw ID the buffer handed out to the ID the caller gets.
func (e *encoder) encode(raw int64) (int64, error) {
	if e == nil || e.perm == nil {
		return raw, nil
	}
	return e.perm.Encode(raw) // cannot fail: loads cut ranges at the bound
}

// errUsedUp marks exhausted's errors: no retry brings IDs back.
var errUsedUp = errors.New("IDs used up")

// exhausted is the answer once a tag (or a period) has issued every ID its
// bound allows.
func (e *encoder) exhausted(period string) error {
	where := ""
	if period != "" {
		where = " in period " + period
	}
	if e.perm != nil {
		return fmt.Errorf("tag %s has used all its 2^%d - 1 opaque IDs%s: %w (%w)", e.tag, e.bits, where, leaf.ErrNotReady, errUsedUp)
	}
	return fmt.Errorf("tag %s: format %s holds sequences up to %d, all issued%s: %w (%w, %w)", e.tag, e.spec, e.bound, where, tagshape.ErrWidthExceeded, leaf.ErrNotReady, errUsedUp)
}

// rangeRefusal is why a range of the tag is refused, nil if it is not
// (e may be nil): an opaque tag's raw numbers, or a formatted tag's bare
// ones, are not its IDs, and a client leasing them would hand them out.
func (e *encoder) rangeRefusal() error {
	switch {
	case e == nil:
		return nil
	case e.perm != nil:
		return fmt.Errorf("tag %s is opaque: its IDs are issued one by one (id, ids), never as a range a client would hand out raw: %w", e.tag, leaf.ErrOpaqueRange)
	case e.formatted:
		return fmt.Errorf("tag %s has the ID format %s: its IDs cannot be leased as a range of numbers; take them with NextID or NextIDs, which answer them formatted: %w", e.tag, e.spec, leaf.ErrFormattedRange)
	}
	return nil
}

// Decode maps an ID tag issued back to its raw sequence: for an opaque
// tag through the permutation of key (which must be the tag's: its
// KeyCheck is compared), for any other the number itself. id is a number,
// or the formatted ID of a formatted or periodic tag. An id the tag cannot
// have issued (outside the permutation's width, or at or above its row's
// max_id) fails with an error wrapping leaf.ErrInvalidArgument; an opaque
// tag on a server without its key with one wrapping leaf.ErrNotReady.
func Decode(ctx context.Context, st leaf.SegmentStore, key []byte, tag, id string) (leaf.DecodedID, error) {
	d := leaf.DecodedID{Tag: tag, ID: id}
	if err := leaf.ValidateTag(tag); err != nil {
		return d, err
	}
	row, err := st.Alloc(ctx, tag)
	if err != nil {
		return d, err
	}
	var shape leaf.TagShape
	if shaper, ok := st.(leaf.TagShaper); ok {
		if shape, err = shaper.TagShape(ctx, tag); err != nil {
			return d, err
		}
	}
	var seq int64
	if shape.Period != leaf.PeriodNone || !shape.Format.IsPlain() {
		if d.Period, seq, err = tagshape.Parse(shape.Format, shape.Period, id); err != nil {
			return d, fmt.Errorf("tag %s: id: %w", tag, err)
		}
	} else if seq, err = strconv.ParseInt(id, 10, 64); err != nil || seq < 1 {
		return d, fmt.Errorf("%w: tag %s: id %q, want a positive number", leaf.ErrInvalidArgument, tag, truncate(id, 40))
	}
	d.Raw = seq
	if shape.OpaqueBits != 0 {
		if len(key) == 0 {
			return d, fmt.Errorf("opaque tag %s needs segment.opaque_key to decode its IDs: %w", tag, leaf.ErrNotReady)
		}
		if kc := tagshape.KeyCheck(key); kc != shape.KeyCheck {
			return d, fmt.Errorf("tag %s was created with another opaque key (check %s; this one's is %s): its IDs cannot be decoded with it: %w", tag, shape.KeyCheck, kc, leaf.ErrNotReady)
		}
		perm, err := tagshape.NewPerm(key, tag, shape.OpaqueBits)
		if err != nil {
			return d, err
		}
		if d.Raw, err = perm.Decode(seq); err != nil {
			return d, fmt.Errorf("tag %s: %w", tag, err)
		}
	}
	maxID := row.MaxID
	if d.Period != "" {
		if maxID, err = periodMaxID(ctx, st, tag, shape.Period, d.Period); err != nil {
			return d, err
		}
	}
	if d.Raw >= maxID {
		return d, fmt.Errorf("%w: tag %s has not issued ID %s: it stands for %d, at or above the %s's max_id %d",
			leaf.ErrInvalidArgument, tag, truncate(id, 40), d.Raw, rowName(d.Period), maxID)
	}
	return d, nil
}

func rowName(period string) string {
	if period != "" {
		return "row of period " + period
	}
	return "row"
}

// periodMaxID reads the max_id of a period's row; a period without a row
// issued nothing, which is max_id 1.
func periodMaxID(ctx context.Context, st leaf.SegmentStore, tag string, p leaf.Period, key string) (int64, error) {
	ps, ok := st.(leaf.PeriodStore)
	if !ok {
		return 0, errors.New("segment store keeps no periods")
	}
	layout := map[int]string{4: "2006", 6: "200601", 8: "20060102"}[len(key)]
	t, err := time.Parse(layout, key)
	if err != nil || len(key) != tagshape.PeriodKeyLen(p) {
		return 0, fmt.Errorf("%w: period %q is not a %s period's key", leaf.ErrInvalidArgument, key, p)
	}
	switch p {
	case leaf.PeriodYear:
		t = t.AddDate(1, 0, 0)
	case leaf.PeriodMonth:
		t = t.AddDate(0, 1, 0)
	default:
		t = t.AddDate(0, 0, 1)
	}
	rows, err := ps.Periods(ctx, tag, tagshape.PeriodKey(p, t), 1)
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 || rows[0].Key != key {
		return 1, nil
	}
	return rows[0].MaxID, nil
}

// Decode is the package's Decode with the generator's store and key.
func (g *Generator) Decode(ctx context.Context, tag, id string) (leaf.DecodedID, error) {
	return Decode(ctx, g.s.Store, g.s.OpaqueKey, tag, id)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// PrepareShape readies a shape to create a tag with under key (nil: none):
// an opaque shape gets key's KeyCheck, and is refused without a key or
// with a format whose width cannot write every opaque ID. Errors wrap
// leaf.ErrInvalidArgument.
func PrepareShape(shape leaf.TagShape, key []byte) (leaf.TagShape, error) {
	if shape.OpaqueBits == 0 {
		return shape, nil
	}
	if len(key) == 0 {
		return shape, fmt.Errorf("%w: opaque tags need segment.opaque_key (or --opaque-key-file) on the server that creates them", leaf.ErrInvalidArgument)
	}
	if err := tagshape.ValidateKey(key); err != nil {
		return shape, fmt.Errorf("%w: %w", leaf.ErrInvalidArgument, err)
	}
	if m, top := tagshape.MaxSeq(shape.Format), tagshape.MaxOpaque(shape.OpaqueBits); shape.Format.Width > 0 && m < top {
		return shape, fmt.Errorf("%w: format width %d (radix %d) holds IDs up to %d, below the %d-bit opaque IDs' largest, %d: widen the format or narrow opaque_bits",
			leaf.ErrInvalidArgument, shape.Format.Width, max(shape.Format.Radix, leaf.Radix10), m, shape.OpaqueBits, top)
	}
	kc := tagshape.KeyCheck(key)
	if shape.KeyCheck != "" && shape.KeyCheck != kc {
		return shape, fmt.Errorf("%w: key check %s is not this key's (%s)", leaf.ErrInvalidArgument, shape.KeyCheck, kc)
	}
	shape.KeyCheck = kc
	return shape, nil
}

// PrepareShape is the package's PrepareShape with the generator's key.
func (g *Generator) PrepareShape(shape leaf.TagShape) (leaf.TagShape, error) {
	return PrepareShape(shape, g.s.OpaqueKey)
}
