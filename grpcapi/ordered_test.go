package grpcapi_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/ordered"
	"github.com/leafgo/leaf/ordered/forward"
	"github.com/leafgo/leaf/segment"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestOrderedTagForwarded: gRPC on a server that does not own an ordered
// tag forwards its calls to the owner over HTTP, as leaf serve wires it;
// Range refuses the tag.
func TestOrderedTagForwarded(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	store := testutil.Store(t, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 25})
	if err := store.SetOrdered(ctx, "seq", true); err != nil {
		t.Fatal(err)
	}
	// A: the owner, over HTTP.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	urlA := "http://" + ln.Addr().String()
	genA, tagsA := newOrdered(t, store, urlA+"#a")
	srv := httpapi.NewFastServer(httpapi.New(httpapi.Config{Segment: genA, Ordered: tagsA, Logger: testutil.Logger()}), httpapi.Limits{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { testutil.ShutdownFast(srv) })
	first, err := genA.NextID(ctx, "seq") // A takes the lease
	if err != nil {
		t.Fatal(err)
	}

	// B: gRPC, forwarding.
	genB, tagsB := newOrdered(t, store, "http://127.0.0.1:1#b")
	fwd, err := forward.New(forward.Config{Local: genB, Watcher: tagsB, Self: "http://127.0.0.1:1#b", Logger: testutil.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	b := client(t, grpcapi.Config{Segment: genB, Forward: fwd})
	last := first
	for i := range 40 {
		var ids []int64
		if i%2 == 0 {
			r, err := b.NextID(ctx, &leafv1.NextIDRequest{Tag: "seq"})
			if err != nil {
				t.Fatalf("NextID: %v", err)
			}
			ids = []int64{r.GetId()}
		} else {
			r, err := b.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "seq", Count: int32(1 + i%4)})
			if err != nil {
				t.Fatalf("NextIDs: %v", err)
			}
			ids = r.GetIds()
		}
		if ids[0] <= last {
			t.Fatalf("call %d: %v after %d, want increasing", i, ids, last)
		}
		last = ids[len(ids)-1]
	}
	if st := fwd.Stats(); st.Forwarded != 40 {
		t.Errorf("forwarder stats %+v, want the 40 calls forwarded", st)
	}
	_, err = b.Range(ctx, &leafv1.RangeRequest{Tag: "seq", Count: 10})
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition {
		t.Errorf("Range of an ordered tag: %v, want FailedPrecondition", err)
	}
}

// newOrdered starts a generator with ordered tags on store, owning them
// as owner under a 2s lease, closed at cleanup.
func newOrdered(t testing.TB, store leaf.SegmentStore, owner string) (*segment.Generator, *ordered.Tags) {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.Store, cfg.Logger = store, testutil.Logger()
	g, tags, err := ordered.NewGenerator(t.Context(), cfg, ordered.Config{Owner: owner, OwnerLease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g, tags
}
