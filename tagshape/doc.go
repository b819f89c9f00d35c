// Package tagshape computes what a tag's shape (leaf.TagShape) says: it
// checks a shape (Validate) and the name of a tag about to have it
// (ValidateTag), keeps the period calendar of periodic tags (PeriodKey,
// PeriodKeyBefore, PeriodRow, Location), writes and reads formatted IDs and
// their one-line specs (Format, Parse, ParseSpec, ParseShape), and holds the
// keyed permutation of opaque tags (NewPerm, Perm, KeyCheck).
//
// The shape itself, its constants and the stores' interfaces are the root
// package's vocabulary; this package is the code, pure and deterministic
// (a permutation is fixed by its key, a period key by the time and the
// zone), with no I/O. It imports only the standard library and the root
// package, so that the generator, the stores, the transports and the CLI
// all compute shapes the same way.
//
// # Periods
//
// A periodic tag restarts at its start value every day, month or year of
// the calendar of its time zone. Each period is a row of leaf_alloc of its
// own, named PeriodRow(tag, key), keyed yyyymmdd, yyyymm or yyyy
// (PeriodKey): keys of one period sort as their periods do.
//
// # Formatted IDs
//
// Format and Parse write and read a tag's formatted IDs, the strings /v2,
// gRPC and the Go client answer beside the number for a tag whose shape has
// a format that is not plain (a prefix, a width or a radix other than 10; a
// periodic tag without one answers its number and its period, and the Leaf
// text routes answer plain numbers); ParseSpec reads the one-line format
// spec operators give on the CLI, the API and in YAML.
//
// An ID is the format's prefix, then the period key and "-" for a periodic
// tag, then the sequence (the number the generator issued, always >= 1;
// here 123) in the format's radix, zero-padded to its width:
//
//	ORD-20261124-000123   prefix "ORD-", day period, width 6, radix 10
//	INV0000003f           prefix "INV", width 8, radix 36
//	0000000001z           width 11, radix 62
//	123                   the zero format: plain numbers
//
// The digits are 0-9 in radix 10, 0-9a-z in radix 36 (lower case only) and
// 0-9A-Za-z in radix 62. Each alphabet is in ASCII order, so the IDs of one
// fixed-width format (and one period) sort as strings as their sequences
// sort as numbers. Parse is strict: it accepts exactly the strings Format
// writes, so that one ID has one spelling. In radix 36 it refuses upper
// case, which would be a second spelling of the same ID (and in radix 62 a
// different ID).
//
// A sequence that needs more digits than the width is refused with
// ErrWidthExceeded: an ID is never truncated nor written longer than its
// format. MaxSeq and Headroom tell how close a tag is to that.
//
// # Format specs
//
// A spec names a leaf.IDFormat, and whether the tag is periodic, in one
// string: a literal prefix, an optional {period} followed by "-", and the
// sequence placeholder, last.
//
//	spec   = prefix [ "{period}-" ] seq
//	prefix = 0 to 32 bytes of A-Z a-z 0-9 . _ : -
//	seq    = "{seq}" | "{seq:" width "}" | "{seq:" width ":" radix "}"
//	width  = 0..19, in decimal without leading zeros (0: as many digits as needed)
//	radix  = "10" | "36" | "62"
//
// For example {seq} (plain numbers), ORD-{period}-{seq:6}, INV{seq:8:36},
// {seq:11:62} or {seq:0:62} (radix 62, as many digits as needed). Anything
// else is refused with an error that wraps leaf.ErrInvalidArgument and says
// what was expected at which offset: braces or placeholders elsewhere,
// text after the sequence, {period} without its "-" or twice, a width or
// radix out of range. The period's kind (day, month, year) and time zone
// are not part of the spec; they are the tag's own settings, and a spec
// with {period} is for a periodic tag only (see ParseSpecFor).
//
// {seq:0} and a radix of 10 ({seq:6:10}) are accepted as other spellings
// of {seq} and {seq:6}. Decimal formats are returned with Radix 0, the
// IDFormat zero value's, so that {seq} is the zero (plain) format and every
// spelling of one format yields one IDFormat, as stores compare shapes
// field by field; Spec writes the shortest spelling.
//
// # Opaque IDs
//
// An opaque tag (leaf.TagShape.OpaqueBits) hides how many IDs it has issued:
// it passes every ID through a keyed permutation of [1, 2^bits): the IDs
// stay unique (a permutation is a bijection), positive and stable for the
// key, but no longer increase, so two IDs no longer tell how many were
// issued between them (Leaf#87; the weakness Meituan's article names for
// segment mode).
//
// # The opaque permutation's construction
//
// The permutation (Perm, made by NewPerm) is a Feistel network over bits
// bits, in the alternating form of NIST SP 800-38G's FF1: the ID is split
// into a high half of floor(bits/2) bits and a low half of the rest, and
// each round replaces one half by itself XOR a keyed function of the other,
// truncated to its width. For an odd width the halves differ by one bit and
// take turns; after an even number of rounds they are back in place. The
// network permutes [0, 2^bits); 0 is not an ID, so an ID that maps to 0 is
// mapped once more (cycle walking): the image of 0 is not 0, and is not the
// image of any ID, so Encode is a bijection of [1, 2^bits) and Decode
// inverts it.
//
// The round function is AES-128 of (round input, round number, width), of
// which the first 64 bits, truncated to the half's width, are used: a
// standard block cipher, in hardware on the machines leaf runs on, used as a
// PRF on at most 2^32 distinct inputs per round (far below its birthday
// bound). HMAC-SHA256 would serve as well but costs about ten times more per
// round. The AES key is HMAC-SHA256(key, label || width || tag), truncated
// to 128 bits, so every tag and width gets an unrelated permutation from one
// configured key.
//
// The network has 10 rounds, FF1's count. Luby and Rackoff's bounds (3
// rounds a PRP, 4 a strong PRP) hold only up to about 2^(bits/4) queries,
// weak at 16 bits; the known attacks on small-domain Feistel ciphers (on FF3
// and FF1) need many chosen inputs and lose ground with every round, and an
// observer of leaf chooses no input: it sees the images of consecutive
// integers. Ten rounds cost 10 AES blocks per ID.
//
// The key is secret: nothing here returns, formats or logs it, and errors
// about it give lengths and positions only. KeyCheck, a fingerprint that
// tells keys apart without revealing them, is the one value derived from it
// meant to be shown or stored.
package tagshape
