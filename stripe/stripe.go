// Package stripe is the arithmetic of a segment store spread over several
// independent databases (see leaf.Stripe): which IDs a database's numbers
// stand for, and back, the runs of IDs a reserved range covers, and the
// checks of a stripe and of the record a database keeps of it.
//
// The types are the root package's vocabulary; what is computed from them
// lives here, so that the root holds no arithmetic. It imports only the
// standard library and the root package.
package stripe

import (
	"fmt"
	"math"

	"github.com/leafgo/leaf"
)

// Validate checks 0 <= Index < Databases <= leaf.MaxStripes and 1 <= Block <=
// leaf.MaxBlock; the zero Stripe is valid. Errors wrap
// leaf.ErrInvalidArgument.
func Validate(s leaf.Stripe) error {
	if s == (leaf.Stripe{}) {
		return nil
	}
	if s.Databases < 1 || s.Databases > leaf.MaxStripes || s.Index < 0 || s.Index >= s.Databases || s.Block < 1 || s.Block > leaf.MaxBlock {
		return fmt.Errorf("%w: stripe %d of %d with blocks of %d IDs, want 0 <= index < databases <= %d and 1 <= block <= %d",
			leaf.ErrInvalidArgument, s.Index, s.Databases, s.Block, leaf.MaxStripes, leaf.MaxBlock)
	}
	return nil
}

// ValidateRecord checks a record about to be written: a striped Stripe and
// a cluster of 1..leaf.MaxClusterLen bytes. Errors wrap
// leaf.ErrInvalidArgument.
func ValidateRecord(r leaf.StripeRecord) error {
	if err := Validate(r.Stripe); err != nil {
		return err
	}
	if !r.Stripe.Striped() {
		return fmt.Errorf("%w: stripe record without a stripe", leaf.ErrInvalidArgument)
	}
	if r.Cluster == "" || len(r.Cluster) > leaf.MaxClusterLen {
		return fmt.Errorf("%w: cluster id of %d bytes, want 1..%d", leaf.ErrInvalidArgument, len(r.Cluster), leaf.MaxClusterLen)
	}
	return nil
}

// MaxNumber is the largest number of s whose ID fits in an int64; numbers
// above it must never be issued. It is -1 when the stripe owns no ID at all.
func MaxNumber(s leaf.Stripe) int64 {
	if !s.Striped() {
		return math.MaxInt64
	}
	top := int64(math.MaxInt64) / s.Block // the block of the largest int64
	if top < int64(s.Index) {
		return -1
	}
	block := top - (top-int64(s.Index))%int64(s.Databases) // the stripe's last block
	last := int64(math.MaxInt64)
	if block < top {
		last = block*s.Block + s.Block - 1
	}
	return Number(s, last)
}

// ID maps number x of s (>= 0, <= MaxNumber(s)) to its ID.
func ID(s leaf.Stripe, x int64) int64 {
	if !s.Striped() {
		return x
	}
	return (x/s.Block)*int64(s.Databases)*s.Block + int64(s.Index)*s.Block + x%s.Block
}

// Owns reports whether id (>= 0) is one of the stripe's IDs.
func Owns(s leaf.Stripe, id int64) bool {
	if !s.Striped() {
		return true
	}
	return (id/s.Block)%int64(s.Databases) == int64(s.Index)
}

// Number is ID's inverse, for an id the stripe owns.
func Number(s leaf.Stripe, id int64) int64 {
	if !s.Striped() {
		return id
	}
	return (id/(int64(s.Databases)*s.Block))*s.Block + id%s.Block
}

// Ranges calls yield with each run [start, end) of consecutive IDs that the
// numbers [from, to) of s map to, in increasing order and never two runs
// that touch, until yield returns false. from and to must be within
// 0..MaxNumber(s)+1.
func Ranges(s leaf.Stripe, from, to int64, yield func(start, end int64) bool) {
	if !s.Striped() || s.Databases == 1 {
		if from < to {
			yield(ID(s, from), ID(s, to-1)+1)
		}
		return
	}
	for x := from; x < to; {
		next := (x/s.Block + 1) * s.Block // the first number of the next block
		if next > to || next < x {
			next = to
		}
		start := ID(s, x)
		if !yield(start, start+(next-x)) {
			return
		}
		x = next
	}
}

// Reserved calls yield with each run [start, end) of consecutive IDs that
// r reserved, in increasing order (see Ranges): [r.Start(), r.MaxID) itself
// from a store of one database.
func Reserved(r leaf.Reservation, yield func(start, end int64) bool) {
	Ranges(r.Stripe, r.Start(), r.MaxID, yield)
}
