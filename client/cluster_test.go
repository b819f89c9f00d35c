package client_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/segment"
)

// The cluster test from the client issue: 3 servers (one segment generator
// each, with its own connection pool, on one database) × 4 buffered clients
// (each knowing all 3 servers) × 8 goroutines draw millions of IDs while one
// server is killed mid-run. The clients must fail over without a duplicate
// and without an error reaching a caller.

const clusterTag = "cluster"

func TestClusterFailoverMySQL(t *testing.T) {
	dsn := testutil.MySQL(t)
	open := func() leaf.SegmentStore {
		st, err := mysql.Open(context.Background(), dsn)
		if err != nil {
			t.Fatalf("mysql.Open: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	total := 5_000_000
	if testing.Short() {
		total = 300_000
	}
	clusterFailover(t, open, total)
}

// On the embedded store: each server opens the one file, as processes on
// one host would.
func TestClusterFailoverSQLite(t *testing.T) {
	path := filepath.Join(testutil.SQLiteDir(t), "leaf.db")
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	clusterFailover(t, func() leaf.SegmentStore { return testutil.OpenSQLite(t, path) }, total)
}

func clusterFailover(t *testing.T, open func() leaf.SegmentStore, total int) {
	const servers, clients, goroutines = 3, 4, 8
	per := total / (clients * goroutines)

	// A step that is no multiple of any lease size: leases are cut short at
	// the servers' segment ends.
	first := open()
	if err := first.(leaf.SegmentAdmin).CreateTag(context.Background(),
		leaf.Alloc{Tag: clusterTag, MaxID: 1, Step: 20_011}); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	gens := make([]*segment.Generator, servers)
	srvs := make([]*fastServer, servers)
	urls := make([]string, servers)
	for i := range servers {
		st := first
		if i > 0 {
			st = open()
		}
		gens[i] = startSegment(t, st, nil)
		srvs[i] = serveFast(t, httpapi.Config{Segment: gens[i], Logger: testutil.Logger()})
		urls[i] = srvs[i].URL
	}

	logs := &countingHandler{}
	bufs := make([]*client.Buffered, clients)
	for i := range bufs {
		c, err := client.New(urls, client.WithLogger(slog.New(logs)), client.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		opts := [][]client.BufferOption{
			{},
			{client.WithRangeSize(7919)},
			// Fixed leases of 2500: this client leases again after the kill
			// whatever the others hold, so a survivor is asked.
			{client.WithRangeSize(2500), client.WithMaxRangeSize(2500), client.WithPrefetch(0.5)},
			{client.WithRangeSize(300), client.WithAdaptiveRange(time.Second)},
		}[i]
		bufs[i] = newBuffered(t, c, clusterTag, opts...)
	}

	// The goroutine that passes a third of the total kills server 1; every
	// goroutine waits for the kill to be over before drawing its last third,
	// so the kill lands mid-run and the clients must carry on without it.
	victim := 1
	var (
		drawn    atomic.Int64
		killOnce sync.Once
		killed   = make(chan struct{})
		hitsAt   [servers]int64
	)
	kill := func() {
		killOnce.Do(func() {
			go func() {
				defer close(killed)
				srvs[victim].kill()
				if err := gens[victim].Close(context.Background()); err != nil {
					t.Errorf("closing the victim's generator: %v", err)
				}
				for i, s := range srvs {
					hitsAt[i] = s.hits.Load()
				}
				t.Logf("server %d killed after %d IDs", victim, drawn.Load())
			}()
		})
	}

	results := make([][]int64, clients*goroutines)
	errs := make(chan error, clients*goroutines)
	var wg sync.WaitGroup
	began := time.Now()
	for ci, b := range bufs {
		for g := range goroutines {
			wg.Go(func() {
				ctx := testutil.Context(t, time.Minute)
				ids := make([]int64, 0, per)
				for len(ids) < per {
					if len(ids) == 2*per/3 {
						<-killed
					}
					if len(ids)%100 == 0 && len(ids) > 0 {
						if drawn.Add(100) >= int64(total/3) {
							kill()
						}
					}
					var err error
					if ids, err = drawMixed(ctx, b, ids, per, 5000, 100); err != nil {
						errs <- err
						return
					}
				}
				results[ci*goroutines+g] = ids
			})
		}
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	for err := range errs {
		t.Fatalf("an error reached a caller: %v", err)
	}
	n := checkUnique(t, results)
	if n != per*clients*goroutines {
		t.Fatalf("%d IDs, want %d", n, per*clients*goroutines)
	}

	// Which survivors lease after the kill depends on how much the clients
	// hold by then (their leases grow with the rate); that one of them does
	// is certain: the client of fixed 2500-ID leases needs more.
	var afterKill int64
	for i, s := range srvs {
		if s.hits.Load() == 0 {
			t.Errorf("server %d served nothing", i)
		}
		if i != victim {
			afterKill += s.hits.Load() - hitsAt[i]
		}
	}
	if afterKill == 0 {
		t.Errorf("no server served after the kill")
	}
	failovers := 0
	for _, m := range logs.messages() {
		if strings.Contains(m, "server failed") {
			failovers++
		}
	}
	if failovers == 0 {
		t.Errorf("no client noticed the dead server; warnings: %q", logs.messages())
	}
	var leased uint64
	for _, b := range bufs {
		st := b.Stats()
		leased += st.LeasedIDs
		t.Logf("client stats: %+v", st)
	}
	t.Logf("%d unique IDs in %s (%.1fM IDs/s) from %d leased, %d failover warnings",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds()/1e6, leased, failovers)
}

// fastServer is a leaf server on the transport leaf serve uses
// (httpapi.NewFastServer), counting its requests.
type fastServer struct {
	URL  string
	hits atomic.Int64
	srv  *fasthttp.Server
}

func serveFast(t *testing.T, cfg httpapi.Config) *fastServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fastServer{URL: "http://" + ln.Addr().String()}
	s.srv = httpapi.NewFastServer(httpapi.New(cfg), httpapi.Limits{})
	h := s.srv.Handler
	s.srv.Handler = func(ctx *fasthttp.RequestCtx) {
		s.hits.Add(1)
		h(ctx)
	}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(s.kill)
	return s
}

// kill closes the listener and every connection: the clients see the
// server go away mid-stream.
func (s *fastServer) kill() { testutil.ShutdownFast(s.srv) }
