package topn

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestKeepMatchesSort(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{0, 3}, {5, 0}, {1, 1}, {3, 5}, {10, 10}, {1000, 1}, {1000, 7}, {5000, 50}} {
		vals := make([]int, tc.n)
		for i := range vals {
			vals[i] = rand.IntN(100) // ties broken by index below
		}
		better := func(a, b int) bool {
			if vals[a] != vals[b] {
				return vals[a] > vals[b]
			}
			return a < b
		}
		h := New(tc.k, better)
		for i := range vals {
			h.Offer(i)
		}
		want := make([]int, tc.n)
		for i := range want {
			want[i] = i
		}
		slices.SortFunc(want, func(a, b int) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		want = want[:min(max(tc.k, 0), tc.n)]
		if got := h.Best(); !slices.Equal(got, want) || h.Len() != len(want) {
			t.Errorf("n=%d k=%d: Best = %v, want %v", tc.n, tc.k, got, want)
		}
	}
}
