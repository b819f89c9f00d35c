// Package idformat writes and reads a tag's formatted IDs, the strings /v2,
// gRPC and the Go client answer beside the number for a tag whose
// leaf.TagShape has a format that is not plain (a prefix, a width or a radix
// other than 10; a periodic tag without one answers its number and its
// period, and the Leaf text routes answer plain numbers), and the one-line
// format spec operators give on the CLI, the API and in YAML.
//
// # IDs
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
package idformat
