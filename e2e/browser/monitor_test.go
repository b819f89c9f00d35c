package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/history"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
	"github.com/leafgo/leaf/tagshape"
)

// Environment variables read by the monitor test.
const (
	envChromium  = "LEAF_TEST_CHROMIUM"  // the browser to drive; default /usr/bin/chromium
	envArtifacts = "LEAF_TEST_ARTIFACTS" // where the screenshot goes; default $TMPDIR/leaf-test-artifacts
)

// chromium returns the browser to drive, or skips the test (fails it under
// LEAF_TEST_STRICT=1) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv(envChromium)
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err == nil {
		return path
	}
	msg := fmt.Sprintf("no browser at %s (set %s); install one with scripts/services.sh", path, envChromium)
	if os.Getenv(testutil.EnvStrict) == "1" {
		t.Fatal(msg + "\n(" + testutil.EnvStrict + "=1 turns a missing service into a failure)")
	}
	t.Skip(msg)
	return ""
}

// page drives one browser tab.
type page struct {
	t   *testing.T
	ctx context.Context // the tab's context, bounded by the test's deadline

	mu       sync.Mutex
	problems []string // the page's script errors so far
}

// openTab starts the browser at browserPath and opens a tab, within ctx.
// Cancelling the allocator kills the browser (and any child process left)
// and waits for that; cleanups run last-in first-out, so the tab closes
// first. Reading the console starts the browser on the tab's own context,
// so that the shorter contexts of each step do not end it.
func openTab(t *testing.T, ctx context.Context, browserPath string) *page {
	t.Helper()
	allocCtx, allocCancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath),
		chromedp.NoSandbox, // tests run as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.WindowSize(1440, 900),
	)...)
	t.Cleanup(allocCancel)
	tabCtx, tabCancel := chromedp.NewContext(allocCtx)
	t.Cleanup(tabCancel)
	p := &page{t: t, ctx: tabCtx}
	// Collect the page's script errors (uncaught exceptions, console.error,
	// CSP violations). Failed requests are logged by the browser too; those
	// the test provokes itself (the 400 of a bad ID) are not errors.
	console := chromedp.Console(tabCtx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// checkConsole fails the test for every script error the page logged.
func (p *page) checkConsole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.problems {
		p.t.Errorf("the page's console: %s", m)
	}
}

// do runs actions, failing the test on error.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// query returns member (a property or a method call) of the first element
// matching the CSS selector, as a string, or "" when there is no such
// element. It does not wait.
func (p *page) query(sel, member string) string {
	p.t.Helper()
	q, _ := json.Marshal(sel)
	expr := fmt.Sprintf(`String(document.querySelector(%s)?.%s ?? "")`, q, member)
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// text returns the textContent of the first element matching sel, or "".
func (p *page) text(sel string) string {
	p.t.Helper()
	return p.query(sel, "textContent")
}

// waitText waits until ok accepts the text of sel, and returns that text.
func (p *page) waitText(sel string, ok func(string) bool) string {
	p.t.Helper()
	var s string
	testutil.WaitForState(p.t, "the text of "+sel, func() (bool, string) {
		s = p.text(sel)
		return ok(s), fmt.Sprintf("%q", s)
	})
	return s
}

// clearInput empties the input with the given id. (chromedp.SetValue refuses
// the empty string, and chromedp.Clear resets the attribute, not what was
// typed.)
func clearInput(id string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(id)
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%s).value = ""`, q))
}

// press clicks the button with the given id as a user would (it must be
// visible), through the DOM rather than at its coordinates: the page
// re-renders its tables every second, and a row added above the button
// between chromedp measuring it and clicking moved it from under the mouse
// (a search never ran in a clean clone's CI).
func press(id string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(id)
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const e = document.getElementById(%s);
		if (!e || !e.checkVisibility()) throw new Error(%s + " is not visible");
		e.click();
	})()`, q, q))
}

// number parses a count as the page shows it ("1,500").
func number(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil {
		t.Fatalf("the page shows %q, want a number", s)
	}
	return n
}

// monitorTags is how many tags the monitor test's store holds beside
// orders and broken: enough that a page rendering every tag would show it.
const monitorTags = 10_000

// monitorOpaqueKey is the server's opaque key, for the opaque tag.
var monitorOpaqueKey = []byte("0123456789abcdef0123456789abcdef")

// bulkTag is the name of the i-th bulk tag; they sort after orders, so
// that orders is on the first page of rows.
func bulkTag(i int) string { return fmt.Sprintf("tenant-%05d", i) }

// failingStore fails every reserve of one tag, as a store would whose row
// for it is broken: the tag's loads fail, and the generator reports it
// degraded.
type failingStore struct {
	*sqlite.Store
	tag string
}

func (s failingStore) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	if tag == s.tag {
		return leaf.Reservation{}, fmt.Errorf("reserve %s: %w", tag, errBrokenRow)
	}
	return s.Store.Reserve(ctx, tag, step)
}

var errBrokenRow = errors.New("the test breaks this row")

// TestMonitorPage drives the monitor page in a headless Chromium against a
// real server (segment on SQLite with 10,000 tags, snowflake on a local
// worker ID): the page follows IDs issued through the API, shows the
// busiest tags in order and a degraded one, finds tags and the store's
// rows by name and pages through them, marks the tags' shapes (period,
// format, opaque), shows the worker, draws charts of the history that move
// under load, and decodes IDs, errors included.
func TestMonitorPage(t *testing.T) {
	browserPath := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)

	// The server, wired as cmd/leaf does, on a store filled in bulk before
	// it starts.
	logger := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTag(ctx, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 1000, Description: "monitor test"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTag(ctx, leaf.Alloc{Tag: "broken", MaxID: 1, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	bulkInsert(t, st, monitorTags)
	set := segment.DefaultConfig()
	set.Store, set.Logger = failingStore{st, "broken"}, logger
	set.OpaqueKey = monitorOpaqueKey
	seg, err := segment.New(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	t.Cleanup(func() { _ = seg.Close(context.Background()) })
	reg, err := local.New(local.Config{WorkerID: 7, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sfSettings := leaftest.FastSnowflake(reg, leaftest.TestEndpoint(0))
	sfSettings.Logger = logger
	snow := leaftest.StartSnowflake(t, nil, sfSettings)
	// The latency histogram and the history the charts draw, sampled once
	// a second until the test ends (before the generators close).
	m := metrics.New(metrics.Config{Segment: seg, Snowflake: snow})
	hist := history.New(history.Config{Segment: seg, Snowflake: snow,
		Latency:       func(dst []uint64) []uint64 { return m.RequestLatency(httpapi.IsIDRoute, dst) },
		LatencyBounds: metrics.RequestBuckets()})
	histCtx, stopHist := context.WithCancel(ctx)
	histDone := make(chan struct{})
	go func() {
		defer close(histDone)
		hist.Run(histCtx)
	}()
	t.Cleanup(func() {
		stopHist()
		<-histDone
	})
	srv := httptest.NewServer(httpapi.New(httpapi.Config{
		Segment: seg, Tags: st, Snowflake: snow, Logger: logger, Version: "v0.0.0-monitor-test",
		Observer: m, History: hist,
	}))
	t.Cleanup(srv.Close)

	p := openTab(t, ctx, browserPath)
	tabCtx := p.ctx

	shot := func(name string, of ...string) {
		capture := chromedp.FullScreenshot(100) // 100: PNG
		if len(of) > 0 {
			capture = chromedp.Screenshot(chromedp.CSS(of[0])) // one element
		}
		buf, err := chromedp.Run(tabCtx, capture)
		if err != nil {
			t.Errorf("screenshot: %v", err)
			return
		}
		dir := os.Getenv(envArtifacts)
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "leaf-test-artifacts")
		}
		path := filepath.Join(dir, name)
		err = os.MkdirAll(dir, 0o755)
		if err == nil {
			err = os.WriteFile(path, buf, 0o644)
		}
		if err != nil {
			t.Errorf("screenshot: %v", err)
			return
		}
		t.Logf("screenshot: %s", path)
	}
	defer func() {
		if t.Failed() {
			shot("monitor-failed.png")
		}
	}()

	// The page shows the version and the state, and no busy tag yet.
	p.do("open the monitor page",
		chromedp.Navigate(srv.URL+"/monitor/"),
		chromedp.WaitVisible(chromedp.ID("totals")),
	)
	if v := p.text("#version"); v != "v0.0.0-monitor-test" {
		t.Errorf("version: %q", v)
	}
	p.waitText("#state", func(s string) bool { return s == "ok" })
	p.waitText(`#totals [data-field="tags_known"]`, func(s string) bool { return s != "" && number(t, s) >= monitorTags+2 })
	if got := p.text(`#totals [data-field="tags_in_use"]`); got != "0" {
		t.Errorf("tags in use before any ID: %q", got)
	}
	p.do("no busy tag yet", chromedp.WaitVisible(chromedp.ID("tags-empty")))
	if n := p.query("#tags-body", "children.length"); n != "0" {
		t.Errorf("%s busy tags before any ID", n)
	}

	// Traffic through the API, all at once once the generator has sampled
	// its tags' counts: the rates then share one window, and the tags rank
	// as their counts do. orders issues exactly 500 IDs and shows among
	// the busiest, its buffers following. The generator samples on a
	// ticker of its own, once a second from its start, and shows no sign
	// of a sample that a test could wait for: the burst is timed halfway
	// between the first sample and the second.
	time.Sleep(time.Until(started.Add(1500 * time.Millisecond)))
	const row = `#tags-body tr[data-tag="orders"] `
	code, body := testutil.Get(t, srv.URL+"/api/segment/get/orders?count=500")
	if code != http.StatusOK || strings.Count(body, "\n") != 499 {
		t.Fatalf("500 IDs: %d %.100q", code, body)
	}
	for tag, n := range map[string]int{bulkTag(4242): 3000, bulkTag(7): 200, bulkTag(9999): 50} {
		for n > 0 {
			c := min(n, 1000)
			if code, body := testutil.Get(t, fmt.Sprintf("%s/api/segment/get/%s?count=%d", srv.URL, tag, c)); code != http.StatusOK {
				t.Fatalf("%d IDs of %s: %d %.100q", c, tag, code, body)
			}
			n -= c
		}
	}
	p.waitText(row+`[data-field="issued"]`, func(s string) bool {
		if s != "" && number(t, s) > 500 {
			t.Fatalf("issued %s, want 500", s)
		}
		return s == "500"
	})
	// The first range is [1, 1001), half of it left, the next ID 501.
	const cur = row + `.buf[data-current="true"] `
	if got := p.text(cur + `[data-field="range"]`); got != "[1, 1001)" {
		t.Errorf("current range: %q, want [1, 1001)", got)
	}
	if got := p.text(cur + `[data-field="value"]`); got != "501" {
		t.Errorf("current value: %q, want 501", got)
	}
	if got := p.query(cur+`.bar`, `getAttribute("aria-valuenow")`); got != "50" {
		t.Errorf("current buffer's bar: %q%% left, want 50", got)
	}

	// The store's row: once the next range is reserved, the page shows
	// max_id as the store has it.
	const dbRow = `#db-body tr[data-tag="orders"] `
	p.waitText(dbRow+`[data-field="max_id"]`, func(s string) bool {
		a, err := st.Alloc(ctx, "orders")
		return err == nil && a.MaxID > 1001 && s == strconv.FormatInt(a.MaxID, 10)
	})
	if got := p.text(dbRow + `[data-field="description"]`); got != "monitor test" {
		t.Errorf("description: %q", got)
	}

	// The busiest tags, by IDs/s.
	busiest := strings.Join([]string{bulkTag(4242), "orders", bulkTag(7), bulkTag(9999)}, " ")
	p.waitTags("#tags-body tr", func(s string) bool { return s == busiest })
	if got := p.text(`#totals [data-field="tags_in_use"]`); got != "4" {
		t.Errorf("tags in use: %q, want 4", got)
	}

	// A tag whose loads fail: the page shows it degraded, with its error,
	// and the state degraded.
	if code, body := testutil.Get(t, srv.URL+"/api/segment/get/broken"); code != http.StatusServiceUnavailable {
		t.Errorf("ID of the broken tag: %d %q, want 503", code, body)
	}
	const broken = `#degraded-body tr[data-tag="broken"] `
	p.do("show the degraded tag", chromedp.WaitVisible(chromedp.CSS(broken)))
	if got := p.text(broken + `[data-field="load_error"]`); !strings.Contains(got, errBrokenRow.Error()) {
		t.Errorf("the degraded tag's error: %q, want %q", got, errBrokenRow)
	}
	if got := p.text(broken + `[data-field="remaining"]`); got != "0" {
		t.Errorf("the degraded tag's remaining IDs: %q", got)
	}
	p.waitText("#state", func(s string) bool { return s == "degraded" })
	if got := p.text("#reasons"); !strings.Contains(got, "tag broken: no IDs buffered") {
		t.Errorf("reasons: %q, want the broken tag's", got)
	}

	// Search by name prefix: the tags held and the store's rows.
	p.do("search tenant-0424",
		chromedp.SendKeys(chromedp.ID("search-input"), "tenant-0424"),
		press("search-submit"),
		chromedp.WaitVisible(chromedp.CSS(`#search-body tr[data-tag="tenant-04242"]`)),
	)
	if got := p.text(`#search-body tr[data-tag="tenant-04242"] [data-field="issued"]`); got != "3,000" {
		t.Errorf("search result tenant-04242: issued %q, want 3,000", got)
	}
	var want []string
	for i := range 10 {
		want = append(want, bulkTag(4240+i))
	}
	p.waitTags("#db-body tr", func(s string) bool { return s == strings.Join(want, " ") })
	if !p.hidden("db-pager") {
		t.Errorf("a pager under 10 rows")
	}
	shot("monitor-search.png")

	// Page through the rows of a wider prefix: 50 a page, the next page
	// starts after the last.
	p.do("search tenant-0",
		clearInput("search-input"),
		chromedp.SendKeys(chromedp.ID("search-input"), "tenant-0"),
		press("search-submit"),
		chromedp.WaitVisible(chromedp.ID("db-next")),
	)
	p.waitText(`#db-body tr:first-child [data-field="tag"]`, func(s string) bool { return s == bulkTag(0) })
	if n := p.query("#db-body", "children.length"); n != "50" {
		t.Errorf("rows on a page: %s, want 50", n)
	}
	p.do("next page of rows", press("db-next"))
	p.waitText(`#db-body tr:first-child [data-field="tag"]`, func(s string) bool { return s == bulkTag(50) })
	if got := p.text(`#db-body tr:last-child [data-field="tag"]`); got != bulkTag(99) {
		t.Errorf("last row of page 2: %q, want %s", got, bulkTag(99))
	}
	p.do("first page of rows", press("db-first"))
	p.waitText(`#db-body tr:first-child [data-field="tag"]`, func(s string) bool { return s == bulkTag(0) })

	// The snowflake worker.
	worker := strconv.FormatInt(snow.Status().WorkerID, 10)
	p.waitText(`#snowflake-fields [data-field="worker_id"]`, func(s string) bool { return s == worker })
	if got, want := p.text(`#snowflake-fields [data-field="layout"]`), snow.Status().Layout; got != want {
		t.Errorf("layout shown: %q, want %q", got, want)
	}

	// The charts of the last 10 minutes, under load: every chart draws its
	// lines, and they move from one sample to the next.
	stopLoad := load(ctx, srv.URL, "/api/segment/get/orders?count=20", "/api/segment/get/"+bulkTag(4242)+"?count=50",
		"/v2/segment/"+bulkTag(7)+"/batch?count=10", "/api/snowflake/get/x?count=30")
	charts := map[string][]string{
		"ids":       {"segment", "snowflake"},
		"tag-ids":   {"orders", bulkTag(4242), bulkTag(7)},
		"latency":   {"p50", "p99"},
		"remaining": {"orders", bulkTag(4242), bulkTag(7)},
		"until-dry": {"orders", bulkTag(4242), bulkTag(7)},
		"lead":      {"lead"},
	}
	first := p.waitCharts(func(lines map[string]string) bool {
		for chart, series := range charts {
			for _, name := range series {
				// A line of at least three points: a sample's worth of
				// traffic, and not a dot.
				if strings.Count(lines[chart+" "+name], "L") < 2 {
					return false
				}
			}
		}
		return true
	})
	p.waitCharts(func(lines map[string]string) bool {
		for line, d := range first {
			if lines[line] == d {
				return false
			}
		}
		return true
	})
	for chart, series := range charts {
		legend := p.text(`[data-chart="` + chart + `"] .legend`)
		for _, name := range series {
			if !strings.Contains(legend, name) {
				t.Errorf("chart %s: the legend %q does not name %s", chart, legend, name)
			}
		}
	}
	shot("monitor-charts.png", "#charts")
	stopLoad()

	// Decode an ID: the page shows what /v2/snowflake/decode says.
	code, id := testutil.Get(t, srv.URL+"/api/snowflake/get/x")
	if code != http.StatusOK {
		t.Fatalf("snowflake ID: %d %q", code, id)
	}
	var decoded struct {
		IDStr       string `json:"id_str"`
		TimestampMs int64  `json:"timestamp_ms"`
		Time        string `json:"time"`
		WorkerID    int64  `json:"worker_id"`
		Sequence    int64  `json:"sequence"`
	}
	getJSON(t, srv.URL+"/v2/snowflake/decode/"+id, http.StatusOK, &decoded)
	p.do("decode "+id,
		clearInput("decode-input"),
		chromedp.SendKeys(chromedp.ID("decode-input"), id),
		press("decode-submit"),
		chromedp.WaitVisible(chromedp.CSS(`#decode[data-state="ok"] #decode-result`)),
	)
	for field, want := range map[string]string{
		"id":           decoded.IDStr,
		"worker_id":    strconv.FormatInt(decoded.WorkerID, 10),
		"sequence":     strconv.FormatInt(decoded.Sequence, 10),
		"timestamp_ms": strconv.FormatInt(decoded.TimestampMs, 10),
		"time":         decoded.Time,
	} {
		if got := p.text(`#decode-result [data-field="` + field + `"]`); got != want {
			t.Errorf("decoded %s: %q, want %q", field, got, want)
		}
	}
	if decoded.IDStr != id || strconv.FormatInt(decoded.WorkerID, 10) != worker {
		t.Errorf("/v2/snowflake/decode/%s: %+v, want the ID and worker %s", id, decoded, worker)
	}
	shot("monitor.png")

	// A bad ID: the page shows the server's error message.
	var apiErr struct {
		Error string `json:"error"`
	}
	getJSON(t, srv.URL+"/v2/snowflake/decode/abc", http.StatusBadRequest, &apiErr)
	p.do("decode abc",
		clearInput("decode-input"),
		chromedp.SendKeys(chromedp.ID("decode-input"), "abc"),
		press("decode-submit"),
		chromedp.WaitVisible(chromedp.CSS(`#decode[data-state="error"] #decode-error`)),
		chromedp.WaitNotVisible(chromedp.ID("decode-result")),
	)
	if got := p.text("#decode-error"); apiErr.Error == "" || !strings.Contains(got, apiErr.Error) {
		t.Errorf("decode abc: the page shows %q, want the server's %q", got, apiErr.Error)
	}

	// A periodic tag shows the period it issues in, a formatted one its
	// format; a plain tag neither.
	if err := st.CreateShapedTag(ctx, leaf.Alloc{Tag: "daily", MaxID: 1, Step: 10},
		leaf.TagShape{Period: leaf.PeriodDay, Format: leaf.IDFormat{Prefix: "D", Width: 4}}); err != nil {
		t.Fatal(err)
	}
	dayBefore := tagshape.PeriodKey(leaf.PeriodDay, time.Now().UTC())
	if code, body := testutil.Get(t, srv.URL+"/v2/segment/daily"); code != http.StatusOK || !strings.Contains(body, `"period"`) {
		t.Fatalf("ID of the periodic tag: %d %q", code, body)
	}
	dayAfter := tagshape.PeriodKey(leaf.PeriodDay, time.Now().UTC())
	const daily = `#search-body tr[data-tag="daily"] [data-field="period"]`
	p.do("search daily",
		clearInput("search-input"),
		chromedp.SendKeys(chromedp.ID("search-input"), "daily"),
		press("search-submit"),
		chromedp.WaitVisible(chromedp.CSS(daily)),
	)
	if got := p.text(daily); got != "period "+dayBefore && got != "period "+dayAfter {
		t.Errorf("the periodic tag's period: %q, want period %s", got, dayAfter)
	}
	if got := p.query(`#tags-body tr[data-tag="orders"] [data-field="period"]`, "hidden"); got != "true" {
		t.Errorf("a plain tag's period shown: hidden = %q", got)
	}
	if got := p.text(`#search-body tr[data-tag="daily"] [data-field="format"]`); got != "format D{period}-{seq:4}" {
		t.Errorf("the formatted tag's format: %q, want format D{period}-{seq:4}", got)
	}
	if got := p.query(`#tags-body tr[data-tag="orders"] [data-field="format"]`, "hidden"); got != "true" {
		t.Errorf("a plain tag's format shown: hidden = %q", got)
	}

	// An opaque tag is marked with its width; other tags are not.
	if err := st.CreateShapedTag(ctx, leaf.Alloc{Tag: "invoices", MaxID: 1, Step: 10},
		leaf.TagShape{OpaqueBits: 24, KeyCheck: tagshape.KeyCheck(monitorOpaqueKey)}); err != nil {
		t.Fatal(err)
	}
	if code, body := testutil.Get(t, srv.URL+"/v2/segment/invoices"); code != http.StatusOK {
		t.Fatalf("ID of the opaque tag: %d %q", code, body)
	}
	const invoices = `#search-body tr[data-tag="invoices"] [data-field="opaque"]`
	p.do("search invoices",
		clearInput("search-input"),
		chromedp.SendKeys(chromedp.ID("search-input"), "invoices"),
		press("search-submit"),
		chromedp.WaitVisible(chromedp.CSS(invoices)),
	)
	if got := p.text(invoices); got != "opaque 24 bits" {
		t.Errorf("the opaque tag's badge: %q, want opaque 24 bits", got)
	}
	for _, row := range []string{`#tags-body tr[data-tag="orders"]`, `#search-body tr[data-tag="invoices"]`} {
		for _, field := range []string{"period", "format"} {
			if got := p.query(row+` [data-field="`+field+`"]`, "hidden"); got != "true" {
				t.Errorf("%s: %s shown: hidden = %q", row, field, got)
			}
		}
	}
	if got := p.query(`#tags-body tr[data-tag="orders"] [data-field="opaque"]`, "hidden"); got != "true" {
		t.Errorf("a plain tag's opaque badge shown: hidden = %q", got)
	}

	// A server without segment mode, reached through the redirect of /: the
	// page says so, shows why the rows cannot be read, and still shows the
	// worker.
	snowOnly := httptest.NewServer(httpapi.New(httpapi.Config{Snowflake: snow, Logger: logger}))
	t.Cleanup(snowOnly.Close)
	p.do("open / on a snowflake-only server",
		chromedp.Navigate(snowOnly.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("segment-off")),
		chromedp.WaitVisible(chromedp.ID("db-error")),
	)
	if got := p.query("html", "ownerDocument.location.pathname"); got != "/monitor/" {
		t.Errorf("/ led to %q, want /monitor/", got)
	}
	if got := p.text("#db-error"); !strings.Contains(got, "segment mode is disabled") {
		t.Errorf("rows of a snowflake-only server: %q, want the 404's message", got)
	}
	p.waitText(`#snowflake-fields [data-field="worker_id"]`, func(s string) bool { return s == worker })
	if got, want := p.text(`#snowflake-fields [data-field="layout"]`), snow.Status().Layout; got != want {
		t.Errorf("layout shown: %q, want %q", got, want)
	}

	// A server with an admin token: the page shows the summary and asks for
	// the token, refuses a wrong one, and shows everything with the right one.
	const token = "monitor-admin-token-0123"
	guarded := httptest.NewServer(httpapi.New(httpapi.Config{
		Segment: seg, Tags: st, Snowflake: snow, Logger: logger, Version: "v0.0.0-guarded", AdminToken: token, History: hist,
	}))
	t.Cleanup(guarded.Close)
	p.do("open a server with an admin token",
		chromedp.Navigate(guarded.URL+"/monitor/"),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.WaitVisible(chromedp.ID("db-error")),
	)
	p.waitText("#version", func(s string) bool { return s == "v0.0.0-guarded" })
	if got := p.text("#tags-empty"); got != "Shown with the admin token." {
		t.Errorf("buffers without the token: %q", got)
	}
	if got := p.text("#db-error"); !strings.Contains(got, "admin token required") {
		t.Errorf("rows without the token: %q, want the 401's message", got)
	}
	if n := p.query("#tags-body", "children.length"); n != "0" {
		t.Errorf("%s buffer rows shown without the token", n)
	}
	p.waitText("#charts-note", func(s string) bool { return s == "Shown with the admin token." })
	if !p.hidden("chart-grid") {
		t.Errorf("charts shown without the token")
	}
	p.do("enter a wrong token",
		chromedp.SendKeys(chromedp.ID("token-input"), "not-the-token-0000"),
		press("token-submit"),
		chromedp.WaitVisible(chromedp.ID("token-error")),
	)
	if got := p.text("#token-error"); !strings.Contains(got, "invalid admin token") {
		t.Errorf("wrong token: the page shows %q", got)
	}
	p.do("enter the token",
		chromedp.SendKeys(chromedp.ID("token-input"), token),
		press("token-submit"),
		chromedp.WaitNotVisible(chromedp.ID("token-form")),
		chromedp.WaitVisible(chromedp.CSS(`#tags-body tr[data-tag="orders"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#db-body tr[data-tag="orders"]`)),
	)
	p.waitText(`#snowflake-fields [data-field="worker_id"]`, func(s string) bool { return s == worker })
	if got, want := p.text(`#snowflake-fields [data-field="layout"]`), snow.Status().Layout; got != want {
		t.Errorf("layout shown: %q, want %q", got, want)
	}
	p.waitCharts(func(lines map[string]string) bool { return strings.Count(lines["ids segment"], "L") >= 2 })
	shot("monitor-token.png")

	p.checkConsole()
}

// waitCharts waits until ok accepts the charts' lines, and returns them:
// the path of each, by "chart series" (as [data-chart] and [data-series]
// name them).
func (p *page) waitCharts(ok func(map[string]string) bool) map[string]string {
	p.t.Helper()
	const expr = `Object.fromEntries(Array.from(document.querySelectorAll("#charts [data-chart] path.line"),
		(e) => [e.closest("[data-chart]").dataset.chart + " " + e.dataset.series, e.getAttribute("d")]))`
	var lines map[string]string
	testutil.WaitForState(p.t, "the charts' lines", func() (bool, string) {
		var err error
		lines, err = chromedp.Run(p.ctx, chromedp.Evaluate[map[string]string](expr))
		if err != nil {
			p.t.Fatalf("the charts' lines: %v", err)
		}
		return ok(lines), fmt.Sprint(lines)
	})
	return lines
}

// load requests each of the paths on base in turn, one every 10 ms (the
// machine is shared), until the returned stop is called; stop waits for
// the last request.
func load(ctx context.Context, base string, paths ...string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+paths[i%len(paths)], nil)
			if err != nil {
				return
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// waitTags waits until ok accepts the data-tag attributes of the elements
// matching sel, joined by spaces.
func (p *page) waitTags(sel string, ok func(string) bool) {
	p.t.Helper()
	q, _ := json.Marshal(sel)
	expr := fmt.Sprintf(`Array.from(document.querySelectorAll(%s), (e) => e.dataset.tag).join(" ")`, q)
	testutil.WaitForState(p.t, "the tags of "+sel, func() (bool, string) {
		s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			p.t.Fatalf("%s: %v", expr, err)
		}
		return ok(s), fmt.Sprintf("%q", s)
	})
}

// hidden reports whether the element with the given id is hidden.
func (p *page) hidden(id string) bool {
	p.t.Helper()
	q, _ := json.Marshal(id)
	return p.query("html", fmt.Sprintf(`ownerDocument.getElementById(%s).hidden`, q)) == "true"
}

// bulkInsert adds n tags (bulkTag(0) ...) to st in one transaction, far
// faster than n CreateTag calls.
func bulkInsert(t *testing.T, st *sqlite.Store, n int) {
	t.Helper()
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ins, err := tx.PrepareContext(t.Context(), "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 1000)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := ins.ExecContext(t.Context(), bulkTag(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// getJSON GETs url, checks the status and decodes the JSON body into v.
func getJSON(t *testing.T, url string, status int, v any) {
	t.Helper()
	code, b := testutil.Get(t, url)
	if code != status {
		t.Fatalf("GET %s: %d %q, want %d", url, code, b, status)
	}
	if err := json.Unmarshal([]byte(b), v); err != nil {
		t.Fatalf("GET %s: %v in %q", url, err, b)
	}
}
