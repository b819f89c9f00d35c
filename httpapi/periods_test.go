package httpapi

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
	"github.com/leafgo/leaf/tagshape"
)

// periodicServer serves the real generator on a SQLite store, its clock
// at clk.
func periodicServer(t *testing.T, clk *testutil.Clock) (string, *sqlite.Store) {
	t.Helper()
	st := testutil.Store(t)
	set := segment.DefaultConfig()
	set.Store, set.Now, set.Logger = st, clk.Now, slog.New(slog.DiscardHandler)
	g, err := segment.New(t.Context(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	base, _ := testServerConfig(t, Config{Segment: g, Tags: st})
	return base, st
}

func wantBody(t *testing.T, r response, status int, body string) {
	t.Helper()
	if r.status != status || r.body != body+"\n" {
		t.Errorf("%d %q, want %d %q", r.status, r.body, status, body)
	}
}

func wantError(t *testing.T, what string, r response, status int, code string, contains ...string) {
	t.Helper()
	e := jsonError(t, r)
	if r.status != status || e.Code != code {
		t.Errorf("%s: %d %q, want %d %s", what, r.status, r.body, status, code)
		return
	}
	for _, c := range contains {
		if !strings.Contains(e.Error, c) {
			t.Errorf("%s: %q does not say %q", what, e.Error, c)
		}
	}
}

// A periodic tag is created with its shape, its /v2 answers name the
// period its IDs belong to (the Leaf routes answer the bare number), and
// each period starts again at the start value.
func TestPeriodicAnswers(t *testing.T) {
	loc, _ := time.LoadLocation("Asia/Shanghai")
	clk := testutil.NewClock(time.Date(2026, 11, 24, 10, 0, 0, 0, loc))
	base, _ := periodicServer(t, clk)

	r := do(t, "POST", base, "/v2/tags", `{"tag":"daily","step":10,"period":"day","time_zone":"Asia/Shanghai","format":"ORD-{period}-{seq:6}"}`)
	var row TagRow
	decodeStrict(t, r, &row)
	if r.status != 201 || row.Period != "day" || row.TimeZone != "Asia/Shanghai" || row.Format != "ORD-{period}-{seq:6}" || row.MaxID != 1 {
		t.Fatalf("create: %d %q", r.status, r.body)
	}
	r = do(t, "POST", base, "/v2/tags", `{"tag":"utc","period":"month","format":"{period}-{seq:4:10}"}`)
	decodeStrict(t, r, &row)
	if r.status != 201 || row.TimeZone != "UTC" || row.Format != "{period}-{seq:4}" {
		t.Errorf("create in UTC: %d %q, want UTC and the shortest spec", r.status, r.body)
	}
	if r := do(t, "POST", base, "/v2/tags", `{"tag":"plain","step":10}`); r.status != 201 || strings.Contains(r.body, "period") {
		t.Errorf("create plain: %d %q", r.status, r.body)
	}

	// daily has a format: its answers carry the IDs formatted too, and
	// it has no ranges.
	wantBody(t, do(t, "GET", base, "/v2/segment/daily", ""), 200, `{"tag":"daily","id":1,"id_str":"1","period":"20261124","formatted":"ORD-20261124-000001"}`)
	wantBody(t, do(t, "POST", base, "/v2/segment/daily/batch?count=2", ""), 200,
		`{"tag":"daily","ids":[2,3],"ids_str":["2","3"],"period":"20261124","formatted":["ORD-20261124-000002","ORD-20261124-000003"]}`)
	wantError(t, "range of a formatted tag", do(t, "GET", base, "/v2/segment/daily/range?count=2", ""), 400, "formatted_tag",
		"tag daily has the ID format ORD-{period}-{seq:6}", "cannot be leased")
	wantBody(t, do(t, "GET", base, "/v2/segment/plain", ""), 200, `{"tag":"plain","id":1,"id_str":"1"}`)
	if r := do(t, "GET", base, "/api/segment/get/daily", ""); r.status != 200 || r.body != "4" {
		t.Errorf("Leaf route: %d %q, want the bare number 4", r.status, r.body)
	}
	// Midnight in Shanghai: the next day starts again at 1.
	clk.Set(time.Date(2026, 11, 25, 0, 0, 0, 0, loc))
	wantBody(t, do(t, "GET", base, "/v2/segment/daily", ""), 200, `{"tag":"daily","id":1,"id_str":"1","period":"20261125","formatted":"ORD-20261125-000001"}`)

	var status statusResponse
	decodeStrict(t, do(t, "GET", base, "/v2/status", ""), &status)
	for _, ts := range status.Segment.Tags {
		if ts.Tag == "daily" && (ts.Period != "20261125" || ts.Issued != 5) {
			t.Errorf("status of daily: period %q, issued %d; want 20261125, 5", ts.Period, ts.Issued)
		}
		if ts.Tag == "plain" && ts.Period != "" {
			t.Errorf("status of plain: period %q", ts.Period)
		}
	}

	// The tag's row shows its shape and periods; the periods are no tags.
	before := tagshape.PeriodKey(leaf.PeriodDay, time.Now().In(loc))
	r = do(t, "GET", base, "/v2/tags/daily", "")
	after := tagshape.PeriodKey(leaf.PeriodDay, time.Now().In(loc))
	decodeStrict(t, r, &row)
	if r.status != 200 || row.Period != "day" || row.PeriodCount == nil || *row.PeriodCount != 2 ||
		(row.CurrentPeriod != before && row.CurrentPeriod != after) || row.MaxID != 1 {
		t.Errorf("GET /v2/tags/daily: %d %q", r.status, r.body)
	}
	var page tagsPage
	decodeStrict(t, do(t, "GET", base, "/v2/tags", ""), &page)
	if len(page.Tags) != 3 || page.Tags[0].Tag != "daily" || page.Tags[0].Format != "ORD-{period}-{seq:6}" || page.Tags[1].Period != "" {
		t.Errorf("GET /v2/tags: %+v", page.Tags)
	}
	if r := do(t, "GET", base, "/db", ""); strings.Contains(r.body, "daily#") {
		t.Errorf("/db shows period rows: %q", r.body)
	}

	// The periods, newest first, a page at a time.
	var periods periodsPage
	decodeStrict(t, do(t, "GET", base, "/v2/tags/daily/periods?limit=1", ""), &periods)
	if len(periods.Periods) != 1 || periods.Periods[0].Period != "20261125" || periods.Periods[0].MaxID != 11 || periods.Next != "20261125" {
		t.Errorf("first page of periods: %+v", periods)
	}
	periods = periodsPage{}
	decodeStrict(t, do(t, "GET", base, "/v2/tags/daily/periods?limit=1&before=20261125", ""), &periods)
	if len(periods.Periods) != 1 || periods.Periods[0].Period != "20261124" || periods.Next != "" {
		t.Errorf("second page of periods: %+v", periods)
	}
	wantBody(t, do(t, "GET", base, "/v2/tags/plain/periods", ""), 200, `{"tag":"plain","periods":[]}`)
	wantError(t, "periods of a missing tag", do(t, "GET", base, "/v2/tags/none/periods", ""), 404, "tag_not_found")
	wantError(t, "periods before a bad key", do(t, "GET", base, "/v2/tags/daily/periods?before=2026-11", ""), 400, "invalid_argument", "before")
	wantError(t, "periods limit 0", do(t, "GET", base, "/v2/tags/daily/periods?limit=0", ""), 400, "invalid_argument", "limit")
}

// Pruning through the API: old periods go, the current one and the one
// before never do, and bad requests are told what is wrong.
func TestPeriodicPrune(t *testing.T) {
	loc, _ := time.LoadLocation("Asia/Shanghai")
	clk := testutil.NewClock(time.Date(2026, 11, 20, 10, 0, 0, 0, loc))
	base, _ := periodicServer(t, clk)
	if r := do(t, "POST", base, "/v2/tags", `{"tag":"daily","step":10,"period":"day","time_zone":"Asia/Shanghai"}`); r.status != 201 {
		t.Fatalf("create: %d %q", r.status, r.body)
	}
	do(t, "POST", base, "/v2/tags", `{"tag":"plain"}`)
	for day := range 5 { // 20261120 .. 20261124
		if r := do(t, "GET", base, "/v2/segment/daily", ""); r.status != 200 {
			t.Fatalf("day %d: %d %q", day, r.status, r.body)
		}
		if day < 4 {
			clk.Add(24 * time.Hour)
		}
	}
	for _, tc := range []struct{ target, says string }{
		{"", "keep=N"},
		{"?keep=3&before=20261120", "keep=N"},
		{"?keep=1", "keep"},
		{"?keep=x", "keep"},
		{"?before=2026-11-20", "period"},
		{"?before=20261124", "current period"},
		{"?before=202611", "day period"},
	} {
		wantError(t, "prune "+tc.target, do(t, "DELETE", base, "/v2/tags/daily/periods"+tc.target, ""), 400, "invalid_argument", tc.says)
	}
	wantError(t, "prune a plain tag", do(t, "DELETE", base, "/v2/tags/plain/periods?keep=2", ""), 400, "invalid_argument", "has no period")
	wantError(t, "prune a missing tag", do(t, "DELETE", base, "/v2/tags/none/periods?keep=2", ""), 404, "tag_not_found")

	var res pruneResponse
	decodeStrict(t, do(t, "DELETE", base, "/v2/tags/daily/periods?keep=3", ""), &res)
	if res.Before != "20261122" || len(res.Removed) != 2 || res.Removed[0].Period != "20261120" || res.Removed[1].Period != "20261121" {
		t.Errorf("keep 3: %+v", res)
	}
	wantBody(t, do(t, "DELETE", base, "/v2/tags/daily/periods?before=20261122", ""), 200, `{"tag":"daily","before":"20261122","removed":[]}`)
	decodeStrict(t, do(t, "DELETE", base, "/v2/tags/daily/periods?before=20261123", ""), &res)
	if len(res.Removed) != 1 || res.Removed[0].Period != "20261122" || res.Removed[0].MaxID != 11 {
		t.Errorf("before 20261123: %+v", res)
	}
	var periods periodsPage
	decodeStrict(t, do(t, "GET", base, "/v2/tags/daily/periods", ""), &periods)
	if len(periods.Periods) != 2 {
		t.Errorf("periods left: %+v", periods)
	}
}

// Bad shapes are refused before the store, each with words on what is
// wrong, and a shape cannot be changed afterwards.
func TestPeriodicCreateRefused(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	base, st := periodicServer(t, clk)
	long := strings.Repeat("p", leaf.MaxPeriodicTagLen+1)
	for _, tc := range []struct {
		name, body, code string
		says             []string
	}{
		{"BadPeriod", `{"tag":"t","period":"week"}`, "invalid_argument", []string{`period "week"`, "day, month or year"}},
		{"BadZone", `{"tag":"t","period":"day","time_zone":"Mars/Olympus"}`, "invalid_argument", []string{"time zone", "Mars/Olympus"}},
		{"ZoneWithoutPeriod", `{"tag":"t","time_zone":"Asia/Tokyo"}`, "invalid_argument", []string{"periodic tags only"}},
		{"BadSpec", `{"tag":"t","format":"ORD-{seq"}`, "invalid_argument", []string{"format spec"}},
		{"SpecWithoutPeriod", `{"tag":"t","period":"day","format":"ORD-{seq:6}"}`, "invalid_argument", []string{"lacks {period}"}},
		{"PeriodInSpecOfPlainTag", `{"tag":"t","format":"{period}-{seq}"}`, "invalid_argument", []string{"has no period"}},
		{"OpaqueBits", `{"tag":"t","opaque_bits":8}`, "invalid_argument", []string{"opaque bits 8"}},
		{"NameTooLong", `{"tag":"` + long + `","period":"day"}`, "invalid_tag", []string{"at most 119"}},
		{"PeriodNotString", `{"tag":"t","period":1}`, "invalid_argument", []string{`"period"`, "a string"}},
	} {
		wantError(t, tc.name, do(t, "POST", base, "/v2/tags", tc.body), 400, tc.code, tc.says...)
	}
	if tags, _ := st.Tags(t.Context()); len(tags) != 0 {
		t.Errorf("refused creates left tags %q", tags)
	}
	// A long name is fine for a plain tag.
	if r := do(t, "POST", base, "/v2/tags", `{"tag":"`+long+`"}`); r.status != 201 {
		t.Errorf("a plain tag of %d bytes: %d %q", len(long), r.status, r.body)
	}

	do(t, "POST", base, "/v2/tags", `{"tag":"daily","period":"day"}`)
	for _, field := range []string{`"period":"month"`, `"time_zone":"UTC"`, `"format":"{period}-{seq}"`, `"opaque_bits":0`} {
		wantError(t, "PATCH "+field, do(t, "PATCH", base, "/v2/tags/daily", `{"step":5,`+field+`}`), 400, "invalid_argument", "cannot be changed", "fixed when it is created")
	}
	// Deleted and created again, the tag must keep its shape.
	if r := do(t, "DELETE", base, "/v2/tags/daily", ""); r.status != 204 {
		t.Fatalf("delete: %d %q", r.status, r.body)
	}
	wantError(t, "created again plain", do(t, "POST", base, "/v2/tags", `{"tag":"daily"}`), 409, "tag_tombstoned", "another shape", "period day in UTC")
	if r := do(t, "POST", base, "/v2/tags", `{"tag":"daily","period":"day","time_zone":"UTC"}`); r.status != 201 {
		t.Errorf("created again with its shape: %d %q", r.status, r.body)
	}
}
