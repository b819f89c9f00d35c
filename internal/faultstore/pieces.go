package faultstore

import (
	"context"
	"time"

	"github.com/leafgo/leaf"
)

// Each piece forwards one interface's methods to the wrapped store, after
// the faults. A combination (combos.go) embeds base and the pieces of the
// interfaces its store implements.

type base struct {
	f     *Faults
	inner leaf.SegmentStore
}

func (b *base) Tags(ctx context.Context) ([]string, error) {
	if err := b.f.before(ctx, Call{Method: "Tags"}, untagged); err != nil {
		return nil, err
	}
	return b.inner.Tags(ctx)
}

func (b *base) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	if err := b.f.before(ctx, Call{Method: "Allocs"}, untagged); err != nil {
		return nil, err
	}
	return b.inner.Allocs(ctx)
}

func (b *base) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	if err := b.f.before(ctx, Call{Method: "Alloc", Tag: tag}, tagged); err != nil {
		return leaf.Alloc{}, err
	}
	return b.inner.Alloc(ctx, tag)
}

func (b *base) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	if err := b.f.before(ctx, Call{Method: "Reserve", Tag: tag}, reserve); err != nil {
		return leaf.Reservation{}, err
	}
	r, err := b.inner.Reserve(ctx, tag, step)
	b.f.reserved(err)
	return r, err
}

func (b *base) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	if err := b.f.before(ctx, Call{Method: "GiveBack", Tag: tag}, tagged); err != nil {
		return false, err
	}
	return b.inner.GiveBack(ctx, tag, from, expect)
}

func (b *base) Ping(ctx context.Context) error {
	if err := b.f.before(ctx, Call{Method: "Ping"}, untagged); err != nil {
		return err
	}
	return b.inner.Ping(ctx)
}

// Close is forwarded without faults: a test must be able to close a store
// it took down.
func (b *base) Close() error { return b.inner.Close() }

type admin struct {
	f     *Faults
	inner leaf.SegmentAdmin
}

func (a *admin) CreateTag(ctx context.Context, al leaf.Alloc) error {
	if err := a.f.before(ctx, Call{Method: "CreateTag", Tag: al.Tag}, tagged); err != nil {
		return err
	}
	return a.inner.CreateTag(ctx, al)
}

func (a *admin) SetStep(ctx context.Context, tag string, step int) error {
	if err := a.f.before(ctx, Call{Method: "SetStep", Tag: tag}, tagged); err != nil {
		return err
	}
	return a.inner.SetStep(ctx, tag, step)
}

func (a *admin) DeleteTag(ctx context.Context, tag string) error {
	if err := a.f.before(ctx, Call{Method: "DeleteTag", Tag: tag}, tagged); err != nil {
		return err
	}
	return a.inner.DeleteTag(ctx, tag)
}

type versioner struct {
	f     *Faults
	inner leaf.SegmentVersioner
}

func (v *versioner) TagsVersion(ctx context.Context) (int64, error) {
	if err := v.f.before(ctx, Call{Method: "TagsVersion"}, untagged); err != nil {
		return 0, err
	}
	return v.inner.TagsVersion(ctx)
}

type shaper struct {
	f     *Faults
	inner leaf.TagShaper
}

func (s *shaper) TagShape(ctx context.Context, tag string) (leaf.TagShape, error) {
	if err := s.f.before(ctx, Call{Method: "TagShape", Tag: tag}, tagged); err != nil {
		return leaf.TagShape{}, err
	}
	return s.inner.TagShape(ctx, tag)
}

func (s *shaper) CreateShapedTag(ctx context.Context, a leaf.Alloc, sh leaf.TagShape) error {
	if err := s.f.before(ctx, Call{Method: "CreateShapedTag", Tag: a.Tag}, tagged); err != nil {
		return err
	}
	return s.inner.CreateShapedTag(ctx, a, sh)
}

type periods struct {
	f     *Faults
	inner leaf.PeriodStore
}

func (p *periods) ReservePeriod(ctx context.Context, tag, key string, step int) (leaf.Reservation, error) {
	if err := p.f.before(ctx, Call{Method: "ReservePeriod", Tag: tag}, reserve); err != nil {
		return leaf.Reservation{}, err
	}
	r, err := p.inner.ReservePeriod(ctx, tag, key, step)
	p.f.reserved(err)
	return r, err
}

func (p *periods) GiveBackPeriod(ctx context.Context, tag, key string, from, expect int64) (bool, error) {
	if err := p.f.before(ctx, Call{Method: "GiveBackPeriod", Tag: tag}, tagged); err != nil {
		return false, err
	}
	return p.inner.GiveBackPeriod(ctx, tag, key, from, expect)
}

func (p *periods) Periods(ctx context.Context, tag, before string, limit int) ([]leaf.PeriodAlloc, error) {
	if err := p.f.before(ctx, Call{Method: "Periods", Tag: tag}, tagged); err != nil {
		return nil, err
	}
	return p.inner.Periods(ctx, tag, before, limit)
}

func (p *periods) CountPeriods(ctx context.Context, tag string) (int, error) {
	if err := p.f.before(ctx, Call{Method: "CountPeriods", Tag: tag}, tagged); err != nil {
		return 0, err
	}
	return p.inner.CountPeriods(ctx, tag)
}

func (p *periods) PrunePeriods(ctx context.Context, tag, before string) ([]leaf.PeriodAlloc, error) {
	if err := p.f.before(ctx, Call{Method: "PrunePeriods", Tag: tag}, tagged); err != nil {
		return nil, err
	}
	return p.inner.PrunePeriods(ctx, tag, before)
}

type ordered struct {
	f     *Faults
	inner leaf.OrderedStore
}

func (o *ordered) TagLease(ctx context.Context, tag string) (leaf.TagLease, bool, error) {
	if err := o.f.before(ctx, Call{Method: "TagLease", Tag: tag}, tagged); err != nil {
		return leaf.TagLease{}, false, err
	}
	return o.inner.TagLease(ctx, tag)
}

func (o *ordered) AcquireTag(ctx context.Context, tag, owner string, ttl time.Duration, watched leaf.TagLease) (leaf.TagLease, error) {
	if err := o.f.before(ctx, Call{Method: "AcquireTag", Tag: tag}, tagged); err != nil {
		return leaf.TagLease{}, err
	}
	return o.inner.AcquireTag(ctx, tag, owner, ttl, watched)
}

func (o *ordered) ReserveOwned(ctx context.Context, tag, owner string, token int64, step int) (leaf.Reservation, error) {
	if err := o.f.before(ctx, Call{Method: "ReserveOwned", Tag: tag}, reserve); err != nil {
		return leaf.Reservation{}, err
	}
	r, err := o.inner.ReserveOwned(ctx, tag, owner, token, step)
	o.f.reserved(err)
	return r, err
}

func (o *ordered) RenewTag(ctx context.Context, tag, owner string, token int64, ttl time.Duration) (leaf.TagLease, error) {
	if err := o.f.before(ctx, Call{Method: "RenewTag", Tag: tag}, tagged); err != nil {
		return leaf.TagLease{}, err
	}
	return o.inner.RenewTag(ctx, tag, owner, token, ttl)
}

func (o *ordered) RenewTags(ctx context.Context, owner string, leases []leaf.TagToken, ttl time.Duration) ([]leaf.LeaseResult, error) {
	if err := o.f.before(ctx, Call{Method: "RenewTags"}, untagged); err != nil {
		return nil, err
	}
	return o.inner.RenewTags(ctx, owner, leases, ttl)
}

func (o *ordered) ReleaseTag(ctx context.Context, tag, owner string, token int64) (bool, error) {
	if err := o.f.before(ctx, Call{Method: "ReleaseTag", Tag: tag}, tagged); err != nil {
		return false, err
	}
	return o.inner.ReleaseTag(ctx, tag, owner, token)
}

func (o *ordered) SetOrdered(ctx context.Context, tag string, on bool) error {
	if err := o.f.before(ctx, Call{Method: "SetOrdered", Tag: tag}, tagged); err != nil {
		return err
	}
	return o.inner.SetOrdered(ctx, tag, on)
}

func (o *ordered) OrderedTags(ctx context.Context, after string, limit int) ([]leaf.TagLease, error) {
	if err := o.f.before(ctx, Call{Method: "OrderedTags"}, untagged); err != nil {
		return nil, err
	}
	return o.inner.OrderedTags(ctx, after, limit)
}

func (o *ordered) OrderedTagsIn(ctx context.Context, tags []string) ([]string, error) {
	if err := o.f.before(ctx, Call{Method: "OrderedTagsIn"}, untagged); err != nil {
		return nil, err
	}
	return o.inner.OrderedTagsIn(ctx, tags)
}

// degraded forwards without faults: it reads the store's memory, not the
// database.
type degraded struct{ inner leaf.DegradedStore }

func (d *degraded) Degraded() []string { return d.inner.Degraded() }

type pager struct {
	f     *Faults
	inner leaf.AllocPager
}

func (p *pager) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	if err := p.f.before(ctx, Call{Method: "AllocsPage"}, untagged); err != nil {
		return nil, err
	}
	return p.inner.AllocsPage(ctx, prefix, after, limit)
}

type shapeLister struct {
	f     *Faults
	inner leaf.ShapeLister
}

func (s *shapeLister) TagShapes(ctx context.Context, tags []string) (map[string]leaf.TagShape, error) {
	if err := s.f.before(ctx, Call{Method: "TagShapes"}, untagged); err != nil {
		return nil, err
	}
	return s.inner.TagShapes(ctx, tags)
}
