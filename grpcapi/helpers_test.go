package grpcapi_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/snowflake"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The real generators are what the transport is written for.
var (
	_ grpcapi.SegmentGenerator   = (*segment.Generator)(nil)
	_ grpcapi.SnowflakeGenerator = (*snowflake.Generator)(nil)
)

// serve runs a server for cfg on a loopback port and returns a client
// connection to it. Both are closed at cleanup, the connection first.
func serve(t testing.TB, cfg grpcapi.Config) *grpc.ClientConn {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpcapi.NewServer(cfg)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// client is serve's connection as a Leaf client.
func client(t testing.TB, cfg grpcapi.Config) leafv1.LeafClient {
	t.Helper()
	return leafv1.NewLeafClient(serve(t, cfg))
}

// ctxFor bounds a test's calls, so that a hang fails the test instead of
// the whole run. It has no deadline: a segment request with a deadline waits
// that long for a range when both buffers are empty, one without waits the
// generator's WaitTimeout, which the outage tests set short.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(30*time.Second, cancel)
	t.Cleanup(func() { stop.Stop(); cancel() })
	return ctx
}

// newSegment starts a segment generator on st, closed at cleanup.
func newSegment(t testing.TB, st leaf.SegmentStore, tweak func(*segment.Config)) *segment.Generator {
	t.Helper()
	s := segment.DefaultConfig()
	s.Store, s.Logger = st, testutil.Logger()
	if tweak != nil {
		tweak(&s)
	}
	g, err := segment.New(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// newSnowflake starts a snowflake generator whose worker ID comes from an
// in-memory leasing registry, closed at cleanup.
func newSnowflake(t *testing.T) *snowflake.Generator {
	t.Helper()
	pool := inmem.NewWorkerPool(time.Minute)
	return leaftest.StartSnowflake(t, pool.Open, leaftest.FastSnowflake(nil, leaftest.TestEndpoint(0)))
}
