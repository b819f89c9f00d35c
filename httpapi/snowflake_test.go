package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// snowServer serves f in snowflake mode, and segment mode with the tag "test"
// unless noSegment.
func snowServer(t *testing.T, f *fakeSnowflake, noSegment bool) string {
	t.Helper()
	cfg := Config{Snowflake: f}
	if !noSegment {
		cfg.Segment = newFakeGen("test")
	}
	base, _ := testServerConfig(t, cfg)
	return base
}

// joinIDs joins the decimal IDs of a text batch body.
func joinIDs(ids ...int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, "\n")
}

func TestLeafCompose(t *testing.T) {
	// The fake's layout is Leaf's: its first ID is Leaf's documented sample.
	if got := leafCompose(sampleMs, sampleWorker, sampleSeq); got != sampleID {
		t.Fatalf("leafCompose = %d, want %d", got, sampleID)
	}
	// LEAF-REFERENCE §1.7: the [NF] README's ID decodes to worker 619.
	p, err := (&fakeSnowflake{ms: 1 << 50}).Decode(1256557484213448722)
	if want := (leaf.SnowflakeParts{ID: 1256557484213448722, Timestamp: 1588421624602, WorkerID: 619, Sequence: 18}); err != nil || p != want {
		t.Fatalf("Decode = %+v, %v; want %+v", p, err, want)
	}
}

func TestLeafSnowflakeGet(t *testing.T) {
	first := int64(sampleID)
	lastOfMs := leafCompose(sampleMs, sampleWorker, maxSequence)
	tests := []struct {
		name    string
		method  string
		target  string
		setup   func(f *fakeSnowflake)
		status  int
		body    string // exact body; "" with a 200 means empty
		contain string // substring of the body, for error messages
		header  map[string]string
		key     string // the key the generator must have been given; "" to skip
		noCall  bool   // the request must not reach the generator
	}{
		{name: "single", method: "GET", target: "/api/snowflake/get/test", status: 200, body: joinIDs(first), key: "test",
			header: map[string]string{"Content-Type": "text/plain; charset=utf-8", "Content-Length": "19", "Cache-Control": "no-store"}},
		{name: "post", method: "POST", target: "/api/snowflake/get/test", status: 200, body: joinIDs(first)},
		// HEAD takes no ID (see headID), so it cannot state GET's length.
		{name: "head", method: "HEAD", target: "/api/snowflake/get/test", status: 200, body: "", noCall: true,
			header: map[string]string{"Content-Length": "", "Content-Type": "text/plain; charset=utf-8"}},
		{name: "key passed through", method: "GET", target: "/api/snowflake/get/order.v1:x", status: 200, body: joinIDs(first), key: "order.v1:x"},
		{name: "other query ignored", method: "GET", target: "/api/snowflake/get/test?_=1700000000&x", status: 200, body: joinIDs(first)},
		{name: "batch", method: "GET", target: "/api/snowflake/get/test?count=3", status: 200, body: joinIDs(first, first+1, first+2),
			header: map[string]string{"Content-Length": "59"}},
		{name: "batch head", method: "HEAD", target: "/api/snowflake/get/test?count=3", status: 200, body: "", noCall: true,
			header: map[string]string{"Content-Length": ""}},
		{name: "batch of one", method: "POST", target: "/api/snowflake/get/test?count=1", status: 200, body: joinIDs(first)},
		{name: "batch across a millisecond", method: "GET", target: "/api/snowflake/get/test?count=3",
			setup: func(f *fakeSnowflake) { f.seq = maxSequence - 1 }, status: 200,
			body: joinIDs(lastOfMs-1, lastOfMs, leafCompose(sampleMs+1, sampleWorker, 0))},
		{name: "count 0", method: "GET", target: "/api/snowflake/get/test?count=0", status: 400, contain: "invalid count: 0", noCall: true},
		{name: "count 10001", method: "GET", target: "/api/snowflake/get/test?count=10001", status: 400, contain: "invalid count: 10001", noCall: true},
		{name: "count not a number", method: "GET", target: "/api/snowflake/get/test?count=ten", status: 400, contain: `invalid count: "ten" is not a whole number`, noCall: true},
		{name: "count empty", method: "GET", target: "/api/snowflake/get/test?count=", status: 400, contain: "invalid count", noCall: true},
		{name: "empty key", method: "GET", target: "/api/snowflake/get/", status: 400, contain: "invalid tag: empty", noCall: true},
		{name: "key too long", method: "GET", target: "/api/snowflake/get/" + strings.Repeat("k", leaf.MaxTagLen+1), status: 400, contain: "invalid tag: 129 bytes", noCall: true},
		{name: "key with %20", method: "GET", target: "/api/snowflake/get/a%20b", status: 400, contain: "invalid tag", noCall: true},
		{name: "key with slash", method: "GET", target: "/api/snowflake/get/a/b", status: 400, contain: "invalid tag", noCall: true},
		{name: "invalid key before count", method: "GET", target: "/api/snowflake/get/a%0Ab?count=0", status: 400, contain: "invalid tag", noCall: true},
		{name: "clock backwards", method: "GET", target: "/api/snowflake/get/test",
			setup: func(f *fakeSnowflake) { f.fail = leaf.ErrClockBackwards }, status: 503, contain: "clock moved backwards",
			header: map[string]string{"Retry-After": "1"}},
		{name: "clock backwards batch", method: "GET", target: "/api/snowflake/get/test?count=4",
			setup: func(f *fakeSnowflake) { f.fail = leaf.ErrClockBackwards }, status: 503, contain: "clock moved backwards",
			header: map[string]string{"Retry-After": "1"}},
		{name: "not ready", method: "GET", target: "/api/snowflake/get/test",
			setup: func(f *fakeSnowflake) { f.fail = leaf.ErrNotReady }, status: 503, contain: "not ready",
			header: map[string]string{"Retry-After": "1"}},
		{name: "worker lost", method: "POST", target: "/api/snowflake/get/test",
			setup: func(f *fakeSnowflake) { f.fail = leaf.ErrWorkerLost }, status: 503, contain: "worker ID lost",
			header: map[string]string{"Retry-After": "1"}},
		{name: "bug", method: "GET", target: "/api/snowflake/get/test",
			setup: func(f *fakeSnowflake) { f.fail = errors.New("cosmic ray") }, status: 500, body: "internal server error\n"},
		{name: "put", method: "PUT", target: "/api/snowflake/get/test", status: 405, contain: "method PUT not allowed",
			header: map[string]string{"Allow": "GET, HEAD, POST"}, noCall: true},
		{name: "delete", method: "DELETE", target: "/api/snowflake/get/test?count=2", status: 405, contain: "method DELETE not allowed",
			header: map[string]string{"Allow": "GET, HEAD, POST"}, noCall: true},
		{name: "no slash", method: "GET", target: "/api/snowflake/get", status: 404, contain: "no route for /api/snowflake/get", noCall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSnowflake()
			if tt.setup != nil {
				tt.setup(f)
			}
			base := snowServer(t, f, false)
			r := do(t, tt.method, base, tt.target, "")
			checkLeafAnswer(t, r, tt.method, tt.status, tt.body, tt.contain, tt.header)
			calls, bad := f.counts()
			if bad != 0 {
				t.Errorf("the generator got %d calls with invalid input", bad)
			}
			if tt.noCall && calls != 0 {
				t.Errorf("the generator got %d calls, want none", calls)
			}
			if tt.key != "" && f.lastKey != tt.key {
				t.Errorf("the generator got key %q, want %q", f.lastKey, tt.key)
			}
		})
	}
}

// brokenSnowflake breaks the generator's contract: IDs without errors that
// are no IDs.
type brokenSnowflake struct{ *fakeSnowflake }

func (brokenSnowflake) NextID(context.Context, string) (int64, error) { return -2, nil }
func (brokenSnowflake) NextIDs(_ context.Context, _ string, n int, dst []int64) ([]int64, error) {
	return append(dst, 7, 7), nil
}

func TestBrokenSnowflakeNeverAnswers200(t *testing.T) {
	base, _ := testServerConfig(t, Config{Snowflake: brokenSnowflake{newFakeSnowflake()}})
	for _, target := range []string{
		"/api/snowflake/get/test", "/api/snowflake/get/test?count=2", "/v2/snowflake", "/v2/snowflake/batch?count=2",
	} {
		if r := do(t, "GET", base, target, ""); r.status != 500 {
			t.Errorf("GET %s = %d %q, want 500", target, r.status, r.body)
		}
	}
}

func TestSnowflakeDisabled(t *testing.T) {
	// Segment on, snowflake off.
	base, _ := testServer(t, newFakeGen("test"))
	for _, rq := range []struct{ method, target string }{
		{"GET", "/api/snowflake/get/test"},
		{"POST", "/api/snowflake/get/test?count=2"},
		// Checked before the key: the mode is off whatever the key.
		{"GET", "/api/snowflake/get/a%20b"},
	} {
		r := do(t, rq.method, base, rq.target, "")
		if r.status != 404 || r.body != "snowflake mode is disabled\n" {
			t.Errorf("%s %s = %d %q, want 404 snowflake mode is disabled", rq.method, rq.target, r.status, r.body)
		}
	}
	// Decoding needs the generator's layout, so it is off too.
	for _, target := range []string{"/decodeSnowflakeId?snowflakeId=" + strconv.Itoa(sampleID), "/decodeSnowflakeId"} {
		r := do(t, "GET", base, target, "")
		if r.status != 404 || r.body != `{"errorMsg":"snowflake mode is disabled"}`+"\n" {
			t.Errorf("GET %s = %d %q, want 404 snowflake mode is disabled", target, r.status, r.body)
		}
	}
	for _, rq := range []struct{ method, target string }{
		{"GET", "/v2/snowflake"},
		{"POST", "/v2/snowflake/batch?count=2"},
		{"GET", "/v2/snowflake/batch"},
		{"GET", "/v2/snowflake/decode/" + strconv.Itoa(sampleID)},
	} {
		r := do(t, rq.method, base, rq.target, "")
		e := jsonError(t, r)
		if r.status != 404 || e.Code != "snowflake_disabled" || e.Error != "snowflake mode is disabled" {
			t.Errorf("%s %s = %d %q, want 404 snowflake_disabled", rq.method, rq.target, r.status, r.body)
		}
	}
	// Snowflake on, segment off: each mode stands alone.
	base = snowServer(t, newFakeSnowflake(), true)
	if r := do(t, "GET", base, "/api/snowflake/get/test", ""); r.status != 200 || r.body != joinIDs(sampleID) {
		t.Errorf("snowflake only: GET /api/snowflake/get/test = %d %q", r.status, r.body)
	}
	if r := do(t, "GET", base, "/api/segment/get/test", ""); r.status != 404 || r.body != "segment mode is disabled\n" {
		t.Errorf("snowflake only: GET /api/segment/get/test = %d %q", r.status, r.body)
	}
}

// leafDecodeBody is /decodeSnowflakeId's answer, decoded strictly.
type leafDecodeBody struct {
	WorkerID   string `json:"workerId"`
	SequenceID string `json:"sequenceId"`
	Timestamp  string `json:"timestamp"`
}

var leafTimestampRE = regexp.MustCompile(`^(\d+)\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\)$`)

func TestLeafDecode(t *testing.T) {
	f := newFakeSnowflake()
	f.seq = maxSequence - 2 // the batch below crosses a millisecond
	base := snowServer(t, f, false)

	// Issue IDs through the server, then decode each: the parts must be the
	// ones the generator composed it from.
	r := do(t, "GET", base, "/api/snowflake/get/test", "")
	if r.status != 200 {
		t.Fatalf("issue: %d %q", r.status, r.body)
	}
	issued := []string{r.body}
	want := []leaf.SnowflakeParts{f.lastParts()}
	r = do(t, "POST", base, "/api/snowflake/get/test?count=4", "")
	if r.status != 200 {
		t.Fatalf("issue batch: %d %q", r.status, r.body)
	}
	batch := strings.Split(r.body, "\n")
	issued = append(issued, batch...)
	last := f.lastParts()
	for i := range batch { // the batch's parts, recomputed from the last one
		seq, ms := last.Sequence-int64(len(batch)-1-i), last.Timestamp
		if seq < 0 {
			seq, ms = seq+maxSequence+1, ms-1
		}
		want = append(want, leaf.SnowflakeParts{ID: leafCompose(ms, sampleWorker, seq), Timestamp: ms, WorkerID: sampleWorker, Sequence: seq})
	}
	if want[len(want)-1].Timestamp != want[0].Timestamp+1 {
		t.Fatalf("the batch did not cross a millisecond: %+v", want)
	}

	for i, id := range issued {
		method := []string{"GET", "POST"}[i%2]
		r := do(t, method, base, "/decodeSnowflakeId?snowflakeId="+id, "")
		if r.status != 200 {
			t.Fatalf("%s decode %s = %d %q", method, id, r.status, r.body)
		}
		var got leafDecodeBody
		decodeStrict(t, r, &got)
		w := want[i]
		if strconv.FormatInt(w.ID, 10) != id {
			t.Fatalf("issued %s, want %d", id, w.ID)
		}
		if got.WorkerID != strconv.FormatInt(w.WorkerID, 10) || got.SequenceID != strconv.FormatInt(w.Sequence, 10) {
			t.Errorf("decode %s = %+v, want worker %d sequence %d", id, got, w.WorkerID, w.Sequence)
		}
		m := leafTimestampRE.FindStringSubmatch(got.Timestamp)
		if m == nil {
			t.Fatalf("decode %s: timestamp %q is not ms(yyyy-MM-dd HH:mm:ss.SSS)", id, got.Timestamp)
		}
		// The time is the server's local time, as Leaf's SimpleDateFormat.
		local := time.UnixMilli(w.Timestamp).Format("2006-01-02 15:04:05.000")
		if m[1] != strconv.FormatInt(w.Timestamp, 10) || m[2] != local {
			t.Errorf("decode %s: timestamp %q, want %d(%s)", id, got.Timestamp, w.Timestamp, local)
		}
		// Leaf's key order.
		wantBody := `{"workerId":"` + got.WorkerID + `","sequenceId":"` + got.SequenceID + `","timestamp":"` + got.Timestamp + "\"}\n"
		if r.body != wantBody {
			t.Errorf("decode %s: body %q, want %q", id, r.body, wantBody)
		}
	}

	if r := do(t, "HEAD", base, "/decodeSnowflakeId?snowflakeId="+issued[0], ""); r.status != 200 || r.body != "" || r.header.Get("Content-Length") == "" {
		t.Errorf("HEAD = %d %q Content-Length %q", r.status, r.body, r.header.Get("Content-Length"))
	}

	maxID := strconv.FormatInt(1<<63-1, 10)
	errs := []struct {
		name, method, target string
		status               int
		contain              string
	}{
		{"missing", "GET", "/decodeSnowflakeId", 400, "invalid argument: the parameter snowflakeId is required"},
		{"other parameter", "GET", "/decodeSnowflakeId?id=" + issued[0], 400, "the parameter snowflakeId is required"},
		{"wrong case", "GET", "/decodeSnowflakeId?snowflakeid=" + issued[0], 400, "the parameter snowflakeId is required"},
		{"empty", "GET", "/decodeSnowflakeId?snowflakeId=", 400, `invalid argument: snowflakeId "" is not a decimal integer`},
		{"abc", "GET", "/decodeSnowflakeId?snowflakeId=abc", 400, `invalid argument: snowflakeId "abc" is not a decimal integer`},
		{"fraction", "POST", "/decodeSnowflakeId?snowflakeId=1.5", 400, `snowflakeId "1.5" is not a decimal integer`},
		{"hex", "GET", "/decodeSnowflakeId?snowflakeId=0x10", 400, `snowflakeId "0x10" is not a decimal integer`},
		{"negative", "GET", "/decodeSnowflakeId?snowflakeId=-5", 400, "invalid argument: snowflake ID -5 is not positive"},
		{"zero", "GET", "/decodeSnowflakeId?snowflakeId=0", 400, "snowflake ID 0 is not positive"},
		{"too large", "GET", "/decodeSnowflakeId?snowflakeId=99999999999999999999", 400,
			`invalid argument: snowflakeId "99999999999999999999" is out of range for a 64-bit ID`},
		{"too small", "GET", "/decodeSnowflakeId?snowflakeId=-99999999999999999999", 400, "is out of range for a 64-bit ID"},
		{"not yet issued", "GET", "/decodeSnowflakeId?snowflakeId=" + maxID, 400, "cannot have been issued with this server's layout"},
		{"put", "PUT", "/decodeSnowflakeId?snowflakeId=" + issued[0], 405, "method PUT not allowed; use GET, HEAD, POST"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, tt.method, base, tt.target, "")
			if r.status != tt.status {
				t.Fatalf("%s %s = %d %q, want %d", tt.method, tt.target, r.status, r.body, tt.status)
			}
			var e struct {
				ErrorMsg string `json:"errorMsg"`
			}
			decodeStrict(t, r, &e)
			if !strings.Contains(e.ErrorMsg, tt.contain) {
				t.Errorf("errorMsg = %q, want it to contain %q", e.ErrorMsg, tt.contain)
			}
			if r.status == 405 && r.header.Get("Allow") != "GET, HEAD, POST" {
				t.Errorf("Allow = %q", r.header.Get("Allow"))
			}
		})
	}
}

func TestLeafTimestamp(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	tests := []struct {
		ms   int64
		loc  *time.Location
		want string
	}{
		// LEAF-REFERENCE §1.7, a server in Asia/Shanghai.
		{sampleMs, shanghai, "1590000000000(2020-05-21 02:40:00.000)"},
		{sampleMs, time.UTC, "1590000000000(2020-05-20 18:40:00.000)"},
		{1588421624602, time.UTC, "1588421624602(2020-05-02 12:13:44.602)"},
		{leafEpoch, time.UTC, "1288834974657(2010-11-04 01:42:54.657)"},
		{leafEpoch + 1<<41 - 1, time.UTC, "3487858230208(2080-07-10 17:30:30.208)"},
	}
	for _, tt := range tests {
		if got := leafTimestamp(tt.ms, tt.loc); got != tt.want {
			t.Errorf("leafTimestamp(%d, %s) = %q, want %q", tt.ms, tt.loc, got, tt.want)
		}
	}
}

func TestV2Snowflake(t *testing.T) {
	f := newFakeSnowflake()
	base := snowServer(t, f, false)

	type idBody struct {
		ID    int64  `json:"id"`
		IDStr string `json:"id_str"`
	}
	for i, method := range []string{"GET", "POST"} {
		r := do(t, method, base, "/v2/snowflake", "")
		var v idBody
		decodeStrict(t, r, &v)
		want := int64(sampleID + i)
		if r.status != 200 || v.ID != want || v.IDStr != strconv.FormatInt(want, 10) {
			t.Errorf("%s /v2/snowflake = %d %+v, want %d", method, r.status, v, want)
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control = %q", r.header.Get("Cache-Control"))
		}
	}
	if f.lastKey != "" {
		t.Errorf("the /v2 route gave the generator the key %q, want none", f.lastKey)
	}
	// HEAD takes no ID: the batch below starts right after the GETs' IDs.
	if r := do(t, "HEAD", base, "/v2/snowflake", ""); r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "" {
		t.Errorf("HEAD /v2/snowflake = %d %q, Content-Length %q", r.status, r.body, r.header.Get("Content-Length"))
	}

	type batchBody struct {
		IDs    []int64  `json:"ids"`
		IDsStr []string `json:"ids_str"`
	}
	var batch batchBody
	r := do(t, "GET", base, "/v2/snowflake/batch?count=3", "")
	decodeStrict(t, r, &batch)
	if r.status != 200 || !reflect.DeepEqual(batch, batchBody{
		IDs:    []int64{sampleID + 2, sampleID + 3, sampleID + 4},
		IDsStr: []string{strconv.Itoa(sampleID + 2), strconv.Itoa(sampleID + 3), strconv.Itoa(sampleID + 4)},
	}) {
		t.Errorf("batch = %d %+v", r.status, batch)
	}
	r = do(t, "POST", base, "/v2/snowflake/batch?count=10000", "")
	decodeStrict(t, r, &batch)
	if r.status != 200 || len(batch.IDs) != 10000 || len(batch.IDsStr) != 10000 {
		t.Fatalf("batch of 10000 = %d, %d IDs", r.status, len(batch.IDs))
	}
	for i, id := range batch.IDs {
		if i > 0 && id <= batch.IDs[i-1] || batch.IDsStr[i] != strconv.FormatInt(id, 10) {
			t.Fatalf("batch of 10000: ID %d at %d (%q) after %d", id, i, batch.IDsStr[i], batch.IDs[max(i-1, 0)])
		}
	}

	type decodeBody struct {
		ID          int64  `json:"id"`
		IDStr       string `json:"id_str"`
		TimestampMs int64  `json:"timestamp_ms"`
		Time        string `json:"time"`
		WorkerID    int64  `json:"worker_id"`
		Sequence    int64  `json:"sequence"`
	}
	var d decodeBody
	r = do(t, "GET", base, "/v2/snowflake/decode/"+strconv.Itoa(sampleID), "")
	decodeStrict(t, r, &d)
	if want := (decodeBody{sampleID, strconv.Itoa(sampleID), sampleMs, "2020-05-20T18:40:00.000Z", sampleWorker, sampleSeq}); r.status != 200 || d != want {
		t.Errorf("decode = %d %+v, want %+v", r.status, d, want)
	}
	// The last ID of the batch, which crossed milliseconds.
	lp := f.lastParts()
	r = do(t, "GET", base, "/v2/snowflake/decode/"+strconv.FormatInt(lp.ID, 10), "")
	decodeStrict(t, r, &d)
	wantTime := time.UnixMilli(lp.Timestamp).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if want := (decodeBody{lp.ID, strconv.FormatInt(lp.ID, 10), lp.Timestamp, wantTime, lp.WorkerID, lp.Sequence}); r.status != 200 || d != want {
		t.Errorf("decode = %d %+v, want %+v", r.status, d, want)
	}
	if r := do(t, "HEAD", base, "/v2/snowflake/decode/"+strconv.Itoa(sampleID), ""); r.status != 200 || r.body != "" {
		t.Errorf("HEAD decode = %d %q", r.status, r.body)
	}

	errs := []struct {
		method, target string
		fail           error
		status         int
		code, contain  string
	}{
		{"GET", "/v2/snowflake/batch", nil, 400, "invalid_count", "count is required"},
		{"GET", "/v2/snowflake/batch?count=0", nil, 400, "invalid_count", ""},
		{"GET", "/v2/snowflake/batch?count=10001", nil, 400, "invalid_count", ""},
		{"GET", "/v2/snowflake/batch?count=x", nil, 400, "invalid_count", ""},
		{"GET", "/v2/snowflake/decode/abc", nil, 400, "invalid_argument", `ID "abc" is not a decimal integer`},
		{"GET", "/v2/snowflake/decode/-5", nil, 400, "invalid_argument", "not positive"},
		{"GET", "/v2/snowflake/decode/99999999999999999999", nil, 400, "invalid_argument", "out of range"},
		{"GET", "/v2/snowflake/decode/", nil, 404, "not_found", ""},
		{"GET", "/v2/snowflake/decode/1/x", nil, 404, "not_found", ""},
		{"GET", "/v2/snowflake", leaf.ErrClockBackwards, 503, "clock_backwards", "clock moved backwards"},
		{"POST", "/v2/snowflake/batch?count=2", leaf.ErrClockBackwards, 503, "clock_backwards", ""},
		{"GET", "/v2/snowflake", leaf.ErrNotReady, 503, "not_ready", ""},
		{"GET", "/v2/snowflake/batch?count=2", leaf.ErrWorkerLost, 503, "worker_lost", "worker ID lost"},
		{"DELETE", "/v2/snowflake", nil, 405, "method_not_allowed", ""},
		{"PUT", "/v2/snowflake/batch?count=2", nil, 405, "method_not_allowed", ""},
		{"POST", "/v2/snowflake/decode/1", nil, 405, "method_not_allowed", ""},
	}
	for _, tt := range errs {
		f.setFail(tt.fail)
		r := do(t, tt.method, base, tt.target, "")
		if e := jsonError(t, r); r.status != tt.status || e.Code != tt.code || !strings.Contains(e.Error, tt.contain) {
			t.Errorf("%s %s = %d %q, want %d %s containing %q", tt.method, tt.target, r.status, r.body, tt.status, tt.code, tt.contain)
		}
		if r.status == 405 {
			want := "GET, HEAD, POST"
			if strings.Contains(tt.target, "/decode/") {
				want = "GET, HEAD"
			}
			if got := r.header.Get("Allow"); got != want {
				t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.target, got, want)
			}
		}
	}
	if _, bad := f.counts(); bad != 0 {
		t.Errorf("the generator got %d calls with invalid input", bad)
	}
}

func TestV2StatusSnowflake(t *testing.T) {
	f := newFakeSnowflake()
	base := snowServer(t, f, false)
	do(t, "GET", base, "/api/snowflake/get/test", "")

	var st struct {
		Version string          `json:"version"`
		Detail  bool            `json:"detail"`
		Segment json.RawMessage `json:"segment"`
		// A pointer: the member must be there, not merely zero.
		Snowflake *workerStatus `json:"snowflake"`
	}
	r := do(t, "GET", base, "/v2/status", "")
	decodeStrict(t, r, &st)
	if r.status != 200 || st.Snowflake == nil || !reflect.DeepEqual(st.Snowflake, newWorkerStatus(f.Status())) {
		t.Errorf("status = %d %s, want the snowflake member %+v", r.status, r.body, f.Status())
	}
	if !strings.Contains(string(st.Segment), `"enabled":true`) {
		t.Errorf("segment member = %s", st.Segment)
	}
	// The worker's fields under their own names, beside segment.
	if !strings.Contains(r.body, `"snowflake":{"registry":"local","endpoint":"127.0.0.1:8080","layout":"leaf","worker_id":5,`) {
		t.Errorf("status body = %s", r.body)
	}

	// Snowflake only: segment still reports itself off.
	base = snowServer(t, newFakeSnowflake(), true)
	r = do(t, "GET", base, "/v2/status", "")
	if r.status != 200 || !strings.HasPrefix(r.body, `{"version":"v1.2.3-test","detail":true,"segment":{"enabled":false,"degraded":[],"tags":[]},"snowflake":{`) {
		t.Errorf("status, snowflake only = %d %s", r.status, r.body)
	}
	// Snowflake off: no member (TestV2Status checks the exact body).
	base, _ = testServer(t, newFakeGen())
	if r := do(t, "GET", base, "/v2/status", ""); strings.Contains(r.body, "snowflake") {
		t.Errorf("status, snowflake off = %s", r.body)
	}
}

func TestReadyzSnowflake(t *testing.T) {
	// Reasons are worded as the real generators word them: each names itself.
	tests := []struct {
		name          string
		seg, snow     []string // degraded reasons
		noSeg, noSnow bool
		target        string
		status        int
		body          string
	}{
		{name: "both healthy", target: "/readyz", status: 200, body: "ok\n"},
		{name: "snowflake only, healthy", noSeg: true, target: "/readyz?strict=1", status: 200, body: "ok\n"},
		{name: "snowflake degraded", snow: []string{"snowflake heartbeat failing: zk: connection closed"}, target: "/readyz", status: 200,
			body: "degraded\nsnowflake heartbeat failing\n"},
		{name: "snowflake degraded strict", snow: []string{"snowflake worker ID lost; re-registering"}, target: "/readyz?strict=1", status: 503,
			body: "degraded\nsnowflake worker ID lost\n"},
		{name: "both degraded, segment first", seg: []string{"segment store unreachable since 2024-05-01T12:00:00Z: dial tcp: refused"},
			snow:   []string{"snowflake clock is behind the last issued ID", "snowflake heartbeat failing: two\nlines"},
			target: "/readyz", status: 200,
			body: "degraded\nsegment store unreachable since 2024-05-01T12:00:00Z\n" +
				"snowflake clock is behind the last issued ID\nsnowflake heartbeat failing\n"},
		{name: "snowflake only, degraded", noSeg: true, snow: []string{"snowflake generator closed"}, target: "/readyz?strict=1", status: 503,
			body: "degraded\nsnowflake generator closed\n"},
		{name: "segment degraded, snowflake healthy", seg: []string{"tag a: no IDs buffered"}, target: "/readyz", status: 200,
			body: "degraded\ntag a: no IDs buffered\n"},
		{name: "segment degraded, snowflake off", noSnow: true, seg: []string{"tag a: no IDs buffered"}, target: "/readyz", status: 200,
			body: "degraded\ntag a: no IDs buffered\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			if !tt.noSeg {
				g := newFakeGen("test")
				g.setDegraded(tt.seg...)
				cfg.Segment = g
			}
			if !tt.noSnow {
				f := newFakeSnowflake()
				f.setDegraded(tt.snow...)
				cfg.Snowflake = f
			}
			base, _ := testServerConfig(t, cfg)
			if r := do(t, "GET", base, tt.target, ""); r.status != tt.status || r.body != tt.body {
				t.Errorf("GET %s = %d %q, want %d %q", tt.target, r.status, r.body, tt.status, tt.body)
			}
		})
	}
}

// TestDegradedDoesNotAppendToGenerators: /readyz must not write into a slice
// a generator handed out (it may be the generator's own).
func TestDegradedDoesNotAppendToGenerators(t *testing.T) {
	own := make([]string, 1, 4)
	own[0] = "segment store unreachable"
	f := newFakeSnowflake()
	f.setDegraded("snowflake heartbeat failing: timeout")
	s := New(Config{Segment: sharingGen{newFakeGen(), own}, Snowflake: f})
	got := s.degraded()
	if !reflect.DeepEqual(got, []string{"segment store unreachable", "snowflake heartbeat failing: timeout"}) {
		t.Fatalf("degraded = %q", got)
	}
	if own[:2][1] != "" {
		t.Errorf("the segment generator's slice was appended to: %q", own[:2])
	}
}

type sharingGen struct {
	*fakeGen
	reasons []string
}

func (g sharingGen) Degraded() []string { return g.reasons }

func TestConcurrentSnowflakeIDsAreUnique(t *testing.T) {
	base := snowServer(t, newFakeSnowflake(), false)
	const workers, each = 8, 30
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				target := []string{"/api/snowflake/get/test", "/api/snowflake/get/test?count=3", "/v2/snowflake"}[i%3]
				resp, err := http.Get(base + target)
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got := strings.Split(string(b), "\n")
				if i%3 == 2 {
					var v struct {
						IDStr string `json:"id_str"`
					}
					if err := json.Unmarshal(b, &v); err != nil {
						t.Errorf("worker %d: %q: %v", w, b, err)
						return
					}
					got = []string{v.IDStr}
				}
				mu.Lock()
				for _, id := range got {
					if seen[id] {
						t.Errorf("ID %s issued twice", id)
					}
					seen[id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := workers * each / 3 * 5; len(seen) != want {
		t.Errorf("got %d distinct IDs, want %d", len(seen), want)
	}
}
