package leaf

// Stripe is one database's share of the IDs when a segment store spans
// several independent databases (Tinyid's delta/remainder, by blocks): the
// IDs are cut into blocks of Block IDs, and database Index of Databases
// serves the blocks whose number is ≡ Index (mod Databases). Its leaf_alloc
// counts in its own numbers, 0, 1, 2, …: number x is the ID
//
//	(x / Block) · Databases · Block  +  Index · Block  +  x mod Block
//
// With Block 1 that is x·Databases + Index. The databases never need to
// agree: no two of them can produce one ID. The zero Stripe (Databases 0)
// is a store of one database, whose numbers are the IDs. Package stripe
// does the arithmetic.
type Stripe struct {
	Index     int   // this database's place in the list, from 0
	Databases int   // how many databases the store spans
	Block     int64 // IDs per block, >= 1
}

// MaxStripes bounds how many databases one segment store may span, and
// MaxBlock the IDs per block (so that a round of blocks fits an int64 many
// times over).
const (
	MaxStripes = 64
	MaxBlock   = 1 << 32
)

// Striped reports whether s maps numbers to IDs (Databases >= 1).
func (s Stripe) Striped() bool { return s.Databases > 0 }
