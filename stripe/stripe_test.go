package stripe

import (
	"math"
	"testing"

	"github.com/leafgo/leaf"
)

// TestStripeMapping: every number maps to an ID of its stripe and back, the
// stripes of one store never share an ID, and Ranges covers exactly the IDs
// of its numbers, in increasing runs.
func TestStripeMapping(t *testing.T) {
	for _, tc := range []struct{ of, block int }{{1, 1}, {2, 1}, {3, 1}, {3, 7}, {2, 1000}, {5, 4}} {
		seen := map[int64]int{}
		for i := range tc.of {
			s := leaf.Stripe{Index: i, Databases: tc.of, Block: int64(tc.block)}
			if err := Validate(s); err != nil {
				t.Fatal(err)
			}
			last := int64(-1)
			for x := range int64(3000) {
				id := ID(s, x)
				if id <= last {
					t.Fatalf("%+v: ID(%d) = %d, not above ID(%d) = %d", s, x, id, x-1, last)
				}
				last = id
				if !Owns(s, id) || Number(s, id) != x {
					t.Fatalf("%+v: ID(%d) = %d, Owns %v, Number %d", s, x, id, Owns(s, id), Number(s, id))
				}
				if j, dup := seen[id]; dup {
					t.Fatalf("ID %d from stripes %d and %d of %d", id, j, i, tc.of)
				}
				seen[id] = i
			}
			for _, r := range [][2]int64{{0, 1}, {5, 5}, {3, 2000}, {999, 1001}, {1000, 2000}} {
				var got []int64
				prevEnd := int64(-1)
				Ranges(s, r[0], r[1], func(start, end int64) bool {
					if start >= end || start <= prevEnd {
						t.Fatalf("%+v: run [%d, %d) after end %d", s, start, end, prevEnd)
					}
					prevEnd = end
					for id := start; id < end; id++ {
						got = append(got, id)
					}
					return true
				})
				if int64(len(got)) != max(r[1]-r[0], 0) {
					t.Fatalf("%+v: Ranges(%d, %d) gave %d IDs", s, r[0], r[1], len(got))
				}
				for k, id := range got {
					if id != ID(s, r[0]+int64(k)) {
						t.Fatalf("%+v: Ranges(%d, %d)[%d] = %d, want %d", s, r[0], r[1], k, id, ID(s, r[0]+int64(k)))
					}
				}
			}
		}
		// Together the stripes cover the IDs without holes.
		for id := range int64(3000) {
			if _, ok := seen[id]; !ok {
				t.Fatalf("of %d, block %d: ID %d belongs to no stripe", tc.of, tc.block, id)
			}
		}
	}
}

func TestStripeMaxNumber(t *testing.T) {
	for _, s := range []leaf.Stripe{
		{Index: 0, Databases: 1, Block: 1},
		{Index: 0, Databases: 2, Block: 1},
		{Index: 1, Databases: 2, Block: 1},
		{Index: 2, Databases: 3, Block: 10000},
		{Index: 0, Databases: 3, Block: 10000},
		{Index: 63, Databases: 64, Block: leaf.MaxBlock},
		{Index: 1, Databases: 3, Block: leaf.MaxBlock},
		{Index: 2, Databases: 3, Block: leaf.MaxBlock - 1},
	} {
		m := MaxNumber(s)
		id := ID(s, m)
		if id < 0 || !Owns(s, id) || Number(s, id) != m {
			t.Fatalf("%+v: MaxNumber %d maps to %d", s, m, id)
		}
		// The next number would be past the largest int64.
		next := (m/s.Block+1)*s.Block*int64(s.Databases) + int64(s.Index)*s.Block
		if m%s.Block != s.Block-1 {
			next = id + 1
		}
		if next >= 0 && next > id && Owns(s, next) {
			t.Fatalf("%+v: MaxNumber %d, but the ID %d of the next number fits", s, m, next)
		}
	}
	if MaxNumber(leaf.Stripe{}) != math.MaxInt64 {
		t.Fatal("the zero stripe is bounded")
	}
}

func TestStripeValidate(t *testing.T) {
	for _, s := range []leaf.Stripe{
		{Index: 0, Databases: 0, Block: 1},
		{Index: 2, Databases: 2, Block: 1},
		{Index: -1, Databases: 2, Block: 1},
		{Index: 0, Databases: 2, Block: 0},
		{Index: 0, Databases: leaf.MaxStripes + 1, Block: 1},
		{Index: 0, Databases: 2, Block: leaf.MaxBlock + 1},
	} {
		if Validate(s) == nil {
			t.Errorf("%+v valid", s)
		}
	}
}
