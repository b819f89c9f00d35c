package httpapi

import (
	"errors"
	"fmt"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/idformat"
)

// This file writes the "formatted" members of the /v2 segment answers for
// a tag whose shape has a format (leaf.IDFormat): the IDs as
// internal/idformat writes them, beside the numbers, which stay. The Leaf
// text routes answer the numbers alone.

// formatError is the answer to an ID the tag's format cannot write: its
// sequence outgrew the width (idformat.ErrWidthExceeded, 503). The
// message names the tag, the format and the largest sequence it holds;
// no ID is answered, never a truncated or longer one.
func formatError(tag string, err error) error {
	if errors.Is(err, idformat.ErrWidthExceeded) {
		return &clientError{err, oneLine("tag " + tag + ": " + err.Error())}
	}
	return fmt.Errorf("httpapi: format an ID of tag %s: %w", tag, err) // a bug: the generator's ID or period is invalid
}

// appendFormattedJSON appends the member ,"formatted":"ID" of a single-ID
// answer. A formatted ID needs no JSON escaping: its prefix is of tag
// bytes, its period and digits alphanumeric.
func appendFormattedJSON(b []byte, tag string, f leaf.IDFormat, period string, id int64) ([]byte, error) {
	b = append(b, `,"formatted":"`...)
	out, err := idformat.AppendFormat(b, f, period, id)
	if err != nil {
		return b, formatError(tag, err)
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
		out, err := idformat.AppendFormat(b, f, period, id)
		if err != nil {
			return b, formatError(tag, err)
		}
		b = append(out, '"')
	}
	return append(b, ']'), nil
}
