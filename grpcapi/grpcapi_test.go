package grpcapi_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/faultstore"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestSegment: the three segment methods on a fresh tag (first ID 1, step
// 1000), on the embedded SQLite store, on a file on the disk (the store's
// default, commits synced) and on the tests' usual /dev/shm file. One
// client, one generator: the IDs are exactly predictable.
func TestSegment(t *testing.T) {
	orders := leaf.Alloc{Tag: "orders", MaxID: 1, Step: 1000}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) leaf.SegmentStore
	}{
		{"sqlite-tmp", func(t *testing.T) leaf.SegmentStore {
			st := testutil.OpenSQLite(t, filepath.Join(t.TempDir(), "leaf.db"))
			if err := st.CreateTag(context.Background(), orders); err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"sqlite-shm", func(t *testing.T) leaf.SegmentStore { return testutil.Store(t, orders) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newSegment(t, tc.store(t), nil)
			c := client(t, grpcapi.Config{Segment: g})
			ctx := ctxFor(t)

			one, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "orders"})
			if err != nil || one.GetId() != 1 {
				t.Fatalf("NextID = %v, %v; want 1", one, err)
			}
			batch, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "orders", Count: 5})
			if err != nil || !slices.Equal(batch.GetIds(), []int64{2, 3, 4, 5, 6}) {
				t.Fatalf("NextIDs(5) = %v, %v; want [2 3 4 5 6]", batch, err)
			}
			r, err := c.Range(ctx, &leafv1.RangeRequest{Tag: "orders", Count: 10})
			if err != nil || r.GetStart() != 7 || r.GetEnd() != 17 {
				t.Fatalf("Range(10) = %v, %v; want [7, 17)", r, err)
			}
			// More than the current range holds: the range stops at its end.
			r, err = c.Range(ctx, &leafv1.RangeRequest{Tag: "orders", Count: leaf.MaxBatch})
			if err != nil || r.GetStart() != 17 || r.GetEnd() != 1001 {
				t.Fatalf("Range(10000) = %v, %v; want [17, 1001)", r, err)
			}
			// The next range, prefetched meanwhile.
			one, err = c.NextID(ctx, &leafv1.NextIDRequest{Tag: "orders"})
			if err != nil || one.GetId() != 1001 {
				t.Fatalf("NextID after the first range = %v, %v; want 1001", one, err)
			}
			// A batch spanning two ranges is still strictly increasing and
			// complete.
			batch, err = c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "orders", Count: leaf.MaxBatch})
			if err != nil || len(batch.GetIds()) != leaf.MaxBatch {
				t.Fatalf("NextIDs(10000) = %d IDs, %v", len(batch.GetIds()), err)
			}
			prev := int64(1001)
			for i, id := range batch.GetIds() {
				if id <= prev {
					t.Fatalf("NextIDs(10000)[%d] = %d after %d", i, id, prev)
				}
				prev = id
			}
		})
	}
}

// TestSnowflake: issue, batch and decode on a real generator.
func TestSnowflake(t *testing.T) {
	g := newSnowflake(t)
	c := client(t, grpcapi.Config{Snowflake: g})
	ctx := ctxFor(t)
	worker := g.Status().WorkerID

	before := time.Now().UnixMilli()
	var last int64
	for _, key := range []string{"", "any", "orders.v1"} {
		r, err := c.SnowflakeNextID(ctx, &leafv1.SnowflakeNextIDRequest{Key: key})
		if err != nil || r.GetId() <= last {
			t.Fatalf("SnowflakeNextID(%q) = %v, %v; want an ID above %d", key, r, err, last)
		}
		last = r.GetId()
	}
	batch, err := c.SnowflakeNextIDs(ctx, &leafv1.SnowflakeNextIDsRequest{Key: "any", Count: leaf.MaxBatch})
	if err != nil || len(batch.GetIds()) != leaf.MaxBatch {
		t.Fatalf("SnowflakeNextIDs(10000) = %d IDs, %v", len(batch.GetIds()), err)
	}
	for i, id := range batch.GetIds() {
		if id <= last {
			t.Fatalf("SnowflakeNextIDs[%d] = %d after %d", i, id, last)
		}
		last = id
	}
	after := time.Now().UnixMilli()

	d, err := c.Decode(ctx, &leafv1.DecodeRequest{Id: last})
	if err != nil {
		t.Fatalf("Decode(%d): %v", last, err)
	}
	want, err := g.Decode(last)
	if err != nil {
		t.Fatal(err)
	}
	if d.GetId() != last || d.GetTimestampMs() != want.Timestamp || d.GetWorkerId() != want.WorkerID || d.GetSequence() != want.Sequence {
		t.Fatalf("Decode(%d) = %v, want %+v", last, d, want)
	}
	if d.GetWorkerId() != worker || d.GetTimestampMs() < before || d.GetTimestampMs() > after {
		t.Fatalf("Decode(%d) = %v, want worker %d and a time in [%d, %d]", last, d, worker, before, after)
	}
}

// fakeGen answers every call with id and err, whatever they are: a stand-in
// for any generator error, and for a buggy generator.
type fakeGen struct {
	id  int64
	err error
}

func (f fakeGen) NextID(context.Context, string) (int64, error) { return f.id, f.err }

func (f fakeGen) NextIDs(_ context.Context, _ string, n int, dst []int64) ([]int64, error) {
	for range n {
		dst = append(dst, f.id)
	}
	return dst, f.err
}

func (f fakeGen) NextRange(context.Context, string, int) (int64, int64, error) {
	return f.id, f.id + 1, f.err
}

func (f fakeGen) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	id, err := f.NextID(ctx, tag)
	return id, "", err
}

func (f fakeGen) NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error) {
	dst, err := f.NextIDs(ctx, tag, n, dst)
	return dst, "", err
}

func (f fakeGen) Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error) {
	if use != leaf.ByClient {
		return leaf.IDRange{}, fmt.Errorf("fakeGen: a range by use %d", use)
	}
	s, e, err := f.NextRange(ctx, tag, n)
	return leaf.IDRange{Start: s, End: e}, err
}

func (f fakeGen) TagShape(context.Context, string) (leaf.TagShape, error) {
	return leaf.TagShape{}, f.err
}

func (f fakeGen) Decode(id int64) (leaf.SnowflakeParts, error) {
	return leaf.SnowflakeParts{ID: id}, f.err
}

// call is one RPC made by a status-code test; it returns the RPC's error and
// whether a response came with it.
type call struct {
	name string
	do   func(ctx context.Context, c leafv1.LeafClient) (gotResponse bool, err error)
}

func nextID(tag string) call {
	return call{"NextID(" + tag + ")", func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		r, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: tag})
		return r != nil, err
	}}
}

func nextIDs(tag string, n int32) call {
	return call{fmt.Sprintf("NextIDs(%s,%d)", tag, n), func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		r, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: tag, Count: n})
		return r != nil, err
	}}
}

func rangeOf(tag string, n int32) call {
	return call{fmt.Sprintf("Range(%s,%d)", tag, n), func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		r, err := c.Range(ctx, &leafv1.RangeRequest{Tag: tag, Count: n})
		return r != nil, err
	}}
}

func snowflakeID(key string) call {
	return call{"SnowflakeNextID(" + key + ")", func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		r, err := c.SnowflakeNextID(ctx, &leafv1.SnowflakeNextIDRequest{Key: key})
		return r != nil, err
	}}
}

func snowflakeIDs(key string, n int32) call {
	return call{fmt.Sprintf("SnowflakeNextIDs(%s,%d)", key, n), func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		r, err := c.SnowflakeNextIDs(ctx, &leafv1.SnowflakeNextIDsRequest{Key: key, Count: n})
		return r != nil, err
	}}
}

func decode(id int64) call {
	return call{fmt.Sprintf("Decode(%d)", id), func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		r, err := c.Decode(ctx, &leafv1.DecodeRequest{Id: id})
		return r != nil, err
	}}
}

// drainThen calls next until the store-down generator has nothing left, and
// returns the first failure.
func drainThen(next call) call {
	return call{"drained " + next.name, func(ctx context.Context, c leafv1.LeafClient) (bool, error) {
		for range 10_000 {
			if got, err := next.do(ctx, c); err != nil {
				return got, err
			}
		}
		return true, errors.New("still issuing after 10000 calls with the store down")
	}}
}

// retryDelay returns the RetryInfo detail's delay of a status, or 0.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// checkStatus checks that a call failed with code and a message containing
// msg, without a response, with a RetryInfo of 1s exactly when the code is
// Unavailable.
func checkStatus(t *testing.T, got bool, err error, code codes.Code, msg string) {
	t.Helper()
	checkStatusDelay(t, got, err, code, msg, 0)
}

// checkStatusDelay is checkStatus with the RetryInfo delay of an
// Unavailable; 0 means the usual second.
func checkStatusDelay(t *testing.T, got bool, err error, code codes.Code, msg string, delay time.Duration) {
	t.Helper()
	if got {
		t.Errorf("a response came with the error %v", err)
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Fatalf("error %v, want code %s with a message containing %q", err, code, msg)
	}
	if code == codes.Internal && st.Message() != "internal server error" {
		t.Errorf("internal error answered with the message %q", st.Message())
	}
	wantDelay := time.Duration(0)
	if code == codes.Unavailable {
		wantDelay = cmp.Or(delay, time.Second)
	}
	if d := retryDelay(st); d != wantDelay {
		t.Errorf("RetryInfo delay %s, want %s (details %v)", d, wantDelay, st.Details())
	}
}

// TestStatusCodes: bad input, unknown tags, disabled modes and an
// unreachable store, each answered with its code over a real connection.
func TestStatusCodes(t *testing.T) {
	full := client(t, grpcapi.Config{
		Segment:   newSegment(t, testutil.Store(t, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 1000}), nil),
		Snowflake: newSnowflake(t),
	})
	none := client(t, grpcapi.Config{})

	// A store that goes down once the generator holds a range: its buffers
	// drain, then requests wait WaitTimeout for a range that never comes.
	downStore, faults := faultstore.Wrap(testutil.Store(t, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 10}))
	downGen := newSegment(t, downStore, func(s *segment.Config) {
		s.WaitTimeout, s.RetryBackoff, s.MaxRetryBackoff = 10*time.Millisecond, time.Millisecond, 5*time.Millisecond
	})
	// The first load may take longer than that short WaitTimeout on a busy
	// machine (the race stage of CI met it): a first call answered "not
	// ready" took nothing, so ask again until the range has landed.
	var firstErr error
	testutil.WaitFor(t, "the first range of the store that goes down", func() bool {
		_, firstErr = downGen.NextID(context.Background(), "orders")
		if firstErr != nil && !errors.Is(firstErr, leaf.ErrNotReady) {
			t.Fatal(firstErr)
		}
		return firstErr == nil
	})
	faults.SetDown(errors.New("connection refused"))
	down := client(t, grpcapi.Config{Segment: downGen})

	long := strings.Repeat("t", leaf.MaxTagLen+1)
	for _, tc := range []struct {
		client leafv1.LeafClient
		call   call
		code   codes.Code
		msg    string
	}{
		{full, nextID(""), codes.InvalidArgument, "invalid tag: empty"},
		{full, nextID("a/b"), codes.InvalidArgument, "invalid tag"},
		{full, nextID("tag with spaces"), codes.InvalidArgument, "invalid tag"},
		{full, nextID(long), codes.InvalidArgument, "invalid tag: 129 bytes"},
		{full, nextIDs("", 1), codes.InvalidArgument, "invalid tag"},
		{full, nextIDs("orders", 0), codes.InvalidArgument, "invalid count: 0"},
		{full, nextIDs("orders", -1), codes.InvalidArgument, "invalid count: -1"},
		{full, nextIDs("orders", leaf.MaxBatch+1), codes.InvalidArgument, "invalid count: 10001"},
		{full, nextIDs("orders", math.MaxInt32), codes.InvalidArgument, "invalid count"},
		{full, rangeOf("a/b", 1), codes.InvalidArgument, "invalid tag"},
		{full, rangeOf("orders", 0), codes.InvalidArgument, "invalid count: 0"},
		{full, rangeOf("orders", leaf.MaxRange+1), codes.InvalidArgument, "invalid count: 1000001"},
		{full, snowflakeID("bad key"), codes.InvalidArgument, "invalid tag"},
		{full, snowflakeIDs("", 0), codes.InvalidArgument, "invalid count: 0"},
		{full, snowflakeIDs("any", leaf.MaxBatch+1), codes.InvalidArgument, "invalid count: 10001"},
		{full, snowflakeIDs("a/b", 1), codes.InvalidArgument, "invalid tag"},
		{full, decode(-1), codes.InvalidArgument, "not positive"},
		{full, decode(0), codes.InvalidArgument, "not positive"},
		{full, decode(math.MinInt64), codes.InvalidArgument, "not positive"},

		{full, nextID("nope"), codes.NotFound, "tag not found"},
		{full, nextIDs("nope", 10), codes.NotFound, "tag not found"},
		{full, rangeOf("nope", 10), codes.NotFound, "tag not found"},

		// A disabled mode answers before the input is looked at.
		{none, nextID("orders"), codes.NotFound, "segment mode is disabled"},
		{none, nextID("a/b"), codes.NotFound, "segment mode is disabled"},
		{none, nextIDs("orders", 10), codes.NotFound, "segment mode is disabled"},
		{none, rangeOf("orders", 0), codes.NotFound, "segment mode is disabled"},
		{none, snowflakeID(""), codes.NotFound, "snowflake mode is disabled"},
		{none, snowflakeIDs("", 10), codes.NotFound, "snowflake mode is disabled"},
		{none, decode(12345), codes.NotFound, "snowflake mode is disabled"},
		{down, snowflakeID("any"), codes.NotFound, "snowflake mode is disabled"},

		{down, drainThen(nextID("orders")), codes.Unavailable, "not ready"},
		// The cause (a refused connection) is the log's, not the client's.
		{down, nextIDs("orders", 10), codes.Unavailable, "not ready"},
		{down, rangeOf("orders", 10), codes.Unavailable, "not ready"},
	} {
		t.Run(tc.call.name, func(t *testing.T) {
			got, err := tc.call.do(ctxFor(t), tc.client)
			checkStatus(t, got, err, tc.code, tc.msg)
		})
	}
}

// TestErrorTable: every error a generator may return, through the one table
// to its code, over a real connection, on every method that can meet it.
// The fake answers an ID along with the error: it must not reach the client.
func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  codes.Code
		msg   string
		delay time.Duration // RetryInfo's, when not the usual
	}{
		{fmt.Errorf("tag %q: %w", "x", leaf.ErrNotReady), codes.Unavailable, "not ready", 0},
		{leaf.ErrClockBackwards, codes.Unavailable, "clock moved backwards", 0},
		{leaf.ErrWorkerIDsExhausted, codes.Unavailable, "no snowflake worker ID", 0},
		{leaf.ErrWorkerLost, codes.Unavailable, "worker ID lost", 0},
		{leaf.ErrWorkerInUse, codes.Unavailable, "in use by another live server", 0},
		{leaf.ErrClockSkew, codes.Unavailable, "skewed", 0},
		{leaf.ErrClosed, codes.Unavailable, "shutting down", 0},
		{leaf.ErrTagNotFound, codes.NotFound, "tag not found", 0},
		{leaf.ErrInvalidArgument, codes.InvalidArgument, "invalid argument", 0},
		// Ordered tags: the range refused; the owner being replaced, or
		// out of reach of the forwarder.
		{leaf.ErrOrderedTag, codes.FailedPrecondition, "the tag is ordered", 0},
		{fmt.Errorf("x: %w", &leaf.NotOwnerError{Tag: "t", Retry: 1500 * time.Millisecond}), codes.Unavailable, "takes it over in 1.5s", 1500 * time.Millisecond},
		{fmt.Errorf("tag t: %w (%w)", leaf.ErrNotReady, leaf.ErrLeaseLost), codes.Unavailable, "lost its lease", 0},
		{leaf.ErrLeaseLost, codes.Unavailable, "lost its lease", 0},
		{fmt.Errorf("%w: tag t: owner http://10.0.0.9:8080: dial tcp: refused", leaf.ErrOwnerUnreachable), codes.Unavailable, "could not be reached", 0},
		{leaf.ErrOwnerBusy, codes.Unavailable, "too many requests wait", 0},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "timed out", 0},
		{context.Canceled, codes.Canceled, "request canceled", 0},
		// The leaf sentinel wins over the context error it wraps.
		{errors.Join(leaf.ErrNotReady, context.DeadlineExceeded), codes.Unavailable, "not ready", 0},
		// Not in the table: a bug, and its text stays on the server.
		{errors.New("secret DSN user:pw@db"), codes.Internal, "internal server error", 0},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			var logs bytes.Buffer
			f := fakeGen{id: 42, err: tc.err}
			c := client(t, grpcapi.Config{Segment: f, Snowflake: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			calls := []call{nextID("t"), nextIDs("t", 3), rangeOf("t", 3), snowflakeID(""), snowflakeIDs("", 3), decode(42)}
			for _, call := range calls {
				got, err := call.do(ctxFor(t), c)
				t.Run(call.name, func(t *testing.T) { checkStatusDelay(t, got, err, tc.code, tc.msg, tc.delay) })
			}
			logged := strings.Count(logs.String(), "grpcapi: internal error")
			if tc.code == codes.Internal {
				if logged != len(calls) || !strings.Contains(logs.String(), "/leaf.v1.Leaf/NextID") {
					t.Errorf("%d internal errors logged for %d calls, want one each naming its method:\n%s", logged, len(calls), logs.String())
				}
			} else if logged != 0 {
				t.Errorf("expected error logged as internal:\n%s", logs.String())
			}
		})
	}
}

// TestBuggyGenerator: a generator that breaks its contract without an error
// is a bug, answered Internal, never served.
func TestBuggyGenerator(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gen   fakeGen
		calls []call
	}{
		// 0 and -2 are Leaf's sentinel IDs; NextIDs returns n copies of id,
		// not increasing; NextRange returns [id, id+1).
		{"zero", fakeGen{id: 0}, []call{nextID("t"), nextIDs("t", 1), rangeOf("t", 1), snowflakeID(""), snowflakeIDs("", 1)}},
		{"negative", fakeGen{id: -2}, []call{nextID("t"), rangeOf("t", 5), snowflakeID("")}},
		{"repeated", fakeGen{id: 7}, []call{nextIDs("t", 2), snowflakeIDs("", 2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, grpcapi.Config{Segment: tc.gen, Snowflake: tc.gen})
			for _, call := range tc.calls {
				got, err := call.do(ctxFor(t), c)
				t.Run(call.name, func(t *testing.T) { checkStatus(t, got, err, codes.Internal, "internal server error") })
			}
		})
	}
}

// shortGen returns fewer IDs than asked, or a range longer than asked.
type shortGen struct{ fakeGen }

func (shortGen) NextIDsPeriod(_ context.Context, _ string, n int, dst []int64) ([]int64, string, error) {
	for i := range n - 1 {
		dst = append(dst, int64(i+1))
	}
	return dst, "", nil
}

func (shortGen) Take(_ context.Context, _ string, n int, _ leaf.RangeUse) (leaf.IDRange, error) {
	return leaf.IDRange{Start: 1, End: int64(n) + 2}, nil
}

func TestShortGenerator(t *testing.T) {
	g := shortGen{fakeGen{id: 1}}
	c := client(t, grpcapi.Config{Segment: g})
	for _, call := range []call{nextIDs("t", 10), rangeOf("t", 10)} {
		got, err := call.do(ctxFor(t), c)
		t.Run(call.name, func(t *testing.T) { checkStatus(t, got, err, codes.Internal, "internal server error") })
	}
}

// TestHealth: SERVING for the server and the Leaf service, whatever modes run.
func TestHealth(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  grpcapi.Config
	}{
		{"both modes", grpcapi.Config{
			Segment:   newSegment(t, testutil.Store(t), nil),
			Snowflake: newSnowflake(t),
		}},
		{"no mode", grpcapi.Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := healthgrpc.NewHealthClient(serve(t, tc.cfg))
			ctx := ctxFor(t)
			for _, svc := range []string{"", "leaf.v1.Leaf"} {
				r, err := h.Check(ctx, &healthgrpc.HealthCheckRequest{Service: svc})
				if err != nil || r.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
					t.Errorf("Check(%q) = %v, %v; want SERVING", svc, r, err)
				}
			}
			_, err := h.Check(ctx, &healthgrpc.HealthCheckRequest{Service: "leaf.v1.Nope"})
			if status.Code(err) != codes.NotFound {
				t.Errorf("Check of an unknown service: %v, want NotFound", err)
			}
		})
	}
}

// TestReflection: grpcurl and friends can list the service and fetch its
// descriptor.
func TestReflection(t *testing.T) {
	cc := serve(t, grpcapi.Config{})
	ctx := ctxFor(t)
	stream, err := reflectiongrpc.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectiongrpc.ServerReflectionRequest) *reflectiongrpc.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("reflection error: %v", e)
		}
		return resp
	}

	resp := ask(&reflectiongrpc.ServerReflectionRequest{
		MessageRequest: &reflectiongrpc.ServerReflectionRequest_ListServices{},
	})
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"leaf.v1.Leaf", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("ListServices = %v, missing %s", names, want)
		}
	}

	resp = ask(&reflectiongrpc.ServerReflectionRequest{
		MessageRequest: &reflectiongrpc.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "leaf.v1.Leaf"},
	})
	var methods []string
	for _, raw := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		var fd descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &fd); err != nil {
			t.Fatal(err)
		}
		if fd.GetName() != "leaf/v1/leaf.proto" {
			continue
		}
		for _, s := range fd.GetService() {
			for _, m := range s.GetMethod() {
				methods = append(methods, m.GetName())
			}
		}
	}
	want := []string{"NextID", "NextIDs", "Range", "SnowflakeNextID", "SnowflakeNextIDs", "Decode"}
	if !slices.Equal(methods, want) {
		t.Errorf("methods of leaf.v1.Leaf by reflection = %v, want %v", methods, want)
	}
}
