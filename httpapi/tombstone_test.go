package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// TestV2TagTombstone runs the tag admin routes on a real generator and
// store: a deleted tag's IDs never come back through them.
func TestV2TagTombstone(t *testing.T) {
	st, err := sqlite.Open(t.Context(), testutil.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := segment.New(t.Context(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	base, _ := testServerConfig(t, Config{Segment: g, Tags: st})

	nextID := func() int64 {
		t.Helper()
		r := do(t, "GET", base, "/v2/segment/orders", "")
		if r.status != 200 {
			t.Fatalf("next ID: %d %s", r.status, r.body)
		}
		var v struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	if r := do(t, "POST", base, "/v2/tags", `{"tag":"orders","start":1,"step":10}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var last int64
	for range 25 {
		last = nextID()
	}
	if r := do(t, "DELETE", base, "/v2/tags/orders", ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", base, "/v2/segment/orders", ""); r.status != 404 {
		t.Errorf("next ID right after the delete: %d %s, want 404", r.status, r.body)
	}

	// The tombstone is the row's max_id when it was deleted: above the IDs
	// issued and any range prefetched. The refusal names it.
	var tomb int64
	for i, body := range []string{`{"tag":"orders","start":1}`, `{"tag":"orders","start":%d,"step":10}`} {
		if i == 1 {
			body = fmt.Sprintf(body, tomb-1)
		}
		r := do(t, "POST", base, "/v2/tags", body)
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		decodeStrict(t, r, &e)
		if m := regexp.MustCompile(`IDs below (\d+)`).FindStringSubmatch(e.Error); i == 0 && m != nil {
			tomb, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if tomb <= last {
			t.Fatalf("POST %s: %d %+v; want a tombstone above the last ID issued, %d", body, r.status, e, last)
		}
		want := fmt.Sprintf("tag orders was deleted; IDs below %d may have been issued under it; create it with start >= %d or without a start", tomb, tomb)
		if r.status != 409 || e.Code != "tag_tombstoned" || !strings.Contains(e.Error, want) {
			t.Errorf("POST %s after the delete: %d %+v, want 409 tag_tombstoned saying %q", body, r.status, e, want)
		}
	}

	r := do(t, "POST", base, "/v2/tags", `{"tag":"orders","step":10}`)
	if r.status != 201 {
		t.Fatalf("POST without a start after the delete: %d %s, want 201", r.status, r.body)
	}
	var row struct {
		Tag        string `json:"tag"`
		MaxID      int64  `json:"max_id"`
		Step       int    `json:"step"`
		Desc       string `json:"description"`
		UpdateTime string `json:"update_time"`
	}
	decodeStrict(t, r, &row)
	if row.MaxID != tomb {
		t.Fatalf("POST without a start after the delete: %+v, want max_id %d", row, tomb)
	}
	// A prefetch the first incarnation started may still be in flight and
	// reserve on the new row: that is a gap, never a repeat. What holds is
	// that nothing issued now is below the tombstone.
	id := nextID()
	if id < tomb {
		t.Errorf("first ID after the re-creation = %d, below the tombstone %d (the last ID issued before was %d)", id, tomb, last)
	}
	// A start exactly at the tombstone is accepted too. The second delete's
	// tombstone is read from the refusal, as an operator would: the row is
	// gone, so no load still in flight can move it any more.
	if r := do(t, "DELETE", base, "/v2/tags/orders", ""); r.status != 204 {
		t.Fatalf("second delete: %d %s", r.status, r.body)
	}
	r = do(t, "POST", base, "/v2/tags", `{"tag":"orders","start":1,"step":10}`)
	m := regexp.MustCompile(`IDs below (\d+)`).FindStringSubmatch(r.body)
	if r.status != 409 || m == nil {
		t.Fatalf("POST with start 1 after the second delete: %d %s, want 409 naming the tombstone", r.status, r.body)
	}
	tomb2, _ := strconv.ParseInt(m[1], 10, 64)
	if tomb2 <= id {
		t.Errorf("second tombstone %d, want it above the ID %d issued before", tomb2, id)
	}
	if r := do(t, "POST", base, "/v2/tags", fmt.Sprintf(`{"tag":"orders","start":%d,"step":10}`, tomb2)); r.status != 201 {
		t.Errorf("POST at the new tombstone %d: %d %s", tomb2, r.status, r.body)
	}
}
