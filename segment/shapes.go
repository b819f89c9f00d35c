package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// This file keeps the tags' shapes for the transports, which format IDs
// with them on every request, and for Degraded's warning that a tag's
// sequence is about to outgrow its format's width.

// cachedShape is an entry of Generator.shapes.
type cachedShape struct {
	shape leaf.TagShape
	at    time.Time // wall clock: when it was read
}

// TagShape is the tag's shape: the zero shape for a plain tag, and on a
// store that keeps none. A shape is fixed when its tag is created (a tag
// deleted and created again keeps it, see leaf.ShapeError), so it is read
// from the store once and cached until the tag leaves the name set
// (deleted here, or gone at a refresh); a tag's first load caches it too.
// A name this server does not know
// is checked first as Known checks it: made-up names never reach the
// store one for one, nor fill the cache.
func (g *Generator) TagShape(ctx context.Context, tag string) (leaf.TagShape, error) {
	if c, ok := g.shapes.Load(tag); ok {
		return c.(*cachedShape).shape, nil
	}
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagShape{}, err
	}
	if g.shaper == nil {
		return leaf.TagShape{}, nil
	}
	if err := g.Known(ctx, tag); err != nil {
		if errors.Is(err, leaf.ErrTagNotFound) || errors.Is(err, leaf.ErrNotReady) {
			return leaf.TagShape{}, err
		}
		// The store failed the lookup: not ready, as a load it fails.
		return leaf.TagShape{}, fmt.Errorf("tag %q: cannot look it up: %w (%w)", tag, leaf.ErrNotReady, err)
	}
	sctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	shape, err := g.shaper.TagShape(sctx, tag)
	cancel()
	if err != nil {
		// Not ready, as a load the store fails: the next try may succeed.
		return leaf.TagShape{}, fmt.Errorf("tag %q: cannot read its shape: %w (%w)", tag, leaf.ErrNotReady, err)
	}
	g.rememberShape(tag, shape)
	return shape, nil
}

// rememberShape caches a shape read from the store: by TagShape, and by a
// tag's first load, which reads it anyway, so that a tag with IDs buffered
// has its shape in memory through a store outage.
func (g *Generator) rememberShape(tag string, shape leaf.TagShape) {
	g.shapes.Store(tag, &cachedShape{shape: shape, at: time.Now()})
}

// forgetShapesLocked drops the cached shapes of tags no longer in the name
// set, but for those read after started (the refresh's query), which may
// be of tags created since. g.mu must be held.
func (g *Generator) forgetShapesLocked(started time.Time) {
	g.shapes.Range(func(k, v any) bool {
		if !g.names.has(k.(string)) && v.(*cachedShape).at.Before(started) {
			g.shapes.Delete(k)
		}
		return true
	})
}

// formatReason is Degraded's warning for a tag whose format has a width,
// "" if there is none: the sequence runs out of digits within LowBuffer
// at the tag's rate, or within the step of the next range, after which
// the transports answer the tag's IDs with tagshape.ErrWidthExceeded. A
// periodic tag's status is its latest period's, whose sequence restarts
// each period: the headroom is that period's. Only shapes already cached
// (by the tag's first load, or by TagShape) are consulted, so that /readyz
// never reads the store.
func (g *Generator) formatReason(st leaf.SegmentStatus) string {
	c, ok := g.shapes.Load(st.Tag)
	if !ok || !st.InitOK {
		return ""
	}
	shape := c.(*cachedShape).shape
	f := shape.Format
	if f.Width == 0 {
		return ""
	}
	maxSeq := tagshape.MaxSeq(f)
	cur := st.Buffers[st.Pos]
	if cur.Remaining() == 0 && st.NextReady {
		cur = st.Buffers[1-st.Pos]
	}
	next := cur.Value // the next sequence to issue
	left := tagshape.Headroom(f, next-1)
	spec := tagshape.Spec(f, shape.Period != leaf.PeriodNone)
	if left == 0 {
		return fmt.Sprintf("tag %s: format %s has run out: sequence %d is past %d, the largest it holds", st.Tag, spec, next, maxSeq)
	}
	secs := math.Inf(1)
	if st.Rate > 0 {
		secs = float64(left) / st.Rate
	}
	low := g.s.LowBuffer > 0 && secs < g.s.LowBuffer.Seconds()
	if !low && left > int64(st.Step) {
		return ""
	}
	when := "at the next range"
	if !math.IsInf(secs, 1) {
		when = fmt.Sprintf("in %.0fs at %.0f IDs/s", secs, st.Rate)
	}
	return fmt.Sprintf("tag %s: format %s runs out %s (%d of %d left; next range step %d)", st.Tag, spec, when, left, maxSeq, st.Step)
}
