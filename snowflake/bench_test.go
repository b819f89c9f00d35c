package snowflake_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf/snowflake"
)

// report adds IDs/s and the share of Leaf's layout's ceiling. Run with
// -benchtime=3s or more: the clock, not the CPU, is the limit.
func report(b *testing.B, start time.Time) { reportFor(b, start, snowflake.LeafLayout) }

// reportFor adds IDs/s and the share of the ceiling of layout l: one
// worker's whole sequence every millisecond, 2^SequenceBits * 1000 IDs/s.
func reportFor(b *testing.B, start time.Time, l snowflake.Layout) {
	ceiling := float64(l.MaxSequence()+1) * 1000
	perSec := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(perSec, "IDs/s")
	b.ReportMetric(100*perSec/ceiling, "%ceiling")
}

func BenchmarkNextID(b *testing.B) {
	g := benchGenerator(b)
	start := time.Now()
	for b.Loop() {
		if _, err := g.NextID(b.Context(), ""); err != nil {
			b.Fatal(err)
		}
	}
	report(b, start)
}

func BenchmarkNextIDParallel(b *testing.B) {
	g := benchGenerator(b)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(b.Context(), ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
	report(b, start)
}

func BenchmarkNextIDs1000(b *testing.B) {
	g := benchGenerator(b)
	dst := make([]int64, 0, 1000)
	start := time.Now()
	for b.Loop() {
		var err error
		if dst, err = g.NextIDs(b.Context(), "", 1000, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.N *= 1000
	report(b, start)
	b.N /= 1000
}

// BenchmarkSingleIDDuringBatches: the latency of single IDs while two other
// goroutines draw batches of 10,000 without pause, reported as p50 and p99
// (ns). A batch spans at least three milliseconds of sequence; a single ID
// must not wait for the whole of it.
func BenchmarkSingleIDDuringBatches(b *testing.B) {
	g := benchGenerator(b)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]int64, 0, 10000)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := g.NextIDs(context.Background(), "", 10000, buf[:0]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := g.NextID(context.Background(), ""); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(50 * time.Microsecond) // a paced client, not a third saturating one
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// The js-safe layout's ceiling is 256 IDs per millisecond per worker
// (256,000 IDs/s): far below what the CPU allows, so a saturating caller
// should see about 100% of it and about 3.9 µs/op. Run with
// -benchtime=3s or more.
func BenchmarkJSSafeNextID(b *testing.B) {
	g := jsSafeGenerator(b, 1, 0, nil)
	start := time.Now()
	for b.Loop() {
		if _, err := g.NextID(b.Context(), ""); err != nil {
			b.Fatal(err)
		}
	}
	reportFor(b, start, snowflake.JSSafeLayout)
}

func BenchmarkJSSafeNextIDParallel(b *testing.B) {
	g := jsSafeGenerator(b, 1, 0, nil)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(b.Context(), ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportFor(b, start, snowflake.JSSafeLayout)
}

// BenchmarkJSSafeNextIDs1000: batches of 1000, four milliseconds of
// sequence each; ns/op is per batch.
func BenchmarkJSSafeNextIDs1000(b *testing.B) {
	g := jsSafeGenerator(b, 1, 0, nil)
	dst := make([]int64, 0, 1000)
	start := time.Now()
	for b.Loop() {
		var err error
		if dst, err = g.NextIDs(b.Context(), "", 1000, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.N *= 1000
	reportFor(b, start, snowflake.JSSafeLayout)
	b.N /= 1000
}
