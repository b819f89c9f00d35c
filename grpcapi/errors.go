package grpcapi

import (
	"context"
	"errors"
	"time"

	"github.com/leafgo/leaf"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Errors of the transport itself; they go through the same table as the
// generators'.
var (
	errSegmentDisabled   = errors.New("segment mode is disabled")
	errSnowflakeDisabled = errors.New("snowflake mode is disabled")
)

// errorKind is one row of the error table.
type errorKind struct {
	err  error
	code codes.Code
}

// errorTable maps every error a method can meet to a status code. It is the
// only place that does so. Rows are tried in order with errors.Is, so an
// error wrapping several sentinels gets the first row's code: the leaf
// sentinels come before the context errors they may wrap (a segment request
// whose deadline passed while it waited for a range is ErrNotReady, and says
// why).
//
// Unavailable carries a RetryInfo detail: the condition is expected to pass
// (a load in flight, a store coming back, the clock catching up, another
// server taking over from one shutting down); so does ResourceExhausted,
// with the client's own wait. An error in no row is a bug:
// Internal, logged, and its text is not shown to the client.
var errorTable = [...]errorKind{
	{leaf.ErrInvalidTag, codes.InvalidArgument},
	{leaf.ErrInvalidCount, codes.InvalidArgument},
	{leaf.ErrInvalidArgument, codes.InvalidArgument},
	{leaf.ErrTagNotFound, codes.NotFound},
	{errSegmentDisabled, codes.NotFound},
	{errSnowflakeDisabled, codes.NotFound},
	{leaf.ErrNotReady, codes.Unavailable},
	{leaf.ErrClockBackwards, codes.Unavailable},
	{leaf.ErrWorkerIDsExhausted, codes.Unavailable},
	{leaf.ErrWorkerLost, codes.Unavailable},
	{leaf.ErrClosed, codes.Unavailable},
	{errRateLimited, codes.ResourceExhausted},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	// The client gave up; it will not read the answer, and it is no bug.
	{context.Canceled, codes.Canceled},
}

// classify finds err's code in the error table: Internal for an error in no
// row.
func classify(err error) codes.Code {
	for _, k := range errorTable {
		if errors.Is(err, k.err) {
			return k.code
		}
	}
	return codes.Internal
}

// retryDelay is the retry_delay of the google.rpc.RetryInfo detail on every
// Unavailable status, as httpapi's Retry-After: 1.
const retryDelay = time.Second

// retryInfo is the RetryInfo detail, marshalled once: status.FromProto
// copies it into each status.
var retryInfo = func() *anypb.Any {
	a, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay)})
	if err != nil {
		panic("grpcapi: marshalling RetryInfo: " + err.Error()) // a fixed message: cannot fail
	}
	return a
}()

// msgInternal is all a client learns of an internal error.
const msgInternal = "internal error"

// statusError turns err into the status the method answers with, through the
// error table. Internal errors are logged with the method and replaced by a
// message that says nothing of the server's insides.
func (s *service) statusError(ctx context.Context, err error) error {
	switch code := classify(err); code {
	case codes.Internal:
		method, _ := grpc.Method(ctx)
		s.log.ErrorContext(ctx, "grpcapi: internal error", "method", method, "err", err)
		return status.Error(codes.Internal, msgInternal)
	case codes.Unavailable:
		return status.FromProto(&spb.Status{
			Code:    int32(code),
			Message: err.Error(),
			Details: []*anypb.Any{retryInfo},
		}).Err()
	case codes.ResourceExhausted:
		st := &spb.Status{Code: int32(code), Message: err.Error()}
		var rl *rateLimitedError
		if errors.As(err, &rl) {
			if a, aerr := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(rl.wait)}); aerr == nil {
				st.Details = []*anypb.Any{a}
			}
		}
		return status.FromProto(st).Err()
	default:
		return status.Error(code, err.Error())
	}
}
