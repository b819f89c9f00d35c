// Package tagpage holds what the paged tag listings share: the check of
// their arguments (a name prefix, a cursor and a page size) and the match
// of one tag against them, so that the stores, the generator and the HTTP
// routes accept and refuse the same input.
//
// The listings are keyset pages: a page is the tags after a cursor, the
// last tag of the previous page, in the listing's order. A tag created or
// deleted between two pages moves no other tag from one page to another,
// so a walk over the pages sees every tag that exists throughout exactly
// once, which an offset cannot promise.
package tagpage

import (
	"fmt"
	"strings"

	"github.com/leafgo/leaf"
)

// Check validates a page request: prefix is "" or up to leaf.MaxTagLen
// bytes of the tag alphabet, after is "" (the first page) or a valid tag,
// and limit is positive. Errors wrap leaf.ErrInvalidArgument.
func Check(prefix, after string, limit int) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	if after != "" {
		if err := leaf.ValidateTag(after); err != nil {
			return fmt.Errorf("%w: cursor after: %w", leaf.ErrInvalidArgument, err)
		}
	}
	if limit < 1 {
		return fmt.Errorf("%w: page limit %d, want >= 1", leaf.ErrInvalidArgument, limit)
	}
	return nil
}

// CheckPrefix validates a name prefix: "" (every tag) or up to
// leaf.MaxTagLen bytes of the tag alphabet. Because the alphabet has
// neither % nor *, a valid prefix holds no LIKE or GLOB wildcard but _,
// which the SQL stores escape.
func CheckPrefix(prefix string) error {
	if len(prefix) > leaf.MaxTagLen {
		return fmt.Errorf("%w: prefix is %d bytes, at most %d", leaf.ErrInvalidArgument, len(prefix), leaf.MaxTagLen)
	}
	for i := 0; i < len(prefix); i++ {
		if !leaf.IsTagByte(prefix[i]) {
			return fmt.Errorf("%w: prefix %q has byte %#02x at offset %d; allowed: A-Z a-z 0-9 . _ : -",
				leaf.ErrInvalidArgument, truncate(prefix, 40), prefix[i], i)
		}
	}
	return nil
}

// Match reports whether tag belongs on a page in byte order: it begins
// with prefix and sorts after the cursor.
func Match(tag, prefix, after string) bool {
	return tag > after && strings.HasPrefix(tag, prefix)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
