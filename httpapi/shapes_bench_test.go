package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// BenchmarkV2Shapes measures one ID a request over real HTTP on loopback
// (keep-alive, GOMAXPROCS clients), through the real segment generator, for
// a tag of each shape in the same run: what a period, a format and the
// opaque permutation cost a request beside a plain tag.
// go test -run '^$' -bench V2Shapes -benchtime 2s ./httpapi/
func BenchmarkV2Shapes(b *testing.B) {
	st := testutil.Store(b)
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct {
		tag   string
		shape leaf.TagShape
	}{
		{"plain", leaf.TagShape{}},
		{"periodic", leaf.TagShape{Period: leaf.PeriodDay}},
		{"formatted", leaf.TagShape{Format: leaf.IDFormat{Prefix: "ORD-", Width: 12}}},
		{"periodic-formatted", leaf.TagShape{Period: leaf.PeriodDay, Format: leaf.IDFormat{Prefix: "ORD-", Width: 9, Radix: leaf.Radix36}}},
		{"opaque", leaf.TagShape{OpaqueBits: 48}},
	} {
		shape, err := segment.PrepareShape(c.shape, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.CreateShapedTag(context.Background(), leaf.Alloc{Tag: c.tag, Step: 1_000_000}, shape); err != nil {
			b.Fatal(err)
		}
	}
	set := segment.DefaultConfig()
	set.Store, set.Logger, set.OpaqueKey = st, slog.New(slog.DiscardHandler), key
	g, err := segment.New(context.Background(), set)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close(context.Background()) })
	base := serveFast(b, New(Config{Segment: g, Tags: st, Logger: slog.New(slog.DiscardHandler)}), Limits{})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, tag := range []string{"plain", "periodic", "formatted", "periodic-formatted", "opaque"} {
		b.Run(tag, func(b *testing.B) {
			url := base + "/v2/segment/" + tag
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := hc.Post(url, "", nil)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("%s: %d", url, resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
		})
	}
}
