package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/tagpage"
)

// The listings (/v2/tags, /v2/status, /db, /cache) answer a page at a time,
// so that no answer grows with the table: a server with 100,000 tags
// answers each page in well under a megabyte.
const (
	// defaultPageLimit is a page's rows when the request names no limit.
	defaultPageLimit = 500
	// maxPageLimit is the most rows a request may ask for.
	maxPageLimit = 1000
)

// pageQuery is a listing's page: the tags beginning with prefix that sort
// after the cursor after, at most limit of them. The cursor is the last tag
// of the previous page (keyset pagination): tags created or deleted between
// two requests move no other tag across pages, where an offset would skip
// or repeat one.
type pageQuery struct {
	prefix, after string
	limit         int
	// limitSet says the request named the limit, which the next page's
	// URL then names too.
	limitSet bool
}

// parsePage reads limit, after and prefix from the query string. Each is
// optional; a value that is not valid is the client's error (400).
func parsePage(r *http.Request) (pageQuery, error) {
	raw := r.URL.RawQuery
	q := pageQuery{limit: defaultPageLimit}
	if v, ok := queryValue(raw, "limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageLimit {
			return q, apierr.AsClient(fmt.Errorf("%w: limit %q, want 1..%d", leaf.ErrInvalidArgument, truncate(v, 20), maxPageLimit))
		}
		q.limit, q.limitSet = n, true
	}
	q.prefix, _ = queryValue(raw, "prefix")
	if err := tagpage.CheckPrefix(q.prefix); err != nil {
		return q, apierr.AsClient(err)
	}
	q.after, _ = queryValue(raw, "after")
	if q.after != "" {
		if err := leaf.ValidateTag(q.after); err != nil {
			return q, apierr.AsClient(fmt.Errorf("%w: after must be a tag, the last of the previous page: %w", leaf.ErrInvalidArgument, err))
		}
	}
	return q, nil
}

// nextURL is the query string of the page after the one that ended with
// the tag last: the same prefix and limit, the cursor moved on.
func (q pageQuery) nextURL(last string) string {
	v := url.Values{}
	if q.prefix != "" {
		v.Set("prefix", q.prefix)
	}
	if q.limitSet {
		v.Set("limit", strconv.Itoa(q.limit))
	}
	v.Set("after", last)
	return "?" + v.Encode()
}

// cutPage trims a listing read with limit+1 rows to the page: next is the
// cursor of the following page, "" when this page is the last.
func cutPage[T any](rows []T, limit int, tag func(T) string) (page []T, next string) {
	if len(rows) <= limit {
		return rows, ""
	}
	page = rows[:limit]
	return page, tag(page[limit-1])
}

// statusPage is the page q of st, which is sorted by tag: the tags held in
// memory, cut here.
func statusPage(st []leaf.SegmentStatus, q pageQuery) (page []leaf.SegmentStatus, next string) {
	// The tags on the page are those > after and >= prefix, a suffix of st.
	i, _ := slices.BinarySearchFunc(st, q.after, func(s leaf.SegmentStatus, after string) int {
		if s.Tag > after && s.Tag >= q.prefix {
			return 1
		}
		return -1
	})
	j := i
	for j < len(st) && j-i <= q.limit && strings.HasPrefix(st[j].Tag, q.prefix) {
		j++
	}
	return cutPage(st[i:j], q.limit, func(s leaf.SegmentStatus) string { return s.Tag })
}
