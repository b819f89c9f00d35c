package bench

import (
	"math"
	"math/bits"
)

// histogram counts latencies (nanoseconds) in log-linear buckets, as
// HdrHistogram does: values below 2^histSubBits exactly, then each power of
// two split into 2^(histSubBits-1) equal buckets, so a bucket is at most
// 1/64 (1.6%) of its values wide at any magnitude, in a fixed array of
// ~2,000 counters (16 KB) from 1ns to histMax. Recording is a few shifts and
// an increment. Quantiles report the highest value of their bucket, capped
// by the largest value recorded, so they never understate.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64
	max    int64
	min    int64
}

const (
	histSubBits  = 7
	histHalf     = 1 << (histSubBits - 1)
	histMaxBits  = 36 // values up to 2^36-1 ns, ~68.7s; larger ones are clamped
	histMax      = 1<<histMaxBits - 1
	histBuckets  = (histMaxBits-histSubBits)*histHalf + 1<<histSubBits
	histExactMax = 1<<histSubBits - 1
)

// histIndex is the bucket of v (0 <= v <= histMax).
func histIndex(v int64) int {
	if v <= histExactMax {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits
	return shift*histHalf + int(v>>shift)
}

// histBounds is the range of values bucket i holds.
func histBounds(i int) (lo, hi int64) {
	if i <= histExactMax {
		return int64(i), int64(i)
	}
	shift := i/histHalf - 1
	lo = int64(i-shift*histHalf) << shift
	return lo, lo + 1<<shift - 1
}

func (h *histogram) record(v int64) {
	v = min(max(v, 0), histMax)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.counts[histIndex(v)]++
	h.n++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile is the value at or below which a fraction q of the recorded
// values lie (the ceil(q*n)-th smallest), to the bucket's precision; 0 if
// nothing was recorded.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	// The tolerance keeps a product like 0.99*100 that float arithmetic
	// puts a hair above 99 from rounding up to the next value.
	rank := uint64(math.Ceil(q*float64(h.n) - 1e-6))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			_, hi := histBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}

// coarseRow is one line of the printed distribution: how many values are at
// most le and above the previous row's le.
type coarseRow struct {
	le    int64
	count uint64
}

// coarse regroups the buckets on a 1-2-5 scale (... 1µs, 2µs, 5µs, 10µs
// ...), from the first non-empty row to the last. A fine bucket goes to the
// row its highest value (capped by the largest recorded) falls in, so a
// value up to 1.6% below a row's bound may be counted in the next row up:
// like the quantiles, the rows never understate.
func (h *histogram) coarse() []coarseRow {
	var bounds []int64
	for decade := int64(1); decade <= histMax; decade *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*decade < histMax {
				bounds = append(bounds, m*decade)
			}
		}
	}
	bounds = append(bounds, histMax) // the clamped values
	rows := make([]coarseRow, len(bounds))
	for i := range rows {
		rows[i].le = bounds[i]
	}
	r := 0
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		_, hi := histBounds(i)
		hi = min(hi, h.max)
		for r < len(rows)-1 && hi > rows[r].le {
			r++
		}
		rows[r].count += c
	}
	first, last := -1, -1
	for i, row := range rows {
		if row.count > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	return rows[first : last+1]
}

// latency reports the quantiles in microseconds.
func (h *histogram) latency() Latency {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Latency{P50: us(h.quantile(0.5)), P90: us(h.quantile(0.9)),
		P99: us(h.quantile(0.99)), P999: us(h.quantile(0.999)), Max: us(h.max), Mean: h.mean() / 1e3}
}
