package sqlstore

import (
	"context"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/tagpage"
)

// AllocsPage lists at most limit rows whose tag begins with prefix ("" for
// every tag) and sorts after the tag after ("" for the first page), in the
// order of the biz_tag primary key: a keyset page. The last tag of a page,
// passed as after, reads the next one; rows created or deleted between
// pages move no other row, so a walk sees every row that exists throughout
// exactly once. Each page is one indexed range read, however large the
// table.
//
// The order is the database's for biz_tag, since only that order can use
// its index: byte order on SQLite and on PostgreSQL with the C collation,
// the column's collation otherwise (MySQL's default ignores case). The
// prefix matches bytes exactly, whatever the collation.
func (s *Store) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	if err := tagpage.Check(prefix, after, limit); err != nil {
		return nil, err
	}
	const op = "list allocs page"
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	query, pattern := s.pageQuery(prefix)
	out := make([]leaf.Alloc, 0, min(limit, 1024))
	// Under a collation that ignores case the database's prefix match
	// also returns rows that differ from the prefix in case, and those are
	// left out here; while they shorten the page, the rest is read on
	// from the last row seen.
	cursor := after
	for {
		want := limit - len(out)
		args := []any{cursor, want}
		if prefix != "" {
			args = []any{cursor, prefix, pattern, want}
			if s.d.PrefixGlob {
				args = []any{cursor, pattern, want}
			}
		}
		n, err := s.readPage(ctx, query, args, prefix, &cursor, &out)
		if err != nil {
			return nil, s.wrap(op, err)
		}
		if n < want || len(out) == limit {
			return out, nil
		}
	}
}

// readPage runs one page query, appending the rows that begin with prefix
// to out and leaving the last tag read in cursor; it returns the number of
// rows read.
func (s *Store) readPage(ctx context.Context, query string, args []any, prefix string, cursor *string, out *[]leaf.Alloc) (int, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		a, err := scanAlloc(rows)
		if err != nil {
			return n, err
		}
		n++
		*cursor = a.Tag
		if strings.HasPrefix(a.Tag, prefix) {
			*out = append(*out, a)
		}
	}
	return n, rows.Err()
}

// pageQuery is AllocsPage's statement and the pattern its prefix becomes.
//
// With a prefix, the statement's lower bound biz_tag >= prefix lets the
// database start its index range there even where it cannot derive the
// range from LIKE (PostgreSQL under a collation other than C); every
// string beginning with the prefix sorts at or above it in the collations
// databases ship. There the last page of a prefix reads on to the end of
// the index: no upper bound is right in every collation (en_US ignores
// punctuation, so "ab-z" sorts above "ab."). SQLite's GLOB is case-sensitive and uses the index; its
// wildcards (* ? [) are not in the tag alphabet. LIKE's _ is, so it is
// escaped, with ! rather than backslash, which MySQL and PostgreSQL read
// differently in string literals.
func (s *Store) pageQuery(prefix string) (query, pattern string) {
	const cols = "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE " + notPeriod + " AND biz_tag > ?"
	switch {
	case prefix == "":
		query = cols + " ORDER BY biz_tag LIMIT ?"
	case s.d.PrefixGlob:
		query = cols + " AND biz_tag GLOB ? ORDER BY biz_tag LIMIT ?"
		pattern = prefix + "*"
	default:
		query = cols + " AND biz_tag >= ? AND biz_tag LIKE ? ESCAPE '!' ORDER BY biz_tag LIMIT ?"
		pattern = strings.ReplaceAll(prefix, "_", "!_") + "%"
	}
	if s.d.Dollar {
		query = Rebind(query)
	}
	return query, pattern
}
