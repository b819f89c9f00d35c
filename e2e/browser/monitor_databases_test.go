package browser

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// TestMonitorDatabases: the monitor page shows the databases of a store
// spread over several in a table that follows their health, and no table
// for a store of one database.
func TestMonitorDatabases(t *testing.T) {
	browserPath := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)

	logger := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, logger
	seg, err := segment.New(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seg.Close(context.Background()) })

	// The second database goes down while the page watches.
	var down atomic.Bool
	databases := func() []httpapi.DatabaseStatus {
		dbs := []httpapi.DatabaseStatus{
			{Index: 0, Name: "root@tcp(db-a:3306)/leaf", Healthy: true, Verified: true, Reserves: 4, HighestID: 8000},
			{Index: 1, Name: "root@tcp(db-b:3306)/leaf", Healthy: true, Verified: true, Reserves: 3, HighestID: 6000},
		}
		if down.Load() {
			dbs[1].Healthy, dbs[1].Failures, dbs[1].LastError = false, 2, "reserve: i/o timeout"
			dbs[1].RetryAt = time.Now().Add(time.Second)
		}
		return dbs
	}
	multi := httptest.NewServer(httpapi.New(httpapi.Config{Segment: seg, Tags: st, Logger: logger, Databases: databases}))
	t.Cleanup(multi.Close)
	single := httptest.NewServer(httpapi.New(httpapi.Config{Segment: seg, Tags: st, Logger: logger}))
	t.Cleanup(single.Close)

	p := openTab(t, ctx, browserPath)
	defer p.checkConsole()

	p.do("open the page of a multi-database store",
		chromedp.Navigate(multi.URL+"/monitor/"),
		chromedp.WaitVisible(chromedp.ID("databases")),
	)
	if n := p.query("#databases-body", "children.length"); n != "2" {
		t.Fatalf("%s database rows, want 2", n)
	}
	row := func(i int) string { return p.text("#databases-body tr:nth-child(" + string(rune('1'+i)) + ")") }
	if got := row(1); !strings.HasPrefix(got, "1root@tcp(db-b:3306)/leafup30") {
		t.Errorf("second row %q", got)
	}
	down.Store(true)
	p.waitText("#databases-body tr:nth-child(2) td:nth-child(3)", func(s string) bool { return strings.HasPrefix(s, "down, retried ") })
	if got := row(1); !strings.Contains(got, "reserve: i/o timeout") {
		t.Errorf("second row once down: %q, want its last error", got)
	}

	p.do("open the page of a store of one database",
		chromedp.Navigate(single.URL+"/monitor/"),
		chromedp.WaitVisible(chromedp.ID("totals")),
	)
	if h := p.query("#databases-box", "hidden"); h != "true" {
		t.Errorf("the databases box of a store of one database: hidden=%q", h)
	}
}
