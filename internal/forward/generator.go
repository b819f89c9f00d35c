package forward

import (
	"context"

	"github.com/leafgo/leaf/segment"
)

// Generator is a segment generator whose ID methods forward: everything
// else is the generator's own. It is what the transports are given in
// forward mode, so that /api/segment/get, the /v2 ID routes and gRPC all
// serve every ordered tag from any server.
type Generator struct {
	*segment.Generator
	fwd *Forwarder
}

// Wrap returns g with its ID methods answered through f, whose Local must
// be g.
func Wrap(g *segment.Generator, f *Forwarder) *Generator {
	return &Generator{Generator: g, fwd: f}
}

// NextID issues one ID of tag, here or at its owner.
func (g *Generator) NextID(ctx context.Context, tag string) (int64, error) {
	return g.fwd.NextID(ctx, tag)
}

// NextIDs appends n IDs of tag to dst, here or at its owner.
func (g *Generator) NextIDs(ctx context.Context, tag string, n int, dst []int64) ([]int64, error) {
	return g.fwd.NextIDs(ctx, tag, n, dst)
}

// NextIDPeriod is NextID that names a periodic tag's period.
func (g *Generator) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	return g.fwd.NextIDPeriod(ctx, tag)
}

// NextIDsPeriod is NextIDs that names a periodic tag's period.
func (g *Generator) NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error) {
	return g.fwd.NextIDsPeriod(ctx, tag, n, dst)
}

// NextIDVia is NextIDPeriod that also names the owner the ID was forwarded
// to, "" when it was issued here.
func (g *Generator) NextIDVia(ctx context.Context, tag string) (int64, string, string, error) {
	return g.fwd.NextIDVia(ctx, tag)
}

// NextIDsVia is NextIDsPeriod that also names the owner the IDs were
// forwarded to, "" when they were issued here.
func (g *Generator) NextIDsVia(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, string, error) {
	return g.fwd.NextIDsVia(ctx, tag, n, dst)
}
