package httpapi

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// updateGolden rewrites the golden answers instead of comparing with them:
// go test ./httpapi -run TestGoldenAnswers -update.
var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from the current answers")

// The golden answers pin, byte for byte, every answer that presents the
// generators' and the store's values: the JSON of /v2/status, its summary,
// /v2/tags and the decode routes (member names and order, omitted members,
// number and time encodings, HTML escaping) and the HTML of /cache and /db.
// Clients and the monitor page read these; a refactoring must not move a
// byte of them.

// goldenZone is a zone with an offset, so that the answers show how a time
// with one is encoded (the stores return times in the database's zone).
var goldenZone = time.FixedZone("", 2*3600)

// goldenSeg is a segment generator whose status and reasons are fixed and
// exercise every member: present and absent errors and times, fractions,
// exponents and the extremes of the counters.
type goldenSeg struct{ *fakeGen }

func newGoldenSeg() goldenSeg {
	g := newFakeGen("a.first", "b.fail", "c.tiny", "t1", "t2", "t3")
	g.rows["a.first"].Description = `escape <me> & "quote" ` + "\u2028 tab\t ünï"
	g.rows["b.fail"].UpdateTime = time.Date(2024, 5, 1, 14, 0, 0, 123456789, goldenZone)
	g.rows["c.tiny"].UpdateTime = time.Time{}
	g.rows["c.tiny"].MaxID = 1<<63 - 1
	g.rows["c.tiny"].Step = leaf.MaxStep
	return goldenSeg{g}
}

func (goldenSeg) Status() []leaf.SegmentStatus {
	return []leaf.SegmentStatus{
		{
			Tag: "a.first", InitOK: true, NextReady: true, Pos: 1, Loading: true, Step: 2000, MinStep: 1000,
			LastLoad: time.Date(2024, 5, 1, 14, 0, 0, 123456789, goldenZone),
			Buffers: [2]leaf.RangeState{
				{Start: 1001, Value: 3001, Max: 3001, Step: 2000},
				{Start: 3001, Value: 3500, Max: 5001, Step: 2000},
			},
			Issued: 12345, Loads: 7, Waits: 2, LoadErrors: 1, LoadSeconds: 0.123456789, GivenBack: 5,
			Remaining: 1501, Rate: 1000.0 / 3, SecondsLeft: 4.503,
		},
		{
			Tag: "b.fail", Step: 1000, MinStep: 1000,
			LoadError:  `reserve: dial tcp 10.0.0.1:3306: connect: connection refused <&> "x"`,
			LoadErrors: 3, SecondsLeft: -1,
		},
		{
			Tag: "c.tiny", InitOK: true, Step: leaf.MaxStep, MinStep: leaf.MaxStep,
			LastLoad: time.Date(2023, 12, 31, 23, 59, 59, 0, time.UTC),
			Buffers: [2]leaf.RangeState{
				{Start: 1<<63 - 1 - leaf.MaxStep, Value: 1<<63 - 2, Max: 1<<63 - 1, Step: leaf.MaxStep},
			},
			Issued: 1<<64 - 1, Loads: 1<<63 + 5, LoadSeconds: 1e-9, Remaining: 1, Rate: 1e-7, SecondsLeft: 1e21,
		},
		{Tag: "t1", InitOK: true, Step: 1000, MinStep: 1000, LastLoad: fakeTime, Issued: 10, Loads: 1, Rate: 2, SecondsLeft: 495,
			Buffers: [2]leaf.RangeState{{Start: 1, Value: 11, Max: 1001, Step: 1000}}, Remaining: 990},
		{Tag: "t2", Step: 1000, MinStep: 1000, SecondsLeft: -1},
		{Tag: "t3", Step: 1000, MinStep: 1000, SecondsLeft: -1},
	}
}

func (goldenSeg) Degraded() []string {
	return []string{
		"segment store unreachable since 2024-05-01T12:00:00Z: dial tcp 10.0.0.1:3306: connect: connection refused",
		"tag b.fail: range load failing (3 times): reserve: dial tcp 10.0.0.1:3306: connect: connection refused",
		"tag gone.tag: buffered IDs last 0.5s at 10 IDs/s (5 left; the next range has not arrived)",
	}
}

// Totals are those of the statuses, of 42 names known, 4 in use: t2 and t3
// were never asked for.
func (g goldenSeg) Totals() leaf.SegmentTotals {
	t := totalsOf(g.Status(), 42)
	t.Active = 4
	return t
}

func (g goldenSeg) Busiest(n int, also ...string) []leaf.SegmentStatus {
	return busiestOf(g.Status(), n, also)
}

// goldenSnow is a snowflake generator with a fixed status.
type goldenSnow struct {
	*fakeSnowflake
	status leaf.WorkerStatus
}

// fullWorker sets every member of the worker's status.
var fullWorker = leaf.WorkerStatus{
	Registry: "zookeeper", Endpoint: "10.1.2.3:8080", Layout: "js-safe", WorkerID: 5, FromCache: true,
	HighWater: 1714564803000, LastIssued: 1714564800123,
	LeaseExpires:      time.Date(2024, 5, 1, 14, 0, 10, 500000000, goldenZone),
	LastHeartbeat:     time.Date(2024, 5, 1, 12, 0, 0, 1, time.UTC),
	HeartbeatError:    `heartbeat: zk: session expired <&> "x"`,
	HeartbeatFailures: 4, Rollbacks: 2, MaxRollbackMs: 3, RollbackMs: 5,
	Peers: 2, PeerSkewMs: -12, PeerCheck: time.Date(2024, 5, 1, 12, 0, 1, 0, time.UTC),
	Issued: 987654321, Rate: 12.5,
}

// bareWorker is a worker that lost its ID and never heard from a peer:
// the zero times and the empty error are left out.
var bareWorker = leaf.WorkerStatus{Registry: "local", Endpoint: ":8080", Layout: "leaf", WorkerID: -1}

func (s goldenSnow) Status() leaf.WorkerStatus { return s.status }

func (goldenSnow) Degraded() []string {
	return []string{"snowflake heartbeat failing: zk: session expired"}
}

// goldenRequest is one request of TestGoldenAnswers, against one of its
// servers, answered as the file testdata/golden/NAME holds.
type goldenRequest struct {
	name, server, method, target, body string
}

func TestGoldenAnswers(t *testing.T) {
	seg, segOnly := newGoldenSeg(), newGoldenSeg()
	servers := map[string]*Server{
		// Both modes.
		"both": New(Config{Segment: seg, Tags: seg, Snowflake: goldenSnow{newFakeSnowflake(), fullWorker},
			Version: "v1.2.3-golden", Logger: slog.New(slog.DiscardHandler)}),
		// Snowflake only: the segment member is there, empty.
		"snow": New(Config{Snowflake: goldenSnow{newFakeSnowflake(), bareWorker},
			Version: "v1.2.3-golden", Logger: slog.New(slog.DiscardHandler)}),
		// Segment only: no snowflake member.
		"seg": New(Config{Segment: segOnly, Tags: segOnly,
			Version: "v1.2.3-golden", Logger: slog.New(slog.DiscardHandler)}),
	}
	bases := map[string]string{}
	for name, s := range servers {
		bases[name] = serveNetHTTP(t, s)
	}
	// In order: the tag administration changes the "both" server's rows.
	requests := []goldenRequest{
		{"status.json", "both", "GET", "/v2/status", ""},
		{"status-page.json", "both", "GET", "/v2/status?prefix=t&limit=2", ""},
		{"status-last-page.json", "both", "GET", "/v2/status?prefix=t&after=t2", ""},
		{"status-nodetail.json", "both", "GET", "/v2/status?detail=0", ""},
		{"status-snowflake-only.json", "snow", "GET", "/v2/status", ""},
		{"status-segment-only.json", "seg", "GET", "/v2/status?limit=1", ""},
		{"summary.json", "both", "GET", "/v2/status/summary?top=2", ""},
		{"summary-default.json", "both", "GET", "/v2/status/summary", ""},
		{"summary-nodetail.json", "both", "GET", "/v2/status/summary?detail=0", ""},
		{"summary-snowflake-only.json", "snow", "GET", "/v2/status/summary", ""},
		{"summary-segment-only.json", "seg", "GET", "/v2/status/summary?top=0", ""},
		{"cache.html", "both", "GET", "/cache", ""},
		{"cache-page.html", "both", "GET", "/cache?prefix=t&limit=2", ""},
		{"db.html", "both", "GET", "/db", ""},
		{"db-page.html", "both", "GET", "/db?limit=2", ""},
		{"tags.json", "both", "GET", "/v2/tags", ""},
		{"tags-page.json", "both", "GET", "/v2/tags?prefix=t&limit=2", ""},
		{"tags-empty.json", "both", "GET", "/v2/tags?prefix=none", ""},
		{"tag.json", "both", "GET", "/v2/tags/a.first", ""},
		{"tag-zero-time.json", "both", "GET", "/v2/tags/c.tiny", ""},
		{"tag-create.json", "both", "POST", "/v2/tags", `{"tag":"new.tag","start":77,"step":7,"description":"made <here> & there"}`},
		{"tag-create-default.json", "both", "POST", "/v2/tags", `{"tag":"new.default"}`},
		{"tag-patch.json", "both", "PATCH", "/v2/tags/new.tag", `{"step":9}`},
		{"tags-after.json", "both", "GET", "/v2/tags?prefix=new", ""},
		{"decode-v2.json", "both", "GET", fmt.Sprintf("/v2/snowflake/decode/%d", int64(sampleID)), ""},
		{"decode-leaf.json", "both", "GET", fmt.Sprintf("/decodeSnowflakeId?snowflakeId=%d", int64(sampleID)), ""},
	}
	// Leaf's decode answer shows the time in the server's zone.
	local := time.UnixMilli(sampleMs).Local().Format("2006-01-02 15:04:05.000")
	for _, req := range requests {
		r := do(t, req.method, bases[req.server], req.target, req.body)
		got := fmt.Sprintf("%d %s\n%s", r.status, r.header.Get("Content-Type"), r.body)
		got = strings.ReplaceAll(got, local, "LOCAL-TIME")
		path := filepath.Join("testdata", "golden", req.name)
		if *updateGolden {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to write it)", req.name, err)
		}
		if got != string(want) {
			t.Errorf("%s %s: answer differs from %s\n got: %s\nwant: %s", req.method, req.target, path, got, want)
		}
	}
}
