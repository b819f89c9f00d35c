package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/sqlite"
)

// TestTagsListPages lists a store of 2,500 tags, more than a page: every
// row once, in order, under one header; the JSON is the array
// json.Encoder would print whole; --prefix filters.
func TestTagsListPages(t *testing.T) {
	t.Parallel()
	env := storeEnv(t)
	dir := strings.TrimPrefix(env[0], "LEAF_DATA_DIR=")
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*listPage + listPage/2
	var tags []string
	for i := range n {
		tags = append(tags, fmt.Sprintf("t%04d", i))
	}
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, tag := range tags {
		if _, err := tx.Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, 10, ?)", tag, i+1, "row "+tag); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	all, err := st.Allocs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, env, "tags", "list")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != n+1 || !strings.HasPrefix(lines[0], "TAG    MAX_ID  STEP  UPDATE_TIME") {
		t.Fatalf("list: exit %d, %d lines, header %q, stderr %q", r.code, len(lines), lines[0], r.stderr)
	}
	for i, line := range lines[1:] {
		if f := strings.Fields(line); len(f) != 6 || f[0] != tags[i] || f[1] != fmt.Sprint(i+1) || f[5] != tags[i] {
			t.Fatalf("line %d: %q, want the row of %s", i+1, line, tags[i])
		}
	}

	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(all); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, env, "tags", "list", "--json"); r.code != 0 || r.stdout != want.String() {
		t.Errorf("list --json: exit %d, %d bytes, want json.Encoder's %d bytes; stderr %q", r.code, len(r.stdout), want.Len(), r.stderr)
	}

	for _, c := range []struct {
		prefix string
		first  string
		rows   int
	}{
		{"t1", "t1000", listPage}, // exactly a page: the next is empty
		{"t20", "t2000", 100},
		{"t2499", "t2499", 1},
		{"x", "", 0},
	} {
		r := runCLI(t, env, "tags", "list", "--prefix", c.prefix, "--json")
		var rows []leaf.Alloc
		if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil {
			t.Fatalf("--prefix %s: exit %d, %v, stderr %q", c.prefix, r.code, err, r.stderr)
		}
		if len(rows) != c.rows || c.rows > 0 && rows[0].Tag != c.first {
			t.Errorf("--prefix %s: %d rows, want %d from %s", c.prefix, len(rows), c.rows, c.first)
		}
	}
	if r := runCLI(t, env, "tags", "list", "--prefix", "a b"); r.code != 2 || !strings.Contains(r.stderr, "prefix") {
		t.Errorf("--prefix 'a b': exit %d, stderr %q, want 2", r.code, r.stderr)
	}
}

// pageCounter is a store that records the pages read from it and refuses
// to list the whole table at once.
type pageCounter struct {
	*inmem.SegmentStore
	limits []int
}

func (p *pageCounter) Allocs(context.Context) ([]leaf.Alloc, error) {
	return nil, errors.New("the whole table was read")
}

func (p *pageCounter) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	p.limits = append(p.limits, limit)
	return p.SegmentStore.AllocsPage(ctx, prefix, after, limit)
}

// TestTagsListStreams: the rows are read a page at a time, never whole.
func TestTagsListStreams(t *testing.T) {
	s := &pageCounter{SegmentStore: inmem.NewSegmentStore()}
	for i := range listPage + 10 {
		if err := s.CreateTag(t.Context(), leaf.Alloc{Tag: fmt.Sprintf("t%05d", i), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var pages []int
	err := eachPage(t.Context(), s, "", func(page []leaf.Alloc) error {
		pages = append(pages, len(page))
		return nil
	})
	if err != nil || fmt.Sprint(pages) != fmt.Sprint([]int{listPage, 10}) || fmt.Sprint(s.limits) != fmt.Sprint([]int{listPage, listPage}) {
		t.Errorf("pages %v, limits %v, err %v; want pages of %d and 10", pages, s.limits, err, listPage)
	}
}
