package segment

import (
	"context"
	"slices"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/tagpage"
)

// allocPager is the paged listing the SQL and in-memory stores offer
// beside leaf.SegmentStore (see sqlstore.Store.AllocsPage).
type allocPager interface {
	AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error)
}

// AllocsPage lists at most limit of the store's rows whose tag begins with
// prefix and sorts after the tag after, in the store's order of biz_tag: a
// keyset page, whose last tag, passed as after, reads the next one. A
// store without a paged listing is read whole and cut here.
func (g *Generator) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	if p, ok := g.s.Store.(allocPager); ok {
		return p.AllocsPage(ctx, prefix, after, limit)
	}
	if err := tagpage.Check(prefix, after, limit); err != nil {
		return nil, err
	}
	all, err := g.s.Store.Allocs(ctx)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(a leaf.Alloc) bool { return !tagpage.Match(a.Tag, prefix, after) })
	slices.SortFunc(all, func(a, b leaf.Alloc) int { return strings.Compare(a.Tag, b.Tag) })
	return slices.Clip(all[:min(len(all), limit)]), nil
}
