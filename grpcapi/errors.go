package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/forward"
	"github.com/leafgo/leaf/internal/idformat"
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
	// msg is what the client is told when the error carries no message
	// written for it (see clientMessage): words about the condition, never
	// the cause, which may hold a driver's text, a host and port, a Go type.
	msg string
}

// errorTable maps every error a method can meet to a status code and a
// message for the client. It is the only place that does so. Rows are tried
// in order with errors.Is, so an error wrapping several sentinels gets the
// first row's code: the leaf sentinels come before the context errors they
// may wrap (a segment request whose deadline passed while it waited for a
// range is ErrNotReady, and says why).
//
// Unavailable carries a RetryInfo detail: the condition is expected to pass
// (a load in flight, a store coming back, the clock catching up, another
// server taking over from one shutting down); so does ResourceExhausted,
// with the client's own wait. An error in no row is a bug:
// Internal, logged, and its text is not shown to the client.
var errorTable = [...]errorKind{
	{leaf.ErrInvalidTag, codes.InvalidArgument, "invalid tag"},
	{leaf.ErrInvalidCount, codes.InvalidArgument, "invalid count"},
	{leaf.ErrInvalidArgument, codes.InvalidArgument, "invalid argument"},
	{leaf.ErrTagNotFound, codes.NotFound, "tag not found"},
	{leaf.ErrOpaqueRange, codes.FailedPrecondition, "the tag is opaque: its IDs are issued one by one, never as a range"},
	{leaf.ErrFormattedRange, codes.InvalidArgument, "a formatted tag's IDs cannot be leased as a range"},
	// Ordered tags. The service is given a generator that forwards (see
	// Config.Segment), so a *leaf.NotOwnerError reaches it only when no
	// server owns the tag: Unavailable, until one takes it over.
	{leaf.ErrOrderedTag, codes.FailedPrecondition, "the tag is ordered: its IDs are issued one by one by the server that owns it, never leased as a range, since a client's cache would hand them out out of order"},
	{leaf.ErrNotOwner, codes.Unavailable, "no server owns the ordered tag right now; retry shortly"},
	{leaf.ErrLeaseLost, codes.Unavailable, "the server lost its lease on the ordered tag; retry shortly"},
	{forward.ErrQueueFull, codes.Unavailable, "too many requests wait for the server that owns the ordered tag; retry shortly"},
	{forward.ErrOwnerUnreachable, codes.Unavailable, "the server that owns the ordered tag could not be reached; retry shortly"},
	{errSegmentDisabled, codes.NotFound, "segment mode is disabled"},
	{errSnowflakeDisabled, codes.NotFound, "snowflake mode is disabled"},
	// FailedPrecondition, not Unavailable: retrying, here or on another
	// server, cannot help (but for a periodic tag in its next period); the
	// tag's format must change, which means a new tag. Before ErrNotReady:
	// a generator may refuse a sequence past the width with both.
	{idformat.ErrWidthExceeded, codes.FailedPrecondition, "the tag's sequence outgrew its ID format's width"},
	{leaf.ErrLeaseExpired, codes.Unavailable, "the lease on the snowflake worker ID ran out: the server cannot reach its worker registry to renew it; retry shortly"},
	{leaf.ErrNotReady, codes.Unavailable, "not ready: no IDs can be issued right now; retry shortly"},
	{leaf.ErrClockBackwards, codes.Unavailable, "the server's clock moved backwards; retry shortly"},
	{leaf.ErrWorkerIDsExhausted, codes.Unavailable, "no snowflake worker ID is available to this server"},
	{leaf.ErrWorkerLost, codes.Unavailable, "snowflake worker ID lost; the server is registering again, retry shortly"},
	{leaf.ErrWorkerInUse, codes.Unavailable, "snowflake worker ID in use by another live server"},
	{leaf.ErrClockSkew, codes.Unavailable, "the server's clock is skewed from its peers' clocks"},
	{leaf.ErrClosed, codes.Unavailable, "the server is shutting down"},
	{errRateLimited, codes.ResourceExhausted, "rate limit exceeded"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "deadline exceeded"},
	// The client gave up; it will not read the answer, and it is no bug.
	{context.Canceled, codes.Canceled, "request canceled"},
}

// internalError is the row of an error in no other: a bug.
var internalError = errorKind{nil, codes.Internal, msgInternal}

// msgInternal is all a client learns of an internal error.
const msgInternal = "internal error"

// classify finds err's row in the error table: internalError for an error
// in no row.
func classify(err error) errorKind {
	for _, k := range errorTable {
		if errors.Is(err, k.err) {
			return k
		}
	}
	return internalError
}

// clientMessage is the one place that chooses what a client is told about
// err: the message of a *clientError (input the service refused, in words
// about that input), else the row's own message. The error's text is never
// shown otherwise: it may carry a driver's message, a host and port, or a
// Go type.
func clientMessage(err error, k errorKind) string {
	if k.code == codes.Internal {
		return k.msg
	}
	var ce *clientError
	if errors.As(err, &ce) {
		return ce.msg
	}
	if k.err == idformat.ErrWidthExceeded || k.err == leaf.ErrFormattedRange {
		return err.Error() // the generator's: the tag, its format, the bound
	}
	if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok {
		return noe.Error() // the tag, and when a server takes it over
	}
	return k.msg
}

// clientError is an error about the client's own request, with a message
// written for the client, that still matches a sentinel (and so a row of
// the error table). Only the service makes them, from what it checks before
// a generator sees the request: whatever a generator returns is answered
// with its row's message instead.
type clientError struct {
	err error
	msg string
}

func (e *clientError) Error() string { return e.msg }
func (e *clientError) Unwrap() error { return e.err }

// asClient marks err, which the service's own checks of the request
// returned, as written for the client; nil stays nil.
func asClient(err error) error {
	if err == nil {
		return nil
	}
	return &clientError{err, err.Error()}
}

// tagged names the client's tag in the answer to a segment call for a tag
// the store lacks; the generator's error may say more than the client needs.
func tagged(tag string, err error) error {
	if errors.Is(err, leaf.ErrTagNotFound) && leaf.ValidateTag(tag) == nil {
		return &clientError{err, "tag " + strconv.Quote(tag) + ": tag not found"}
	}
	return err
}

// formatError is the answer to an ID the tag's format cannot write: its
// sequence outgrew the width (FailedPrecondition), with a message naming
// the tag, the format and the largest sequence it holds. Any other
// formatting error is a bug: the generator's ID or period is invalid.
func formatError(tag string, err error) error {
	if errors.Is(err, idformat.ErrWidthExceeded) {
		return &clientError{err, "tag " + tag + ": " + err.Error()}
	}
	return fmt.Errorf("grpcapi: format an ID of tag %s: %w", tag, err)
}

// retryDelay is the retry_delay of the google.rpc.RetryInfo detail on every
// Unavailable status, as httpapi's Retry-After: 1.
const retryDelay = time.Second

// requestIDKey is the trailer that carries a failed call's request ID, as
// httpapi's X-Request-Id header does; the status's google.rpc.RequestInfo
// detail carries it too.
const requestIDKey = "x-request-id"

// statusError turns err into the status the method answers with, through the
// error table: the row's code, the client's message, and a new request ID
// (a RequestInfo detail and the x-request-id trailer). A failure of the
// server's own (Internal, Unavailable, DeadlineExceeded) is logged with its
// cause and the request ID, within the service's log budget: an outage
// fails every call at once, and a line each would bury the log.
func (s *service) statusError(ctx context.Context, err error) error {
	k := classify(err)
	id := reqlog.NewID()
	st := &spb.Status{Code: int32(k.code), Message: clientMessage(err, k)}
	switch k.code {
	case codes.Unavailable:
		d := retryDelay
		if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok && noe.Retry > d {
			d = noe.Retry // when a server takes the tag over
		}
		st.Details = append(st.Details, retryInfo(d))
	case codes.ResourceExhausted:
		var rl *rateLimitedError
		if errors.As(err, &rl) {
			st.Details = append(st.Details, retryInfo(rl.wait))
		}
	}
	if a, aerr := anypb.New(&errdetails.RequestInfo{RequestId: id}); aerr == nil {
		st.Details = append(st.Details, a)
	}
	// Fails only outside a gRPC call (a method called directly, as in
	// tests), where there is no one to send it to.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(requestIDKey, id))
	switch k.code {
	case codes.Internal, codes.Unavailable, codes.DeadlineExceeded:
		if ok, dropped := s.errLog.Allow(); ok {
			method, _ := grpc.Method(ctx)
			level, what := slog.LevelWarn, "grpcapi: call failed"
			if k.code == codes.Internal {
				level, what = slog.LevelError, "grpcapi: internal error"
			}
			attrs := []slog.Attr{
				slog.String("request_id", id),
				slog.String("method", method),
				slog.String("code", k.code.String()),
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
