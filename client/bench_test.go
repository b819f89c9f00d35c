package client_test

import (
	"context"
	"testing"

	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
)

// BenchmarkBufferedNext measures Buffered.NextID from GOMAXPROCS goroutines
// against a real server in-process over loopback, with the default lease
// sizes: from 10,000 IDs, growing with the rate (the server's own segments
// are large, so its store is rarely asked). waits/lease is how often a call
// found no ID at hand, per lease: under 1 means most leases arrive before
// they are needed; waits/range the same per range request (a lease above
// 10,000 IDs takes several).
// go test -run '^$' -bench BufferedNext -benchtime 2s ./client/
func BenchmarkBufferedNext(b *testing.B) {
	s, buf := benchBuffered(b)
	ctx := context.Background()
	requests, before := s.hits.Load(), buf.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := buf.NextID(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	report(b, s, buf, requests, before)
}

// benchBuffered starts a server in-process over loopback with large
// segments (its store is rarely asked) and a Buffered of it with the
// default lease sizes, closed when the benchmark ends, that has taken its
// first ID.
func benchBuffered(b *testing.B) (*server, *client.Buffered) {
	s := serve(b, httpapi.Config{Segment: startSegment(b, newStore(b, 1_000_000, "bench"), nil)})
	buf, err := newClient(b, []string{s.URL}).Buffered("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = buf.Close() })
	if _, err := buf.NextID(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s, buf
}

// report adds the IDs/s and the lease figures to a benchmark's line.
func report(b *testing.B, s *server, buf *client.Buffered, requests int64, before client.BufferedStats) {
	after := buf.Stats()
	leases, waits := after.Leases-before.Leases, after.Waits-before.Waits
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
	b.ReportMetric(float64(leases), "leases")
	b.ReportMetric(float64(s.hits.Load()-requests), "requests")
	b.ReportMetric(float64(waits), "waits")
	b.ReportMetric(float64(waits)/float64(max(leases, 1)), "waits/lease")
	b.ReportMetric(float64(waits)/float64(max(after.Ranges-before.Ranges, 1)), "waits/range")
	b.ReportMetric(float64(after.RangeSize), "lease-size")
}

// BenchmarkBufferedNextOneCaller is BenchmarkBufferedNext from one
// goroutine: a caller that leaves a core to the loader and the server, as
// an application that does anything but draw IDs does. With every core
// spinning in Next (BenchmarkBufferedNext on a 2-core machine), the
// loader and the in-process server run only when the scheduler preempts a
// caller, every 10ms, and most leases are late whatever their size.
// go test -run '^$' -bench BufferedNextOneCaller -benchtime 2s ./client/
func BenchmarkBufferedNextOneCaller(b *testing.B) {
	s, buf := benchBuffered(b)
	ctx := context.Background()
	requests, before := s.hits.Load(), buf.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := buf.NextID(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, s, buf, requests, before)
}
