package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/reqlog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// retryDelay is the retry_delay of the google.rpc.RetryInfo detail on every
// Unavailable status, as httpapi's Retry-After: 1.
const retryDelay = time.Second

// requestIDKey is the trailer that carries a failed call's request ID, as
// httpapi's X-Request-Id header does; the status's google.rpc.RequestInfo
// detail carries it too.
const requestIDKey = "x-request-id"

// statusError turns err into the status the method answers with, through the
// error table: the row's code, the client's message (tag is the tag the call
// names, if any), and a new request ID
// (a RequestInfo detail and the x-request-id trailer). A failure of the
// server's own (Internal, Unavailable, DeadlineExceeded) is logged with its
// cause and the request ID, within the service's log budget: an outage
// fails every call at once, and a line each would bury the log.
func (s *service) statusError(ctx context.Context, tag string, err error) error {
	k := apierr.Classify(err)
	id := reqlog.NewID()
	st := &spb.Status{Code: int32(k.GRPC), Message: apierr.Message(err, k, tag)}
	switch k.GRPC {
	case codes.Unavailable:
		d := retryDelay
		if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok && noe.Retry > d {
			d = noe.Retry // when a server takes the tag over
		}
		st.Details = append(st.Details, retryInfo(d))
	case codes.ResourceExhausted:
		var rl *apierr.RateLimitedError
		if errors.As(err, &rl) {
			st.Details = append(st.Details, retryInfo(rl.Wait))
		}
	}
	if a, aerr := anypb.New(&errdetails.RequestInfo{RequestId: id}); aerr == nil {
		st.Details = append(st.Details, a)
	}
	// Fails only outside a gRPC call (a method called directly, as in
	// tests), where there is no one to send it to.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(requestIDKey, id))
	switch k.GRPC {
	case codes.Internal, codes.Unavailable, codes.DeadlineExceeded:
		if ok, dropped := s.errLog.Allow(); ok {
			method, _ := grpc.Method(ctx)
			level, what := slog.LevelWarn, "grpcapi: call failed"
			if k.GRPC == codes.Internal {
				level, what = slog.LevelError, "grpcapi: internal error"
			}
			attrs := []slog.Attr{
				slog.String("request_id", id),
				slog.String("method", method),
				slog.String("code", k.GRPC.String()),
				slog.Any("err", err),
			}
			if dropped > 0 {
				attrs = append(attrs, slog.Int("lines_dropped_before", dropped))
			}
			s.log.LogAttrs(ctx, level, what, attrs...)
		}
	}
	return status.FromProto(st).Err()
}

// retryInfo is a google.rpc.RetryInfo detail asking the client to wait d.
func retryInfo(d time.Duration) *anypb.Any {
	a, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic("grpcapi: marshalling RetryInfo: " + err.Error()) // a duration only: cannot fail
	}
	return a
}
