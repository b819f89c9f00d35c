package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/snowflake"
)

// TestSnowflakeClockOverHTTP: a real snowflake generator behind the HTTP API,
// its clock stepped like NTP would: 3 ms back is waited out (200), 1 s back
// answers 503 with Retry-After and says why, and once the clock is back IDs
// continue above every ID issued before; /readyz reports the rollback.
func TestSnowflakeClockOverHTTP(t *testing.T) {
	var offset atomic.Int64
	reg, err := local.New(local.Config{WorkerID: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := leaftest.FastSnowflake(reg, leaftest.TestEndpoint(0))
	s.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := snowflake.New(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Snowflake: g, Logger: s.Logger}))
	t.Cleanup(srv.Close)

	var last int64
	next := func(phase string) {
		t.Helper()
		code, body := testutil.Get(t, srv.URL+"/api/snowflake/get/any")
		id, err := strconv.ParseInt(body, 10, 64)
		if code != http.StatusOK || err != nil || id <= last {
			t.Fatalf("%s: %d %q, want 200 and an ID above %d", phase, code, body, last)
		}
		last = id
	}
	for range 100 {
		next("steady clock")
	}
	offset.Store(int64(-3 * time.Millisecond))
	for range 100 {
		next("3ms back")
	}
	offset.Store(int64(-time.Second))
	resp, err := http.Get(srv.URL + "/api/snowflake/get/any")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("1s back: %s %q, Retry-After %q; want 503 with Retry-After", resp.Status, body, resp.Header.Get("Retry-After"))
	}
	t.Logf("1s back: %s %s", resp.Status, body)
	if code, body := testutil.Get(t, srv.URL+"/readyz"); code != http.StatusOK || len(body) < len("degraded") || body[:8] != "degraded" {
		t.Fatalf("/readyz while the clock is behind: %d %q, want 200 degraded", code, body)
	}
	offset.Store(0)
	for range 100 {
		next("clock back to normal")
	}
}
