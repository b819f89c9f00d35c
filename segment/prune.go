package segment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// PrunePeriods removes the periods of tag that pr names from st, each
// leaving a tombstone, so that a server that asks for a pruned period later
// continues it above every ID issued in it rather than restarting it. now
// is the clock the current period is judged by. Errors wrap
// leaf.ErrInvalidArgument for a bad pr or a tag without a period, and
// leaf.ErrTagNotFound for a tag the store does not hold.
func PrunePeriods(ctx context.Context, st leaf.SegmentStore, tag string, pr leaf.Prune, now time.Time) (leaf.PruneResult, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.PruneResult{}, err
	}
	shaper, ok := st.(leaf.TagShaper)
	ps, ok2 := st.(leaf.PeriodStore)
	if !ok || !ok2 {
		return leaf.PruneResult{}, errors.New("segment store keeps no periods")
	}
	if (pr.Keep == 0) == (pr.Before == "") {
		return leaf.PruneResult{}, fmt.Errorf("%w: prune needs keep or before, not both", leaf.ErrInvalidArgument)
	}
	if pr.Keep != 0 && (pr.Keep < 2 || pr.Keep > leaf.MaxPruneKeep) {
		return leaf.PruneResult{}, fmt.Errorf("%w: keep %d, want 2..%d: the current period and the one before are always kept", leaf.ErrInvalidArgument, pr.Keep, leaf.MaxPruneKeep)
	}
	if _, err := st.Alloc(ctx, tag); err != nil {
		return leaf.PruneResult{}, err
	}
	shape, err := shaper.TagShape(ctx, tag)
	if err != nil {
		return leaf.PruneResult{}, err
	}
	if shape.Period == leaf.PeriodNone {
		return leaf.PruneResult{}, fmt.Errorf("%w: tag %s has no period: it has no periods to prune", leaf.ErrInvalidArgument, tag)
	}
	loc, err := tagshape.Location(shape.TimeZone)
	if err != nil {
		return leaf.PruneResult{}, err
	}
	now = now.In(loc)
	before := pr.Before
	if pr.Keep != 0 {
		before = tagshape.PeriodKeyBefore(shape.Period, now, pr.Keep-1)
	} else {
		if err := tagshape.ValidatePeriodKey(before); err != nil {
			return leaf.PruneResult{}, err
		}
		if len(before) != tagshape.PeriodKeyLen(shape.Period) {
			return leaf.PruneResult{}, fmt.Errorf("%w: before %s is not a key of a %s period (%d digits)", leaf.ErrInvalidArgument, before, shape.Period, tagshape.PeriodKeyLen(shape.Period))
		}
		if prev := tagshape.PeriodKeyBefore(shape.Period, now, 1); before > prev {
			return leaf.PruneResult{}, fmt.Errorf("%w: before %s would remove the current period (%s) or the one before (%s), which are always kept; before %s at the latest",
				leaf.ErrInvalidArgument, before, tagshape.PeriodKey(shape.Period, now), prev, prev)
		}
	}
	removed, err := ps.PrunePeriods(ctx, tag, before)
	return leaf.PruneResult{Before: before, Removed: removed}, err
}

// PrunePeriods removes old periods of a periodic tag from the store (see
// the package function PrunePeriods), judging the current period by the
// generator's clock. This server holds buffers of the current period and
// the one before only, which are never pruned.
func (g *Generator) PrunePeriods(ctx context.Context, tag string, pr leaf.Prune) (leaf.PruneResult, error) {
	res, err := PrunePeriods(ctx, g.s.Store, tag, pr, g.s.Now())
	if err != nil {
		return res, err
	}
	g.s.Logger.Info("segment periods pruned", "tag", tag, "before", res.Before, "removed", len(res.Removed))
	return res, nil
}

// CreateShapedTag is CreateTag with a shape (see leaf.TagShaper): a
// periodic tag, a format, an opaque permutation. The shape is fixed from
// now on. An opaque shape gets the KeyCheck of the generator's key (see
// PrepareShape), and is refused without one.
func (g *Generator) CreateShapedTag(ctx context.Context, a leaf.Alloc, shape leaf.TagShape) error {
	if shape.IsPlain() {
		return g.CreateTag(ctx, a)
	}
	if g.shaper == nil {
		return fmt.Errorf("%w: the segment store keeps no tag shapes", leaf.ErrInvalidArgument)
	}
	if shape.Period != leaf.PeriodNone && g.periods == nil {
		return fmt.Errorf("%w: the segment store keeps no periods", leaf.ErrInvalidArgument)
	}
	shape, err := PrepareShape(shape, g.s.OpaqueKey)
	if err != nil {
		return err
	}
	return g.create(a, func() error { return g.shaper.CreateShapedTag(ctx, a, shape) }, shape)
}
