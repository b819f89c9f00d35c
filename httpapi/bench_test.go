package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// counterGen issues IDs from one atomic counter, the cost of the real
// generator's fast path, so that the benchmarks measure the transport.
type counterGen struct {
	*fakeGen
	n atomic.Int64
}

func (g *counterGen) NextID(context.Context, string) (int64, error) { return g.n.Add(1), nil }

func (g *counterGen) NextIDs(_ context.Context, _ string, n int, dst []int64) ([]int64, error) {
	last := g.n.Add(int64(n))
	for id := last - int64(n) + 1; id <= last; id++ {
		dst = append(dst, id)
	}
	return dst, nil
}

// discardWriter is a ResponseWriter that keeps its header map between
// requests, as the benchmarks reuse it: what it measures is the handler's own
// cost, without the header map net/http allocates per request.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) WriteHeader(s int)   { d.status = s }
func (d *discardWriter) Write(b []byte) (int, error) {
	d.n += len(b)
	return len(b), nil
}

func (d *discardWriter) reset() {
	clear(d.h)
	d.status = 200
	d.n = 0
}

// newBenchServer serves both modes. The snowflake fake is the test one: a
// mutex and a few shifts, about the cost of the real generator's fast path
// without its clock read.
func newBenchServer() *Server {
	return newObservedBenchServer(nil)
}

// newObservedBenchServer is newBenchServer with obs told of every request.
func newObservedBenchServer(obs RequestObserver) *Server {
	return New(Config{
		Segment:   &counterGen{fakeGen: newFakeGen("leaf-segment-test")},
		Snowflake: newFakeSnowflake(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer:  obs,
	})
}

func newBenchRequest(target string) *http.Request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		panic(err)
	}
	return (&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: "bench"}).WithContext(context.Background())
}

func benchServe(b *testing.B, target string) {
	s := newBenchServer()
	r := newBenchRequest(target)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		s.ServeHTTP(w, r)
	}
	if w.status != 200 || w.n == 0 {
		b.Fatalf("status %d, %d bytes", w.status, w.n)
	}
}

// BenchmarkSegmentGet is the hot path: GET /api/segment/get/{key}, one ID.
func BenchmarkSegmentGet(b *testing.B) { benchServe(b, "/api/segment/get/leaf-segment-test") }

// BenchmarkSnowflakeGet is the snowflake hot path: GET
// /api/snowflake/get/{key}, one ID.
func BenchmarkSnowflakeGet(b *testing.B) { benchServe(b, "/api/snowflake/get/leaf-snowflake-test") }

// BenchmarkSegmentGetParallel is the hot path from every core at once: the
// shared state it touches (the generator's counter, the pools) shows here.
func BenchmarkSegmentGetParallel(b *testing.B) {
	s := newBenchServer()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := newBenchRequest("/api/segment/get/leaf-segment-test")
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			w.reset()
			s.ServeHTTP(w, r)
		}
	})
}

func BenchmarkSegmentGetBatch100(b *testing.B) {
	benchServe(b, "/api/segment/get/leaf-segment-test?count=100")
}

func BenchmarkV2SegmentID(b *testing.B) { benchServe(b, "/v2/segment/leaf-segment-test") }

func BenchmarkV2SegmentBatch100(b *testing.B) {
	benchServe(b, "/v2/segment/leaf-segment-test/batch?count=100")
}

func BenchmarkSnowflakeGetBatch100(b *testing.B) {
	benchServe(b, "/api/snowflake/get/leaf-snowflake-test?count=100")
}

func BenchmarkV2SnowflakeID(b *testing.B) { benchServe(b, "/v2/snowflake") }

// BenchmarkSegmentGetLoopback is one ID over real HTTP/1.1 on loopback with
// keep-alive: the whole cost a client sees, mostly net/http's.
func BenchmarkSegmentGetLoopback(b *testing.B) {
	srv := httptest.NewServer(newBenchServer())
	defer srv.Close()
	client := srv.Client()
	target := srv.URL + "/api/segment/get/leaf-segment-test"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// TestHotPathAllocations guards the promise the benchmarks show: the ID
// routes allocate nothing of their own, observed or not.
func TestHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	t.Run("unobserved", func(t *testing.T) { testHotPathAllocations(t, newBenchServer()) })
	t.Run("observed", func(t *testing.T) { testHotPathAllocations(t, newObservedBenchServer(&countingObserver{})) })
}

func testHotPathAllocations(t *testing.T, s *Server) {
	for _, target := range []string{
		"/api/segment/get/leaf-segment-test",
		"/api/segment/get/leaf-segment-test?_=1700000000",
		"/api/segment/get/leaf-segment-test?a=1&b=%20&c",
		"/api/snowflake/get/leaf-snowflake-test",
		"/api/snowflake/get/leaf-snowflake-test?_=1700000000",
	} {
		r := newBenchRequest(target)
		w := &discardWriter{h: http.Header{}}
		s.ServeHTTP(w, r) // warm the pools
		if allocs := testing.AllocsPerRun(1000, func() {
			w.reset()
			s.ServeHTTP(w, r)
		}); allocs != 0 {
			t.Errorf("GET %s: %v allocations per request, want 0", target, allocs)
		}
		if w.status != 200 {
			t.Errorf("GET %s: status %d", target, w.status)
		}
	}
}
