package client_test

import (
	"context"
	"testing"

	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
)

// BenchmarkBufferedNext measures Buffered.Next from GOMAXPROCS goroutines
// against a real server in-process over loopback, leasing ranges of 10,000
// (the server's own segments are large, so its store is rarely asked).
// go test -run '^$' -bench BufferedNext -benchtime 2s ./client/
func BenchmarkBufferedNext(b *testing.B) {
	s := serve(b, httpapi.Config{Segment: startSegment(b, newStore(b, 1_000_000, "bench"), nil)})
	c := newClient(b, []string{s.URL})
	buf, err := c.Buffered("bench", client.WithRangeSize(10_000))
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	ctx := context.Background()
	if _, err := buf.Next(ctx); err != nil {
		b.Fatal(err)
	}
	leases := s.hits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := buf.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
	b.ReportMetric(float64(s.hits.Load()-leases), "leases")
	b.ReportMetric(float64(buf.Stats().Waits), "waits")
}
