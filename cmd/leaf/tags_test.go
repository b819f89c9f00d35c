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
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
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
	if r.code != 0 || len(lines) != n+1 || !strings.HasPrefix(lines[0], "TAG    MAX_ID  STEP  UPDATE_TIME") || !strings.Contains(lines[0], "SHAPE  DESCRIPTION") {
		t.Fatalf("list: exit %d, %d lines, header %q, stderr %q", r.code, len(lines), lines[0], r.stderr)
	}
	for i, line := range lines[1:] {
		if f := strings.Fields(line); len(f) != 7 || f[0] != tags[i] || f[1] != fmt.Sprint(i+1) || f[4] != "-" || f[6] != tags[i] {
			t.Fatalf("line %d: %q, want the row of %s", i+1, line, tags[i])
		}
	}

	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	rows := make([]httpapi.TagRow, len(all))
	for i, a := range all {
		rows[i] = httpapi.TagRow{Tag: a.Tag, MaxID: a.MaxID, Step: a.Step, Description: a.Description, UpdateTime: a.UpdateTime}
	}
	if err := enc.Encode(rows); err != nil {
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
		var rows []httpapi.TagRow
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
	*sqlite.Store
	limits []int
}

func (p *pageCounter) Allocs(context.Context) ([]leaf.Alloc, error) {
	return nil, errors.New("the whole table was read")
}

func (p *pageCounter) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	p.limits = append(p.limits, limit)
	return p.Store.AllocsPage(ctx, prefix, after, limit)
}

// TestTagsListStreams: the rows are read a page at a time, never whole.
func TestTagsListStreams(t *testing.T) {
	s := &pageCounter{Store: testutil.Store(t)}
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

// TestTagsListJSON pins the rows tags list --json prints: the members and
// encodings of GET /v2/tags, in an array json.Encoder would indent.
func TestTagsListJSON(t *testing.T) {
	var b bytes.Buffer
	w := &jsonArrayWriter{w: &b}
	rows := []httpapi.TagRow{
		httpapi.NewTagRow(leaf.Alloc{Tag: "a", MaxID: 1<<63 - 1, Step: 1000, Description: `<&> "q"`, UpdateTime: time.Date(2024, 5, 1, 14, 0, 0, 5, time.FixedZone("", 7200))}, leaf.TagShape{}),
		httpapi.NewTagRow(leaf.Alloc{Tag: "b", MaxID: 1, Step: 1}, leaf.TagShape{}),
	}
	if err := w.rows(rows[:1]); err != nil {
		t.Fatal(err)
	}
	if err := w.rows(rows[1:]); err != nil {
		t.Fatal(err)
	}
	if err := w.end(); err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "tag": "a",
    "max_id": 9223372036854775807,
    "step": 1000,
    "description": "\u003c\u0026\u003e \"q\"",
    "update_time": "2024-05-01T14:00:00.000000005+02:00"
  },
  {
    "tag": "b",
    "max_id": 1,
    "step": 1,
    "description": "",
    "update_time": "0001-01-01T00:00:00Z"
  }
]
`
	if b.String() != want {
		t.Errorf("tags list --json printed\n%s\nwant\n%s", b.String(), want)
	}
}

// TestTagsShapes: create with a shape, list and get show it, bad shapes
// and prune requests are usage errors (exit 2) before the store is opened,
// and prune removes a periodic tag's old periods only.
func TestTagsShapes(t *testing.T) {
	t.Parallel()
	env := storeEnv(t)
	long := strings.Repeat("p", leaf.MaxPeriodicTagLen+1)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"tags", "create", "t", "--period", "week"}, 2, "", `period "week", want day, month or year`},
		{[]string{"tags", "create", "t", "--period", "day", "--tz", "Mars/Olympus"}, 2, "", `time zone "Mars/Olympus"`},
		{[]string{"tags", "create", "t", "--tz", "Asia/Tokyo"}, 2, "", "is for periodic tags only"},
		{[]string{"tags", "create", "t", "--format", "ORD-{seq"}, 2, "", "format spec"},
		{[]string{"tags", "create", "t", "--period", "day", "--format", "ORD-{seq:6}"}, 2, "", "lacks {period}"},
		{[]string{"tags", "create", "t", "--format", "{period}-{seq}"}, 2, "", "has no period"},
		{[]string{"tags", "create", "t", "--opaque-bits", "8"}, 2, "", "opaque bits 8"},
		{[]string{"tags", "create", long, "--period", "day"}, 2, "", "at most 119"},
		{[]string{"tags", "prune", "orders"}, 2, "", "--keep N or --before PERIOD"},
		{[]string{"tags", "prune", "orders", "--keep", "2", "--before", "202001"}, 2, "", "--keep N or --before PERIOD"},
		{[]string{"tags", "prune", "orders", "--keep", "1"}, 2, "", "--keep 1, want 2..36500"},
		{[]string{"tags", "prune", "orders", "--before", "2020-01"}, 2, "", `period "2020-01"`},
		{[]string{"tags", "prune", "a b", "--keep", "2"}, 2, "", "invalid tag"},
		{[]string{"tags", "get"}, 2, "", "missing TAG"},

		{[]string{"tags", "create", "orders", "--period", "month", "--tz", "Asia/Shanghai", "--format", "ORD-{period}-{seq:6}", "--start", "100"}, 0,
			"created tag orders: step 1000, first ID 100\nshape: period=month, tz=Asia/Shanghai, format=ORD-{period}-{seq:6}\n", ""},
		{[]string{"tags", "create", "plain"}, 0, "created tag plain: step 1000, first ID 1\n", ""},
		{[]string{"tags", "list"}, 0, "period=month,tz=Asia/Shanghai,format=ORD-{period}-{seq:6}", ""},
		{[]string{"tags", "get", "orders"}, 0, "period        month\ntime_zone     Asia/Shanghai\nformat        ORD-{period}-{seq:6}\n", ""},
		{[]string{"tags", "get", "plain"}, 0, "shape         plain\n", ""},
		{[]string{"tags", "get", "missing"}, 1, "", "tag not found"},
		{[]string{"tags", "prune", "plain", "--keep", "2"}, 2, "", "tag plain has no period"},
		{[]string{"tags", "prune", "missing", "--keep", "2"}, 1, "", "tag not found"},
		{[]string{"tags", "prune", "orders", "--before", "20200101"}, 2, "", "not a key of a month period"},
	} {
		r := runCLI(t, env, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}

	// Periods of 2020, long past whatever the date: made as servers make
	// them, then pruned.
	dir := strings.TrimPrefix(env[0], "LEAF_DATA_DIR=")
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"202001", "202002", "202003", "202004"} {
		if _, err := st.ReservePeriod(t.Context(), "orders", key, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var row httpapi.TagRow
	r := runCLI(t, env, "tags", "get", "orders", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &row); err != nil || row.PeriodCount == nil || *row.PeriodCount != 4 || row.CurrentPeriod == "" || row.MaxID != 100 {
		t.Errorf("get --json: %q, %v", r.stdout, err)
	}
	if r := runCLI(t, env, "tags", "get", "orders"); !strings.Contains(r.stdout, "periods       4, latest first: 202004 (max_id 1100), 202003 (max_id 1100)") {
		t.Errorf("get: %q, want the periods", r.stdout)
	}
	for _, tc := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"tags", "prune", "orders", "--before", "202003"}, "tag orders: removed 2 periods below 202003: 202001 202002\n"},
		{[]string{"tags", "prune", "orders", "--before", "202003"}, "tag orders: no period below 202003 to remove\n"},
		{[]string{"tags", "prune", "orders", "--keep", "2"}, "tag orders: removed 2 periods below "},
	} {
		if r := runCLI(t, env, tc.args...); r.code != 0 || !strings.HasPrefix(r.stdout, tc.stdout) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tc.args, r.code, r.stdout, r.stderr, tc.stdout)
		}
	}
	// The tombstones keep a pruned period from starting again.
	st, err = sqlite.Open(t.Context(), filepath.Join(dir, "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if r, err := st.ReservePeriod(t.Context(), "orders", "202001", 0); err != nil || r.Start() != 1100 {
		t.Errorf("a pruned period made again starts at %d, %v; want 1100, above its IDs", r.Start(), err)
	}
}

// TestTagsOrdered: tags made ordered at creation and switched on and off,
// as list, get and the store see them.
func TestTagsOrdered(t *testing.T) {
	t.Parallel()
	env := storeEnv(t)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"tags", "create", "seq", "--ordered"}, 0, "created tag seq: step 1000, first ID 1\nordered: IDs strictly increase in the order they are issued\n", ""},
		{[]string{"tags", "create", "plain"}, 0, "created tag plain: step 1000, first ID 1\n", ""},
		{[]string{"tags", "list"}, 0, "plain  1       1000  ", ""},
		{[]string{"tags", "get", "seq"}, 0, "ordered       yes, owner none", ""},
		{[]string{"tags", "order", "plain", "on"}, 0, "tag plain: ordered\n", ""},
		{[]string{"tags", "order", "seq", "off"}, 0, "tag seq: plain (not ordered)\n", ""},
		{[]string{"tags", "order", "missing", "on"}, 1, "", "tag not found"},
		{[]string{"tags", "order", "plain", "yes"}, 2, "", `"yes": want on or off`},
		{[]string{"tags", "order", "plain"}, 2, "", "missing on|off"},
		{[]string{"tags", "order", "a b", "on"}, 2, "", "invalid tag"},
	} {
		r := runCLI(t, env, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	r := runCLI(t, env, "tags", "list", "--json")
	var rows []httpapi.TagRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, r.stdout)
	}
	got := map[string]bool{}
	for _, row := range rows {
		got[row.Tag] = row.Ordered
	}
	if want := map[string]bool{"plain": true, "seq": false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ordered by tag %v, want %v", got, want)
	}
	if r := runCLI(t, env, "tags", "list"); !strings.Contains(r.stdout, "ordered") {
		t.Errorf("list does not mark plain ordered:\n%s", r.stdout)
	}
}
