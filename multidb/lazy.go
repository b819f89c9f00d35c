package multidb

import (
	"context"
	"fmt"
	"sync"

	"github.com/leafgo/leaf"
)

// lazy is a Member opened on first use, for a Database given by Connect: a
// database that is down when the server starts cannot be opened (opening
// creates its tables), and must not keep the server from starting. Each
// call while it is not open tries to open it, within the call's context;
// the prober's calls do so in the background.
type lazy struct {
	name    string
	connect func(context.Context) (Member, error)

	mu     sync.Mutex
	inner  Member
	expect *leaf.StripeRecord // passed on to inner once it is open
	closed bool
}

func (l *lazy) get(ctx context.Context) (Member, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, leaf.ErrClosed
	}
	if l.inner != nil {
		return l.inner, nil
	}
	m, err := l.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("connect: %s: no store", l.name)
	}
	if l.expect != nil {
		m.ExpectStripe(*l.expect)
	}
	l.inner = m
	return m, nil
}

func (l *lazy) ExpectStripe(rec leaf.StripeRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expect = &rec
	if l.inner != nil {
		l.inner.ExpectStripe(rec)
	}
}

func (l *lazy) Tags(ctx context.Context) ([]string, error) {
	m, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return m.Tags(ctx)
}

func (l *lazy) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	m, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return m.Allocs(ctx)
}

func (l *lazy) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	m, err := l.get(ctx)
	if err != nil {
		return leaf.Alloc{}, err
	}
	return m.Alloc(ctx, tag)
}

func (l *lazy) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	m, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := m.(leaf.AllocPager)
	if !ok {
		return nil, fmt.Errorf("%T has no paged listing", m)
	}
	return p.AllocsPage(ctx, prefix, after, limit)
}

func (l *lazy) TagsVersion(ctx context.Context) (int64, error) {
	m, err := l.get(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := m.(leaf.SegmentVersioner)
	if !ok {
		return 0, fmt.Errorf("%T keeps no change counter", m)
	}
	return v.TagsVersion(ctx)
}

func (l *lazy) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	m, err := l.get(ctx)
	if err != nil {
		return leaf.Reservation{}, err
	}
	return m.Reserve(ctx, tag, step)
}

func (l *lazy) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	m, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return m.GiveBack(ctx, tag, from, expect)
}

func (l *lazy) Ping(ctx context.Context) error {
	m, err := l.get(ctx)
	if err != nil {
		return err
	}
	return m.Ping(ctx)
}

func (l *lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.inner == nil {
		return nil
	}
	return l.inner.Close()
}

func (l *lazy) CreateTag(ctx context.Context, a leaf.Alloc) error {
	m, err := l.get(ctx)
	if err != nil {
		return err
	}
	return m.CreateTag(ctx, a)
}

func (l *lazy) SetStep(ctx context.Context, tag string, step int) error {
	m, err := l.get(ctx)
	if err != nil {
		return err
	}
	return m.SetStep(ctx, tag, step)
}

func (l *lazy) DeleteTag(ctx context.Context, tag string) error {
	m, err := l.get(ctx)
	if err != nil {
		return err
	}
	return m.DeleteTag(ctx, tag)
}

func (l *lazy) ReadStripe(ctx context.Context) (leaf.StripeRecord, bool, error) {
	m, err := l.get(ctx)
	if err != nil {
		return leaf.StripeRecord{}, false, err
	}
	return m.ReadStripe(ctx)
}

func (l *lazy) WriteStripe(ctx context.Context, rec leaf.StripeRecord) (bool, error) {
	m, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return m.WriteStripe(ctx, rec)
}

func (l *lazy) ReplaceStripe(ctx context.Context, old, rec leaf.StripeRecord) (bool, error) {
	m, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return m.ReplaceStripe(ctx, old, rec)
}

func (l *lazy) Used(ctx context.Context) (bool, error) {
	m, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return m.Used(ctx)
}

func (l *lazy) Tombstone(ctx context.Context, tag string) (int64, bool, error) {
	m, err := l.get(ctx)
	if err != nil {
		return 0, false, err
	}
	return m.Tombstone(ctx, tag)
}
