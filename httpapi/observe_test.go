package httpapi

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
)

// countingObserver counts requests by route and status.
type countingObserver struct {
	mu sync.Mutex
	n  map[observed]int
}

type observed struct {
	route  string
	status int
}

func (o *countingObserver) ObserveRequest(route string, status int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[observed]int{}
	}
	if d < 0 {
		status = -1 // make a negative duration show up as a wrong count
	}
	o.n[observed{route, status}]++
}

func (o *countingObserver) count(route string, status int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[observed{route, status}]
}

// TestObserver: every request reaches the observer once, under its route's
// pattern (never the raw path) and with the status actually answered.
func TestObserver(t *testing.T) {
	obs := &countingObserver{}
	base, _ := testServerConfig(t, Config{Segment: newFakeGen("test"), Observer: obs,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("# metrics\n")) })})
	requests := []struct {
		method, target string
		status         int
	}{
		{"GET", "/api/segment/get/test", 200},
		{"GET", "/api/segment/get/test?count=3", 200},
		{"GET", "/api/segment/get/no-such-tag", 404},
		{"GET", "/api/segment/get/bad%20tag", 400},
		{"DELETE", "/api/segment/get/test", 405},
		{"GET", "/api/snowflake/get/x", 404}, // snowflake is off
		{"GET", "/v2/segment/test", 200},
		{"POST", "/v2/segment/test/batch?count=2", 200},
		{"GET", "/v2/segment/test/batch?count=0", 400},
		{"PUT", "/v2/segment/test", 405},
		{"GET", "/v2/status", 200},
		{"GET", "/healthz", 200},
		{"HEAD", "/readyz", 200},
		{"GET", "/metrics", 200},
		{"GET", "/nope/1", 404},
		{"GET", "/nope/2", 404},
		{"GET", "/v2/nope", 404},
	}
	for _, rq := range requests {
		if r := do(t, rq.method, base, rq.target, ""); r.status != rq.status {
			t.Fatalf("%s %s = %d, want %d", rq.method, rq.target, r.status, rq.status)
		}
	}
	// The server answers before it observes: wait for the last request.
	testutil.WaitFor(t, "the last request to be observed", func() bool {
		return obs.count("/v2/", 404) > 0
	})
	for _, want := range []struct {
		route  string
		status int
		n      int
	}{
		{"/api/segment/get/{key}", 200, 2},
		{"/api/segment/get/{key}", 404, 1},
		{"/api/segment/get/{key}", 400, 1},
		{"/api/segment/get/{key}", 405, 1},
		{"/api/snowflake/get/{key}", 404, 1},
		{"/v2/segment/{tag}", 200, 1},
		{"/v2/segment/{tag}", 405, 1},
		{"/v2/segment/{tag}/batch", 200, 1},
		{"/v2/segment/{tag}/batch", 400, 1},
		{"/v2/status", 200, 1},
		{"/healthz", 200, 1},
		{"/readyz", 200, 1},
		{"/metrics", 200, 1},
		{"/", 404, 2},
		{"/v2/", 404, 1},
	} {
		if got := obs.count(want.route, want.status); got != want.n {
			t.Errorf("observed %s %d %d times, want %d", want.route, want.status, got, want.n)
		}
	}
	total := 0
	obs.mu.Lock()
	for _, n := range obs.n {
		total += n
	}
	obs.mu.Unlock()
	if total != len(requests) {
		t.Errorf("observed %d requests, sent %d: %v", total, len(requests), obs.n)
	}
}
