package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
)

// The zone tests run two zones of two real servers each, every server with
// its own segment generator on one shared store, as a cluster spread over
// two data centres is.

const zoneTag = "zone"

// zoneServer is a leaf server that can be stopped and started again on the
// same address, as a restarted process is, or made to answer 503 as a
// server that cannot issue IDs does (a real one does so only once its
// buffers are empty, too slow to arrange here).
type zoneServer struct {
	t       testing.TB
	URL     string
	addr    string
	h       http.Handler
	hits    atomic.Int64 // requests received, 503s included
	served  atomic.Int64 // requests passed to the leaf handler
	failing atomic.Bool  // answer 503 not_ready

	mu  sync.Mutex
	srv *http.Server
}

func startZoneServer(t testing.TB, st leaf.SegmentStore) *zoneServer {
	t.Helper()
	s := &zoneServer{t: t, h: httpapi.New(httpapi.Config{Segment: startSegment(t, st, nil), Logger: testutil.Logger()})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.URL = "http://" + s.addr
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *zoneServer) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if s.failing.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"no IDs can be issued right now","code":"not_ready"}`))
			return
		}
		s.served.Add(1)
		s.h.ServeHTTP(w, r)
	})}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// stop closes the listener and every connection: connections are refused
// until start.
func (s *zoneServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.srv.Close()
}

// start listens on the address again.
func (s *zoneServer) start() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("listening on %s again: %v", s.addr, err)
	}
	s.serve(ln)
}

// twoZones starts dc1 and dc2, two servers each, and returns a client of
// them in zone dc1 whose first call goes to dc1's first server. The
// endpoints are listed interleaved: their order does not make the zones.
func twoZones(t *testing.T, opts ...client.Option) (dc1, dc2 []*zoneServer, c *client.Client) {
	t.Helper()
	st := newStore(t, 1000, zoneTag)
	dc1 = []*zoneServer{startZoneServer(t, st), startZoneServer(t, st)}
	dc2 = []*zoneServer{startZoneServer(t, st), startZoneServer(t, st)}
	eps := []client.Endpoint{
		{URL: dc2[0].URL, Zone: "dc2"}, {URL: dc1[0].URL, Zone: "dc1"},
		{URL: dc2[1].URL, Zone: "dc2"}, {URL: dc1[1].URL, Zone: "dc1"},
	}
	opts = append([]client.Option{client.WithZone("dc1"), client.WithLogger(testutil.Logger()),
		client.WithTimeout(10 * time.Second)}, opts...)
	c, err := client.NewZoned(eps, opts...)
	if err != nil {
		t.Fatalf("NewZoned: %v", err)
	}
	client.StartAt(c, 0)
	return dc1, dc2, c
}

func hits(servers []*zoneServer) int64 {
	var n int64
	for _, s := range servers {
		n += s.hits.Load()
	}
	return n
}

func served(servers []*zoneServer) int64 {
	var n int64
	for _, s := range servers {
		n += s.served.Load()
	}
	return n
}

// coolingIn reports whether a server of zone is cooling down.
func coolingIn(c *client.Client, zone string) bool {
	for _, e := range c.Stats().Endpoints {
		if e.Zone == zone && e.CoolingDown {
			return true
		}
	}
	return false
}

// nextIDs makes n calls one after the other, failing the test on an error.
func nextIDs(t *testing.T, c *client.Client, n int) []int64 {
	t.Helper()
	ctx := testutil.Context(t, time.Minute)
	ids := make([]int64, n)
	for i := range ids {
		id, err := c.NextID(ctx, zoneTag)
		if err != nil {
			t.Fatalf("NextID #%d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// recordingHandler keeps the level and message of every record at Info and
// above.
type recordingHandler struct {
	mu   sync.Mutex
	recs []string
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.recs...)
}

// zoneTrips are the logged moves between zones, in order.
func (h *recordingHandler) zoneTrips() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if strings.Contains(r, "zone") {
			out = append(out, r)
		}
	}
	return out
}

// TestZoneFailover: traffic stays in the client's zone, round robin; moves
// to the other zone when both of its servers fail (one stopped, one
// answering 503), with no call failing; and comes back once they recover
// and their cool-downs end.
func TestZoneFailover(t *testing.T) {
	logs := &recordingHandler{}
	dc1, dc2, c := twoZones(t, client.WithCooldown(50*time.Millisecond), client.WithLogger(slog.New(logs)))
	var all [][]int64

	// In zone: dc1's servers share the calls, dc2 gets none.
	all = append(all, nextIDs(t, c, 100))
	for i, s := range dc1 {
		if n := s.hits.Load(); n != 50 {
			t.Errorf("dc1 server %d got %d requests, want 50", i, n)
		}
	}
	if n := hits(dc2); n != 0 {
		t.Errorf("dc2 got %d requests while dc1 was healthy", n)
	}
	st := c.Stats()
	if st.Zone != "dc1" || len(st.Endpoints) != 4 || st.Endpoints[0].Zone != "dc2" || st.Endpoints[1].URL != dc1[0].URL {
		t.Errorf("Stats = %+v", st)
	}
	if z := st.ByZone(); z["dc1"] != (client.ZoneStats{Requests: 100}) || z["dc2"] != (client.ZoneStats{}) {
		t.Errorf("ByZone = %+v, want 100 requests in dc1, none in dc2", z)
	}

	// Callers keep calling through the outage and the recovery.
	const callers = 4
	stop := make(chan struct{})
	got := make([][]int64, callers)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			ctx := testutil.Context(t, time.Minute)
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := c.NextID(ctx, zoneTag)
				if err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("a call failed: %v", err)
					}
					continue
				}
				got[g] = append(got[g], id)
			}
		})
	}

	// dc1 goes down: one server stops, the other answers 503.
	dc1[0].stop()
	dc1[1].failing.Store(true)
	before := hits(dc2)
	testutil.WaitFor(t, "calls to move to dc2", func() bool { return hits(dc2) >= before+200 })
	// Past their cool-downs the dc1 servers are tried again, fail again,
	// and the calls go on to dc2.
	failures := func(i int) uint64 { return c.Stats().Endpoints[1+2*i].Failures }
	f0, f1 := failures(0), failures(1)
	testutil.WaitFor(t, "dc1's servers to be tried again", func() bool { return failures(0) > f0 && failures(1) > f1 })

	// dc1 comes back on the same addresses: once their cool-downs end, its
	// servers are tried first again and take the calls back.
	dc1[0].start()
	dc1[1].failing.Store(false)
	s0, s1 := dc1[0].served.Load(), dc1[1].served.Load()
	testutil.WaitFor(t, "both dc1 servers to serve again", func() bool {
		return dc1[0].served.Load() > s0+100 && dc1[1].served.Load() > s1+100
	})
	close(stop)
	wg.Wait()
	all = append(all, got...)
	if n := failed.Load(); n > 0 {
		t.Errorf("%d calls failed during the switches", n)
	}

	// Settled: every call stays in dc1 again.
	testutil.WaitFor(t, "dc1's cool-downs to end", func() bool { return !coolingIn(c, "dc1") })
	before, in := hits(dc2), served(dc1)
	all = append(all, nextIDs(t, c, 100))
	if n := hits(dc2) - before; n != 0 {
		t.Errorf("dc2 got %d requests after dc1 recovered", n)
	}
	if n := served(dc1) - in; n != 100 {
		t.Errorf("dc1 served %d of 100 calls after it recovered", n)
	}
	st = c.Stats()
	for i, e := range st.Endpoints {
		if e.CoolingDown {
			t.Errorf("endpoint %d still cooling down: %+v", i, e)
		}
	}
	// dc2 never failed; dc1's failures are its outage.
	z := st.ByZone()
	if z["dc2"].Failures != 0 || z["dc2"].Requests != uint64(hits(dc2)) || z["dc1"].Failures == 0 {
		t.Errorf("ByZone = %+v; dc2 had %d requests", z, hits(dc2))
	}
	n := checkUnique(t, all)
	t.Logf("%d unique IDs; per zone: %+v", n, z)

	// One warning when the calls left dc1, one note when they came back
	// (calls in flight at the switch may add a round trip, never an
	// unbalanced one).
	trips := logs.zoneTrips()
	if len(trips) < 2 || len(trips)%2 != 0 || !strings.HasPrefix(trips[0], "WARN") ||
		!strings.Contains(trips[0], "calling other zones") || !strings.Contains(trips[len(trips)-1], "back to it") {
		t.Errorf("zone log lines = %q, want a warning leaving dc1 and a note coming back", trips)
	}
}

// TestZoneOneServerDown: with one server of its zone down, the other takes
// every call; nothing crosses zones.
func TestZoneOneServerDown(t *testing.T) {
	for _, how := range []string{"stopped", "503"} {
		t.Run(how, func(t *testing.T) {
			logs := &recordingHandler{}
			dc1, dc2, c := twoZones(t, client.WithCooldown(time.Minute), client.WithLogger(slog.New(logs)))
			if how == "stopped" {
				dc1[0].stop()
			} else {
				dc1[0].failing.Store(true)
			}
			checkUnique(t, [][]int64{nextIDs(t, c, 100)})
			if n := dc1[1].served.Load(); n != 100 {
				t.Errorf("the healthy dc1 server served %d of 100 calls", n)
			}
			if n := hits(dc2); n != 0 {
				t.Errorf("dc2 got %d requests", n)
			}
			// The first call tried the failed server; its cool-down keeps
			// the others off it.
			down := c.Stats().Endpoints[1]
			if down.URL != dc1[0].URL || down.Requests != 1 || down.Failures != 1 || !down.CoolingDown {
				t.Errorf("failed server's stats = %+v, want 1 failed request and cooling down", down)
			}
			if recs := logs.all(); len(recs) != 1 || !strings.Contains(recs[0], "WARN leaf client: server failed") {
				t.Errorf("log lines = %q, want only the failed server's warning", recs)
			}
		})
	}
}

// TestZoneBuffered: a Buffered leases through its client, so it gets the
// zone preference: leases from the own zone, from the other while the own
// is down, and from the own again once it is back.
func TestZoneBuffered(t *testing.T) {
	dc1, dc2, c := twoZones(t, client.WithCooldown(50*time.Millisecond))
	fixed := []client.BufferOption{client.WithRangeSize(100), client.WithMaxRangeSize(100)}
	ctx := testutil.Context(t, time.Minute)
	var all [][]int64

	b := newBuffered(t, c, zoneTag, fixed...)
	all = append(all, draw(t, b, 3000))
	if n := hits(dc2); n != 0 {
		t.Errorf("dc2 got %d range requests while dc1 was healthy", n)
	}
	if s0, s1 := dc1[0].served.Load(), dc1[1].served.Load(); s0 == 0 || s1 == 0 {
		t.Errorf("dc1's servers served %d and %d range requests, want both some", s0, s1)
	}

	dc1[0].stop()
	dc1[1].failing.Store(true)
	before := hits(dc2)
	all = append(all, draw(t, b, 3000))
	if n := hits(dc2) - before; n < 20 {
		t.Errorf("dc2 got %d range requests for 3,000 IDs in leases of 100 while dc1 was down", n)
	}
	if err := b.Close(); err != nil { // waits for its lease in flight
		t.Fatal(err)
	}
	if st := b.Stats(); st.LoadErrors != 0 {
		t.Errorf("a lease failed: %+v", st)
	}

	dc1[0].start()
	dc1[1].failing.Store(false)
	testutil.WaitFor(t, "dc1's cool-downs to end", func() bool { return !coolingIn(c, "dc1") })
	was := c.Stats().ByZone()
	b = newBuffered(t, c, zoneTag, fixed...)
	ids := make([]int64, 0, 3000)
	for range 3000 {
		id, err := b.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	all = append(all, ids)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	now := c.Stats().ByZone()
	if now["dc2"].Requests != was["dc2"].Requests || now["dc1"].Requests < was["dc1"].Requests+20 {
		t.Errorf("after dc1 recovered: requests per zone went from %+v to %+v, want all in dc1", was, now)
	}
	checkUnique(t, all)
}

// TestZoneNone: without WithZone, zones only label the stats; calls go
// round robin to every server, as with New.
func TestZoneNone(t *testing.T) {
	st := newStore(t, 1000, zoneTag)
	servers := []*zoneServer{startZoneServer(t, st), startZoneServer(t, st), startZoneServer(t, st), startZoneServer(t, st)}
	c, err := client.NewZoned([]client.Endpoint{
		{URL: servers[0].URL, Zone: "dc1"}, {URL: servers[1].URL, Zone: "dc2"},
		{URL: servers[2].URL, Zone: "dc1"}, {URL: servers[3].URL},
	}, client.WithLogger(testutil.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	client.StartAt(c, 0)
	nextIDs(t, c, 40)
	for i, s := range servers {
		if n := s.hits.Load(); n != 10 {
			t.Errorf("server %d got %d requests, want 10", i, n)
		}
	}
	if z := c.Stats().ByZone(); z["dc1"].Requests != 20 || z["dc2"].Requests != 10 || z[""].Requests != 10 {
		t.Errorf("ByZone = %+v", z)
	}
}

// TestZoneUnzonedIsOther: a server without a zone is in another zone than
// the client's: tried only when the own zone fails.
func TestZoneUnzonedIsOther(t *testing.T) {
	st := newStore(t, 1000, zoneTag)
	plain, own := startZoneServer(t, st), startZoneServer(t, st)
	c, err := client.NewZoned([]client.Endpoint{{URL: plain.URL}, {URL: own.URL, Zone: "dc1"}},
		client.WithZone("dc1"), client.WithLogger(testutil.Logger()), client.WithCooldown(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	nextIDs(t, c, 20)
	if plain.hits.Load() != 0 || own.hits.Load() != 20 {
		t.Errorf("requests: %d to the server without a zone, %d to dc1's; want 0 and 20", plain.hits.Load(), own.hits.Load())
	}
	own.stop()
	nextIDs(t, c, 20)
	if plain.hits.Load() != 20 {
		t.Errorf("the server without a zone got %d requests while dc1 was down, want 20", plain.hits.Load())
	}
}

func TestNewZonedValidates(t *testing.T) {
	a, b := "http://127.0.0.1:8080", "http://127.0.0.1:8081"
	good := []struct {
		eps  []client.Endpoint
		zone string
	}{
		{[]client.Endpoint{{URL: a}}, ""},
		{[]client.Endpoint{{URL: a, Zone: "dc1"}, {URL: b}}, "dc1"},
		{[]client.Endpoint{{URL: a, Zone: "us-east-1a"}, {URL: b, Zone: "cn_bj.yz"}}, "cn_bj.yz"},
		{[]client.Endpoint{{URL: a, Zone: "dc1"}, {URL: b, Zone: "dc2"}}, ""},
		{[]client.Endpoint{{URL: a, Zone: strings.Repeat("z", 64)}}, strings.Repeat("z", 64)},
	}
	for _, tc := range good {
		if _, err := client.NewZoned(tc.eps, client.WithZone(tc.zone)); err != nil {
			t.Errorf("NewZoned(%+v, WithZone(%q)): %v", tc.eps, tc.zone, err)
		}
	}
	bad := []struct {
		eps  []client.Endpoint
		zone string
		want string
	}{
		{nil, "dc1", "no endpoints"},
		{[]client.Endpoint{{URL: a, Zone: "dc 1"}}, "", `endpoint "http://127.0.0.1:8080": zone "dc 1" is not 1 to 64 letters`},
		{[]client.Endpoint{{URL: a, Zone: "dc1/a"}}, "", `zone "dc1/a" is not`},
		{[]client.Endpoint{{URL: a, Zone: strings.Repeat("z", 65)}}, "", "is not 1 to 64"},
		{[]client.Endpoint{{URL: a, Zone: "dc1"}, {URL: a + "/", Zone: "dc2"}}, "", "listed twice"},
		{[]client.Endpoint{{URL: "10.0.0.1:8080", Zone: "dc1"}}, "", "not a URL"},
		{[]client.Endpoint{{URL: a, Zone: "dc1"}}, "dc 1", `WithZone("dc 1"): the zone is not 1 to 64`},
		{[]client.Endpoint{{URL: a, Zone: "dc1"}, {URL: b, Zone: "dc2"}}, "dc3",
			`WithZone("dc3"): no endpoint is in that zone (endpoints' zones: "dc1", "dc2")`},
		{[]client.Endpoint{{URL: a, Zone: "DC1"}}, "dc1", `no endpoint is in that zone (endpoints' zones: "DC1")`},
		{[]client.Endpoint{{URL: a}, {URL: b}}, "dc1", "no endpoint has a zone; give them with NewZoned"},
	}
	for _, tc := range bad {
		_, err := client.NewZoned(tc.eps, client.WithZone(tc.zone))
		if !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewZoned(%+v, WithZone(%q)) = %v, want ErrInvalidArgument mentioning %q", tc.eps, tc.zone, err, tc.want)
		}
	}
	for zone, ok := range map[string]bool{"": true, "dc1": true, "a.b_c-D9": true, "dc 1": false, "dc=1": false, "é": false} {
		if err := client.ValidateZone(zone); (err == nil) != ok || (err != nil && !errors.Is(err, leaf.ErrInvalidArgument)) {
			t.Errorf("ValidateZone(%q) = %v, want ok=%v", zone, err, ok)
		}
	}
	// New knows no zones: WithZone needs NewZoned.
	if _, err := client.New([]string{a}, client.WithZone("dc1")); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("New with WithZone = %v, want ErrInvalidArgument", err)
	}
}
