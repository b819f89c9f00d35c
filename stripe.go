package leaf

import (
	"fmt"
	"math"
)

// Stripe is one database's share of the IDs when a segment store spans
// several independent databases (Tinyid's delta/remainder, by blocks): the
// IDs are cut into blocks of Block IDs, and database Index of Of serves the
// blocks whose number is ≡ Index (mod Of). Its leaf_alloc counts in its own
// numbers, 0, 1, 2, …: number x is the ID
//
//	(x / Block) · Of · Block  +  Index · Block  +  x mod Block
//
// With Block 1 that is x·Of + Index. The databases never need to agree: no
// two of them can produce one ID. The zero Stripe (Of 0) is a store of one
// database, whose numbers are the IDs.
type Stripe struct {
	Index int   // this database's place in the list, from 0
	Of    int   // how many databases the store spans
	Block int64 // IDs per block, >= 1
}

// MaxStripes bounds how many databases one segment store may span, and
// MaxBlock the IDs per block (so that a round of blocks fits an int64 many
// times over).
const (
	MaxStripes = 64
	MaxBlock   = 1 << 32
)

// Striped reports whether s maps numbers to IDs (Of >= 1).
func (s Stripe) Striped() bool { return s.Of > 0 }

// Validate checks 0 <= Index < Of <= MaxStripes and 1 <= Block <=
// MaxBlock; the zero Stripe is valid.
func (s Stripe) Validate() error {
	if s == (Stripe{}) {
		return nil
	}
	if s.Of < 1 || s.Of > MaxStripes || s.Index < 0 || s.Index >= s.Of || s.Block < 1 || s.Block > MaxBlock {
		return fmt.Errorf("%w: stripe %d of %d with blocks of %d IDs, want 0 <= index < databases <= %d and 1 <= block <= %d",
			ErrInvalidArgument, s.Index, s.Of, s.Block, MaxStripes, MaxBlock)
	}
	return nil
}

// MaxNumber is the largest number whose ID fits in an int64; numbers above
// it must never be issued. It is -1 when the stripe owns no ID at all.
func (s Stripe) MaxNumber() int64 {
	if !s.Striped() {
		return math.MaxInt64
	}
	top := int64(math.MaxInt64) / s.Block // the block of the largest int64
	if top < int64(s.Index) {
		return -1
	}
	block := top - (top-int64(s.Index))%int64(s.Of) // the stripe's last block
	last := int64(math.MaxInt64)
	if block < top {
		last = block*s.Block + s.Block - 1
	}
	return s.Number(last)
}

// ID maps number x (>= 0, <= MaxNumber) to its ID.
func (s Stripe) ID(x int64) int64 {
	if !s.Striped() {
		return x
	}
	return (x/s.Block)*int64(s.Of)*s.Block + int64(s.Index)*s.Block + x%s.Block
}

// Owns reports whether id (>= 0) is one of the stripe's IDs.
func (s Stripe) Owns(id int64) bool {
	if !s.Striped() {
		return true
	}
	return (id/s.Block)%int64(s.Of) == int64(s.Index)
}

// Number is ID's inverse, for an id the stripe owns.
func (s Stripe) Number(id int64) int64 {
	if !s.Striped() {
		return id
	}
	return (id/(int64(s.Of)*s.Block))*s.Block + id%s.Block
}

// Ranges calls yield with each run [start, end) of consecutive IDs that the
// numbers [from, to) map to, in increasing order and never two runs that
// touch, until yield returns false. from and to must be within
// 0..MaxNumber+1.
func (s Stripe) Ranges(from, to int64, yield func(start, end int64) bool) {
	if !s.Striped() || s.Of == 1 {
		if from < to {
			yield(s.ID(from), s.ID(to-1)+1)
		}
		return
	}
	for x := from; x < to; {
		next := (x/s.Block + 1) * s.Block // the first number of the next block
		if next > to || next < x {
			next = to
		}
		start := s.ID(x)
		if !yield(start, start+(next-x)) {
			return
		}
		x = next
	}
}
