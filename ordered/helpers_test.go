package ordered_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/ordered"
	"github.com/leafgo/leaf/segment"
)

var bg = context.Background()

// conf is a server's configuration: its generator's and its ordered
// tags'.
type conf struct {
	segment.Config
	Owner      string
	OwnerLease time.Duration
}

func settings(st leaf.SegmentStore, tweaks ...func(*conf)) conf {
	s := conf{Config: segment.DefaultConfig(), OwnerLease: ordered.DefaultConfig().OwnerLease}
	s.Store = st
	if !testing.Verbose() {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	for _, f := range tweaks {
		f(&s)
	}
	return s
}

// gen is a server: a generator with ordered tags.
type gen struct {
	*segment.Generator
	*ordered.Tags
}

// Close closes the generator, which closes its ordered tags.
func (g *gen) Close(ctx context.Context) error { return g.Generator.Close(ctx) }

// Refresh runs the ordered tags' part of the generator's tag refresh.
func (g *gen) Refresh() error { return g.Tags.Refresh(bg) }

// NextOrderedRange is Take by leaf.ByForwarder, as a forwarding server's
// owner serves it.
func (g *gen) NextOrderedRange(ctx context.Context, tag string, n int) (int64, int64, error) {
	r, err := g.Take(ctx, tag, n, leaf.ByForwarder)
	return r.Start, r.End, err
}

func start(s conf) (*gen, error) {
	g, tags, err := ordered.NewGenerator(bg, s.Config, ordered.Config{Owner: s.Owner, OwnerLease: s.OwnerLease})
	if err != nil {
		return nil, err
	}
	return &gen{g, tags}, nil
}

func newGen(t *testing.T, s conf) *gen {
	t.Helper()
	g, err := start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(bg) })
	return g
}

func next(t *testing.T, g *gen, tag string) int64 {
	t.Helper()
	id, err := g.NextID(bg, tag)
	if err != nil {
		t.Fatalf("NextID(%q): %v", tag, err)
	}
	return id
}
