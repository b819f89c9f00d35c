package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/leafgo/leaf/internal/testutil"
)

// TestRulesAndDashboardLive runs Debian's Prometheus, with the example
// configuration and both rule files, scraping a real leaf server every
// second while light traffic runs through it (segment and snowflake IDs,
// 404s, 400s, a malformed request), with the etcd registry so that the
// snowflake lease and peer series exist. Then:
//
//   - every rule is evaluated by Prometheus without error;
//   - every dashboard query, with Grafana's variables filled in, and every
//     recording rule returns at least one sample that is not NaN;
//   - every alert expression parses and evaluates; it is empty on a healthy
//     server, so what this proves about it is weaker: every metric name it
//     selects has series. A wrong label value in a matcher (say, a state
//     leaf does not export) is not caught here; the promtool unit tests pin
//     those;
//   - no alert fires on the healthy server (of the alerts without a "for",
//     which could fire within the test's seconds).
func TestRulesAndDashboardLive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds leaf and runs it with Prometheus")
	}
	promBin := prometheus(t)
	etcd := testutil.Etcd(t)
	leafBin := testutil.BuildLeaf(t)

	// leaf serve on SQLite in a temporary directory, with its worker ID
	// leased from etcd under a name of its own.
	srv := testutil.StartLeaf(t, leafBin, t.TempDir(), testutil.CleanEnv(), "--listen", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--snowflake-registry", "etcd", "--etcd", etcd,
		"--name", "deploy-test-"+testutil.UniqueName())
	prom := startPrometheus(t, promBin, srv.Addr)
	// Traffic starts after the first scrape, so that the counters the
	// dashboard rates (loads among them) move between scrapes.
	prom.waitFor(t, "the first scrape of leaf", func() (bool, string) {
		s := prom.mustQuery(t, `up{job="leaf"} == 1`)
		return len(s) == 1, "up"
	})
	counts := drive(t, srv.Addr)
	malformedRequest(t, srv.Addr)

	d := readDashboard(t)
	fill := grafanaVars(srv.Addr)
	type check struct{ where, expr string }
	var want []check // queries that must return data
	for _, q := range d.queries() {
		want = append(want, check{q.where, fill(t, q.expr)})
	}
	recording := readRules(t, recordingFile)
	alerts := readRules(t, alertsFile)
	for _, r := range recording {
		want = append(want, check{"recorded series " + r.Record, r.Record})
	}
	names := map[string]string{} // metric name -> the first alert selecting it
	for _, r := range alerts {
		for _, n := range metricNames(r.Expr) {
			if _, ok := names[n]; !ok {
				names[n] = r.Alert
			}
		}
	}
	for n, alert := range names {
		want = append(want, check{"metric " + n + " selected by " + alert, n})
	}
	if len(names) < 10 {
		t.Fatalf("only %d metric names found in the alerts: %v", len(names), names)
	}

	prom.waitFor(t, "every rule evaluated and every query answered", func() (bool, string) {
		if pending := prom.rulesPending(t, len(recording)+len(alerts)); pending != "" {
			return false, pending
		}
		for _, c := range want {
			samples := prom.mustQuery(t, c.expr)
			if !hasNumber(samples) {
				return false, fmt.Sprintf("%s: no sample but NaN (%d samples)\n\t%s", c.where, len(samples), c.expr)
			}
		}
		return true, ""
	})

	// The template variables: label_values(SELECTOR, LABEL) lists LABEL's
	// values over SELECTOR's series.
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`).FindStringSubmatch(fill(t, v.query()))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.query())
			continue
		}
		var values []string
		for _, s := range prom.mustQuery(t, m[1]) {
			values = append(values, s.Metric[m[2]])
		}
		want := map[string]string{"job": "leaf", "instance": srv.Addr}[v.Name]
		if len(values) != 1 || values[0] != want {
			t.Errorf("variable %s would offer %q, want [%s]", v.Name, values, want)
		}
	}

	for _, r := range alerts {
		if _, err := prom.query(r.Expr); err != nil {
			t.Errorf("alert %s: %v\n%s", r.Alert, err, r.Expr)
		}
	}
	t.Logf("answered with data: %d dashboard queries, %d recorded series, %d metric names the alerts select",
		len(d.queries()), len(recording), len(names))
	for _, a := range prom.alerts(t) {
		t.Logf("alert %s is %s", a.Labels["alertname"], a.State)
		if a.State == "firing" {
			t.Errorf("alert %s fires on a healthy server: %v (value %s)", a.Labels["alertname"], a.Labels, a.Value)
		}
	}

	// The traffic did what the dashboard's panels were checked against.
	got := counts()
	for _, code := range []int{200, 400, 404} {
		if got[code] == 0 {
			t.Errorf("the traffic got no %d answer (got %v)", code, got)
		}
	}
}

// process is a program the test started, and its output.
type process struct {
	cmd    *exec.Cmd
	log    *testutil.LogBuffer
	exited chan struct{}
}

// start starts bin, and at cleanup stops it with sig (SIGKILL if it does
// not exit within 15s).
func start(t *testing.T, sig os.Signal, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), log: &testutil.LogBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.log.String())
		}
	})
	return p
}

// promServer is a Prometheus the test runs and asks through its HTTP API.
type promServer struct {
	*process
	base   string
	client *http.Client
}

// startPrometheus runs Prometheus on a free port of 127.0.0.1 with a data
// directory of its own, on the example configuration with target as the
// only leaf, and both intervals at 1s.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg map[string]any
	readYAML(t, exampleConfig, &cfg)
	cfg["global"] = map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
	var rules []string
	for _, f := range []string{recordingFile, alertsFile} {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, abs)
	}
	cfg["rule_files"] = rules
	jobs, _ := cfg["scrape_configs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("%s: want one scrape job, got %v", exampleConfig, cfg["scrape_configs"])
	}
	job := jobs[0].(map[string]any)
	job["static_configs"] = []any{map[string]any{"targets": []string{target}}}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, b, 0o644); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	p := &promServer{
		process: start(t, os.Kill, bin, os.Environ(), "--config.file="+cfgFile,
			"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn"),
		base:   "http://" + addr,
		client: &http.Client{Timeout: 10 * time.Second},
	}
	p.waitFor(t, "Prometheus to be ready", func() (bool, string) {
		select {
		case <-p.exited:
			t.Fatalf("prometheus exited:\n%s", p.log.String())
		default:
		}
		resp, err := p.client.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// freeAddr returns a 127.0.0.1 address with a port nobody listens on. The
// port is free when it returns; Prometheus, which cannot be handed a
// listener, takes it a moment later, and fails loudly if someone was
// quicker.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond until it holds, failing the test with cond's last
// explanation if it does not in time.
func (p *promServer) waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testutil.WaitForState(t, what, cond)
}

// apiResponse is the envelope of every Prometheus API answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

func (p *promServer) api(path string, params url.Values, data any) error {
	resp, err := p.client.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %s: %w", path, body, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// sample is one element of a query's result.
type sample struct {
	Metric map[string]string
	Value  float64
}

// query evaluates expr now. An error is the query's: it did not parse or
// could not be evaluated.
func (p *promServer) query(expr string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	switch data.ResultType {
	case "vector":
		if err := json.Unmarshal(data.Result, &raw); err != nil {
			return nil, err
		}
	case "scalar":
		raw = make([]struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}, 1)
		if err := json.Unmarshal(data.Result, &raw[0].Value); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("result type %s, want an instant vector", data.ResultType)
	}
	out := make([]sample, len(raw))
	for i, r := range raw {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("value %v: %w", r.Value, err)
		}
		out[i] = sample{r.Metric, v}
	}
	return out, nil
}

func (p *promServer) mustQuery(t *testing.T, expr string) []sample {
	t.Helper()
	s, err := p.query(expr)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return s
}

// hasNumber reports whether a result holds data: a sample that is not NaN
// (a quantile or a ratio over no events).
func hasNumber(samples []sample) bool {
	for _, s := range samples {
		if !math.IsNaN(s.Value) {
			return true
		}
	}
	return false
}

// rulesPending returns why the rules are not all evaluated yet, or "" once
// all want of them have been; a rule whose evaluation failed fails the test.
func (p *promServer) rulesPending(t *testing.T, want int) string {
	t.Helper()
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api("/api/v1/rules", nil, &data); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			n++
			switch r.Health {
			case "ok":
			case "err":
				t.Fatalf("rule %s (group %s) fails: %s", r.Name, g.Name, r.LastError)
			default:
				return fmt.Sprintf("rule %s: health %q", r.Name, r.Health)
			}
		}
	}
	if n != want {
		t.Fatalf("Prometheus loaded %d rules, want %d", n, want)
	}
	return ""
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

func (p *promServer) alerts(t *testing.T) []alert {
	t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	if err := p.api("/api/v1/alerts", nil, &data); err != nil {
		t.Fatal(err)
	}
	return data.Alerts
}

// grafanaVars returns what fills in the dashboard's variables as Grafana
// would for this server: job and instance selected (a multi-value variable's
// value is regex-escaped inside the PromQL string), and a rate interval of
// a minute, which at a 1s scrape spans many samples.
func grafanaVars(instance string) func(t *testing.T, expr string) string {
	escaped := regexp.MustCompile(`[.*+?^$()\[\]{}|\\]`).ReplaceAllString(instance, `\\$0`)
	r := strings.NewReplacer("$__rate_interval", "1m", "$job", "leaf", "$instance", escaped)
	return func(t *testing.T, expr string) string {
		t.Helper()
		out := r.Replace(expr)
		if m := varRE.FindString(strings.ReplaceAll(out, escaped, "")); m != "" {
			t.Fatalf("%s: variable %s left unfilled", expr, m)
		}
		return out
	}
}

// drive sends light traffic to the server until the test ends: segment and
// snowflake IDs on both APIs, an unknown tag (404), a bad count (400), the
// status summary. The returned function reports the answers by status.
func drive(t *testing.T, addr string) func() map[int]int {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
	)
	paths := []string{
		"/api/segment/get/" + testutil.SeedTag,
		"/api/segment/get/" + testutil.SeedTag + "?count=50",
		"/v2/segment/" + testutil.SeedTag,
		"/api/snowflake/get/deploy",
		"/v2/snowflake/batch?count=10",
		"/api/segment/get/no-such-tag",
		"/api/segment/get/" + testutil.SeedTag + "?count=0",
		"/v2/status/summary",
	}
	client := &http.Client{Timeout: 5 * time.Second}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, path := range paths {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("GET %s: %v", path, err)
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				counts[resp.StatusCode]++
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return func() map[int]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

// malformedRequest sends bytes that are not HTTP, which the transport
// refuses before any route sees them and counts in
// leaf_http_bad_requests_total.
func malformedRequest(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "NOT HTTP AT ALL\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("reading the answer to a malformed request: %v", err)
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.1 400") {
		t.Errorf("a malformed request was answered %q, want 400", answer)
	}
}
