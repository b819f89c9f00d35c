package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// zoneTestServer is a real leaf server (httpapi, a segment generator) on
// a store shared with the other servers of the test, counting requests.
type zoneTestServer struct {
	URL  string
	cert *x509.Certificate // with TLS
	hits atomic.Int64
}

// zoneServers starts n servers over one SQLite store holding tag "zone".
func zoneServers(t *testing.T, n int) []*zoneTestServer {
	return startZoneServers(t, n, httptest.NewServer)
}

// startZoneServers starts n servers with start (httptest.NewServer or
// NewTLSServer).
func startZoneServers(t *testing.T, n int, start func(http.Handler) *httptest.Server) []*zoneTestServer {
	t.Helper()
	st := testutil.Store(t)
	if err := st.CreateTag(context.Background(), leaf.Alloc{Tag: "zone", MaxID: 1, Step: 100_000}); err != nil {
		t.Fatal(err)
	}
	out := make([]*zoneTestServer, n)
	for i := range out {
		s := segment.DefaultConfig()
		s.Store, s.Logger = st, slog.New(slog.DiscardHandler)
		g, err := segment.New(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		api := httpapi.New(httpapi.Config{Segment: g, Logger: slog.New(slog.DiscardHandler)})
		zs := &zoneTestServer{}
		hs := start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			zs.hits.Add(1)
			api.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		zs.URL = hs.URL
		zs.cert = hs.Certificate()
		out[i] = zs
	}
	return out
}

// ids parses the lines of leaf get's output.
func ids(t *testing.T, out string) []int64 {
	t.Helper()
	var got []int64
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		id, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		got = append(got, id)
	}
	return got
}

func TestGetZones(t *testing.T) {
	t.Parallel()
	s := zoneServers(t, 3)
	a, b, c := s[0].URL, s[1].URL, s[2].URL
	dead := "http://" + closedAddr(t)
	tests := []struct {
		name  string
		env   []string
		args  []string
		count int
		hits  [3]int64 // requests each server got
		warn  string   // in stderr; "?": whatever (the rotation starts at a random server)
	}{
		{"own zone", nil, []string{"--server", "dc1=" + a + ",dc2=" + b, "--zone", "dc1", "--count", "3"}, 3, [3]int64{1, 0, 0}, ""},
		{"repeated flag", nil, []string{"--server", "dc2=" + a, "--server", "dc1=" + b, "--zone=dc1"}, 1, [3]int64{0, 1, 0}, ""},
		{"own zone down", nil, []string{"--server", "dc1=" + dead + ",dc2=" + c, "--zone", "dc1"}, 1, [3]int64{0, 0, 1},
			"no server of the client's zone answers"},
		{"own zone's other server", nil, []string{"--server", "dc1=" + dead + ", dc1=" + a + ", dc2=" + b, "--zone", "dc1", "--count", "2"}, 2,
			[3]int64{1, 0, 0}, "?"},
		{"several without zones", nil, []string{"--server", dead + "," + strings.TrimPrefix(c, "http://")}, 1, [3]int64{0, 0, 1}, "?"},
		{"zones from the environment", []string{"LEAF_SERVER=dc2=" + a + ",dc1=" + c}, []string{"--zone", "dc1"}, 1, [3]int64{0, 0, 1}, ""},
		{"zones without --zone", nil, []string{"--server", "dc1=" + b}, 1, [3]int64{0, 1, 0}, ""},
	}
	// One at a time: each case checks the servers' counters.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before [3]int64
			for i := range s {
				before[i] = s[i].hits.Load()
			}
			r := runCLI(t, tt.env, append([]string{"get", "zone"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if got := ids(t, r.stdout); len(got) != tt.count {
				t.Errorf("stdout %q, want %d IDs", r.stdout, tt.count)
			}
			for i := range s {
				if n := s[i].hits.Load() - before[i]; n != tt.hits[i] {
					t.Errorf("server %d got %d requests, want %d", i, n, tt.hits[i])
				}
			}
			if tt.warn != "?" && (tt.warn == "" && r.stderr != "" || !strings.Contains(r.stderr, tt.warn)) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.warn)
			}
			if strings.Contains(r.stderr, "time=") {
				t.Errorf("stderr has timestamps: %q", r.stderr)
			}
		})
	}
	t.Run("server error", func(t *testing.T) {
		r := runCLI(t, nil, "get", "missing", "--server", "dc1="+a+",dc2="+b, "--zone", "dc1")
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "404 tag_not_found") {
			t.Errorf("exit %d stdout %q stderr %q; want exit 1 and the 404", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("all down", func(t *testing.T) {
		r := runCLI(t, nil, "get", "zone", "--server", "dc1="+dead+",dc2=http://"+closedAddr(t), "--zone", "dc1")
		if r.code != 1 || !strings.Contains(r.stderr, "connection refused") {
			t.Errorf("exit %d stderr %q; want exit 1 and the refusal", r.code, r.stderr)
		}
	})
}

// TestZoneFlagsUsage: bad --server and --zone values, for get and bench
// alike, exit 2 with a message naming what is wrong, before any request.
func TestZoneFlagsUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown zone", []string{"--server", "dc1=h:1,dc2=h:2", "--zone", "dc3"}, `--zone "dc3": no --server is in that zone (zones: dc1, dc2)`},
		{"zone of plain servers", []string{"--server", "h:1", "--zone", "dc1"}, `--zone "dc1": no --server is in that zone (none has a zone; give them as ZONE=URL)`},
		{"bad zone", []string{"--server", "dc1=h:1", "--zone", "dc 1"}, `--zone "dc 1" is not 1 to 64 letters, digits, '.', '_' or '-'`},
		{"bad server zone", []string{"--server", "dc/1=http://h:1"}, `--server "dc/1=http://h:1": the zone before '=' is not 1 to 64 letters`},
		{"empty server zone", []string{"--server", "=http://h:1"}, `--server "=http://h:1": the zone before '='`},
		{"empty entry", []string{"--server", "h:1,,h:2"}, `--server "h:1,,h:2" has an empty entry`},
		{"trailing comma", []string{"--server", "h:1,"}, "has an empty entry"},
		{"bad URL", []string{"--server", "dc1=ftp://h:1"}, `--server "ftp://h:1" is not an http(s) URL`},
		{"twice", []string{"--server", "dc1=http://h:1,dc2=http://h:1/"}, `--server: endpoint "http://h:1/" listed twice`},
		{"query", []string{"--server", "dc1=http://h:1/?x=1"}, "has a query"},
		{"cacert plain", []string{"--server", "dc1=https://h:1,dc2=http://h:2", "--cacert", "ca.pem"}, "--cacert is for an https:// server"},
	}
	for _, cmd := range []string{"get", "bench"} {
		for _, tt := range tests {
			t.Run(cmd+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				args := []string{cmd}
				if cmd == "get" {
					args = append(args, "zone")
				}
				r := runCLI(t, nil, append(args, tt.args...)...)
				if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "leaf "+cmd+": ") || !strings.Contains(r.stderr, tt.stderr) {
					t.Errorf("exit %d stdout %q stderr %q; want exit 2 and %q", r.code, r.stdout, r.stderr, tt.stderr)
				}
			})
		}
	}
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"zone with grpc", []string{"--grpc", "h:1", "--zone", "dc1"}, "--zone is for --server, not --grpc"},
		{"zoned server and grpc", []string{"--grpc", "h:1", "--server", "dc1=h:2"}, "--server and --grpc exclude each other"},
	} {
		r := runCLI(t, nil, append([]string{"bench"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("bench %s: exit %d stderr %q; want exit 2 and %q", tt.name, r.code, r.stderr, tt.stderr)
		}
	}
}

// TestBenchZones runs leaf bench through the Go client against two zones:
// every request stays in the own zone, whose dead server costs retries
// but no failed request.
func TestBenchZones(t *testing.T) {
	t.Parallel()
	s := zoneServers(t, 3)
	dead := "http://" + closedAddr(t)
	servers := strings.Join([]string{"dc1=" + s[0].URL, "dc1=" + dead, "dc2=" + s[1].URL, "dc2=" + s[2].URL}, ",")
	r, sum := runBenchJSON(t, "--server", servers, "--zone", "dc1", "--tag", "zone", "--count", "5",
		"--concurrency", "4", "--duration", benchDuration(), "--check-unique")
	if r.code != 0 || sum.Errors != 0 {
		t.Fatalf("exit %d, %d errors %+v; stderr %q", r.code, sum.Errors, sum.ErrorKinds, r.stderr)
	}
	if sum.Transport != "client" || sum.Zone != "dc1" || sum.Target != servers || len(sum.Servers) != 4 {
		t.Fatalf("summary: transport %q zone %q target %q servers %+v", sum.Transport, sum.Zone, sum.Target, sum.Servers)
	}
	if sum.Unique == nil || sum.Unique.Duplicates != 0 || sum.IDs != 5*sum.Requests {
		t.Errorf("IDs %d of %d requests, unique %+v", sum.IDs, sum.Requests, sum.Unique)
	}
	live, down := sum.Servers[0], sum.Servers[1]
	// Every request (and the probe) was answered by dc1's live server; its
	// dead one was tried once per cool-down, and failed.
	if live.Requests != uint64(sum.Requests)+1 || live.Failures != 0 || uint64(s[0].hits.Load()) != live.Requests {
		t.Errorf("dc1's live server: %+v (%d hits), want all %d requests and the probe", live, s[0].hits.Load(), sum.Requests)
	}
	if down.URL != dead || down.Requests == 0 || down.Failures != down.Requests {
		t.Errorf("dc1's dead server: %+v, want tried and failed", down)
	}
	for _, sv := range sum.Servers[2:] {
		if sv.Requests != 0 {
			t.Errorf("dc2 server %+v got requests", sv)
		}
	}
	if s[1].hits.Load()+s[2].hits.Load() != 0 {
		t.Errorf("dc2's servers were called")
	}
	if !strings.Contains(r.stderr, "server failed") {
		t.Errorf("stderr %q lacks the dead server's warning", r.stderr)
	}

	// The text summary lists the servers.
	text := runCLI(t, nil, "bench", "--quiet", "--server", "dc1="+s[0].URL+",dc2="+s[1].URL, "--zone", "dc1",
		"--tag", "zone", "--concurrency", "2", "--duration", "100ms")
	for _, want := range []string{"the Go client of dc1=" + s[0].URL + ",dc2=" + s[1].URL + " in zone dc1",
		"requests per server (retries included):", "dc2=" + s[1].URL + "  ", "0 failed"} {
		if text.code != 0 || !strings.Contains(text.stdout, want) {
			t.Errorf("exit %d, summary lacks %q:\n%s%s", text.code, want, text.stdout, text.stderr)
		}
	}
	// A single server without zones is benchmarked directly, as before.
	r, sum = runBenchJSON(t, "--server", s[2].URL, "--tag", "zone", "--concurrency", "1", "--duration", "100ms")
	if r.code != 0 || sum.Transport != "http" || sum.Servers != nil {
		t.Errorf("single server: exit %d, transport %q, servers %+v", r.code, sum.Transport, sum.Servers)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil || raw["servers"] != nil || raw["zone"] != nil {
		t.Errorf("single server JSON has servers or zone: %s", r.stdout)
	}
}

// TestZonesCACert: --cacert reaches the Go client's connections.
func TestZonesCACert(t *testing.T) {
	t.Parallel()
	s := startZoneServers(t, 2, httptest.NewTLSServer)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	var pemData []byte
	for _, zs := range s {
		pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: zs.cert.Raw})...)
	}
	if err := os.WriteFile(ca, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	servers := "dc1=" + s[0].URL + ",dc2=" + s[1].URL
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"get", []string{"get", "zone", "--server", servers, "--zone", "dc2", "--cacert", ca}, 0, "\n", ""},
		{"get without --cacert", []string{"get", "zone", "--server", servers, "--zone", "dc2"}, 1, "", "certificate signed by unknown authority"},
		{"bench", []string{"bench", "--server", servers, "--zone", "dc2", "--cacert", ca, "--tag", "zone", "--concurrency", "1",
			"--duration", "100ms", "--quiet"}, 0, "  requests ", ""},
		{"bench without --cacert", []string{"bench", "--server", servers, "--zone", "dc2", "--tag", "zone", "--duration", "100ms",
			"--quiet"}, 1, "", "certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		r := runCLI(t, nil, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.name, r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
		}
	}
	if s[0].hits.Load() != 0 || s[1].hits.Load() == 0 {
		t.Errorf("requests: %d in dc1, %d in dc2; want all in dc2", s[0].hits.Load(), s[1].hits.Load())
	}
}
