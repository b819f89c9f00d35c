package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/reqlog"
	"github.com/leafgo/leaf/internal/testutil"
)

// Internal causes as the stores and registries produce them: what must
// reach the log and never an answer.
var (
	// errDial is what database/sql hands back while MariaDB is down.
	errDial = &net.OpError{Op: "dial", Net: "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 3306},
		Err:  &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	errDriver = driverError("Error 1062 (23000): Duplicate entry 'orders' for key 'PRIMARY'")
	errSQLite = errors.New("database is locked (5) (SQLITE_BUSY)")
	errGoType = errors.New("json: cannot unmarshal string into Go struct field segment.row.step of type int")
)

// driverError is an error text as a driver gives it, capitalized (MySQL's
// "Error 1062 ..."), which errors.New would be linted for.
type driverError string

func (e driverError) Error() string { return string(e) }

// internals are the fragments of those causes, and of our own code, that
// no answer may contain.
var internals = []string{
	"10.1.2.3", "3306", "dial tcp", "connection refused", "Error 1062", "Duplicate entry", "SQLITE", "(5)",
	"Go struct", "of type", "segment.row", "createTagRequest", "patchTagRequest", "mysql", "sqlite", "postgres",
	"SQLSTATE", "zk:", "heartbeat:", "json:",
}

// internalFailures are generator failures as the real ones word them: a
// sentinel for the table, wrapped with a cause from below.
var internalFailures = []error{
	fmt.Errorf("tag %q: no IDs buffered and the store failed: mysql: reserve %q: %w: %w", "orders", "orders", errDial, leaf.ErrNotReady),
	fmt.Errorf("mysql: create %q: %w (%w)", "orders", leaf.ErrTagExists, errDriver),
	fmt.Errorf("sqlite: alloc %q: %w: %w", "orders", errSQLite, leaf.ErrTagNotFound),
	fmt.Errorf("%w: postgres: invalid input syntax for type bigint (SQLSTATE 22P02)", leaf.ErrInvalidArgument),
	fmt.Errorf("mysql: create %q: %w", "orders", &leaf.TombstoneError{Tag: "orders", MinStart: 5000}),
	fmt.Errorf("%w: cannot persist the high-water mark ahead of the clock: registry heartbeat: zk: %w", leaf.ErrNotReady, errDial),
	fmt.Errorf("%w: by 12ms, more than the 5ms waited out; heartbeat: %w", leaf.ErrClockBackwards, errDial),
	fmt.Errorf("register worker 10.1.2.3:8080: mysql: %w: %w", errDial, leaf.ErrWorkerIDsExhausted),
	fmt.Errorf("%w: zk: session expired talking to %w", leaf.ErrWorkerLost, errDial),
	fmt.Errorf("%w: zk: node /snowflake/leaf/10.1.2.3:3306 held", leaf.ErrWorkerInUse),
	fmt.Errorf("%w: peers at %w", leaf.ErrClockSkew, errDial),
	fmt.Errorf("sqlite: reserve: %w (%w)", leaf.ErrClosed, errSQLite),
	fmt.Errorf("mysql: reserve %q: %w (%w)", "orders", context.DeadlineExceeded, errDial),
	fmt.Errorf("segment: read row: %w", errGoType), // in no row: a bug
}

// leakySeg and leakySnow fail every call with err, and report degraded
// reasons that carry internal causes.
type leakySeg struct{ err error }

func (g leakySeg) NextID(context.Context, string) (int64, error) { return 0, g.err }
func (g leakySeg) NextIDs(_ context.Context, _ string, _ int, dst []int64) ([]int64, error) {
	return dst, g.err
}
func (g leakySeg) NextRange(context.Context, string, int) (int64, int64, error) { return 0, 0, g.err }
func (g leakySeg) Decode(context.Context, string, string) (leaf.DecodedID, error) {
	return leaf.DecodedID{}, g.err
}
func (g leakySeg) Known(context.Context, string) error { return g.err }
func (g leakySeg) Status() []leaf.SegmentStatus {
	return []leaf.SegmentStatus{{Tag: "orders", LoadError: "mysql: reserve: " + errDial.Error()}}
}
func (g leakySeg) Totals() leaf.SegmentTotals { return totalsOf(g.Status(), 0) }
func (g leakySeg) Busiest(n int, also ...string) []leaf.SegmentStatus {
	return busiestOf(g.Status(), n, also)
}
func (g leakySeg) Degraded() []string {
	return []string{
		"segment store unreachable since 2024-05-01T12:00:00Z: mysql: reserve \"orders\": " + errDial.Error(),
		"tag orders: no IDs buffered: mysql: reserve \"orders\": " + errSQLite.Error(),
	}
}
func (g leakySeg) Allocs(context.Context) ([]leaf.Alloc, error) { return nil, g.err }
func (g leakySeg) AllocsPage(context.Context, string, string, int) ([]leaf.Alloc, error) {
	return nil, g.err
}
func (g leakySeg) Alloc(context.Context, string) (leaf.Alloc, error) { return leaf.Alloc{}, g.err }
func (g leakySeg) CreateTag(context.Context, leaf.Alloc) error       { return g.err }
func (g leakySeg) SetStep(context.Context, string, int) error        { return g.err }
func (g leakySeg) DeleteTag(context.Context, string) error           { return g.err }
func (g leakySeg) NextIDPeriod(context.Context, string) (int64, string, error) {
	return 0, "", g.err
}
func (g leakySeg) NextIDsPeriod(_ context.Context, _ string, _ int, dst []int64) ([]int64, string, error) {
	return dst, "", g.err
}
func (g leakySeg) Take(context.Context, string, int, leaf.RangeUse) (leaf.IDRange, error) {
	return leaf.IDRange{}, g.err
}
func (g leakySeg) TagShape(context.Context, string) (leaf.TagShape, error) {
	return leaf.TagShape{}, g.err
}
func (g leakySeg) CreateShapedTag(context.Context, leaf.Alloc, leaf.TagShape) error { return g.err }
func (g leakySeg) PrunePeriods(context.Context, string, leaf.Prune) (leaf.PruneResult, error) {
	return leaf.PruneResult{}, g.err
}
func (g leakySeg) TagShapes(context.Context, []string) (map[string]leaf.TagShape, error) {
	return nil, g.err
}
func (g leakySeg) Periods(context.Context, string, string, int) ([]leaf.PeriodAlloc, error) {
	return nil, g.err
}
func (g leakySeg) CountPeriods(context.Context, string) (int, error) { return 0, g.err }
func (g leakySnow) NextID(context.Context, string) (int64, error)    { return 0, g.err }
func (g leakySnow) Decode(int64) (leaf.SnowflakeParts, error)        { return leaf.SnowflakeParts{}, g.err }
func (g leakySnow) Status() leaf.WorkerStatus                        { return leaf.WorkerStatus{} }
func (g leakySnow) NextIDs(_ context.Context, _ string, _ int, dst []int64) ([]int64, error) {
	return dst, g.err
}
func (g leakySnow) Degraded() []string {
	return []string{"snowflake heartbeat failing: registry heartbeat: zk: " + errDial.Error()}
}

type leakySnow struct{ err error }

// errorRoutes are the requests that reach a generator, one per route and
// call.
var errorRoutes = []struct{ method, target, body string }{
	{"GET", "/api/segment/get/orders", ""},
	{"POST", "/api/segment/get/orders?count=3", ""},
	{"GET", "/api/snowflake/get/orders", ""},
	{"GET", "/api/snowflake/get/orders?count=3", ""},
	{"GET", "/decodeSnowflakeId?snowflakeId=123", ""},
	{"GET", "/v2/segment/orders", ""},
	{"GET", "/v2/segment/orders/batch?count=3", ""},
	{"GET", "/v2/segment/orders/range?count=3", ""},
	{"GET", "/v2/snowflake", ""},
	{"POST", "/v2/snowflake/batch?count=3", ""},
	{"GET", "/v2/snowflake/decode/123", ""},
	{"GET", "/v2/tags", ""},
	{"GET", "/v2/tags/orders", ""},
	{"POST", "/v2/tags", `{"tag":"orders"}`},
	{"PATCH", "/v2/tags/orders", `{"step":5}`},
	{"DELETE", "/v2/tags/orders", ""},
	{"GET", "/db", ""},
}

// checkNoInternals fails if any part of an answer names an internal.
func checkNoInternals(t *testing.T, what string, r response) {
	t.Helper()
	parts := []string{r.body}
	for k, vv := range r.header {
		if k != requestIDHeader { // random hex, which may hold "3306"
			parts = append(parts, k+": "+strings.Join(vv, ", "))
		}
	}
	for _, p := range parts {
		for _, bad := range internals {
			if strings.Contains(p, bad) {
				t.Errorf("%s: %d answer shows %q: %q", what, r.status, bad, p)
			}
		}
	}
}

// logLine finds the JSON log line carrying request ID id.
func logLine(logs *testutil.LogBuffer, id string) map[string]any {
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["request_id"] == id {
			return m
		}
	}
	return nil
}

// TestNoInternalsInAnswers sweeps every route that reaches a generator, on
// both HTTP transports, with generators failing as real ones do while their
// store or registry is down or broken: no answer may show the cause (a host
// and port, a driver's text, a Go type), every error answer carries a
// request ID, and a 5xx's request ID is in the log line with its cause.
func TestNoInternalsInAnswers(t *testing.T) {
	for _, fail := range internalFailures {
		logs := &testutil.LogBuffer{}
		s := New(Config{Segment: leakySeg{fail}, Tags: leakySeg{fail}, Snowflake: leakySnow{fail},
			Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		s.errLog = &reqlog.Budget{} // every line, for the sweep to find them all
		transports := map[string]string{"net/http": serveNetHTTP(t, s), "fast": serveFast(t, s, Limits{})}
		for name, base := range transports {
			for _, rq := range errorRoutes {
				what := fmt.Sprintf("%s %s %s on %q", name, rq.method, rq.target, fail)
				r := do(t, rq.method, base, rq.target, rq.body)
				if r.status < 400 {
					t.Fatalf("%s: %d %q, want an error", what, r.status, r.body)
				}
				checkNoInternals(t, what, r)
				id := r.header.Get(requestIDHeader)
				if len(id) != 16 {
					t.Errorf("%s: %s %q, want a request ID", what, requestIDHeader, id)
					continue
				}
				if r.status < 500 {
					continue
				}
				line := logLine(logs, id)
				if cause, _ := line["err"].(string); cause != fail.Error() {
					t.Errorf("%s: log line for request %s = %v, want the cause %q", what, id, line, fail)
				}
			}
		}
	}
}

// TestNoInternalsInStatus: the probes and the status summary show the
// generators' degraded reasons in the clients' words; with the detail
// (admin), /v2/status shows them whole.
func TestNoInternalsInStatus(t *testing.T) {
	s := New(Config{Segment: leakySeg{leaf.ErrNotReady}, Snowflake: leakySnow{leaf.ErrNotReady},
		Logger: slog.New(slog.DiscardHandler), AdminToken: "s3cret"})
	for name, base := range map[string]string{"net/http": serveNetHTTP(t, s), "fast": serveFast(t, s, Limits{})} {
		for _, target := range []string{"/readyz", "/readyz?strict=1", "/v2/status", "/v2/status?detail=0", "/v2/status?detail=1"} {
			r := do(t, "GET", base, target, "")
			checkNoInternals(t, name+" GET "+target, r)
		}
		r := do(t, "GET", base, "/readyz", "")
		if want := "degraded\nsegment store unreachable since 2024-05-01T12:00:00Z\ntag orders: no IDs buffered\nsnowflake heartbeat failing\n"; r.body != want {
			t.Errorf("%s /readyz = %q, want %q", name, r.body, want)
		}
		// With the admin token, and no ?detail=0, the reasons come whole.
		admin := http.Header{"Authorization": {"Bearer s3cret"}}
		r = doHeader(t, "GET", base, "/v2/status", "", admin)
		if !strings.Contains(r.body, "10.1.2.3:3306") || !strings.Contains(r.body, `"detail":true`) {
			t.Errorf("%s /v2/status as admin = %q, want the detailed causes", name, r.body)
		}
		r = doHeader(t, "GET", base, "/v2/status?detail=0", "", admin)
		checkNoInternals(t, name+" GET /v2/status?detail=0 as admin", r)
	}
}

// TestBodyErrorsInClientTerms: a body the decoder refuses is described in
// JSON's terms, not in our Go types'.
func TestBodyErrorsInClientTerms(t *testing.T) {
	base, _ := testServer(t, newFakeGen("existing"))
	for _, tc := range []struct{ method, target, body, want string }{
		{"POST", "/v2/tags", `{"tag":"x","step":"5"}`, `invalid argument: request body: "step": got a JSON string, want an integer in range`},
		{"POST", "/v2/tags", `{"tag":"x","step":1.5}`, `invalid argument: request body: "step": got a JSON number, want an integer in range`},
		{"POST", "/v2/tags", `{"tag":"x","start":9223372036854775808}`, `invalid argument: request body: "start": got a JSON number, want an integer in range`},
		{"POST", "/v2/tags", `{"tag":7}`, `invalid argument: request body: "tag": got a JSON number, want a string`},
		{"POST", "/v2/tags", `["x"]`, `invalid argument: request body: got a JSON array, want an object`},
		{"POST", "/v2/tags", `"x"`, `invalid argument: request body: got a JSON string, want an object`},
		{"POST", "/v2/tags", `{"tag":`, `invalid argument: request body: not one complete JSON object`},
		{"POST", "/v2/tags", `{"tag" 1}`, `invalid argument: request body: invalid JSON at byte 8`},
		{"POST", "/v2/tags", `{"tag":"x","stpe":5}`, `invalid argument: request body: unknown field "stpe"`},
		{"PATCH", "/v2/tags/existing", `{"step":true}`, `invalid argument: request body: "step": got a JSON bool, want an integer in range`},
		{"GET", "/v2/status?detail=maybe", "", `invalid argument: detail "maybe", want 0 or 1`},
	} {
		r := do(t, tc.method, base, tc.target, tc.body)
		e := jsonError(t, r)
		if r.status != 400 || e.Error != tc.want {
			t.Errorf("%s %s %s = %d %q, want 400 %q", tc.method, tc.target, tc.body, r.status, e.Error, tc.want)
		}
		checkNoInternals(t, tc.method+" "+tc.target, r)
	}
}

// TestFailureLogBudget: an outage fails every request, and the log gets ten
// lines per ten seconds of them, not one each.
func TestFailureLogBudget(t *testing.T) {
	logs := &testutil.LogBuffer{}
	s := New(Config{Segment: leakySeg{internalFailures[0]}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	base := serveFast(t, s, Limits{})
	for range 50 {
		if r := do(t, "GET", base, "/api/segment/get/orders", ""); r.status != 503 {
			t.Fatalf("status %d, want 503", r.status)
		}
	}
	if n := strings.Count(logs.String(), "httpapi: request failed"); n != 10 {
		t.Errorf("50 failed requests logged %d lines, want 10 (the budget)", n)
	}
}
