package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestOperability runs serve on MariaDB as a user of its own, then locks that
// account and kills its connections, so that the store is really gone for
// the server (not just a port closed in between): /readyz reports degraded
// while IDs keep coming from the buffers, and ok once the account is
// unlocked. /metrics is scraped along the way and its values are checked
// against the traffic and /v2/status.
func TestOperability(t *testing.T) {
	t.Parallel()
	rootDSN := testutil.MySQL(t)
	cfg, err := gomysql.ParseDSN(rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	root, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	ctx := context.Background()
	user := "u" + strings.TrimPrefix(testutil.UniqueName(), "leaftest_")
	account := "'" + user + "'@'%'"
	for _, q := range []string{
		"CREATE USER " + account + " IDENTIFIED BY 'pw'",
		"GRANT ALL ON " + cfg.DBName + ".* TO " + account,
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = root.ExecContext(ctx, "DROP USER IF EXISTS "+account) })

	userCfg := cfg.Clone()
	userCfg.User, userCfg.Passwd = user, "pw"
	userCfg.Timeout = 2 * time.Second
	env := append(dataEnv(t), "LEAF_SNOWFLAKE_ENABLED=false", "LEAF_SEGMENT_SEED=true")
	s := serveInProcess(t, env, "--listen", "127.0.0.1:0", "--segment-store", "mysql", "--segment-dsn", userCfg.FormatDSN())
	tag := config.SeedTag

	var last int64
	issue := func(n int) {
		t.Helper()
		for range n {
			id := testutil.FetchID(t, s.URL("/api/segment/get/"+tag))
			if id <= last {
				t.Fatalf("ID %d after %d", id, last)
			}
			last = id
		}
	}
	issue(300)
	testutil.WaitFor(t, "the next range", func() bool { return segmentStatus(t, s, tag).NextReady })
	if code, body := testutil.Get(t, s.URL("/readyz")); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz before the outage: %d %q", code, body)
	}

	m := scrape(t, s)
	st := segmentStatus(t, s, tag)
	// The only tag is among the busiest (metrics.top_tags 20), so it has
	// per-tag series beside the totals over all tags.
	checkMetric(t, m, `leaf_ids_issued_total{mode="segment"}`, 300)
	checkMetric(t, m, `leaf_segment_ids_issued_total{tag="`+tag+`"}`, 300)
	checkMetric(t, m, `leaf_segment_step{tag="`+tag+`"}`, 2000)
	checkMetric(t, m, `leaf_segment_loads_total{tag="`+tag+`"}`, 2)
	checkMetric(t, m, `leaf_segment_remaining_ids{tag="`+tag+`"}`, float64(st.Remaining))
	if st.Remaining != 2*2000-300 {
		t.Errorf("remaining %d, want %d", st.Remaining, 2*2000-300)
	}
	checkMetric(t, m, `leaf_segment_all_loads_total`, 2)
	checkMetric(t, m, `leaf_segment_load_duration_seconds_count`, 2)
	checkMetric(t, m, `leaf_segment_tags{state="unloaded"}`, 0)
	checkMetric(t, m, `leaf_segment_tags{state="load_error"}`, 0)
	checkMetric(t, m, `leaf_degraded{mode="segment"}`, 0)
	// The 300 requests above were observed, each under its route's pattern.
	checkMetric(t, m, `leaf_http_request_duration_seconds_count{code="200",route="/api/segment/get/{key}"}`, 300)

	// The outage: the account is locked and its sessions killed.
	if _, err := root.ExecContext(ctx, "ALTER USER "+account+" ACCOUNT LOCK"); err != nil {
		t.Fatal(err)
	}
	killSessions(t, root, user)
	testutil.WaitFor(t, "/readyz to report the locked account", func() bool {
		code, body := testutil.Get(t, s.URL("/readyz"))
		return code == 200 && strings.HasPrefix(body, "degraded\n") && strings.Contains(body, "segment store unreachable")
	})
	if code, _ := testutil.Get(t, s.URL("/readyz?strict=1")); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz?strict=1 during the outage: %d, want 503", code)
	}
	checkMetric(t, scrape(t, s), `leaf_degraded{mode="segment"}`, 1)
	issue(1000) // from the buffers

	if _, err := root.ExecContext(ctx, "ALTER USER "+account+" ACCOUNT UNLOCK"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "/readyz to recover", func() bool {
		code, body := testutil.Get(t, s.URL("/readyz"))
		return code == 200 && body == "ok\n"
	})
	issue(3000) // past both buffers: new ranges load again
	m = scrape(t, s)
	checkMetric(t, m, `leaf_ids_issued_total{mode="segment"}`, 4300)
	checkMetric(t, m, `leaf_segment_ids_issued_total{tag="`+tag+`"}`, 4300)
	checkMetric(t, m, `leaf_degraded{mode="segment"}`, 0)
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
}

// killSessions ends every connection user has open.
func killSessions(t *testing.T, root *sql.DB, user string) {
	t.Helper()
	rows, err := root.Query("SELECT id FROM information_schema.processlist WHERE user = ?", user)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		// A session may end on its own meanwhile.
		_, _ = root.Exec("KILL " + strconv.FormatInt(id, 10))
	}
}

type tagStatus struct {
	NextReady bool  `json:"next_ready"`
	Remaining int64 `json:"remaining"`
}

func segmentStatus(t *testing.T, s *inProcessServer, tag string) tagStatus {
	t.Helper()
	_, body := testutil.Get(t, s.URL("/v2/status"))
	var st struct {
		Segment struct {
			Tags []struct {
				Tag string `json:"tag"`
				tagStatus
			} `json:"tags"`
		} `json:"segment"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/v2/status: %v: %s", err, body)
	}
	for _, ts := range st.Segment.Tags {
		if ts.Tag == tag {
			return ts.tagStatus
		}
	}
	return tagStatus{}
}

// scrape reads /metrics into a map from "name{labels}" (labels sorted, as
// the exposition writes them) to value.
func scrape(t *testing.T, s *inProcessServer) map[string]float64 {
	t.Helper()
	code, body := testutil.Get(t, s.URL("/metrics"))
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

func checkMetric(t *testing.T, m map[string]float64, series string, want float64) {
	t.Helper()
	got, ok := m[series]
	if !ok {
		t.Errorf("/metrics has no %s", series)
		return
	}
	if got != want {
		t.Errorf("%s = %v, want %v", series, got, want)
	}
}
