package snowflake_test

import (
	"testing"
	"time"
)

// The ceiling of a 12-bit sequence: 4096 IDs per millisecond.
const ceiling = 4_096_000

// report adds IDs/s and the share of the layout's ceiling. Run with
// -benchtime=3s or more: the clock, not the CPU, is the limit.
func report(b *testing.B, start time.Time) {
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
