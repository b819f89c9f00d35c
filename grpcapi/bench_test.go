package grpcapi_test

import (
	"context"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
)

// The benchmarks call a real segment generator through a real server over
// loopback TCP and one client connection: they measure the whole transport
// (protobuf, HTTP/2, the kernel's loopback), which dwarfs the generator's
// one atomic add. The step is the largest, so the store is hardly called.
// Client and server share the machine's cores.

func benchClient(b *testing.B) leafv1.LeafClient {
	st := testutil.Store(b, leaf.Alloc{Tag: "bench", MaxID: 1, Step: leaf.MaxStep})
	return client(b, grpcapi.Config{Segment: newSegment(b, st, nil)})
}

// reportIDs reports the IDs issued per second of the benchmark's time.
func reportIDs(b *testing.B, ids int) {
	b.ReportMetric(float64(ids)/b.Elapsed().Seconds(), "IDs/s")
}

// BenchmarkUnaryNextID: one ID per call. serial is the latency of one call
// after another; parallel is the throughput of 32 callers on one connection.
func BenchmarkUnaryNextID(b *testing.B) {
	req := &leafv1.NextIDRequest{Tag: "bench"}
	b.Run("serial", func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if _, err := c.NextID(ctx, req); err != nil {
				b.Fatal(err)
			}
			n++
		}
		reportIDs(b, n)
	})
	b.Run("parallel", func(b *testing.B) {
		c := benchClient(b)
		b.ReportAllocs()
		b.SetParallelism(16) // 16 × GOMAXPROCS callers
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := c.NextID(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportIDs(b, b.N)
	})
}

// BenchmarkNextIDs1000: 1000 IDs per call, serial and parallel as above.
func BenchmarkNextIDs1000(b *testing.B) {
	const n = 1000
	req := &leafv1.NextIDsRequest{Tag: "bench", Count: n}
	b.Run("serial", func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		b.ReportAllocs()
		calls := 0
		for b.Loop() {
			r, err := c.NextIDs(ctx, req)
			if err != nil || len(r.GetIds()) != n {
				b.Fatal(len(r.GetIds()), err)
			}
			calls++
		}
		reportIDs(b, calls*n)
	})
	b.Run("parallel", func(b *testing.B) {
		c := benchClient(b)
		b.ReportAllocs()
		b.SetParallelism(16)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				r, err := c.NextIDs(ctx, req)
				if err != nil || len(r.GetIds()) != n {
					b.Error(len(r.GetIds()), err)
					return
				}
			}
		})
		reportIDs(b, b.N*n)
	})
}
