package httpapi

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf/internal/deadline"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/metrics"
)

// logLines splits a log into its non-empty lines.
func logLines(logs *testutil.LogBuffer) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// sendRaw writes raw on a new connection to addr and reads until the server
// closes it.
func sendRaw(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Error(err)
		return ""
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestGarbageIsCountedNotLogged: a thousand garbage requests, each on its
// own connection, cost the log at most a couple of lines, and the metric
// counts every one.
func TestGarbageIsCountedNotLogged(t *testing.T) {
	logs := &testutil.LogBuffer{}
	m := metrics.New(metrics.Config{})
	s := New(Config{Segment: newFakeGen("test"), Observer: m, Metrics: m.Handler(),
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	base := serveFast(t, s, Limits{})
	addr := strings.TrimPrefix(base, "http://")

	const total, workers = 1000, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < total; i += workers {
				if got := sendRaw(t, addr, "NONSENSE\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400 ") {
					t.Errorf("garbage answered %q, want 400", got)
					return
				}
			}
		})
	}
	wg.Wait()

	if lines := logLines(logs); len(lines) > 2 {
		t.Errorf("%d garbage requests wrote %d log lines, want at most 2:\n%s", total, len(lines), strings.Join(lines[:min(len(lines), 5)], "\n"))
	} else if len(lines) == 0 || !strings.Contains(lines[0], `"malformed":1`) {
		t.Errorf("log = %q, want one summary line counting the first malformed request", lines)
	}
	r := do(t, "GET", base, "/metrics", "")
	for _, want := range []string{
		`leaf_http_bad_requests_total{reason="malformed"} 1000`,
		`leaf_http_request_duration_seconds_count{code="400",route="/"} 1000`,
	} {
		if !strings.Contains(r.body, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(r.body, "leaf_http_"))
		}
	}
}

// grepLines keeps the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// badObserver is a countingObserver that counts refused requests too.
type badObserver struct {
	countingObserver
	mu  sync.Mutex
	bad map[string]int
}

func (o *badObserver) ObserveBadRequest(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bad == nil {
		o.bad = map[string]int{}
	}
	o.bad[reason]++
}

func (o *badObserver) badCount(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bad[reason]
}

// TestBadRequestReasons: each way a request is refused unread is counted
// under its reason; those answered over HTTP are observed under the
// unmatched route with their status (413 and 431 included), and none is
// logged on its own.
func TestBadRequestReasons(t *testing.T) {
	obs := &badObserver{}
	logs := &testutil.LogBuffer{}
	s := New(Config{Segment: newFakeGen("test"), Observer: obs, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	lim := Limits{ReadTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4096, MaxBodyBytes: 1024}
	addr := strings.TrimPrefix(serveFast(t, s, lim), "http://")

	// The same server behind TLS, as leaf serve runs it with tls.cert set.
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	tlsCfg := ts.TLS.Clone()
	ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewFastServer(s, lim)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(tls.NewListener(deadline.Wrap(ln, 50*time.Millisecond), tlsCfg))
	}()
	t.Cleanup(func() { testutil.ShutdownFast(srv); <-done })

	for _, tc := range []struct {
		name, addr, raw, reason string
		status                  int // 0: no HTTP answer
	}{
		{"garbage", addr, "NONSENSE\r\n\r\n", "malformed", 400},
		{"bad header", addr, "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n", "malformed", 400},
		{"headers too large", addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8192) + "\r\n\r\n", "headers_too_large", 431},
		{"body too large", addr, "POST /v2/tags HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", "body_too_large", 413},
		{"too slow", addr, "GET /healthz HTTP/1.1\r\nHost: le", "timeout", 408},
		{"plain HTTP on the TLS port", ln.Addr().String(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "tls_handshake", 0},
	} {
		got := sendRaw(t, tc.addr, tc.raw)
		if tc.status != 0 && !strings.HasPrefix(got, "HTTP/1.1 "+strconv.Itoa(tc.status)+" ") {
			t.Errorf("%s: answered %.80q, want %d", tc.name, got, tc.status)
		}
		if n := obs.badCount(tc.reason); n < 1 {
			t.Errorf("%s: %s counted %d times", tc.name, tc.reason, n)
		}
	}
	// A TLS client that rejects the server's certificate aborts the
	// handshake too.
	if c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "leaf"}); err == nil {
		c.Close()
		t.Error("the handshake with an unknown certificate succeeded")
	}
	// The server counts a failed handshake after the client has seen it
	// fail.
	testutil.WaitFor(t, "the second failed TLS handshake to be counted", func() bool {
		return obs.badCount("tls_handshake") >= 2
	})
	if n := obs.badCount("tls_handshake"); n != 2 {
		t.Errorf("tls_handshake counted %d times, want 2", n)
	}
	for _, status := range []int{400, 408, 413, 431} {
		if n := obs.count(unmatchedRoute, status); n < 1 {
			t.Errorf("no %d observed under the route %q", status, unmatchedRoute)
		}
	}
	if lines := logLines(logs); len(lines) != 1 {
		t.Errorf("%d log lines, want the one summary:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// TestBadRequestSummary: the first refusal is logged at once; later ones
// within the minute only counted, and told by the next line after it, with
// the counts since the last line.
func TestBadRequestSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testutil.LogBuffer{}
		b := newBadRequests(slog.New(slog.NewJSONHandler(logs, nil)), nil)
		b.add(badMalformed, "first")
		for range 99 {
			b.add(badMalformed, "more")
		}
		b.add(badTLSHandshake, "tls")
		if n := len(logLines(logs)); n != 1 {
			t.Fatalf("%d lines within the first minute, want 1", n)
		}
		time.Sleep(badRequestSummaryEvery)
		b.add(badBodyTooLarge, "big")
		lines := logLines(logs)
		if len(lines) != 2 {
			t.Fatalf("%d lines after a minute, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		var second struct {
			Refused    map[string]int `json:"refused"`
			FirstCause string         `json:"first_cause"`
		}
		if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"malformed": 99, "tls_handshake": 1, "body_too_large": 1}
		if len(second.Refused) != len(want) || second.FirstCause != "more" {
			t.Errorf("second line %s, want counts %v and first cause %q", lines[1], want, "more")
		}
		for k, v := range want {
			if second.Refused[k] != v {
				t.Errorf("second line counts %s %d, want %d", k, second.Refused[k], v)
			}
		}
	})
}
