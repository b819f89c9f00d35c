package openapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestOpenAPIConformance runs the real binary and holds every answer it
// gives to httpapi/openapi.json, the document it serves at /openapi.json:
// each request must match a documented operation, the document must accept
// the requests the server serves and refuse those it refuses for their
// parameters, body or missing token, and each answer's status, headers and
// body must be documented for its operation. Every answer the document
// describes (operation, status, media type) must be seen at least once, so
// that it describes nothing the server does not do; httpapi's
// TestOpenAPIDescribesEveryRoute checks that it describes every route.
//
// Five servers give every answer: A, the default one (SQLite, both modes,
// an admin token, a chaos build's clock that the test steps back at the
// end); B, on MariaDB through a proxy the test cuts, snowflake off, the
// owner of an ordered tag; C, rate limited; D, segment off; E, on B's
// database, redirecting to B.
func TestOpenAPIConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	mysqlDSN := testutil.MySQL(t)
	bin := testutil.BuildLeaf(t, "chaos")
	const token = "openapi-test-admin-token"

	dirA := t.TempDir()
	clockFile := filepath.Join(dirA, "clock")
	// A's low-buffer check is off: whether a tag of step 10 that the test
	// drew from just now lasts under 2s at its rate depends on when the
	// rate was sampled, and GET /readyz?strict=1 must find A healthy (a
	// degraded strict answer is B's, its store cut off).
	a := testutil.StartLeaf(t, bin, dirA, append(testutil.CleanEnv(), "LEAF_DATA_DIR="+filepath.Join(dirA, "data"),
		"LEAF_ADMIN_TOKEN="+token, envChaosClock+"="+clockFile, "LEAF_SEGMENT_LOW_BUFFER=0",
		"LEAF_SEGMENT_OPAQUE_KEY=3f9c2a7be1d04c6a8f5e2b1d9c7a6e4f0b3d5c8a1e2f4b6d7c9a0e1f2b3c4d5e"), "--listen", "127.0.0.1:0")

	cfg, err := gomysql.ParseDSN(mysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, cfg.Addr)
	cfg.Addr, cfg.Timeout = proxy.Addr(), time.Second
	dirB := t.TempDir()
	// The default wait (1s): an ordered tag's first request reads its shape
	// and lease, takes the lease and reserves, a few transactions through
	// the proxy, which a 200ms wait did not cover on a busy machine
	// (scripts/stress-tests.sh). The requests with the store cut off wait
	// it out each.
	b := testutil.StartLeaf(t, bin, dirB, append(testutil.CleanEnv(), "LEAF_DATA_DIR="+filepath.Join(dirB, "data"),
		"LEAF_SNOWFLAKE_ENABLED=false", "LEAF_SEGMENT_SEED=true", "LEAF_SEGMENT_WAIT_TIMEOUT=1s"),
		"--listen", "127.0.0.1:0", "--segment-store", "mysql", "--segment-dsn", cfg.FormatDSN())

	dirC := t.TempDir()
	c := testutil.StartLeaf(t, bin, dirC, append(testutil.CleanEnv(), "LEAF_DATA_DIR="+filepath.Join(dirC, "data"), "LEAF_RATE_LIMIT_BURST=1"),
		"--listen", "127.0.0.1:0", "--rate-limit", "1")

	dirD := t.TempDir()
	d := testutil.StartLeaf(t, bin, dirD, append(testutil.CleanEnv(), "LEAF_DATA_DIR="+filepath.Join(dirD, "data"), "LEAF_SEGMENT_ENABLED=false"),
		"--listen", "127.0.0.1:0")

	k := newConformance(t, a.URL(""))

	// Every path's other methods: 405, the path's methods in Allow, and a
	// body in the path's error style.
	k.probeMethods(a.URL(""))

	// A: successes and the client's errors.
	seed := testutil.SeedTag
	sid := testutil.FetchID(t, a.URL("/api/snowflake/get/x"))
	ids := strconv.FormatInt(sid, 10)
	wrong := "wrong-admin-token-0123456789"
	forwarded := map[string]string{"Leaf-Forward": "1"}
	const big = 100 << 10 // over the /v2 body limit, under the server's
	bigBody := `{"tag":"t","description":"` + strings.Repeat("d", big) + `"}`
	for _, tt := range []apiCall{
		// Leaf's ID routes.
		{method: "GET", target: "/api/segment/get/" + seed, status: 200},
		{method: "POST", target: "/api/segment/get/" + seed, status: 200},
		{method: "HEAD", target: "/api/segment/get/" + seed, status: 200},
		{method: "GET", target: "/api/segment/get/" + seed + "?count=3", status: 200},
		{method: "POST", target: "/api/segment/get/" + seed + "?count=3", status: 200},
		{method: "GET", target: "/api/segment/get/bad%20tag", status: 400, invalid: true},
		{method: "POST", target: "/api/segment/get/bad%20tag", status: 400, invalid: true},
		{method: "HEAD", target: "/api/segment/get/bad%20tag", status: 400, invalid: true},
		{method: "GET", target: "/api/segment/get/" + seed + "?count=0", status: 400, invalid: true},
		{method: "GET", target: "/api/segment/get/" + seed + "?count=10001", status: 400, invalid: true},
		{method: "HEAD", target: "/api/segment/get/" + seed + "?count=x", status: 400, invalid: true},
		{method: "GET", target: "/api/segment/get/no.such.tag", status: 404},
		{method: "POST", target: "/api/segment/get/no.such.tag", status: 404},
		{method: "HEAD", target: "/api/segment/get/no.such.tag", status: 404},
		{method: "GET", target: "/api/snowflake/get/any", status: 200},
		{method: "POST", target: "/api/snowflake/get/any?count=2", status: 200},
		{method: "HEAD", target: "/api/snowflake/get/any", status: 200},
		{method: "GET", target: "/api/snowflake/get/bad*key", status: 400, invalid: true},
		{method: "POST", target: "/api/snowflake/get/any?count=-1", status: 400, invalid: true},
		{method: "HEAD", target: "/api/snowflake/get/any?count=", status: 400, invalid: true},
		{method: "GET", target: "/decodeSnowflakeId?snowflakeId=" + ids, status: 200},
		{method: "POST", target: "/decodeSnowflakeId?snowflakeId=" + ids, status: 200},
		{method: "HEAD", target: "/decodeSnowflakeId?snowflakeId=" + ids, status: 200},
		{method: "GET", target: "/decodeSnowflakeId", status: 400, invalid: true},
		{method: "POST", target: "/decodeSnowflakeId?snowflakeId=abc", status: 400, invalid: true},
		{method: "HEAD", target: "/decodeSnowflakeId?snowflakeId=-1", status: 400, invalid: true},

		// Leaf's pages, admin and paged.
		{method: "GET", target: "/cache", token: token, status: 200},
		{method: "POST", target: "/cache?limit=1", token: token, status: 200},
		{method: "HEAD", target: "/cache", token: token, status: 200},
		{method: "GET", target: "/cache?limit=0", token: token, status: 400, invalid: true},
		{method: "POST", target: "/cache?prefix=a%20b", token: token, status: 400, invalid: true},
		{method: "HEAD", target: "/cache?after=a%20b", token: token, status: 400, invalid: true},
		{method: "GET", target: "/cache", token: wrong, status: 401},
		{method: "GET", target: "/db?prefix=leaf", token: token, status: 200},
		{method: "POST", target: "/db", token: token, status: 200},
		{method: "HEAD", target: "/db", token: token, status: 200},
		{method: "GET", target: "/db?limit=1001", token: token, status: 400, invalid: true},
		{method: "POST", target: "/db?limit=x", token: token, status: 400, invalid: true},
		{method: "HEAD", target: "/db?limit=0", token: token, status: 400, invalid: true},

		// The native ID routes.
		{method: "GET", target: "/v2/segment/" + seed, status: 200},
		{method: "POST", target: "/v2/segment/" + seed, status: 200},
		{method: "HEAD", target: "/v2/segment/" + seed, status: 200},
		{method: "GET", target: "/v2/segment/bad%20tag", status: 400, invalid: true},
		{method: "POST", target: "/v2/segment/" + strings.Repeat("t", 129), status: 400, invalid: true},
		{method: "HEAD", target: "/v2/segment/bad%20tag", status: 400, invalid: true},
		{method: "GET", target: "/v2/segment/no.such.tag", status: 404},
		{method: "POST", target: "/v2/segment/no.such.tag", status: 404},
		{method: "HEAD", target: "/v2/segment/no.such.tag", status: 404},
		{method: "GET", target: "/v2/segment/" + seed + "/batch?count=3", status: 200},
		{method: "POST", target: "/v2/segment/" + seed + "/batch?count=1", status: 200},
		{method: "HEAD", target: "/v2/segment/" + seed + "/batch?count=3", status: 200},
		{method: "GET", target: "/v2/segment/" + seed + "/batch", status: 400, invalid: true},
		{method: "POST", target: "/v2/segment/" + seed + "/batch?count=10001", status: 400, invalid: true},
		{method: "HEAD", target: "/v2/segment/" + seed + "/batch?count=0", status: 400, invalid: true},
		{method: "GET", target: "/v2/segment/no.such.tag/batch?count=3", status: 404},
		{method: "POST", target: "/v2/segment/no.such.tag/batch?count=3", status: 404},
		{method: "HEAD", target: "/v2/segment/no.such.tag/batch?count=3", status: 404},
		{method: "GET", target: "/v2/segment/" + seed + "/range?count=100", status: 200},
		{method: "POST", target: "/v2/segment/" + seed + "/range?count=10000", status: 200},
		{method: "HEAD", target: "/v2/segment/" + seed + "/range?count=100", status: 200},
		{method: "GET", target: "/v2/segment/" + seed + "/range?count=x", status: 400, invalid: true},
		{method: "POST", target: "/v2/segment/" + seed + "/range", status: 400, invalid: true},
		{method: "HEAD", target: "/v2/segment/" + seed + "/range", status: 400, invalid: true},
		{method: "GET", target: "/v2/segment/no.such.tag/range?count=3", status: 404},
		{method: "POST", target: "/v2/segment/no.such.tag/range?count=3", status: 404},
		{method: "HEAD", target: "/v2/segment/no.such.tag/range?count=3", status: 404},
		{method: "GET", target: "/v2/snowflake", status: 200},
		{method: "POST", target: "/v2/snowflake", status: 200},
		{method: "HEAD", target: "/v2/snowflake", status: 200},
		{method: "GET", target: "/v2/snowflake/batch?count=2", status: 200},
		{method: "POST", target: "/v2/snowflake/batch?count=10000", status: 200},
		{method: "HEAD", target: "/v2/snowflake/batch?count=2", status: 200},
		{method: "GET", target: "/v2/snowflake/batch", status: 400, invalid: true},
		{method: "POST", target: "/v2/snowflake/batch?count=0", status: 400, invalid: true},
		{method: "HEAD", target: "/v2/snowflake/batch?count=x", status: 400, invalid: true},
		{method: "GET", target: "/v2/snowflake/decode/" + ids, status: 200},
		{method: "HEAD", target: "/v2/snowflake/decode/" + ids, status: 200},
		{method: "GET", target: "/v2/snowflake/decode/0", status: 400, invalid: true},
		{method: "HEAD", target: "/v2/snowflake/decode/x", status: 400, invalid: true},

		// Status: the detail with the token, the summary without.
		{method: "GET", target: "/v2/status", token: token, status: 200},
		{method: "GET", target: "/v2/status?limit=1", token: token, status: 200},
		{method: "GET", target: "/v2/status?detail=0", token: token, status: 200},
		{method: "GET", target: "/v2/status", status: 200},
		{method: "HEAD", target: "/v2/status", status: 200},
		{method: "GET", target: "/v2/status?detail=yes", status: 400, invalid: true},
		{method: "HEAD", target: "/v2/status?limit=0", token: token, status: 400, invalid: true},
		{method: "GET", target: "/v2/status", token: wrong, status: 401},
		{method: "HEAD", target: "/v2/status", token: wrong, status: 401},
		{method: "GET", target: "/v2/status/summary", token: token, status: 200},
		{method: "GET", target: "/v2/status/summary?top=0", token: token, status: 200},
		{method: "GET", target: "/v2/status/summary?detail=false", status: 200},
		{method: "HEAD", target: "/v2/status/summary", status: 200},
		{method: "GET", target: "/v2/status/summary?top=51", status: 400, invalid: true},
		{method: "HEAD", target: "/v2/status/summary?detail=2", status: 400, invalid: true},
		{method: "GET", target: "/v2/status/summary", token: wrong, status: 401},
		{method: "HEAD", target: "/v2/status/summary", token: wrong, status: 401},
		{method: "GET", target: "/v2/status/history", token: token, status: 200},
		{method: "GET", target: "/v2/status/history?since=3", token: token, status: 200},
		{method: "GET", target: "/v2/status/history", status: 200},
		{method: "HEAD", target: "/v2/status/history", token: token, status: 200},
		{method: "GET", target: "/v2/status/history?since=-1", token: token, status: 400, invalid: true},
		{method: "HEAD", target: "/v2/status/history?since=x", status: 400, invalid: true},
		{method: "GET", target: "/v2/status/history", token: wrong, status: 401},
		{method: "HEAD", target: "/v2/status/history", token: wrong, status: 401},

		// Tag administration. oa.made is created here, oa.gone created,
		// used and deleted: its tombstone refuses a start below its IDs.
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.made","step":10,"description":"made by the OpenAPI test"}`, status: 201},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.made"}`, status: 409},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.gone","start":100}`, status: 201},
		{method: "GET", target: "/api/segment/get/oa.gone", status: 200},
		{method: "DELETE", target: "/v2/tags/oa.gone", token: token, status: 204},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.gone","start":1}`, status: 409},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","stpe":10}`, status: 400, invalid: true},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","start":0}`, status: 400, invalid: true},
		{method: "POST", target: "/v2/tags", token: token, body: bigBody, status: 413, invalid: true},
		{method: "POST", target: "/v2/tags", token: token, bodyLength: 2 << 20, status: 413, invalid: true},
		{method: "GET", target: "/v2/tags", token: token, status: 200},
		{method: "GET", target: "/v2/tags?limit=1&prefix=oa.", token: token, status: 200},
		{method: "HEAD", target: "/v2/tags", token: token, status: 200},
		{method: "GET", target: "/v2/tags?after=a%20b", token: token, status: 400, invalid: true},
		{method: "HEAD", target: "/v2/tags?limit=x", token: token, status: 400, invalid: true},
		{method: "GET", target: "/v2/tags", token: wrong, status: 401},
		{method: "GET", target: "/v2/tags/oa.made", token: token, status: 200},
		{method: "HEAD", target: "/v2/tags/oa.made", token: token, status: 200},
		{method: "GET", target: "/v2/tags/no.such.tag", token: token, status: 404},
		{method: "HEAD", target: "/v2/tags/no.such.tag", token: token, status: 404},
		{method: "GET", target: "/v2/tags/bad%20tag", token: token, status: 400, invalid: true},
		{method: "HEAD", target: "/v2/tags/bad%20tag", token: token, status: 400, invalid: true},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{"step":20}`, status: 200},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{"ordered":true}`, status: 200},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{"ordered":false,"step":10}`, status: 200},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{"ordered":"yes"}`, status: 400, invalid: true},
		// A forwarded range (ordered tags) needs the token.
		{method: "GET", target: "/v2/segment/" + seed + "/range?count=2", header: forwarded, status: 401},
		{method: "POST", target: "/v2/segment/" + seed + "/range?count=2", header: forwarded, token: wrong, status: 401},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{}`, status: 400, invalid: true},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{"step":0}`, status: 400, invalid: true},
		{method: "PATCH", target: "/v2/tags/no.such.tag", token: token, body: `{"step":20}`, status: 404},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, body: `{"step":` + strings.Repeat(" ", big) + `1}`, status: 413},
		{method: "PATCH", target: "/v2/tags/oa.made", token: token, bodyLength: 2 << 20, status: 413, invalid: true},
		{method: "DELETE", target: "/v2/tags/bad%20tag", token: token, status: 400, invalid: true},
		{method: "DELETE", target: "/v2/tags/no.such.tag", token: token, status: 404},

		// A periodic tag: its shape on creation and reads, the period in
		// its answers, its periods listed and pruned.
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.daily","step":10,"period":"day","time_zone":"Asia/Shanghai","format":"D-{period}-{seq:4}"}`, status: 201},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","period":"week"}`, status: 400, invalid: true},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","period":"day","time_zone":"Mars/Olympus"}`, status: 400},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","format":"{period}-{seq}"}`, status: 400},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","opaque_bits":64}`, status: 400, invalid: true},
		// An opaque tag: its IDs one by one, never as a range; decoded back.
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.secret","step":10,"opaque_bits":32}`, status: 201},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.x","opaque_bits":32,"format":"{seq:4}"}`, status: 400},
		{method: "GET", target: "/v2/segment/oa.secret", status: 200},
		{method: "GET", target: "/v2/segment/oa.secret/range?count=3", status: 409},
		{method: "POST", target: "/v2/segment/oa.secret/range?count=3", status: 409},
		{method: "GET", target: "/v2/tags/" + seed + "/decode?id=1", token: token, status: 200},
		{method: "HEAD", target: "/v2/tags/" + seed + "/decode?id=1", token: token, status: 200},
		{method: "GET", target: "/v2/tags/oa.secret/decode?id=x", token: token, status: 400},
		{method: "HEAD", target: "/v2/tags/oa.secret/decode", token: token, status: 400, invalid: true},
		{method: "GET", target: "/v2/tags/oa.secret/decode?id=1", token: wrong, status: 401},
		{method: "HEAD", target: "/v2/tags/oa.secret/decode?id=1", token: wrong, status: 401},
		{method: "GET", target: "/v2/tags/no.such.tag/decode?id=1", token: token, status: 404},
		{method: "HEAD", target: "/v2/tags/no.such.tag/decode?id=1", token: token, status: 404},
		{method: "GET", target: "/v2/segment/oa.daily", status: 200},
		{method: "GET", target: "/v2/segment/oa.daily/batch?count=3", status: 200},
		// A formatted tag has no ranges; a periodic one without a format
		// has; a sequence past the width is refused.
		{method: "POST", target: "/v2/segment/oa.daily/range?count=3", status: 400},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.monthly","step":10,"period":"month"}`, status: 201},
		{method: "POST", target: "/v2/segment/oa.monthly/range?count=3", status: 200},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.tiny","start":10,"step":10,"format":"T{seq:1}"}`, status: 201},
		{method: "GET", target: "/v2/segment/oa.tiny", status: 503},
		{method: "POST", target: "/v2/segment/oa.tiny/batch?count=2", status: 503},
		// Gone, so that /readyz no longer warns of its format.
		{method: "DELETE", target: "/v2/tags/oa.tiny", token: token, status: 204},
		{method: "GET", target: "/v2/tags/oa.daily", token: token, status: 200},
		{method: "GET", target: "/v2/tags?prefix=oa.d", token: token, status: 200},
		{method: "GET", target: "/v2/status?prefix=oa.d", token: token, status: 200},
		{method: "PATCH", target: "/v2/tags/oa.daily", token: token, body: `{"step":20,"period":"month"}`, status: 400, invalid: true},
		{method: "GET", target: "/v2/tags/oa.daily/periods", token: token, status: 200},
		{method: "GET", target: "/v2/tags/oa.daily/periods?limit=1&before=20991231", token: token, status: 200},
		{method: "HEAD", target: "/v2/tags/oa.daily/periods", token: token, status: 200},
		{method: "GET", target: "/v2/tags/oa.daily/periods?limit=0", token: token, status: 400, invalid: true},
		{method: "HEAD", target: "/v2/tags/oa.daily/periods?before=x", token: token, status: 400, invalid: true},
		{method: "GET", target: "/v2/tags/no.such.tag/periods", token: token, status: 404},
		{method: "HEAD", target: "/v2/tags/no.such.tag/periods", token: token, status: 404},
		{method: "DELETE", target: "/v2/tags/oa.daily/periods?keep=2", token: token, status: 200},
		{method: "DELETE", target: "/v2/tags/oa.daily/periods?before=20200101", token: token, status: 200},
		{method: "DELETE", target: "/v2/tags/oa.daily/periods?keep=1", token: token, status: 400, invalid: true},
		{method: "DELETE", target: "/v2/tags/oa.daily/periods", token: token, status: 400},
		{method: "DELETE", target: "/v2/tags/oa.made/periods?keep=2", token: token, status: 400},
		{method: "DELETE", target: "/v2/tags/no.such.tag/periods?keep=2", token: token, status: 404},

		// Operations.
		{method: "GET", target: "/healthz", status: 200},
		{method: "HEAD", target: "/healthz", status: 200},
		{method: "GET", target: "/readyz", status: 200},
		{method: "GET", target: "/readyz?strict=1", status: 200},
		{method: "HEAD", target: "/readyz", status: 200},
		{method: "GET", target: "/metrics", status: 200},
		{method: "HEAD", target: "/metrics", status: 200},
		{method: "GET", target: "/monitor/", status: 200},
		{method: "HEAD", target: "/monitor/", status: 200},
		{method: "GET", target: "/", status: 302},
		{method: "HEAD", target: "/", status: 302},
		{method: "GET", target: "/openapi.json", status: 200},
		{method: "HEAD", target: "/openapi.json", status: 200},
	} {
		k.check(a.URL(""), tt)
	}
	// The admin routes without the token.
	for _, tt := range k.examples(func(op *openapi3.Operation) bool { return requiresToken(op) }) {
		tt.status, tt.invalid = http.StatusUnauthorized, true
		k.check(a.URL(""), tt)
	}

	// D: segment mode off. B and D have no admin token: they ignore the
	// one sent to satisfy the document.
	for _, tt := range []apiCall{
		{method: "GET", target: "/cache", token: token, status: 404},
		{method: "POST", target: "/cache", token: token, status: 404},
		{method: "HEAD", target: "/cache", token: token, status: 404},
		{method: "GET", target: "/db", token: token, status: 404},
		{method: "POST", target: "/db", token: token, status: 404},
		{method: "HEAD", target: "/db", token: token, status: 404},
		{method: "GET", target: "/v2/tags", token: token, status: 404},
		{method: "HEAD", target: "/v2/tags", token: token, status: 404},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.made"}`, status: 404},
	} {
		k.check(d.URL(""), tt)
	}

	// C: over the rate limit (1/s, a burst of 1), every ID route answers
	// 429. A token refilled between two requests is served instead, so
	// each is asked until it answers 429.
	for _, tt := range k.examples(func(op *openapi3.Operation) bool { return op.Responses.Status(429) != nil }) {
		for attempt := 1; ; attempt++ {
			if status := k.check(c.URL(""), tt); status == http.StatusTooManyRequests {
				break
			} else if status != http.StatusOK || attempt == 10 {
				t.Errorf("%s %s: %d, want 429 over the rate limit", tt.method, tt.target, status)
				break
			}
		}
	}

	// B: snowflake mode off, then the store cut off. oa.cold exists but
	// was never asked for an ID: with the store gone no range can load.
	for _, tt := range []apiCall{
		{method: "GET", target: "/api/snowflake/get/any", status: 404},
		{method: "POST", target: "/api/snowflake/get/any", status: 404},
		{method: "HEAD", target: "/api/snowflake/get/any", status: 404},
		{method: "GET", target: "/v2/snowflake", status: 404},
		{method: "POST", target: "/v2/snowflake", status: 404},
		{method: "HEAD", target: "/v2/snowflake", status: 404},
		{method: "GET", target: "/v2/snowflake/batch?count=2", status: 404},
		{method: "POST", target: "/v2/snowflake/batch?count=2", status: 404},
		{method: "HEAD", target: "/v2/snowflake/batch?count=2", status: 404},
		{method: "GET", target: "/v2/snowflake/decode/1", status: 404},
		{method: "HEAD", target: "/v2/snowflake/decode/1", status: 404},
		{method: "GET", target: "/decodeSnowflakeId?snowflakeId=1", status: 404},
		{method: "POST", target: "/decodeSnowflakeId?snowflakeId=1", status: 404},
		{method: "HEAD", target: "/decodeSnowflakeId?snowflakeId=1", status: 404},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.cold"}`, status: 201},
		{method: "GET", target: "/api/segment/get/" + seed, status: 200},
		// An ordered tag, which B owns once it served it.
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.ordered","step":10,"ordered":true}`, status: 201},
		{method: "GET", target: "/api/segment/get/oa.ordered", status: 200},
		{method: "GET", target: "/v2/tags/oa.ordered", token: token, status: 200},
		{method: "GET", target: "/v2/segment/oa.ordered/range?count=5", header: forwarded, status: 200},
		{method: "POST", target: "/v2/segment/oa.ordered/range?count=5", status: 409},
	} {
		k.check(b.URL(""), tt)
	}
	// E: on B's database, in redirect mode: its clients go to B, the
	// owner; a forwarded request is refused, not sent on.
	dirE := t.TempDir()
	e := testutil.StartLeaf(t, bin, dirE, append(testutil.CleanEnv(), "LEAF_DATA_DIR="+filepath.Join(dirE, "data"),
		"LEAF_SNOWFLAKE_ENABLED=false", "LEAF_SEGMENT_ORDERED=redirect"),
		"--listen", "127.0.0.1:0", "--segment-store", "mysql", "--segment-dsn", mysqlDSN)
	for _, tt := range []apiCall{
		{method: "GET", target: "/api/segment/get/oa.ordered", status: 307},
		{method: "POST", target: "/api/segment/get/oa.ordered?count=2", status: 307},
		{method: "GET", target: "/v2/segment/oa.ordered", status: 307},
		{method: "POST", target: "/v2/segment/oa.ordered", status: 307},
		{method: "GET", target: "/v2/segment/oa.ordered/batch?count=2", status: 307},
		{method: "POST", target: "/v2/segment/oa.ordered/batch?count=2", status: 307},
		{method: "GET", target: "/v2/segment/oa.ordered/range?count=2", status: 409},
		{method: "GET", target: "/v2/segment/oa.ordered/range?count=2", header: forwarded, status: 409},
	} {
		if status := k.check(e.URL(""), tt); status == http.StatusTemporaryRedirect {
			if loc := k.lastLocation; !strings.HasPrefix(loc, b.URL("/")) {
				t.Errorf("%s %s: redirected to %q, want B, the owner (%s)", tt.method, tt.target, loc, b.URL(""))
			}
		}
	}
	proxy.Down()
	for _, tt := range []apiCall{
		{method: "GET", target: "/api/segment/get/oa.cold", status: 503},
		{method: "POST", target: "/api/segment/get/oa.cold?count=2", status: 503},
		{method: "HEAD", target: "/api/segment/get/oa.unknown1", status: 503},
		{method: "GET", target: "/v2/segment/oa.cold", status: 503},
		{method: "POST", target: "/v2/segment/oa.cold", status: 503},
		{method: "HEAD", target: "/v2/segment/oa.unknown2", status: 503},
		{method: "GET", target: "/v2/segment/oa.cold/batch?count=2", status: 503},
		{method: "POST", target: "/v2/segment/oa.cold/batch?count=2", status: 503},
		{method: "HEAD", target: "/v2/segment/oa.unknown3/batch?count=2", status: 503},
		{method: "GET", target: "/v2/segment/oa.cold/range?count=2", status: 503},
		{method: "POST", target: "/v2/segment/oa.cold/range?count=2", status: 503},
		{method: "HEAD", target: "/v2/segment/oa.unknown4/range?count=2", status: 503},
		{method: "GET", target: "/db", token: token, status: 500},
		{method: "POST", target: "/db", token: token, status: 500},
		{method: "HEAD", target: "/db", token: token, status: 500},
		{method: "GET", target: "/v2/tags", token: token, status: 500},
		{method: "HEAD", target: "/v2/tags", token: token, status: 500},
		{method: "POST", target: "/v2/tags", token: token, body: `{"tag":"oa.new"}`, status: 500},
		{method: "GET", target: "/v2/tags/oa.cold", token: token, status: 500},
		{method: "HEAD", target: "/v2/tags/oa.cold", token: token, status: 500},
		{method: "PATCH", target: "/v2/tags/oa.cold", token: token, body: `{"step":20}`, status: 500},
		{method: "DELETE", target: "/v2/tags/oa.cold", token: token, status: 500},
		{method: "GET", target: "/v2/tags/oa.cold/periods", token: token, status: 500},
		{method: "HEAD", target: "/v2/tags/oa.cold/periods", token: token, status: 500},
		{method: "DELETE", target: "/v2/tags/oa.cold/periods?keep=2", token: token, status: 500},
		{method: "GET", target: "/v2/tags/oa.cold/decode?id=1", token: token, status: 500},
		{method: "HEAD", target: "/v2/tags/oa.cold/decode?id=1", token: token, status: 500},
	} {
		k.check(b.URL(""), tt)
	}
	testutil.WaitFor(t, "B's /readyz to report the store", func() bool {
		code, _ := testutil.Get(t, b.URL("/readyz?strict=1"))
		return code == http.StatusServiceUnavailable
	})
	k.check(b.URL(""), apiCall{method: "GET", target: "/readyz?strict=1", status: 503})
	k.check(b.URL(""), apiCall{method: "HEAD", target: "/readyz?strict=1", status: 503})

	// A, last: its clock an hour behind the last snowflake ID.
	testutil.FetchID(t, a.URL("/api/snowflake/get/x"))
	if err := os.WriteFile(clockFile, []byte("-1h"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "A's clock to step back", func() bool {
		code, _ := testutil.Get(t, a.URL("/v2/snowflake"))
		return code == http.StatusServiceUnavailable
	})
	for _, tt := range []apiCall{
		{method: "GET", target: "/api/snowflake/get/any", status: 503},
		{method: "POST", target: "/api/snowflake/get/any?count=3", status: 503},
		{method: "GET", target: "/v2/snowflake", status: 503},
		{method: "POST", target: "/v2/snowflake", status: 503},
		{method: "GET", target: "/v2/snowflake/batch?count=3", status: 503},
		{method: "POST", target: "/v2/snowflake/batch?count=3", status: 503},
		{method: "GET", target: "/readyz", status: 200},
		{method: "GET", target: "/readyz?strict=true", status: 503},
		{method: "GET", target: "/v2/status", token: token, status: 200},
		{method: "GET", target: "/v2/status/summary", token: token, status: 200},
		{method: "GET", target: "/v2/status/summary", status: 200},
	} {
		k.check(a.URL(""), tt)
	}

	k.checkCoverage()
}

// envChaosClock is the chaos build's clock file variable (cmd/leaf's chaos.go, built
// only with -tags chaos).
const envChaosClock = "LEAF_CHAOS_CLOCK_FILE"

// apiCall is one request and the status it must get.
type apiCall struct {
	method, target string // target: the path and query
	token          string // sent as Authorization: Bearer TOKEN
	header         map[string]string
	body           string // JSON
	// bodyLength, when set, is a Content-Length sent with no body: a
	// server that refuses the length answers before reading any.
	bodyLength int
	status     int
	// invalid says the document refuses the request too (a parameter or
	// body off its schema, no token where one is required).
	invalid bool
}

// conformance checks answers against the document and records which of
// its answers were seen.
type conformance struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	client *http.Client
	seen   map[apiAnswer]bool
	// lastLocation is the Location header of the last answer checked.
	lastLocation string
}

// apiAnswer is one answer the document describes: an operation, a status and
// a media type ("" for an answer without a body).
type apiAnswer struct {
	method, path string
	status       int
	media        string
}

// newConformance loads the document the server at base serves, which must
// be httpapi's openapi.json, and validates it.
func newConformance(t *testing.T, base string) *conformance {
	t.Helper()
	code, served := testutil.Get(t, base+"/openapi.json")
	file := httpapi.OpenAPIDocument()
	if code != http.StatusOK || served != string(file) {
		t.Fatalf("/openapi.json: %d and %d bytes, want 200 and httpapi/openapi.json (%d bytes)", code, len(served), len(file))
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(file)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	// legacy.NewRouter validates the document first.
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// The HTML pages are text to the validator, as text/plain is.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	return &conformance{
		t:      t,
		doc:    doc,
		router: router,
		// Redirects are answers to check, not to follow.
		client: &http.Client{
			Timeout:       time.Minute,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		seen: map[apiAnswer]bool{},
	}
}

// check sends c to the server at base, checks the status (when c names
// one), the request and the answer against the document, and returns the
// status.
func (k *conformance) check(base string, c apiCall) int {
	t := k.t
	t.Helper()
	name := c.method + " " + c.target
	req, err := http.NewRequest(c.method, base+c.target, strings.NewReader(c.body))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	if c.body != "" || c.bodyLength > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	var resp *http.Response
	if c.bodyLength > 0 {
		resp = sendLength(t, req, c.bodyLength)
	} else if resp, err = k.client.Do(req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	k.lastLocation = resp.Header.Get("Location")
	if c.status != 0 && resp.StatusCode != c.status {
		t.Errorf("%s: %s %q, want %d", name, resp.Status, truncateBody(body), c.status)
		return resp.StatusCode
	}

	route, params, err := k.router.FindRoute(req)
	if err != nil {
		t.Errorf("%s: %v: the document has no such operation", name, err)
		return resp.StatusCode
	}
	req.Body = io.NopCloser(strings.NewReader(c.body))
	err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerAuth, MultiError: true},
	})
	switch {
	case c.invalid && err == nil:
		t.Errorf("%s: the document accepts a request the server refuses (%d)", name, resp.StatusCode)
	case !c.invalid && err != nil:
		t.Errorf("%s: the document refuses the request:\n%v", name, err)
	}

	// ValidateResponse passes any answer to HEAD unchecked: the HEAD
	// operation's answer is checked as if to GET (its answers describe
	// no body), and the body must be empty.
	vreq := req
	if req.Method == http.MethodHead {
		vreq = req.Clone(context.Background())
		vreq.Method = http.MethodGet
		if len(body) != 0 {
			t.Errorf("%s: a body of %d bytes", name, len(body))
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s: the answer (%d %q) does not match the document:\n%v", name, resp.StatusCode, truncateBody(body), err)
		return resp.StatusCode
	}
	// ValidateResponse has refused a status the operation does not list.
	r := route.Operation.Responses.Status(resp.StatusCode)
	if r.Ref == "#/components/responses/HeadID" && resp.Header.Get("Content-Length") != "" {
		// HEAD takes no ID, so the length of the ID GET would issue is
		// unknown: the document promises none rather than a wrong one.
		t.Errorf("%s: Content-Length %s on a HEAD that takes no ID", name, resp.Header.Get("Content-Length"))
	}
	k.seen[apiAnswer{req.Method, route.Path, resp.StatusCode, mediaOf(r.Value.Content, resp.Header.Get("Content-Type"))}] = true
	return resp.StatusCode
}

// mediaOf is the key of content that the media type ct matches, "" for
// none.
func mediaOf(content openapi3.Content, ct string) string {
	if len(content) == 0 {
		return ""
	}
	mt := content.Get(ct)
	for key, v := range content {
		if v == mt {
			return key
		}
	}
	return ""
}

// bearerAuth is the document's security scheme as the validator checks a
// request: a bearer token is present (whether it is right is the server's
// to say).
func bearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if in.SecurityScheme.Type != "http" || !strings.EqualFold(scheme, in.SecurityScheme.Scheme) || token == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// sendLength sends req's method, target and headers with a Content-Length
// of n and no body, and reads the answer.
func sendLength(t *testing.T, req *http.Request, n int) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.Method, req.URL.RequestURI(), req.URL.Host, n)
	if err := req.Header.Write(&head); err != nil {
		t.Fatal(err)
	}
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("%s %s with Content-Length %d: %v", req.Method, req.URL, n, err)
	}
	return resp
}

func truncateBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// requiresToken says an operation answers only with the admin token.
func requiresToken(op *openapi3.Operation) bool {
	if op.Security == nil || len(*op.Security) == 0 {
		return false
	}
	for _, req := range *op.Security {
		if len(req) == 0 { // {}: anonymous requests are allowed
			return false
		}
	}
	return true
}

// examples builds, for every operation that want selects, a request from
// the document's examples: the path's parameters and the required query
// parameters. An operation that takes a body gets an empty one.
func (k *conformance) examples(want func(*openapi3.Operation) bool) []apiCall {
	var calls []apiCall
	for path, item := range k.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if want(op) {
				c := apiCall{method: method, target: k.exampleTarget(path, item, op, true)}
				if op.RequestBody != nil {
					c.body = "{}"
				}
				calls = append(calls, c)
			}
		}
	}
	slices.SortFunc(calls, func(a, b apiCall) int { return strings.Compare(a.target+" "+a.method, b.target+" "+b.method) })
	return calls
}

// exampleTarget fills the path's parameters with their examples and, with
// query, adds the operation's required query parameters.
func (k *conformance) exampleTarget(path string, item *openapi3.PathItem, op *openapi3.Operation, query bool) string {
	target, q := path, url.Values{}
	for _, p := range slices.Concat(item.Parameters, op.Parameters) {
		v := p.Value
		switch {
		case v.In == openapi3.ParameterInPath:
			target = strings.ReplaceAll(target, "{"+v.Name+"}", fmt.Sprint(v.Example))
		case v.In == openapi3.ParameterInQuery && v.Required && query:
			q.Set(v.Name, fmt.Sprint(v.Example))
		}
		if (v.In == openapi3.ParameterInPath || v.Required) && v.Example == nil {
			k.t.Fatalf("%s: the parameter %s has no example", path, v.Name)
		}
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return target
}

// probeMethods sends every documented path a method none of them has: the
// answer is 405 with the path's documented methods in Allow, and a body in
// the style of the path's documented errors.
func (k *conformance) probeMethods(base string) {
	t := k.t
	t.Helper()
	for path, item := range k.doc.Paths.Map() {
		var methods []string
		var some *openapi3.Operation
		for m, op := range item.Operations() {
			methods, some = append(methods, m), op
		}
		slices.Sort(methods)
		if slices.Contains(methods, http.MethodPut) {
			t.Fatalf("%s has PUT, the method probed for 405", path)
		}
		target := k.exampleTarget(path, item, some, false)
		name := "PUT " + target
		req, err := http.NewRequest(http.MethodPut, base+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := k.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %s %q, want 405", name, resp.Status, truncateBody(body))
			continue
		}
		if got, want := resp.Header.Get("Allow"), strings.Join(methods, ", "); got != want {
			t.Errorf("%s: Allow %q; the document has %q", name, got, want)
		}
		if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: headers %v, want Cache-Control: no-store and an X-Request-Id", name, resp.Header)
		}
		ct := resp.Header.Get("Content-Type")
		schema := k.errorSchema(item, ct)
		if schema == nil {
			t.Errorf("%s: a %q body; the path documents no error of that type", name, ct)
			continue
		}
		var v any = string(body)
		if strings.HasPrefix(ct, "application/json") {
			if err := json.Unmarshal(body, &v); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
		}
		if err := k.doc.ValidateSchemaJSON(schema, v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: the body %q is not in the path's error style:\n%v", name, body, err)
		}
	}
}

// errorSchema is the schema of the path's documented error bodies of media
// type ct, without a status's narrowing of its code (allOf: [base, ...]).
// Text errors are the document's TextError on every route, those that
// document none included.
func (k *conformance) errorSchema(item *openapi3.PathItem, ct string) *openapi3.Schema {
	if strings.HasPrefix(ct, "text/plain") {
		return k.doc.Components.Schemas["TextError"].Value
	}
	for _, op := range item.Operations() {
		for code, r := range op.Responses.Map() {
			if n, _ := strconv.Atoi(code); n < 400 || r.Value == nil {
				continue
			}
			if mt := r.Value.Content.Get(ct); mt != nil && mt.Schema != nil {
				s := mt.Schema.Value
				if len(s.AllOf) > 0 {
					s = s.AllOf[0].Value
				}
				return s
			}
		}
	}
	return nil
}

// checkCoverage fails for every answer the document describes that no
// request provoked.
func (k *conformance) checkCoverage() {
	k.t.Helper()
	for path, item := range k.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, r := range op.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil {
					k.t.Errorf("%s %s: response %q is not a status", method, path, code)
					continue
				}
				media := []string{""}
				if len(r.Value.Content) > 0 {
					media = slices.Collect(maps.Keys(r.Value.Content))
				}
				for _, m := range media {
					if !k.seen[apiAnswer{method, path, status, m}] {
						k.t.Errorf("openapi.json describes %s %s answering %d %s, which no request here provoked", method, path, status, m)
					}
				}
			}
		}
	}
}
