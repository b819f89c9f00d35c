package leaf

import (
	"context"
	"fmt"
)

// Period is the calendar unit after which a periodic tag starts again at its
// start value. The zero value is a tag that never restarts.
type Period string

const (
	PeriodNone  Period = ""
	PeriodDay   Period = "day"
	PeriodMonth Period = "month"
	PeriodYear  Period = "year"
)

// Radixes a formatted ID may be written in.
const (
	Radix10 = 10
	Radix36 = 36
	Radix62 = 62
)

// MaxFormatPrefix is the longest prefix a format may have, in bytes.
const MaxFormatPrefix = 32

// MinOpaqueBits and MaxOpaqueBits bound the width of an opaque tag's
// permutation: IDs stay positive int64s, and a width under 16 bits would
// leave too few IDs to hide a volume.
const (
	MinOpaqueBits = 16
	MaxOpaqueBits = 63
)

// IDFormat is how a tag's IDs are written on /v2, gRPC and the Go client:
// Prefix, then the period (for periodic tags, followed by "-"), then the
// sequence in Radix, zero-padded to Width digits. The zero value is the
// plain decimal number. The Leaf text routes always answer plain numbers.
type IDFormat struct {
	Prefix string // at most MaxFormatPrefix bytes of [A-Za-z0-9._:-]
	Width  int    // digits of the sequence, 1..19; 0: as many as needed
	Radix  int    // 10, 36 or 62; 0 means 10
}

// IsPlain reports whether f writes IDs as plain decimal numbers.
func (f IDFormat) IsPlain() bool {
	return f.Prefix == "" && f.Width == 0 && (f.Radix == 0 || f.Radix == Radix10)
}

// TagShape is what a tag's IDs look like beyond leaf_alloc's columns. It is
// stored beside leaf_alloc (leaf_alloc stays Java Leaf's table) and fixed
// when the tag is created: every server reads the same shape, and none can
// change under IDs already issued. The zero value is a plain tag, as every
// tag created by Java Leaf or before shapes existed is.
// Package tagshape checks a shape (tagshape.Validate) and writes its IDs.
type TagShape struct {
	// Period, when set, makes the tag restart at its start value each
	// period: every period is a row of its own, keyed by the period.
	Period Period
	// TimeZone is the IANA zone whose calendar the periods follow; "" is UTC.
	TimeZone string
	// Format writes the IDs; see IDFormat.
	Format IDFormat
	// OpaqueBits, when not 0, passes every ID through a keyed permutation
	// of that many bits: still unique, no longer increasing, and a range
	// reserved past 2^OpaqueBits is refused.
	OpaqueBits int
	// KeyCheck fingerprints the opaque key the tag was created with (never
	// the key itself): a server holding another key refuses to issue for the
	// tag instead of issuing IDs another permutation may also produce.
	KeyCheck string
}

// DecodedID is what an ID a segment tag issued stands for: the answer of
// decoding an opaque (or formatted) ID back.
type DecodedID struct {
	Tag    string
	ID     string // as asked: a number, or a formatted ID
	Raw    int64  // the sequence the tag's row issued it as
	Period string // the period's key, for a periodic tag
}

// Canonical is s with each setting in the one spelling stores keep and
// compare: radix 10 as 0, the time zone "UTC" as "". Two shapes that write
// the same IDs have the same Canonical.
func (s TagShape) Canonical() TagShape {
	if s.Format.Radix == Radix10 {
		s.Format.Radix = 0
	}
	if s.TimeZone == "UTC" {
		s.TimeZone = ""
	}
	return s
}

// IsPlain reports whether s is the shape of a plain tag.
func (s TagShape) IsPlain() bool {
	return s.Period == PeriodNone && s.TimeZone == "" && s.Format.IsPlain() && s.OpaqueBits == 0 && s.KeyCheck == ""
}

// TagShaper is implemented by stores that keep tag shapes beside leaf_alloc.
// Found by type assertion; a store without it holds plain tags only.
type TagShaper interface {
	// TagShape reads a tag's shape: the zero TagShape for a tag created
	// without one (or by Java Leaf). It does not check that the tag exists.
	TagShape(ctx context.Context, tag string) (TagShape, error)
	// CreateShapedTag is SegmentAdmin.CreateTag that also stores the shape,
	// in the same transaction; it keeps s.Canonical(). A shape outlives its tag's deletion, as the
	// tombstone does: creating a deleted tag again with another shape (plain
	// included) fails with a *ShapeError, and SegmentAdmin.CreateTag is
	// CreateShapedTag with the zero shape.
	CreateShapedTag(ctx context.Context, a Alloc, s TagShape) error
}

// ShapeLister is implemented by stores that read the shapes of many tags
// at once, as every store of this module that keeps shapes (TagShaper)
// does; found by type assertion. A listing reads a page's shapes with it
// in a few queries rather than one per tag.
type ShapeLister interface {
	// TagShapes reads the shapes of tags, as TagShape does each one's:
	// plain tags are not in the map, and, as TagShape, it does not check
	// that the tags exist. An invalid tag fails the call with
	// ErrInvalidTag.
	TagShapes(ctx context.Context, tags []string) (map[string]TagShape, error)
}

// ShapeError is the answer to creating a tag again with another shape than
// the one it was deleted with. Its IDs, issued under the old shape, may
// still be in use: under another period, format or permutation the new
// tag's could repeat them. It matches ErrTagTombstoned with errors.Is.
type ShapeError struct {
	Tag  string
	Kept TagShape // the shape the tag was created with first
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("tag %s was deleted with another shape (%s); IDs issued under it may repeat under a new one; create it with the same shape", e.Tag, e.Kept)
}

func (e *ShapeError) Unwrap() error { return ErrTagTombstoned }

// String describes the shape for messages: "plain" or its parts.
func (s TagShape) String() string {
	if s.IsPlain() {
		return "plain"
	}
	out := ""
	add := func(part string) {
		if out != "" {
			out += ", "
		}
		out += part
	}
	if s.Period != PeriodNone {
		tz := s.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		add(fmt.Sprintf("period %s in %s", s.Period, tz))
	}
	if !s.Format.IsPlain() {
		radix := s.Format.Radix
		if radix == 0 {
			radix = Radix10
		}
		add(fmt.Sprintf("format prefix %q width %d radix %d", s.Format.Prefix, s.Format.Width, radix))
	}
	if s.OpaqueBits != 0 {
		add(fmt.Sprintf("opaque %d bits", s.OpaqueBits))
	}
	return out
}
