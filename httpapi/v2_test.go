package httpapi

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// jsonError decodes a /v2 error body, checking its shape.
func jsonError(t *testing.T, r response) apiError {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json (body %q)", ct, r.body)
	}
	if (r.status == 503) != (r.header.Get("Retry-After") == "1") {
		t.Errorf("status %d with Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	var e apiError
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Errorf("error body %q: %v", r.body, err)
	}
	if e.Error == "" || e.Code == "" || strings.Contains(e.Error, "\n") {
		t.Errorf("error body %q lacks a one-line error or a code", r.body)
	}
	return e
}

// decodeStrict decodes a JSON body into v, refusing unknown fields, so that a
// test notices a renamed or added member.
func decodeStrict(t *testing.T, r response, v any) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

func TestV2SegmentID(t *testing.T) {
	g := newFakeGen("test")
	g.next["test"] = 1<<53 + 1 // past float64 precision: why id_str exists
	base, _ := testServer(t, g)
	for i, method := range []string{"GET", "POST"} {
		r := do(t, method, base, "/v2/segment/test", "")
		if r.status != 200 {
			t.Fatalf("%s = %d %q", method, r.status, r.body)
		}
		var v struct {
			Tag   string `json:"tag"`
			ID    int64  `json:"id"`
			IDStr string `json:"id_str"`
		}
		decodeStrict(t, r, &v)
		want := int64(1<<53+1) + int64(i)
		if v.Tag != "test" || v.ID != want || v.IDStr != strconv.FormatInt(want, 10) {
			t.Errorf("%s = %+v, want id %d", method, v, want)
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control = %q", r.header.Get("Cache-Control"))
		}
	}
	// HEAD takes no ID, so it cannot state GET's length.
	if r := do(t, "HEAD", base, "/v2/segment/test", ""); r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "" {
		t.Errorf("HEAD = %d %q, Content-Length %q", r.status, r.body, r.header.Get("Content-Length"))
	}
}

func TestV2SegmentBatchAndRange(t *testing.T) {
	g := newFakeGen("test", "a.b:c-d_e")
	g.maxRange = 5000
	base, _ := testServer(t, g)

	r := do(t, "GET", base, "/v2/segment/test/batch?count=3", "")
	var batch struct {
		Tag    string   `json:"tag"`
		IDs    []int64  `json:"ids"`
		IDsStr []string `json:"ids_str"`
	}
	decodeStrict(t, r, &batch)
	if r.status != 200 || batch.Tag != "test" || !reflect.DeepEqual(batch.IDs, []int64{1, 2, 3}) ||
		!reflect.DeepEqual(batch.IDsStr, []string{"1", "2", "3"}) {
		t.Errorf("batch = %d %+v", r.status, batch)
	}

	r = do(t, "POST", base, "/v2/segment/a.b:c-d_e/batch?count=10000", "")
	decodeStrict(t, r, &batch)
	if r.status != 200 || batch.Tag != "a.b:c-d_e" || len(batch.IDs) != 10000 || len(batch.IDsStr) != 10000 ||
		batch.IDs[9999] != 10000 || batch.IDsStr[9999] != "10000" {
		t.Errorf("batch of 10000 = %d, %d IDs", r.status, len(batch.IDs))
	}

	type rangeBody struct {
		Tag      string `json:"tag"`
		Start    int64  `json:"start"`
		End      int64  `json:"end"`
		StartStr string `json:"start_str"`
		EndStr   string `json:"end_str"`
		Count    int64  `json:"count"`
	}
	var rg rangeBody
	r = do(t, "GET", base, "/v2/segment/test/range?count=10", "")
	decodeStrict(t, r, &rg)
	if want := (rangeBody{"test", 4, 14, "4", "14", 10}); r.status != 200 || rg != want {
		t.Errorf("range = %d %+v, want %+v", r.status, rg, want)
	}
	// The generator may lease less than asked; count says how much.
	r = do(t, "POST", base, "/v2/segment/test/range?count=10000", "")
	decodeStrict(t, r, &rg)
	if want := (rangeBody{"test", 14, 5014, "14", "5014", 5000}); r.status != 200 || rg != want {
		t.Errorf("short range = %d %+v, want %+v", r.status, rg, want)
	}
	// A range is two numbers: it may ask for more than a batch.
	r = do(t, "POST", base, "/v2/segment/test/range?count=1000000", "")
	decodeStrict(t, r, &rg)
	if want := (rangeBody{"test", 5014, 10014, "5014", "10014", 5000}); r.status != 200 || rg != want {
		t.Errorf("range of 1000000 = %d %+v, want %+v", r.status, rg, want)
	}

	errs := []struct {
		method, target string
		status         int
		code           string
	}{
		{"GET", "/v2/segment/test/batch", 400, "invalid_count"},
		{"GET", "/v2/segment/test/batch?n=3", 400, "invalid_count"},
		{"GET", "/v2/segment/test/batch?count=0", 400, "invalid_count"},
		{"GET", "/v2/segment/test/batch?count=10001", 400, "invalid_count"},
		{"GET", "/v2/segment/test/batch?count=-1", 400, "invalid_count"},
		{"GET", "/v2/segment/test/batch?count=abc", 400, "invalid_count"},
		{"GET", "/v2/segment/test/batch?count=", 400, "invalid_count"},
		{"GET", "/v2/segment/test/range", 400, "invalid_count"},
		{"GET", "/v2/segment/test/range?count=1000001", 400, "invalid_count"},
		{"GET", "/v2/segment/a%20b", 400, "invalid_tag"},
		{"GET", "/v2/segment/a%2Fb", 400, "invalid_tag"},
		{"GET", "/v2/segment/a%2Fb/batch?count=2", 400, "invalid_tag"},
		{"GET", "/v2/segment/" + strings.Repeat("x", 129) + "/range?count=2", 400, "invalid_tag"},
		{"GET", "/v2/segment/nope", 404, "tag_not_found"},
		{"GET", "/v2/segment/nope/batch?count=2", 404, "tag_not_found"},
		{"GET", "/v2/segment/nope/range?count=2", 404, "tag_not_found"},
		{"GET", "/v2/segment/down", 503, "not_ready"},
		{"GET", "/v2/segment/down/batch?count=2", 503, "not_ready"},
		{"GET", "/v2/segment/down/range?count=2", 503, "not_ready"},
		{"DELETE", "/v2/segment/test", 405, "method_not_allowed"},
		{"PUT", "/v2/segment/test/batch?count=2", 405, "method_not_allowed"},
		{"PATCH", "/v2/segment/test/range?count=2", 405, "method_not_allowed"},
		{"POST", "/v2/status", 405, "method_not_allowed"},
	}
	g.rows["down"] = &leaf.Alloc{Tag: "down"}
	g.setFail("down", leaf.ErrNotReady)
	for _, tt := range errs {
		r := do(t, tt.method, base, tt.target, "")
		if e := jsonError(t, r); r.status != tt.status || e.Code != tt.code {
			t.Errorf("%s %s = %d %q, want %d %s", tt.method, tt.target, r.status, r.body, tt.status, tt.code)
		}
		if r.status == 405 {
			want := "GET, HEAD, POST"
			if strings.HasSuffix(tt.target, "/status") {
				want = "GET, HEAD"
			}
			if got := r.header.Get("Allow"); got != want {
				t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.target, got, want)
			}
		}
	}
	if n := g.invalidCalls(); n != 0 {
		t.Errorf("the generator got %d calls with invalid input", n)
	}
}

func TestV2Status(t *testing.T) {
	g := newFakeGen("b", "a")
	g.setDegraded("store unreachable")
	base, _ := testServer(t, g)
	var st struct {
		Version string `json:"version"`
		Detail  bool   `json:"detail"`
		Segment struct {
			Enabled  bool        `json:"enabled"`
			Degraded []string    `json:"degraded"`
			Tags     []tagStatus `json:"tags"`
		} `json:"segment"`
	}
	r := do(t, "GET", base, "/v2/status", "")
	decodeStrict(t, r, &st)
	if r.status != 200 || st.Version != "v1.2.3-test" || !st.Detail || !st.Segment.Enabled ||
		!reflect.DeepEqual(st.Segment.Degraded, []string{"store unreachable"}) ||
		len(st.Segment.Tags) != 2 || st.Segment.Tags[0].Tag != "a" || st.Segment.Tags[1].Buffers[1].Max != 3001 {
		t.Errorf("status = %d %s", r.status, r.body)
	}

	base, _ = testServer(t, nil)
	r = do(t, "GET", base, "/v2/status", "")
	if r.status != 200 || r.body != `{"version":"v1.2.3-test","detail":true,"segment":{"enabled":false,"degraded":[],"tags":[]}}`+"\n" {
		t.Errorf("status, segment disabled = %d %s", r.status, r.body)
	}

	base, _ = testServer(t, newFakeGen())
	r = do(t, "GET", base, "/v2/status", "")
	if r.status != 200 || !strings.Contains(r.body, `"segment":{"enabled":true,"degraded":[],"tags":[]}`) {
		t.Errorf("status, no tags = %d %s", r.status, r.body)
	}
}

// TestV2StatusDetail: ?detail=0 gives the summary (no tags, no worker,
// degraded reasons in the clients' words) even where the detail is open;
// ?detail=1 cannot widen what the token allows; and a tag not loaded yet
// shows no last_load rather than year 1.
func TestV2StatusDetail(t *testing.T) {
	g := newFakeGen("a")
	g.setDegraded("segment store unreachable since 2024-05-01T12:00:00Z: dial tcp 10.1.2.3:3306: connect: connection refused")
	base, _ := testServerConfig(t, Config{Segment: g, Snowflake: newFakeSnowflake()})
	r := do(t, "GET", base, "/v2/status", "")
	if r.status != 200 || !strings.Contains(r.body, `"detail":true`) || !strings.Contains(r.body, `"tag":"a"`) ||
		!strings.Contains(r.body, "10.1.2.3:3306") || !strings.Contains(r.body, `"snowflake":{`) {
		t.Errorf("/v2/status = %d %s, want the detail", r.status, r.body)
	}
	if strings.Contains(r.body, "0001-01-01") || strings.Contains(r.body, "last_load") {
		t.Errorf("/v2/status shows a tag never loaded with a zero time: %s", r.body)
	}
	for _, target := range []string{"/v2/status?detail=0", "/v2/status?detail=false"} {
		r = do(t, "GET", base, target, "")
		want := `{"version":"v1.2.3-test","detail":false,"segment":{"enabled":true,` +
			`"degraded":["segment store unreachable since 2024-05-01T12:00:00Z"],"tags":[]}}` + "\n"
		if r.status != 200 || r.body != want {
			t.Errorf("%s = %d %s, want %s", target, r.status, r.body, want)
		}
	}
	// A loaded tag shows when.
	loaded := &loadedGen{fakeGen: g, at: fakeTime}
	base, _ = testServerConfig(t, Config{Segment: loaded})
	if r := do(t, "GET", base, "/v2/status", ""); !strings.Contains(r.body, `"last_load":"2024-05-01T12:00:00Z"`) {
		t.Errorf("/v2/status of a loaded tag = %s, want its last_load", r.body)
	}

	base, _ = testServerConfig(t, Config{Segment: g, AdminToken: "s3cret"})
	if r := do(t, "GET", base, "/v2/status?detail=1", ""); !strings.Contains(r.body, `"detail":false`) || strings.Contains(r.body, "10.1.2.3") {
		t.Errorf("/v2/status?detail=1 without the token = %s, want the summary", r.body)
	}
}

// loadedGen is a fakeGen whose tags were last loaded at a given time.
type loadedGen struct {
	*fakeGen
	at time.Time
}

func (g *loadedGen) Status() []leaf.SegmentStatus {
	st := g.fakeGen.Status()
	for i := range st {
		st[i].LastLoad = g.at
	}
	return st
}

func TestV2Tags(t *testing.T) {
	g := newFakeGen("existing")
	base, _ := testServer(t, g)
	type row struct {
		Tag         string `json:"tag"`
		MaxID       int64  `json:"max_id"`
		Step        int    `json:"step"`
		Description string `json:"description"`
		UpdateTime  string `json:"update_time"`
	}
	wantRow := func(r response, status int, want row) {
		t.Helper()
		if r.status != status {
			t.Fatalf("status = %d, want %d (body %s)", r.status, status, r.body)
		}
		var got row
		decodeStrict(t, r, &got)
		if got != want {
			t.Errorf("row = %+v, want %+v", got, want)
		}
	}
	const ts = "2024-05-01T12:00:00Z"

	// Create with every field, then with the defaults.
	r := do(t, "POST", base, "/v2/tags", `{"tag":"orders","start":1000,"step":500,"description":"order IDs"}`)
	wantRow(r, 201, row{"orders", 1000, 500, "order IDs", ts})
	if loc := r.header.Get("Location"); loc != "/v2/tags/orders" {
		t.Errorf("Location = %q", loc)
	}
	wantRow(do(t, "POST", base, "/v2/tags", `{"tag":"users"}`), 201, row{"users", 1, 1000, "", ts})

	// The new tag issues from its start.
	if r := do(t, "GET", base, "/api/segment/get/orders", ""); r.status != 200 || r.body != "1000" {
		t.Errorf("first ID of orders = %d %q, want 1000", r.status, r.body)
	}

	wantRow(do(t, "GET", base, "/v2/tags/orders", ""), 200, row{"orders", 1001, 500, "order IDs", ts})
	wantRow(do(t, "PATCH", base, "/v2/tags/orders", `{"step":2000}`), 200, row{"orders", 1001, 2000, "order IDs", ts})

	r = do(t, "GET", base, "/v2/tags", "")
	var list struct {
		Tags []row `json:"tags"`
	}
	decodeStrict(t, r, &list)
	var names []string
	for _, x := range list.Tags {
		names = append(names, x.Tag)
	}
	if r.status != 200 || !reflect.DeepEqual(names, []string{"existing", "orders", "users"}) {
		t.Errorf("list = %d %v", r.status, names)
	}

	if r := do(t, "DELETE", base, "/v2/tags/orders", ""); r.status != 204 || r.body != "" {
		t.Errorf("delete = %d %q", r.status, r.body)
	}

	errs := []struct {
		name, method, target, body string
		status                     int
		code, contain              string
	}{
		{"duplicate", "POST", "/v2/tags", `{"tag":"existing"}`, 409, "tag_exists", "already exists"},
		{"get deleted", "GET", "/v2/tags/orders", "", 404, "tag_not_found", ""},
		{"delete deleted", "DELETE", "/v2/tags/orders", "", 404, "tag_not_found", ""},
		{"patch unknown", "PATCH", "/v2/tags/nope", `{"step":5}`, 404, "tag_not_found", ""},
		{"bad JSON", "POST", "/v2/tags", `{"tag":`, 400, "invalid_argument", "request body"},
		{"not an object", "POST", "/v2/tags", `["x"]`, 400, "invalid_argument", ""},
		{"empty body", "POST", "/v2/tags", ``, 400, "invalid_argument", "empty body"},
		{"unknown field", "POST", "/v2/tags", `{"tag":"x","stpe":5}`, 400, "invalid_argument", `unknown field "stpe"`},
		{"trailing data", "POST", "/v2/tags", `{"tag":"x"} {"tag":"y"}`, 400, "invalid_argument", "after the JSON object"},
		{"trailing garbage", "POST", "/v2/tags", `{"tag":"x"}}`, 400, "invalid_argument", ""},
		{"oversize", "POST", "/v2/tags", `{"tag":"x","description":"` + strings.Repeat("d", 70<<10) + `"}`, 413, "request_too_large", ""},
		{"oversize whitespace", "POST", "/v2/tags", `{"tag":"x"}` + strings.Repeat(" ", 70<<10), 413, "request_too_large", ""},
		{"wrong type", "POST", "/v2/tags", `{"tag":"x","step":"5"}`, 400, "invalid_argument", ""},
		{"fractional step", "POST", "/v2/tags", `{"tag":"x","step":1.5}`, 400, "invalid_argument", ""},
		{"start overflow", "POST", "/v2/tags", `{"tag":"x","start":9223372036854775808}`, 400, "invalid_argument", ""},
		{"no tag", "POST", "/v2/tags", `{"step":5}`, 400, "invalid_tag", ""},
		{"null body", "POST", "/v2/tags", `null`, 400, "invalid_tag", ""},
		{"bad tag", "POST", "/v2/tags", `{"tag":"a b"}`, 400, "invalid_tag", ""},
		{"start 0", "POST", "/v2/tags", `{"tag":"x","start":0}`, 400, "invalid_argument", "start 0"},
		{"step 0", "POST", "/v2/tags", `{"tag":"x","step":0}`, 400, "invalid_argument", "step 0"},
		{"step too big", "POST", "/v2/tags", `{"tag":"x","step":1000001}`, 400, "invalid_argument", ""},
		{"long description", "POST", "/v2/tags", `{"tag":"x","description":"` + strings.Repeat("d", 257) + `"}`, 400, "invalid_argument", "description"},
		{"patch no step", "PATCH", "/v2/tags/existing", `{}`, 400, "invalid_argument", "step or ordered is required"},
		{"patch step 0", "PATCH", "/v2/tags/existing", `{"step":0}`, 400, "invalid_argument", ""},
		{"patch unknown field", "PATCH", "/v2/tags/existing", `{"step":5,"max_id":1}`, 400, "invalid_argument", "unknown field"},
		{"patch bad tag", "PATCH", "/v2/tags/a%2Fb", `{"step":5}`, 400, "invalid_tag", ""},
		{"get bad tag", "GET", "/v2/tags/a%20b", "", 400, "invalid_tag", ""},
		{"delete bad tag", "DELETE", "/v2/tags/" + strings.Repeat("x", 129), "", 400, "invalid_tag", ""},
		{"put list", "PUT", "/v2/tags", `{}`, 405, "method_not_allowed", ""},
		{"put tag", "PUT", "/v2/tags/existing", `{}`, 405, "method_not_allowed", ""},
		{"post tag", "POST", "/v2/tags/existing", `{}`, 405, "method_not_allowed", ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, tt.method, base, tt.target, tt.body)
			e := jsonError(t, r)
			if r.status != tt.status || e.Code != tt.code || !strings.Contains(e.Error, tt.contain) {
				t.Errorf("%s %s = %d %q, want %d %s containing %q", tt.method, tt.target, r.status, r.body, tt.status, tt.code, tt.contain)
			}
			if r.status == 405 {
				want := "GET, HEAD, POST"
				if tt.target != "/v2/tags" {
					want = "DELETE, GET, HEAD, PATCH"
				}
				if got := r.header.Get("Allow"); got != want {
					t.Errorf("Allow = %q, want %q", got, want)
				}
			}
		})
	}
	// Nothing above changed the table.
	r = do(t, "GET", base, "/v2/tags", "")
	decodeStrict(t, r, &list)
	names = names[:0]
	for _, x := range list.Tags {
		names = append(names, x.Tag)
	}
	if !reflect.DeepEqual(names, []string{"existing", "users"}) {
		t.Errorf("tags after the failed requests = %v", names)
	}
	if n := g.invalidCalls(); n != 0 {
		t.Errorf("the generator got %d calls with invalid input", n)
	}
}

func TestV2TagsEmptyList(t *testing.T) {
	base, _ := testServer(t, newFakeGen())
	if r := do(t, "GET", base, "/v2/tags", ""); r.status != 200 || r.body != `{"tags":[]}`+"\n" {
		t.Errorf("empty list = %d %q", r.status, r.body)
	}
}

// TestTagReadsFromStore: the rows come from Config.Tags, the store, and the
// buffers from the generator; a created tag is written through the
// generator and answered as the store holds it.
func TestTagReadsFromStore(t *testing.T) {
	gen, store := newFakeGen("held"), newFakeGen("stored")
	base, _ := testServerConfig(t, Config{Segment: gen, Tags: store})
	for _, c := range []struct{ target, has, lacks string }{
		{"/v2/tags", `"tag":"stored"`, `"held"`},
		{"/v2/tags/stored", `"tag":"stored"`, `"held"`},
		{"/db", ">stored<", "held"},
		{"/cache", ">held<", "stored"},
		{"/v2/status", `"tag":"held"`, `"stored"`},
	} {
		r := do(t, "GET", base, c.target, "")
		if r.status != 200 || !strings.Contains(r.body, c.has) || strings.Contains(r.body, c.lacks) {
			t.Errorf("GET %s: %d %q, want %s and not %s", c.target, r.status, r.body, c.has, c.lacks)
		}
	}
	if r := do(t, "GET", base, "/v2/tags/held", ""); r.status != 404 {
		t.Errorf("GET /v2/tags/held, a row the store lacks: %d %q, want 404", r.status, r.body)
	}
	// Written through the generator; the answer is the store's row, which
	// this store does not have: the request's values, as when a read-back
	// fails.
	r := do(t, "POST", base, "/v2/tags", `{"tag":"made","step":5}`)
	if _, err := gen.Alloc(t.Context(), "made"); r.status != 201 || err != nil {
		t.Errorf("POST /v2/tags: %d %q, generator's row: %v", r.status, r.body, err)
	}
	if _, err := store.Alloc(t.Context(), "made"); err == nil {
		t.Error("the store was written to directly, not through the generator")
	}
}

// TestTagsDisabled: with segment mode on but no store to read the rows
// from, tag administration and /db are off, and say so; the generator's
// own routes still serve.
func TestTagsDisabled(t *testing.T) {
	g := newFakeGen("test")
	base, _ := testServerConfig(t, Config{Segment: g})
	for _, rq := range []struct{ method, target, body string }{
		{"GET", "/v2/tags", ""},
		{"POST", "/v2/tags", `{"tag":"new"}`},
		{"GET", "/v2/tags/test", ""},
		{"PATCH", "/v2/tags/test", `{"step":5}`},
		{"DELETE", "/v2/tags/test", ""},
	} {
		r := do(t, rq.method, base, rq.target, rq.body)
		if e := jsonError(t, r); r.status != 404 || e.Code != "tags_disabled" || e.Error != "tag administration is disabled" {
			t.Errorf("%s %s: %d %q, want 404 tags_disabled", rq.method, rq.target, r.status, r.body)
		}
	}
	if r := do(t, "GET", base, "/db", ""); r.status != 404 || r.body != "tag administration is disabled\n" {
		t.Errorf("/db: %d %q, want 404 and the reason", r.status, r.body)
	}
	if r := do(t, "GET", base, "/cache", ""); r.status != 200 {
		t.Errorf("/cache: %d %q, want 200", r.status, r.body)
	}
	if a, err := g.Alloc(t.Context(), "test"); err != nil || a.Step != 1000 || len(g.rows) != 1 {
		t.Errorf("the generator's rows changed: %+v %v, %d rows", a, err, len(g.rows))
	}
}
