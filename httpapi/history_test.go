package httpapi

import (
	"math"
	"net/http"
	"sync"
	"testing"

	"github.com/leafgo/leaf/internal/history"
)

// fakeHistory answers a fixed window and remembers the since it was asked.
type fakeHistory struct {
	mu    sync.Mutex
	since []uint64
}

func (f *fakeHistory) Window(since uint64) history.Window {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since = append(f.since, since)
	return history.Window{
		IntervalMS: 1000, First: 7, Next: 9, TimeMS: []int64{1000, 2000},
		Segment: &history.SegmentSeries{IDsPerSec: history.Series{math.NaN(), 12.5}},
		Tags: []history.TagSeries{{Tag: "orders", IDsPerSec: history.Series{1, 2},
			Remaining: history.Series{900, 800}, SecondsLeft: history.Series{math.NaN(), 400}}},
	}
}

func (f *fakeHistory) asked() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.since...)
}

// TestStatusHistory checks /v2/status/history: the window from the sample
// asked for, in its compact JSON; only the detail flag without the token;
// bad parameters; 404 when the server keeps no history.
func TestStatusHistory(t *testing.T) {
	h := &fakeHistory{}
	base, _ := testServerConfig(t, Config{History: h, Snowflake: newFakeSnowflake()})
	const full = `{"detail":true,"interval_ms":1000,"first":7,"next":9,"time_ms":[1000,2000],` +
		`"segment":{"ids_per_sec":[null,12.5]},` +
		`"tags":[{"tag":"orders","ids_per_sec":[1,2],"remaining":[900,800],"seconds_left":[null,400]}]}` + "\n"
	for _, tc := range []struct {
		target string
		since  uint64
	}{
		{"/v2/status/history", 0},
		{"/v2/status/history?since=42", 42},
		{"/v2/status/history?since=18446744073709551615", math.MaxUint64},
	} {
		r := do(t, "GET", base, tc.target, "")
		if r.status != 200 || r.body != full || r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d %s %q", tc.target, r.status, r.header, r.body)
		}
		if got := h.asked(); len(got) == 0 || got[len(got)-1] != tc.since {
			t.Errorf("GET %s: asked since %v, want %d", tc.target, got, tc.since)
		}
	}
	for _, q := range []string{"since=-1", "since=abc", "since=", "since=18446744073709551616", "detail=maybe"} {
		r := do(t, "GET", base, "/v2/status/history?"+q, "")
		if e := jsonError(t, r); r.status != 400 || e.Code != "invalid_argument" {
			t.Errorf("?%s: %d %q, want 400 invalid_argument", q, r.status, r.body)
		}
	}
	if r := do(t, "GET", base, "/v2/status/history?detail=0", ""); r.status != 200 || r.body != `{"detail":false}`+"\n" {
		t.Errorf("?detail=0: %d %q", r.status, r.body)
	}
	if r := do(t, "POST", base, "/v2/status/history", ""); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", r.status, r.header.Get("Allow"))
	}

	// With an admin token: the series name tags, so they need it.
	guarded, _ := testServerConfig(t, Config{History: h, AdminToken: testToken})
	if r := do(t, "GET", guarded, "/v2/status/history", ""); r.status != 200 || r.body != `{"detail":false}`+"\n" {
		t.Errorf("without the token: %d %q", r.status, r.body)
	}
	if r := doHeader(t, "GET", guarded, "/v2/status/history", "", http.Header{"Authorization": {"Bearer wrong-token-000000"}}); r.status != 401 {
		t.Errorf("a wrong token: %d %q", r.status, r.body)
	}
	if r := doHeader(t, "GET", guarded, "/v2/status/history", "", http.Header{"Authorization": {"Bearer " + testToken}}); r.status != 200 || r.body != full {
		t.Errorf("with the token: %d %q", r.status, r.body)
	}

	// No history kept: not found, as any unknown /v2 path.
	none, _ := testServerConfig(t, Config{Snowflake: newFakeSnowflake()})
	if r := do(t, "GET", none, "/v2/status/history", ""); r.status != 404 {
		t.Errorf("without a history: %d %q", r.status, r.body)
	}
}

// TestIsIDRoute: the routes that issue IDs, and only those, as the
// observer names them.
func TestIsIDRoute(t *testing.T) {
	for route, want := range map[string]bool{
		"/api/segment/get/{key}":    true,
		"/api/snowflake/get/{key}":  true,
		"/v2/segment/{tag}":         true,
		"/v2/segment/{tag}/batch":   true,
		"/v2/segment/{tag}/range":   true,
		"/v2/snowflake":             true,
		"/v2/snowflake/batch":       true,
		"/v2/snowflake/decode/{id}": false,
		"/v2/status/summary":        false,
		"/v2/status/history":        false,
		"/v2/tags/{tag}":            false,
		"/decodeSnowflakeId":        false,
		"/":                         false,
		"*":                         false,
	} {
		if got := IsIDRoute(route); got != want {
			t.Errorf("IsIDRoute(%q) = %v, want %v", route, got, want)
		}
	}
}
