package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	seq := func(from, to int64) []int64 {
		var v []int64
		for i := from; i <= to; i++ {
			v = append(v, i)
		}
		return v
	}
	repeat := func(v int64, n int) []int64 { return slices.Repeat([]int64{v}, n) }
	tests := []struct {
		name   string
		values []int64
		// want maps a quantile to the expected value: exact below 128,
		// the highest value of its bucket above.
		want map[float64]int64
		max  int64
	}{
		{"empty", nil, map[float64]int64{0.5: 0, 0.99: 0}, 0},
		{"one value", []int64{42}, map[float64]int64{0: 42, 0.5: 42, 1: 42}, 42},
		{"exact range 1..100", seq(1, 100), map[float64]int64{0.01: 1, 0.5: 50, 0.9: 90, 0.99: 99, 0.999: 100, 1: 100}, 100},
		// 500 is in the bucket [500, 503], 900 in [896, 903], 990 in
		// [984, 991]; 999 in [992, 999]; 1000 is the max.
		{"1..1000", seq(1, 1000), map[float64]int64{0.5: 503, 0.9: 903, 0.99: 991, 0.999: 999, 1: 1000}, 1000},
		// A repeated large value is reported exactly: the bucket's top is
		// capped by the largest value recorded.
		{"constant 1ms", repeat(1_000_000, 1000), map[float64]int64{0.5: 1_000_000, 0.999: 1_000_000}, 1_000_000},
		// 99% at 100µs, 1% at 1s: the tail shows from p99.9 on.
		{"bimodal", append(repeat(100_000, 990), repeat(1_000_000_000, 10)...),
			map[float64]int64{0.5: 100_351, 0.99: 100_351, 0.991: 1_000_000_000, 0.999: 1_000_000_000}, 1_000_000_000},
		{"negative and huge are clamped", []int64{-5, 0, 1 << 40}, map[float64]int64{0.33: 0, 0.66: 0, 1: histMax}, histMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h histogram
			for _, v := range tt.values {
				h.record(v)
			}
			for q, want := range tt.want {
				if got := h.quantile(q); got != want {
					t.Errorf("quantile(%v) = %d, want %d", q, got, want)
				}
			}
			if h.max != tt.max || h.n != uint64(len(tt.values)) {
				t.Errorf("max %d n %d, want %d %d", h.max, h.n, tt.max, len(tt.values))
			}
		})
	}
}

// TestHistogramPrecision: against random latencies spanning six orders of
// magnitude, every quantile is at least the exact one and at most 1/64
// above it, whether recorded in one histogram or merged from several.
func TestHistogramPrecision(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	values := make([]int64, 100_000)
	parts := make([]histogram, 7)
	var whole histogram
	for i := range values {
		v := int64(math.Exp(rng.Float64()*math.Log(1e9))) + rng.Int64N(100)
		values[i] = v
		whole.record(v)
		parts[i%len(parts)].record(v)
	}
	var merged histogram
	for i := range parts {
		merged.merge(&parts[i])
	}
	merged.merge(&histogram{}) // an empty one changes nothing
	if merged != whole {
		t.Fatal("merged histogram differs from the one recorded directly")
	}
	slices.Sort(values)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		exact := values[int(math.Ceil(q*float64(len(values))-1e-6))-1]
		got := whole.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/64 {
			t.Errorf("quantile(%v) = %d, exact %d: beyond 1/64", q, got, exact)
		}
	}
	if whole.min != values[0] || whole.max != values[len(values)-1] {
		t.Errorf("min %d max %d, want %d %d", whole.min, whole.max, values[0], values[len(values)-1])
	}
	var rows uint64
	prev := int64(0)
	for _, r := range whole.coarse() {
		if r.le <= prev {
			t.Errorf("coarse rows not increasing at %d", r.le)
		}
		rows += r.count
		prev = r.le
	}
	if rows != whole.n {
		t.Errorf("coarse rows hold %d values, want %d", rows, whole.n)
	}
}

// TestHistogramBuckets: buckets tile 0..histMax without gaps or overlaps,
// each at most 1/64 of its values wide, and every value lands in its own.
func TestHistogramBuckets(t *testing.T) {
	t.Parallel()
	next := int64(0)
	for i := range histBuckets {
		lo, hi := histBounds(i)
		if lo != next || hi < lo || (lo > histExactMax && float64(hi-lo+1) > float64(lo)/64) {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d and be at most 1/64 wide", i, lo, hi, next)
		}
		for _, v := range []int64{lo, (lo + hi) / 2, hi} {
			if got := histIndex(v); got != i {
				t.Fatalf("histIndex(%d) = %d, want %d", v, got, i)
			}
		}
		next = hi + 1
	}
	if next != histMax+1 {
		t.Errorf("buckets end at %d, want %d", next-1, int64(histMax))
	}
}

// TestHistogramMerge: merging gives what recording every value in one
// histogram gives, min and max included, whichever side is empty.
func TestHistogramMerge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b []int64
	}{
		{"both empty", nil, nil},
		{"into empty", nil, []int64{5, 3_000, 7}},
		{"from empty", []int64{5, 3_000, 7}, nil},
		{"min from the other", []int64{100, 200}, []int64{1, 150}},
		{"max from the other", []int64{100, 200}, []int64{150, 1 << 30}},
		{"zeros", []int64{0, 0}, []int64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b, whole histogram
			for _, v := range tt.a {
				a.record(v)
				whole.record(v)
			}
			for _, v := range tt.b {
				b.record(v)
				whole.record(v)
			}
			a.merge(&b)
			if a != whole {
				t.Errorf("merged n %d min %d max %d mean %v; recorded in one: n %d min %d max %d mean %v",
					a.n, a.min, a.max, a.mean(), whole.n, whole.min, whole.max, whole.mean())
			}
		})
	}
}

// TestHistogramCoarse: the printed distribution's rows, on the 1-2-5 scale,
// from the first row holding a value to the last, empty rows between kept.
func TestHistogramCoarse(t *testing.T) {
	t.Parallel()
	type row = [2]int64 // le, count
	tests := []struct {
		name   string
		values []int64
		want   []row
	}{
		{"empty", nil, nil},
		{"one value", []int64{1500}, []row{{2000, 1}}},
		{"on a bound, the largest value", []int64{1000}, []row{{1000, 1}}},
		// 1000's bucket is [1000, 1007]: with larger values recorded its
		// top, 1007, is what places it.
		{"on a bound, below the largest", []int64{1000, 3000}, []row{{2000, 1}, {5000, 1}}},
		{"gap kept", []int64{1500, 1500, 40_000}, []row{{2000, 2}, {5000, 0}, {10_000, 0}, {20_000, 0}, {50_000, 1}}},
		{"exact small values", []int64{1, 2, 2, 3}, []row{{1, 1}, {2, 2}, {5, 1}}},
		{"clamped", []int64{1 << 40}, []row{{histMax, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h histogram
			for _, v := range tt.values {
				h.record(v)
			}
			var got []row
			for _, r := range h.coarse() {
				got = append(got, row{r.le, int64(r.count)})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("coarse() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHistogramMean(t *testing.T) {
	t.Parallel()
	var h histogram
	if h.mean() != 0 {
		t.Errorf("mean of nothing = %v", h.mean())
	}
	for _, v := range []int64{1, 2, 3, 1_000_000} {
		h.record(v)
	}
	if h.mean() != 250_001.5 || h.min != 1 || h.max != 1_000_000 {
		t.Errorf("mean %v min %d max %d, want 250001.5 1 1000000", h.mean(), h.min, h.max)
	}
	// The latency report is in microseconds.
	if l := h.latency(); l.Max != 1000 || l.Mean != 250.0015 || l.P50 != 0.002 {
		t.Errorf("latency() = %+v", l)
	}
}
