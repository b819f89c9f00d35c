// Package e2e holds tests that wire the real pieces together — a store on a
// real database, the segment generator and the HTTP API over loopback — the
// way cmd/leaf does, and break them from outside.
package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/snowflake"
)

var _ httpapi.SegmentGenerator = (*segment.Generator)(nil)
var _ httpapi.SnowflakeGenerator = (*snowflake.Generator)(nil)

// TestReadyzFollowsStoreOutage: a server on MariaDB reached through a TCP
// proxy keeps answering IDs from its buffers while the proxy is down,
// /readyz says degraded (200, or 503 with ?strict=1), and both recover when
// the database is reachable again.
func TestReadyzFollowsStoreOutage(t *testing.T) {
	cfg, err := gomysql.ParseDSN(testutil.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout = time.Second
	ctx := context.Background()
	st, err := mysql.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTag(ctx, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	set := segment.DefaultConfig()
	set.Store, set.Logger, set.MaxStep = st, logger, 1000
	set.HealthInterval, set.StoreTimeout = 20*time.Millisecond, time.Second
	set.RetryBackoff, set.MaxRetryBackoff = 10*time.Millisecond, 100*time.Millisecond
	gen, err := segment.New(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close(ctx) })
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Segment: gen, Tags: st, Logger: logger}))
	t.Cleanup(srv.Close)

	if code, body := testutil.Get(t, srv.URL+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz before the outage: %d %q", code, body)
	}
	last := int64(0)
	nextID := func() {
		t.Helper()
		code, body := testutil.Get(t, srv.URL+"/api/segment/get/orders")
		id, err := strconv.ParseInt(body, 10, 64)
		if code != 200 || err != nil || id <= last {
			t.Fatalf("ID after %d: %d %q", last, code, body)
		}
		last = id
	}
	for range 200 {
		nextID()
	}
	testutil.WaitFor(t, "the next range loaded", func() bool {
		st := gen.Status()
		return len(st) == 1 && st[0].NextReady
	})
	proxy.Down()
	testutil.WaitFor(t, "/readyz to say degraded, the store unreachable", func() bool {
		code, body := testutil.Get(t, srv.URL+"/readyz")
		return code == 200 && strings.HasPrefix(body, "degraded\n") && strings.Contains(body, "unreachable")
	})
	if code, _ := testutil.Get(t, srv.URL+"/readyz?strict=1"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz?strict=1 during the outage: %d, want 503", code)
	}
	for range 1000 { // still served from the buffers
		nextID()
	}
	proxy.Up()
	testutil.WaitFor(t, "/readyz ok after the outage", func() bool {
		code, body := testutil.Get(t, srv.URL+"/readyz")
		return code == 200 && body == "ok\n"
	})
	for range 2000 { // and beyond them: new ranges load again
		nextID()
	}
}
