package grpcapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// Internal causes as the stores and registries produce them: what must
// reach the log and never a status.
var (
	errDial = &net.OpError{Op: "dial", Net: "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 3306},
		Err:  &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	errSQLite = errors.New("database is locked (5) (SQLITE_BUSY)")
	errGoType = errors.New("json: cannot unmarshal string into Go struct field segment.row.step of type int")

	internals = []string{"10.1.2.3", "3306", "dial tcp", "connection refused", "SQLITE", "(5)", "Go struct",
		"of type", "segment.row", "mysql", "sqlite", "postgres", "SQLSTATE", "zk:", "heartbeat:", "json:"}
)

// TestNoInternalsInStatuses: every method, failing as the real generators
// fail while their store or registry is down or broken, answers a status
// whose message and details name none of the cause; every failed call
// carries a request ID (trailer and RequestInfo), and a failure of the
// server's own is logged with that ID and the cause.
func TestNoInternalsInStatuses(t *testing.T) {
	for _, fail := range []error{
		fmt.Errorf("tag %q: no IDs buffered and the store failed: mysql: reserve %q: %w: %w", "t", "t", errDial, leaf.ErrNotReady),
		fmt.Errorf("sqlite: alloc %q: %w: %w", "t", errSQLite, leaf.ErrTagNotFound),
		fmt.Errorf("%w: postgres: invalid input syntax for type bigint (SQLSTATE 22P02)", leaf.ErrInvalidArgument),
		fmt.Errorf("%w: by 12ms; heartbeat: %w", leaf.ErrClockBackwards, errDial),
		fmt.Errorf("register worker 10.1.2.3:8080: mysql: %w: %w", errDial, leaf.ErrWorkerIDsExhausted),
		fmt.Errorf("%w: zk: session expired talking to %w", leaf.ErrWorkerLost, errDial),
		fmt.Errorf("%w: zk: node /snowflake/leaf/10.1.2.3:3306 held", leaf.ErrWorkerInUse),
		fmt.Errorf("%w: peers at %w", leaf.ErrClockSkew, errDial),
		fmt.Errorf("sqlite: reserve: %w (%w)", leaf.ErrClosed, errSQLite),
		fmt.Errorf("mysql: reserve: %w (%w)", context.DeadlineExceeded, errDial),
		fmt.Errorf("segment: read row: %w", errGoType),
	} {
		logs := &testutil.LogBuffer{}
		f := fakeGen{id: 42, err: fail}
		c := client(t, grpcapi.Config{Segment: f, Snowflake: f, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		calls := map[string]func(ctx context.Context, opts ...grpc.CallOption) error{
			"NextID": func(ctx context.Context, o ...grpc.CallOption) error {
				_, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "t"}, o...)
				return err
			},
			"NextIDs": func(ctx context.Context, o ...grpc.CallOption) error {
				_, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "t", Count: 3}, o...)
				return err
			},
			"Range": func(ctx context.Context, o ...grpc.CallOption) error {
				_, err := c.Range(ctx, &leafv1.RangeRequest{Tag: "t", Count: 3}, o...)
				return err
			},
			"SnowflakeNextID": func(ctx context.Context, o ...grpc.CallOption) error {
				_, err := c.SnowflakeNextID(ctx, &leafv1.SnowflakeNextIDRequest{}, o...)
				return err
			},
			"SnowflakeNextIDs": func(ctx context.Context, o ...grpc.CallOption) error {
				_, err := c.SnowflakeNextIDs(ctx, &leafv1.SnowflakeNextIDsRequest{Count: 3}, o...)
				return err
			},
			"Decode": func(ctx context.Context, o ...grpc.CallOption) error {
				_, err := c.Decode(ctx, &leafv1.DecodeRequest{Id: 42}, o...)
				return err
			},
		}
		for name, call := range calls {
			what := fmt.Sprintf("%s on %q", name, fail)
			var trailer metadata.MD
			err := call(ctxFor(t), grpc.Trailer(&trailer))
			st, ok := status.FromError(err)
			if !ok || st.Code() == codes.OK || st.Code() == codes.Unknown {
				t.Fatalf("%s: %v, want a status from the table", what, err)
			}
			shown := st.Message()
			var requestID string
			for _, d := range st.Details() {
				if m, ok := d.(proto.Message); ok {
					shown += " " + prototext.Format(m)
				}
				if ri, ok := d.(*errdetails.RequestInfo); ok {
					requestID = ri.GetRequestId()
				}
			}
			// The request ID is random hex, which may spell a port
			// ("…3306…"): it is not what is checked here.
			if requestID != "" {
				shown = strings.ReplaceAll(shown, requestID, "<request-id>")
			}
			for _, bad := range internals {
				if strings.Contains(shown, bad) {
					t.Errorf("%s: status shows %q: %s", what, bad, shown)
				}
			}
			if ids := trailer.Get("x-request-id"); len(requestID) != 16 || len(ids) != 1 || ids[0] != requestID {
				t.Errorf("%s: RequestInfo %q, trailer x-request-id %q; want one request ID in both", what, requestID, ids)
				continue
			}
			switch st.Code() {
			case codes.Internal, codes.Unavailable, codes.DeadlineExceeded:
				if cause := loggedCause(logs, requestID); cause != fail.Error() {
					t.Errorf("%s: log line for request %s has the cause %q, want %q\nlog:\n%s", what, requestID, cause, fail, logs)
				}
			}
		}
	}
}

// loggedCause is the err of the JSON log line with request ID id.
func loggedCause(logs *testutil.LogBuffer, id string) string {
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["request_id"] == id {
			s, _ := m["err"].(string)
			return s
		}
	}
	return ""
}
