package bench

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// leafServers starts n real leaf servers (httpapi, one segment generator
// each) on one SQLite store holding tag "t", counting their requests.
func leafServers(t *testing.T, n int) ([]string, []*atomic.Int64) {
	t.Helper()
	st := testutil.Store(t)
	if err := st.CreateTag(context.Background(), leaf.Alloc{Tag: "t", MaxID: 1, Step: 100_000}); err != nil {
		t.Fatal(err)
	}
	urls, hits := make([]string, n), make([]*atomic.Int64, n)
	for i := range n {
		s := segment.DefaultConfig()
		s.Store, s.Logger = st, slog.New(slog.DiscardHandler)
		g, err := segment.New(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		api := httpapi.New(httpapi.Config{Segment: g, Logger: slog.New(slog.DiscardHandler)})
		h := &atomic.Int64{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.Add(1)
			api.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		urls[i], hits[i] = srv.URL, h
	}
	return urls, hits
}

func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// TestRunClient runs through the Go client against two zones: the
// requests stay in the own zone, and the summary says where they went.
func TestRunClient(t *testing.T) {
	urls, hits := leafServers(t, 2)
	o := Config{
		Servers: []client.Endpoint{{URL: urls[0], Zone: "dc1"}, {URL: urls[1], Zone: "dc2"}},
		Zone:    "dc1", Mode: "segment", Tag: "t", Count: 3, Concurrency: 2, Duration: MinDuration, CheckUnique: true,
	}
	sum, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 0 || sum.Requests == 0 || sum.IDs != 3*sum.Requests || sum.Unique.Duplicates != 0 {
		t.Errorf("summary: %d requests, %d IDs, %d errors %+v, unique %+v", sum.Requests, sum.IDs, sum.Errors, sum.ErrorKinds, sum.Unique)
	}
	want := []Server{{URL: urls[0], Zone: "dc1", Requests: uint64(sum.Requests) + 1}, {URL: urls[1], Zone: "dc2"}}
	if sum.Transport != "client" || sum.Zone != "dc1" || sum.Target != "dc1="+urls[0]+",dc2="+urls[1] ||
		len(sum.Servers) != 2 || sum.Servers[0] != want[0] || sum.Servers[1] != want[1] {
		t.Errorf("summary: transport %q zone %q target %q servers %+v; want servers %+v", sum.Transport, sum.Zone, sum.Target, sum.Servers, want)
	}
	if hits[0].Load() != int64(want[0].Requests) || hits[1].Load() != 0 {
		t.Errorf("the servers got %d and %d requests", hits[0].Load(), hits[1].Load())
	}
	var b strings.Builder
	if err := sum.WriteText(&b); err != nil || !strings.Contains(b.String(), "in zone dc1") ||
		!strings.Contains(b.String(), "dc2="+urls[1]+" ") {
		t.Errorf("text summary: %v\n%s", err, b.String())
	}
}

// TestRunClientProbe: the probe's failure is the error the client gave up
// with, named by kind.
func TestRunClientProbe(t *testing.T) {
	urls, _ := leafServers(t, 1)
	tests := []struct {
		name string
		eps  []client.Endpoint
		tag  string
		kind string
	}{
		{"unknown tag", []client.Endpoint{{URL: urls[0]}, {URL: closedURL(t)}}, "nope", "(http 404): leaf client: POST"},
		{"all down", []client.Endpoint{{URL: closedURL(t), Zone: "a"}, {URL: closedURL(t), Zone: "b"}}, "t", "(transport connection refused)"},
	}
	for _, tt := range tests {
		o := Config{Servers: tt.eps, Mode: "segment", Tag: tt.tag, Count: 1, Concurrency: 1, Duration: time.Hour}
		sum, err := Run(t.Context(), o)
		if sum != nil || err == nil || !strings.Contains(err.Error(), tt.kind) {
			t.Errorf("%s: Run = %v, %v; want the probe's failure %q", tt.name, sum, err, tt.kind)
		}
	}
}

func TestOptionsValidateServers(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:8080")
	eps := []client.Endpoint{{URL: "http://127.0.0.1:8080", Zone: "dc1"}}
	tests := []struct {
		name string
		o    Config
	}{
		{"servers and URL", Config{Servers: eps, URL: u}},
		{"servers and gRPC", Config{Servers: eps, GRPC: "h:1"}},
		{"zone without servers", Config{URL: u, Zone: "dc1"}},
	}
	for _, tt := range tests {
		tt.o.Mode, tt.o.Tag, tt.o.Count, tt.o.Concurrency, tt.o.Duration = "segment", "t", 1, 1, time.Second
		if err := tt.o.validate(); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("%s: validate() = %v, want ErrInvalidArgument", tt.name, err)
		}
	}
	// The client's own checks come from Run.
	o := Config{Servers: eps, Zone: "dc2", Mode: "segment", Tag: "t", Count: 1, Concurrency: 1, Duration: time.Second}
	if _, err := Run(t.Context(), o); !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), `no endpoint is in that zone`) {
		t.Errorf("Run with a zone no server is in = %v", err)
	}
}
