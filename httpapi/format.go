package httpapi

import (
	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/tagshape"
)

// This file writes the "formatted" members of the /v2 segment answers for
// a tag whose shape has a format (leaf.IDFormat): the IDs as
// tagshape writes them, beside the numbers, which stay. The Leaf
// text routes answer the numbers alone.

// appendFormattedJSON appends the member ,"formatted":"ID" of a single-ID
// answer. A formatted ID needs no JSON escaping: its prefix is of tag
// bytes, its period and digits alphanumeric.
func appendFormattedJSON(b []byte, tag string, f leaf.IDFormat, period string, id int64) ([]byte, error) {
	b = append(b, `,"formatted":"`...)
	out, err := tagshape.AppendFormat(b, f, period, id)
	if err != nil {
		return b, apierr.FormatError(tag, err)
	}
	return append(out, '"'), nil
}

// appendFormattedsJSON appends the member ,"formatted":[...] of a batch
// answer; one ID its format cannot write fails the whole answer.
func appendFormattedsJSON(b []byte, tag string, f leaf.IDFormat, period string, ids []int64) ([]byte, error) {
	b = append(b, `,"formatted":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		out, err := tagshape.AppendFormat(b, f, period, id)
		if err != nil {
			return b, apierr.FormatError(tag, err)
		}
		b = append(out, '"')
	}
	return append(b, ']'), nil
}
