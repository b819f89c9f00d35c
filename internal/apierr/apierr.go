// Package apierr is the one error table of leaf's transports: every error a
// generator, a store or a transport may answer, with its /v2 code, its HTTP
// status, its gRPC code and the message a client is told; and, read the other
// way, the sentinel a caller of the Go client matches for a code.
//
// httpapi (both of its HTTP stacks) and grpcapi answer errors through
// Classify and Message; client maps a /v2 answer's code back through ByCode.
// A row written here is the whole of a new error: no transport or client
// keeps a table of its own.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
	"google.golang.org/grpc/codes"
)

// Errors of the transports themselves; they go through the same table as the
// generators'.
var (
	ErrNoRoute           = errors.New("not found")
	ErrMethodNotAllowed  = errors.New("method not allowed")
	ErrSegmentDisabled   = errors.New("segment mode is disabled")
	ErrSnowflakeDisabled = errors.New("snowflake mode is disabled")
	ErrTagsDisabled      = errors.New("tag administration is disabled")
	ErrBodyTooLarge      = errors.New("request body too large")
	ErrUnauthorized      = errors.New("unauthorized")
	ErrRateLimited       = errors.New("rate limit exceeded")
)

// What a caller of the Go client matches, where it is more than the server's
// sentinel: the client's advice comes with it. Package client exports them.
var (
	// ErrModeDisabled: the server does not run the requested mode.
	ErrModeDisabled = errors.New("mode disabled on the server")
	// ErrFormatExhausted: the tag's sequence outgrew its ID format's width.
	ErrFormatExhausted = errors.New("the tag's sequence outgrew its ID format's width")
	// ErrFormattedTag: a formatted tag has no ranges.
	ErrFormattedTag = fmt.Errorf("%w: a formatted tag's IDs cannot be leased or buffered; use NextIDFormatted", leaf.ErrInvalidArgument)
	// ErrOrderedTag: an ordered tag has no ranges.
	ErrOrderedTag = fmt.Errorf("%w: an ordered tag's IDs cannot be leased or buffered, since a client's cache would hand them out of the order they were issued in; use NextID or NextIDs", leaf.ErrOrderedTag)
)

// Kind is one row of the error table.
type Kind struct {
	// Err is the sentinel the row stands for, matched with errors.Is.
	Err error
	// Code is the "code" of a /v2 error body.
	Code string
	// HTTP is the status of an HTTP answer, GRPC the code of a gRPC one.
	HTTP int
	GRPC codes.Code
	// Msg is what the client is told when the error carries no message
	// written for it (see Message): words about the condition, never the
	// cause, which may hold a driver's text, a host and port, a Go type.
	Msg string
	// Means is what a caller of the Go client matches for Code with
	// errors.Is; nil leaves it to the HTTP status (see client.Error).
	// The server's own waits running out (timeout, an owner being replaced
	// or out of reach) mean to the caller a server not ready.
	Means error
}

// table maps every error a transport can meet to its row. Rows are tried in
// order with errors.Is, so an error wrapping several sentinels gets the first
// row: the leaf sentinels come before the context errors they may wrap (a
// segment request whose deadline passed while it waited for a range is
// ErrNotReady, and says why).
//
// An HTTP 503 carries Retry-After and a gRPC Unavailable a RetryInfo: the
// condition is expected to pass (a load in flight, a store coming back, the
// clock catching up, another server taking over); so do 429 and
// ResourceExhausted, with the client's own wait. An error in no row is a
// bug: Internal, logged, and its text is not shown to the client.
var table = [...]Kind{
	{leaf.ErrInvalidTag, "invalid_tag", http.StatusBadRequest, codes.InvalidArgument, "invalid tag", leaf.ErrInvalidTag},
	{leaf.ErrInvalidCount, "invalid_count", http.StatusBadRequest, codes.InvalidArgument, "invalid count", leaf.ErrInvalidCount},
	{leaf.ErrInvalidArgument, "invalid_argument", http.StatusBadRequest, codes.InvalidArgument, "invalid argument", leaf.ErrInvalidArgument},
	{leaf.ErrFormattedRange, "formatted_tag", http.StatusBadRequest, codes.InvalidArgument, "a formatted tag's IDs cannot be leased as a range", ErrFormattedTag},
	{leaf.ErrTagNotFound, "tag_not_found", http.StatusNotFound, codes.NotFound, "tag not found", leaf.ErrTagNotFound},
	{leaf.ErrOpaqueRange, "opaque_range", http.StatusConflict, codes.FailedPrecondition, "the tag is opaque: its IDs are issued one by one, never as a range", leaf.ErrOpaqueRange},
	{leaf.ErrTagExists, "tag_exists", http.StatusConflict, codes.AlreadyExists, "tag already exists", leaf.ErrTagExists},
	{leaf.ErrTagTombstoned, "tag_tombstoned", http.StatusConflict, codes.FailedPrecondition, "tag was deleted and its IDs may not be issued again; create it without a start", leaf.ErrTagTombstoned},
	// Ordered tags. A *leaf.NotOwnerError without a live owner is NoOwner
	// instead (Classify); over HTTP one naming the owner is a redirect on the
	// ID routes, and gRPC is given a generator that forwards, so it meets
	// one only when no server owns the tag.
	{leaf.ErrOrderedTag, "ordered_tag", http.StatusConflict, codes.FailedPrecondition, "the tag is ordered: its IDs are issued one by one by the server that owns it, never leased as a range, since a client's cache would hand them out out of order", ErrOrderedTag},
	{leaf.ErrNotOwner, "not_owner", http.StatusConflict, codes.Unavailable, "this server does not own the ordered tag", leaf.ErrNotOwner},
	{leaf.ErrLeaseLost, "lease_lost", http.StatusServiceUnavailable, codes.Unavailable, "the server lost its lease on the ordered tag; retry shortly", leaf.ErrNotReady},
	{leaf.ErrOwnerBusy, "owner_busy", http.StatusServiceUnavailable, codes.Unavailable, "too many requests wait for the server that owns the ordered tag; retry shortly", leaf.ErrNotReady},
	{leaf.ErrOwnerUnreachable, "owner_unreachable", http.StatusServiceUnavailable, codes.Unavailable, "the server that owns the ordered tag could not be reached; retry shortly", leaf.ErrNotReady},
	// Before ErrNotReady: a generator may refuse a sequence past the width
	// with both. No server can write the tag's IDs any more (but for a
	// periodic tag in its next period): gRPC's FailedPrecondition, and the
	// client does not retry it.
	{tagshape.ErrWidthExceeded, "format_exhausted", http.StatusServiceUnavailable, codes.FailedPrecondition, "the tag's sequence outgrew its ID format's width", ErrFormatExhausted},
	// Before ErrNotReady, which the issuer adds.
	{leaf.ErrLeaseExpired, "lease_expired", http.StatusServiceUnavailable, codes.Unavailable, "the lease on the snowflake worker ID ran out: the server cannot reach its worker registry to renew it; retry shortly", leaf.ErrNotReady},
	{leaf.ErrNotReady, "not_ready", http.StatusServiceUnavailable, codes.Unavailable, "not ready: no IDs can be issued right now; retry shortly", leaf.ErrNotReady},
	{leaf.ErrClockBackwards, "clock_backwards", http.StatusServiceUnavailable, codes.Unavailable, "the server's clock moved backwards; retry shortly", leaf.ErrClockBackwards},
	{leaf.ErrWorkerIDsExhausted, "worker_ids_exhausted", http.StatusServiceUnavailable, codes.Unavailable, "no snowflake worker ID is available to this server", leaf.ErrWorkerIDsExhausted},
	{leaf.ErrWorkerLost, "worker_lost", http.StatusServiceUnavailable, codes.Unavailable, "snowflake worker ID lost; the server is registering again, retry shortly", leaf.ErrWorkerLost},
	{leaf.ErrWorkerInUse, "worker_in_use", http.StatusServiceUnavailable, codes.Unavailable, "snowflake worker ID in use by another live server", nil},
	{leaf.ErrClockSkew, "clock_skew", http.StatusServiceUnavailable, codes.Unavailable, "the server's clock is skewed from its peers' clocks", nil},
	{leaf.ErrClosed, "closed", http.StatusServiceUnavailable, codes.Unavailable, "the server is shutting down", leaf.ErrClosed},
	{ErrSegmentDisabled, "segment_disabled", http.StatusNotFound, codes.NotFound, "segment mode is disabled", ErrModeDisabled},
	{ErrSnowflakeDisabled, "snowflake_disabled", http.StatusNotFound, codes.NotFound, "snowflake mode is disabled", ErrModeDisabled},
	{ErrTagsDisabled, "tags_disabled", http.StatusNotFound, codes.NotFound, "tag administration is disabled", nil},
	{ErrNoRoute, "not_found", http.StatusNotFound, codes.NotFound, "not found", nil},
	{ErrMethodNotAllowed, "method_not_allowed", http.StatusMethodNotAllowed, codes.Unimplemented, "method not allowed", nil},
	{ErrBodyTooLarge, "request_too_large", http.StatusRequestEntityTooLarge, codes.InvalidArgument, "request body too large", nil},
	{ErrUnauthorized, "unauthorized", http.StatusUnauthorized, codes.Unauthenticated, "unauthorized", nil},
	{ErrRateLimited, "rate_limited", http.StatusTooManyRequests, codes.ResourceExhausted, "rate limit exceeded", nil},
	// The server's own wait ran out: for the caller, a server not ready.
	{context.DeadlineExceeded, "timeout", http.StatusServiceUnavailable, codes.DeadlineExceeded, "timed out; retry shortly", leaf.ErrNotReady},
	// The client gave up; it will not read the answer, and it is no bug.
	{context.Canceled, "canceled", http.StatusServiceUnavailable, codes.Canceled, "request canceled", leaf.ErrNotReady},
}

// Internal is the row of an error in no other: a bug.
var Internal = Kind{nil, "internal", http.StatusInternalServerError, codes.Internal, "internal server error", nil}

// NoOwner is the row of a *leaf.NotOwnerError that names no owner: none is
// alive, and a server takes the tag over when the lease runs out, which the
// answer's retry delay says.
var NoOwner = Kind{leaf.ErrNotOwner, "no_owner", http.StatusServiceUnavailable, codes.Unavailable, "no server owns the ordered tag right now; retry shortly", leaf.ErrNotReady}

// Classify finds err's row: Internal for an error in no other.
func Classify(err error) Kind {
	if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok && noe.URL == "" {
		return NoOwner
	}
	for _, k := range table {
		if errors.Is(err, k.Err) {
			return k
		}
	}
	return Internal
}

// ByCode finds the row of a /v2 error body's code.
func ByCode(code string) (Kind, bool) {
	if code == NoOwner.Code {
		return NoOwner, true
	}
	if code == Internal.Code {
		return Internal, true
	}
	for _, k := range table {
		if k.Code == code {
			return k, true
		}
	}
	return Kind{}, false
}

// Kinds lists every row, NoOwner and Internal last, for tests and documents
// that must name every code.
func Kinds() []Kind { return append(table[:len(table):len(table)], NoOwner, Internal) }

// Message is the one place that chooses what a client is told about err,
// whose row is k (wtf's Error{Code, Message}, with the cause kept apart):
// the text of an error written for the client (a *ClientError, or one of the
// generators' errors that name only the client's tag and what to do: a
// *leaf.TombstoneError, *leaf.ShapeError, *leaf.NotOwnerError, a used-up or
// refused ID format), the client's own tag for a tag not found or an
// ordered tag (tag is the tag the request names, if any), else the row's
// message. The error's text is never shown otherwise: it may carry a
// driver's message, a host and port, or a Go type.
func Message(err error, k Kind, tag string) string {
	if k.HTTP == http.StatusInternalServerError {
		return k.Msg
	}
	if _, ok := errors.AsType[clientSafe](err); ok {
		return OneLine(err.Error())
	}
	if te, ok := errors.AsType[*leaf.TombstoneError](err); ok {
		return OneLine(te.Error())
	}
	if se, ok := errors.AsType[*leaf.ShapeError](err); ok {
		return OneLine(se.Error())
	}
	if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok {
		return OneLine(noe.Error()) // the tag, and its owner or when one takes over
	}
	switch k.Err {
	case tagshape.ErrWidthExceeded, leaf.ErrFormattedRange:
		return OneLine(err.Error()) // the generator's: the tag, its format (and the bound)
	case leaf.ErrOrderedTag:
		if leaf.ValidateTag(tag) == nil {
			return "tag " + tag + ": " + k.Msg
		}
	case leaf.ErrTagNotFound:
		if leaf.ValidateTag(tag) == nil {
			return "tag " + strconv.Quote(tag) + ": tag not found" // as the generator words it
		}
	}
	return k.Msg
}

// clientSafe is an error whose text is written for the client.
type clientSafe interface {
	error
	clientSafe()
}

// ClientError is an error about the client's own input, with a message
// written for the client, that still matches a sentinel (and so a row of the
// table). Only a transport makes them, from what it checks before a
// generator sees the request: whatever a generator returns is answered with
// its row's message instead.
type ClientError struct {
	Err error
	Msg string
}

func (e *ClientError) Error() string { return e.Msg }
func (e *ClientError) Unwrap() error { return e.Err }
func (e *ClientError) clientSafe()   {}

// Client is a *ClientError: err, told to the client as msg.
func Client(err error, msg string) error { return &ClientError{Err: err, Msg: msg} }

// AsClient marks err, which a transport's own checks of the request
// returned, as written for the client; nil stays nil.
func AsClient(err error) error {
	if err == nil {
		return nil
	}
	return &ClientError{Err: err, Msg: err.Error()}
}

// RateLimitedError is ErrRateLimited with the wait the client is told
// (Retry-After, or gRPC's RetryInfo).
type RateLimitedError struct{ Wait time.Duration }

func (e *RateLimitedError) Error() string {
	return "rate limit exceeded for this client; retry after " + strconv.Itoa(e.Seconds()) + "s"
}
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }
func (e *RateLimitedError) clientSafe()   {}

// Seconds is the wait rounded up to whole seconds, at least 1, as
// Retry-After takes it.
func (e *RateLimitedError) Seconds() int {
	return max(1, int((e.Wait+time.Second-1)/time.Second))
}

// FormatError is the answer to an ID the tag's format cannot write: its
// sequence outgrew the width (tagshape.ErrWidthExceeded), with a message
// naming the tag, the format and the largest sequence it holds; no ID is
// answered, never a truncated or longer one. Any other formatting error is
// a bug: the generator's ID or period is invalid.
func FormatError(tag string, err error) error {
	if errors.Is(err, tagshape.ErrWidthExceeded) {
		return Client(err, OneLine("tag "+tag+": "+err.Error()))
	}
	return fmt.Errorf("format an ID of tag %s: %w", tag, err)
}

// OneLine keeps an error message on one line: the text bodies are one line,
// and a message may carry text from a driver or a client (a path may hold an
// escaped newline).
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}
