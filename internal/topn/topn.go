// Package topn keeps the k best of a stream of candidates in one pass, with
// memory bounded by k: the busiest tags of a status listing, which the
// status summary, the metrics and the monitor's history each pick from
// every tag in use.
package topn

import "slices"

// Keep holds the indexes of the k best candidates offered so far. Better
// reports whether candidate a ranks above candidate b; it must be a strict
// order.
type Keep struct {
	k      int
	idx    []int // a min-heap: idx[0] is the worst kept
	better func(a, b int) bool
}

// New keeps the k best by better. k <= 0 keeps nothing.
func New(k int, better func(a, b int) bool) *Keep {
	return &Keep{k: k, better: better}
}

// Offer considers candidate i: O(1) when it ranks below every one kept, as
// most do once k are kept, O(log k) otherwise.
func (h *Keep) Offer(i int) {
	switch {
	case h.k <= 0:
	case len(h.idx) < h.k:
		if h.idx == nil {
			h.idx = make([]int, 0, h.k)
		}
		h.idx = append(h.idx, i)
		for j := len(h.idx) - 1; j > 0; {
			p := (j - 1) / 2
			if !h.better(h.idx[p], h.idx[j]) {
				break
			}
			h.idx[j], h.idx[p] = h.idx[p], h.idx[j]
			j = p
		}
	case h.better(i, h.idx[0]):
		h.idx[0] = i
		for j := 0; ; {
			m, l, r := j, 2*j+1, 2*j+2
			if l < len(h.idx) && h.better(h.idx[m], h.idx[l]) {
				m = l
			}
			if r < len(h.idx) && h.better(h.idx[m], h.idx[r]) {
				m = r
			}
			if m == j {
				break
			}
			h.idx[j], h.idx[m] = h.idx[m], h.idx[j]
			j = m
		}
	}
}

// Len is how many are kept: min(k, the candidates offered).
func (h *Keep) Len() int { return len(h.idx) }

// Unordered returns the kept indexes in no particular order. The slice is
// the Keep's own until the next Offer.
func (h *Keep) Unordered() []int { return h.idx }

// Best returns the kept indexes, best first, in a new slice.
func (h *Keep) Best() []int {
	out := slices.Clone(h.idx)
	slices.SortFunc(out, func(a, b int) int {
		if h.better(a, b) {
			return -1
		}
		if h.better(b, a) {
			return 1
		}
		return 0
	})
	return out
}
