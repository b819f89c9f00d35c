package client_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/snowflake"
	"github.com/leafgo/leaf/sqlite"
)

// Tests run real servers over loopback: httpapi in front of real generators
// on real stores (SQLite here, MariaDB for the cluster test too).

// newStore returns a SQLite store holding tags, each starting at 1 with the
// given step.
func newStore(t testing.TB, step int, tags ...string) *sqlite.Store {
	t.Helper()
	rows := make([]leaf.Alloc, len(tags))
	for i, tag := range tags {
		rows[i] = leaf.Alloc{Tag: tag, MaxID: 1, Step: step}
	}
	return testutil.Store(t, rows...)
}

// startSegment starts a segment generator on st, closed at cleanup.
func startSegment(t testing.TB, st leaf.SegmentStore, tweak func(*segment.Config)) *segment.Generator {
	t.Helper()
	s := segment.DefaultConfig()
	s.Store, s.Logger = st, testutil.Logger()
	if tweak != nil {
		tweak(&s)
	}
	g, err := segment.New(context.Background(), s)
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// startSnowflake starts a snowflake generator with a worker ID from an
// in-memory registry.
func startSnowflake(t *testing.T) *snowflake.Generator {
	t.Helper()
	return leaftest.StartSnowflake(t, inmem.NewWorkerPool(5*time.Second).Open,
		leaftest.FastSnowflake(nil, leaftest.TestEndpoint(0)))
}

// server is one leaf server under test.
type server struct {
	*httptest.Server
	hits atomic.Int64 // requests received
}

// serve starts an HTTP server for cfg, closed at cleanup.
func serve(t testing.TB, cfg httpapi.Config) *server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger()
	}
	return serveHandler(t, httpapi.New(cfg))
}

// serveHandler starts an HTTP server for h that counts its requests.
func serveHandler(t testing.TB, h http.Handler) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// segmentServer serves a fresh SQLite store holding tags (step 1000).
func segmentServer(t testing.TB, tags ...string) *server {
	t.Helper()
	return serve(t, httpapi.Config{Segment: startSegment(t, newStore(t, 1000, tags...), nil)})
}

// refusedURL is the base URL of a port nobody listens on.
func refusedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// hangingServer answers nothing until the test ends.
func hangingServer(t testing.TB) *server {
	t.Helper()
	release := make(chan struct{})
	s := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	// Cleanups run last-registered first: release the handlers, then Close
	// (registered by serveHandler) no longer waits for them.
	t.Cleanup(func() { close(release) })
	return s
}

// newClient builds a client with a quiet logger whose first call goes to
// the first endpoint, failing the test on error.
func newClient(t testing.TB, endpoints []string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(endpoints, append([]client.Option{client.WithLogger(testutil.Logger())}, opts...)...)
	if err != nil {
		t.Fatalf("client.New(%q): %v", endpoints, err)
	}
	client.StartAt(c, 0) // tests know which server is tried first
	return c
}

// countingHandler is a slog.Handler counting records at Warn and above.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}
