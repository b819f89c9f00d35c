package leaftest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
)

func (storeSuite) pager(t *testing.T, st leaf.SegmentStore) leaf.AllocPager {
	t.Helper()
	p, ok := st.(leaf.AllocPager)
	if !ok {
		t.Fatalf("%T has no AllocsPage", st)
	}
	return p
}

func (storeSuite) page(t *testing.T, p leaf.AllocPager, prefix, after string, limit int) []string {
	t.Helper()
	as, err := p.AllocsPage(t.Context(), prefix, after, limit)
	if err != nil {
		t.Fatalf("AllocsPage(%q, %q, %d): %v", prefix, after, limit, err)
	}
	if len(as) > limit {
		t.Fatalf("AllocsPage(%q, %q, %d): %d rows", prefix, after, limit, len(as))
	}
	tags := make([]string, len(as))
	for i, a := range as {
		tags[i] = a.Tag
	}
	return tags
}

// walk reads every page of prefix, limit rows at a time, calling between
// pages, with the cursor, a function that may change the table.
func (s storeSuite) walk(t *testing.T, p leaf.AllocPager, prefix string, limit int, between func(cursor string)) []string {
	t.Helper()
	var all []string
	after := ""
	for range 10000 {
		page := s.page(t, p, prefix, after, limit)
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
		after = page[len(page)-1]
		if between != nil {
			between(after)
		}
	}
	t.Fatalf("walk over %q: no end after 10000 pages", prefix)
	return nil
}

// allocsPage checks AllocsPage's pages, prefixes and cursors. The order
// is checked on tags of lower-case letters and digits only, which every
// collation a database ships sorts as bytes do; elsewhere a store may
// follow its collation.
func (s storeSuite) allocsPage(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	p := s.pager(t, st)
	if got := s.page(t, p, "", "", 10); len(got) != 0 {
		t.Errorf("first page of an empty store: %q", got)
	}
	ordered := []string{"a1", "a2", "a3", "b1", "b10", "b2", "c"}
	for _, tag := range ordered {
		s.create(t, adm, tag, 5, 10)
	}
	as, err := p.AllocsPage(ctx, "b1", "", 10)
	if err != nil || len(as) != 2 || as[0].Tag != "b1" || as[0].MaxID != 5 || as[0].Step != 10 || as[0].UpdateTime.IsZero() {
		t.Errorf("AllocsPage(b1) = %+v, %v; want the rows b1 and b10 in full", as, err)
	}
	for _, limit := range []int{1, 2, 3, 7, 100} {
		if got := s.walk(t, p, "", limit, nil); !slices.Equal(got, ordered) {
			t.Errorf("walk with limit %d: %q, want %q", limit, got, ordered)
		}
	}
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"a", "", 10, []string{"a1", "a2", "a3"}},
		{"a", "a1", 10, []string{"a2", "a3"}},
		{"a", "", 2, []string{"a1", "a2"}},
		{"b1", "", 10, []string{"b1", "b10"}},
		{"b1", "b1", 10, []string{"b10"}},
		{"a", "b", 10, nil},                                     // the cursor is past the prefix
		{"b", "a", 10, []string{"b1", "b10", "b2"}},             // and before it
		{"", "a25", 10, []string{"a3", "b1", "b10", "b2", "c"}}, // a cursor that is no tag
		{"", "c", 10, nil},
		{"zz", "", 10, nil},
		{"c", "", 1, []string{"c"}},
	} {
		if got := s.page(t, p, c.prefix, c.after, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("AllocsPage(%q, %q, %d) = %q, want %q", c.prefix, c.after, c.limit, got, c.want)
		}
	}

	// The prefix matches bytes: case counts whatever the collation, and _
	// is no wildcard. (Pa1 and pa2 differ in case and digit, so that a
	// case-insensitive primary key takes both.)
	for _, tag := range []string{"Pa1", "pa2", "x_1", "xa1", "m.1", "m:1", "m-1", "m1", "m_1"} {
		s.create(t, adm, tag, 1, 10)
	}
	for _, c := range []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"pa", 10, []string{"pa2"}},
		{"pa", 1, []string{"pa2"}}, // past Pa1, which a case-insensitive collation puts first
		{"Pa", 10, []string{"Pa1"}},
		{"PA", 10, nil},
		{"x_", 10, []string{"x_1"}},
		{"m.", 10, []string{"m.1"}},
		{"m:", 10, []string{"m:1"}},
		{"m-", 10, []string{"m-1"}},
		{"m_", 10, []string{"m_1"}},
		{"m", 10, []string{"m-1", "m.1", "m1", "m:1", "m_1"}},
	} {
		got := s.walk(t, p, c.prefix, c.limit, nil)
		slices.Sort(got) // the order of punctuation is the collation's
		if !slices.Equal(got, c.want) {
			t.Errorf("walk over %q, limit %d: %q, want %q", c.prefix, c.limit, got, c.want)
		}
	}
	all := s.walk(t, p, "", 4, nil)
	slices.Sort(all)
	if want := s.tags(t, st); !slices.Equal(all, want) {
		t.Errorf("walk over every tag: %q, want %q", all, want)
	}

	for _, c := range []struct {
		prefix, after string
		limit         int
	}{
		{"", "", 0},
		{"", "", -1},
		{"a b", "", 10},
		{"a%", "", 10},
		{"a*", "", 10},
		{strings.Repeat("a", leaf.MaxTagLen+1), "", 10},
		{"", "bad tag", 10},
		{"", strings.Repeat("a", leaf.MaxTagLen+1), 10},
	} {
		_, err := p.AllocsPage(ctx, c.prefix, c.after, c.limit)
		if !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("AllocsPage(%q, %q, %d): error %v, want %v", c.prefix, c.after, c.limit, err, leaf.ErrInvalidArgument)
		}
	}
}

// allocsPageChurn walks the pages while tags are created and deleted
// between them, before and after the cursor, the cursor's own row
// included: every tag that exists throughout is seen exactly once, no tag
// twice, and nothing that never existed.
func (s storeSuite) allocsPageChurn(t *testing.T, open Opener) {
	st, adm := s.open(t, open)
	p := s.pager(t, st)
	stable := map[string]bool{}
	for i := range 40 {
		tag := fmt.Sprintf("s%03d", i*10)
		s.create(t, adm, tag, 1, 10)
		stable[tag] = true
	}
	existed := map[string]bool{}
	var alive []string // churn tags not deleted yet, oldest first
	churn := func(tag string) {
		s.create(t, adm, tag, 1, 10)
		existed[tag] = true
		alive = append(alive, tag)
	}
	remove := func(tag string) {
		if err := adm.DeleteTag(t.Context(), tag); err != nil {
			t.Fatalf("DeleteTag(%q): %v", tag, err)
		}
		alive = slices.DeleteFunc(alive, func(a string) bool { return a == tag })
	}
	for i := range 5 { // some to delete ahead of the cursor
		churn(fmt.Sprintf("s%03d", 300+i*10+5))
	}
	n := 0
	got := s.walk(t, p, "s", 3, func(cursor string) {
		n++
		if !stable[cursor] {
			remove(cursor) // the cursor's own row goes
		}
		churn(cursor + "a")               // right after the cursor: may be seen
		churn(fmt.Sprintf("s%03da", n-1)) // behind the cursor: never seen
		churn(fmt.Sprintf("r%03d", n))    // before every stable tag
		churn(fmt.Sprintf("t%03d", n))    // after every stable tag, and not under the prefix
		if len(alive) > 4 {
			remove(alive[0])
			remove(alive[len(alive)-1])
		}
	})
	seen := map[string]int{}
	for i, tag := range got {
		seen[tag]++
		if seen[tag] > 1 {
			t.Errorf("tag %s seen twice", tag)
		}
		if !stable[tag] && !existed[tag] {
			t.Errorf("tag %s seen, but it never existed", tag)
		}
		if !strings.HasPrefix(tag, "s") {
			t.Errorf("tag %s is not under the prefix s", tag)
		}
		if i > 0 && got[i-1] >= tag {
			t.Errorf("%s after %s: out of order", tag, got[i-1])
		}
	}
	for tag := range stable {
		if seen[tag] != 1 {
			t.Errorf("stable tag %s seen %d times, want once", tag, seen[tag])
		}
	}
	if n < 10 {
		t.Errorf("only %d pages: the walk did not churn", n)
	}
}
