package segment

import (
	"context"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// Sample takes the rate sample the background loop takes every second, so
// that tests on a fake clock control when samples happen.
func (g *Generator) Sample() { _ = g.sample(context.Background()) }

// Held finds tag's buffer as a request does, and returns a take from that
// very buffer, as the request would run it later: the race with the idle
// sweep, made deterministic.
func (g *Generator) Held(tag string) (func(n int64) (int64, int64, error), error) {
	b, err := g.buffer(tag)
	if err != nil {
		return nil, err
	}
	return func(n int64) (int64, int64, error) {
		var waitUntil time.Time
		return b.take(context.Background(), n, &waitUntil)
	}, nil
}

// Refresh runs the tag refresh the background loop runs every
// RefreshInterval.
func (g *Generator) Refresh() error { return g.refresh(context.Background()) }

// PeriodSpan is the span [from, until) a periodic tag of shape compares
// instants with on its hot path, for the period t is in; ok is false where
// it compares dates instead.
func PeriodSpan(shape leaf.TagShape, t time.Time) (from, until time.Time, ok bool, err error) {
	loc, err := tagshape.Location(shape.TimeZone)
	if err != nil {
		return from, until, false, err
	}
	p := &periodic{shape: shape, loc: loc}
	f, u := p.bounds(p.date(t))
	return time.Unix(0, f), time.Unix(0, u), u != 0, nil
}
