package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
)

var grpcListeningRE = regexp.MustCompile(`msg="grpc listening" addr=(\S+)`)

// grpcConn connects with creds to the gRPC address serve logged; the
// connection is closed at cleanup.
func grpcConn(t *testing.T, s *inProcessServer, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	m := grpcListeningRE.FindStringSubmatch(s.Log.String())
	if m == nil {
		t.Fatalf("no gRPC address logged:\n%s", s.Log.String())
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestServeGRPC: --grpc-listen serves the gRPC API next to HTTP, from the
// same generators, and a graceful stop ends both.
func TestServeGRPC(t *testing.T) {
	t.Parallel()
	s := serveInProcess(t, dataEnv(t), "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0")
	conn := grpcConn(t, s, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := leafv1.NewLeafClient(conn)

	// HTTP and gRPC draw on one generator: their IDs interleave, never repeat.
	httpID := testutil.FetchID(t, s.URL("/api/segment/get/"+config.SeedTag))
	r, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: config.SeedTag})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetId() != httpID+1 {
		t.Errorf("gRPC ID %d after HTTP ID %d, want %d", r.GetId(), httpID, httpID+1)
	}
	sf, err := c.SnowflakeNextID(ctx, &leafv1.SnowflakeNextIDRequest{})
	if err != nil || sf.GetId() <= 0 {
		t.Errorf("SnowflakeNextID = %v, %v", sf, err)
	}
	h, err := healthgrpc.NewHealthClient(conn).Check(ctx, &healthgrpc.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, %v", h, err)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
	if _, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: config.SeedTag}); err == nil {
		t.Error("gRPC still answers after serve stopped")
	}
}
