package forward_test

import (
	"context"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

func BenchmarkZZNotOwner(b *testing.B) {
	store := testutil.Store(b, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 100000})
	_ = store.SetOrdered(context.Background(), "seq", true)
	mk := func(o string) *segment.Generator {
		s := segment.DefaultSettings()
		s.Store, s.Logger, s.Owner, s.OwnerLease = store, testutil.Logger(), o, 10*time.Second
		g, _ := segment.New(context.Background(), s)
		b.Cleanup(func() { g.Close(context.Background()) })
		return g
	}
	a, g := mk("http://a#1"), mk("http://b#1")
	a.NextID(context.Background(), "seq")
	g.NextID(context.Background(), "seq")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, err := g.NextID(context.Background(), "seq")
		if err == nil {
			b.Fatal("owner")
		}
	}
}
