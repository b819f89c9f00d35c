package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/forward"
	"github.com/leafgo/leaf/internal/idformat"
	"github.com/leafgo/leaf/internal/reqlog"
)

// Errors of the transport itself; they go through the same table as the
// generator's.
var (
	errNoRoute           = errors.New("not found")
	errMethodNotAllowed  = errors.New("method not allowed")
	errSegmentDisabled   = errors.New("segment mode is disabled")
	errSnowflakeDisabled = errors.New("snowflake mode is disabled")
	errTagsDisabled      = errors.New("tag administration is disabled")
	errBodyTooLarge      = errors.New("request body too large")
)

// errorKind is one row of the error table.
type errorKind struct {
	err    error
	status int
	code   string // the "code" of a /v2 error body
	// msg is what the client is told when the error carries no message
	// written for it (see clientMessage): words about the condition, never
	// the cause, which may hold a driver's text, a host and port, a Go type.
	msg string
}

// errorTable maps every error a handler can meet to a status code and a
// message for the client. It is the only place that does so. Rows are tried
// in order with errors.Is, so an error wrapping several sentinels gets the
// first row's status: the leaf sentinels come before the context errors they
// may wrap.
//
// 503 carries Retry-After: the condition is expected to pass (a load in
// flight, a store coming back, the clock catching up); so does 429, with
// the client's own wait. 401 carries the Bearer challenge. An error in no row is
// a bug: 500, logged, and its text is not shown to the client.
var errorTable = [...]errorKind{
	{leaf.ErrInvalidTag, http.StatusBadRequest, "invalid_tag", "invalid tag"},
	{leaf.ErrInvalidCount, http.StatusBadRequest, "invalid_count", "invalid count"},
	{leaf.ErrInvalidArgument, http.StatusBadRequest, "invalid_argument", "invalid argument"},
	{leaf.ErrFormattedRange, http.StatusBadRequest, "formatted_tag", "a formatted tag's IDs cannot be leased as a range"},
	{leaf.ErrTagNotFound, http.StatusNotFound, "tag_not_found", "tag not found"},
	{leaf.ErrOpaqueRange, http.StatusConflict, "opaque_range", "the tag is opaque: its IDs are issued one by one, never as a range"},
	{leaf.ErrTagExists, http.StatusConflict, "tag_exists", "tag already exists"},
	{leaf.ErrTagTombstoned, http.StatusConflict, "tag_tombstoned", "tag was deleted and its IDs may not be issued again; create it without a start"},
	// Ordered tags (see ordered.go). A *leaf.NotOwnerError without a live
	// owner is noOwner instead (classify), and on the ID routes one naming
	// the owner is a redirect (writeError).
	{leaf.ErrOrderedTag, http.StatusConflict, "ordered_tag", "the tag is ordered: its IDs are issued one by one by the server that owns it, never leased as a range, since a client's cache would hand them out out of order"},
	{leaf.ErrNotOwner, http.StatusConflict, "not_owner", "this server does not own the ordered tag"},
	{leaf.ErrLeaseLost, http.StatusServiceUnavailable, "lease_lost", "the server lost its lease on the ordered tag; retry shortly"},
	{forward.ErrQueueFull, http.StatusServiceUnavailable, "owner_busy", "too many requests wait for the server that owns the ordered tag; retry shortly"},
	{forward.ErrOwnerUnreachable, http.StatusServiceUnavailable, "owner_unreachable", "the server that owns the ordered tag could not be reached; retry shortly"},
	// Before ErrNotReady: a generator may refuse a sequence past the width
	// with both.
	{idformat.ErrWidthExceeded, http.StatusServiceUnavailable, "format_exhausted", "the tag's sequence outgrew its ID format's width"},
	// Before ErrNotReady, which the issuer adds.
	{leaf.ErrLeaseExpired, http.StatusServiceUnavailable, "lease_expired", "the lease on the snowflake worker ID ran out: the server cannot reach its worker registry to renew it; retry shortly"},
	{leaf.ErrNotReady, http.StatusServiceUnavailable, "not_ready", "not ready: no IDs can be issued right now; retry shortly"},
	{leaf.ErrClockBackwards, http.StatusServiceUnavailable, "clock_backwards", "the server's clock moved backwards; retry shortly"},
	{leaf.ErrWorkerIDsExhausted, http.StatusServiceUnavailable, "worker_ids_exhausted", "no snowflake worker ID is available to this server"},
	{leaf.ErrWorkerLost, http.StatusServiceUnavailable, "worker_lost", "snowflake worker ID lost; the server is registering again, retry shortly"},
	{leaf.ErrWorkerInUse, http.StatusServiceUnavailable, "worker_in_use", "snowflake worker ID in use by another live server"},
	{leaf.ErrClockSkew, http.StatusServiceUnavailable, "clock_skew", "the server's clock is skewed from its peers' clocks"},
	{leaf.ErrClosed, http.StatusServiceUnavailable, "closed", "the server is shutting down"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout", "timed out; retry shortly"},
	// The client gave up; it will not read the answer, and it is no bug.
	{context.Canceled, http.StatusServiceUnavailable, "canceled", "request canceled"},
	{errSegmentDisabled, http.StatusNotFound, "segment_disabled", "segment mode is disabled"},
	{errSnowflakeDisabled, http.StatusNotFound, "snowflake_disabled", "snowflake mode is disabled"},
	{errTagsDisabled, http.StatusNotFound, "tags_disabled", "tag administration is disabled"},
	{errNoRoute, http.StatusNotFound, "not_found", "not found"},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed"},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge, "request_too_large", "request body too large"},
	{errUnauthorized, http.StatusUnauthorized, "unauthorized", "unauthorized"},
	{errRateLimited, http.StatusTooManyRequests, "rate_limited", "rate limit exceeded"},
}

var internalError = errorKind{nil, http.StatusInternalServerError, "internal", "internal server error"}

// noOwner is the row of a *leaf.NotOwnerError that names no owner: none is
// alive, and a server takes the tag over when the lease runs out, which
// its Retry-After says.
var noOwner = errorKind{leaf.ErrNotOwner, http.StatusServiceUnavailable, "no_owner", "no server owns the ordered tag right now; retry shortly"}

// classify finds err's row in the error table.
func classify(err error) errorKind {
	if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok && noe.URL == "" {
		return noOwner
	}
	for _, k := range errorTable {
		if errors.Is(err, k.err) {
			return k
		}
	}
	return internalError
}

// errorStyle selects the body of an error response: one line of text on the
// Leaf-compatible text routes and the operations routes, a JSON object on /v2,
// and Leaf's {"errorMsg":"..."} on /decodeSnowflakeId, whose clients already
// look for that key.
type errorStyle uint8

const (
	textStyle     errorStyle = iota
	jsonStyle                // {"error":"...","code":"...","request_id":"..."}
	leafJSONStyle            // {"errorMsg":"..."}
)

// requestIDHeader carries the request ID of every error answer, whatever its
// style: the Leaf-compatible bodies keep Leaf's shape, so the header is the
// one place every client finds it.
const requestIDHeader = "X-Request-Id"

// writeError answers a request with err: its status and client message from
// the error table, and a new request ID (see answerFor).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, style errorStyle, err error) int {
	k, msg, id := s.answerFor(r.Context(), r.Method, r.URL.Path, requestTag(r), err)
	h := w.Header()
	h["X-Content-Type-Options"] = noSniff
	h[requestIDHeader] = []string{id}
	if owner := ownerRedirect(err); owner != "" && r.Header.Get(forward.Header) == "" {
		k.status = http.StatusTemporaryRedirect
		h["Location"] = []string{owner + r.URL.RequestURI()}
		h[forward.OwnerHeader] = []string{owner}
	}
	switch k.status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		h["Retry-After"] = []string{retryAfter(err)}
	case http.StatusUnauthorized:
		h["Www-Authenticate"] = []string{wwwAuthenticate}
	}
	switch style {
	case jsonStyle:
		body, _ := json.Marshal(struct { // strings only: cannot fail
			Error     string `json:"error"`
			Code      string `json:"code"`
			RequestID string `json:"request_id"`
		}{msg, k.code, id})
		writeBody(w, r, k.status, appJSON, append(body, '\n'))
	case leafJSONStyle:
		body, _ := json.Marshal(struct { // a string only: cannot fail
			ErrorMsg string `json:"errorMsg"`
		}{msg})
		writeBody(w, r, k.status, appJSON, append(body, '\n'))
	default:
		writeBody(w, r, k.status, textPlain, []byte(msg+"\n"))
	}
	return k.status
}

// answerFor finds err's row in the error table, the one-line message to
// answer with (clientMessage; tag is the tag the request names, if any) and
// a new request ID for the answer. Both transports answer errors through it.
//
// A failure of the server's own (5xx, but for a client that gave up) is
// logged here with its cause and the request ID, within the server's log
// budget: an outage fails every request at once, and a line each would bury
// the log.
func (s *Server) answerFor(ctx context.Context, method, path, tag string, err error) (k errorKind, msg, requestID string) {
	k = classify(err)
	msg = clientMessage(err, k, tag)
	requestID = reqlog.NewID()
	if k.status < http.StatusInternalServerError || errors.Is(err, context.Canceled) {
		return k, msg, requestID
	}
	ok, dropped := s.errLog.Allow()
	if !ok {
		return k, msg, requestID
	}
	level, what := slog.LevelWarn, "httpapi: request failed"
	if k.status == http.StatusInternalServerError {
		level, what = slog.LevelError, "httpapi: internal error"
	}
	attrs := []slog.Attr{
		slog.String("request_id", requestID),
		slog.String("method", truncate(method, 20)),
		slog.String("path", truncate(path, 200)),
		slog.Int("status", k.status),
		slog.String("code", k.code),
		slog.Any("err", err),
	}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("lines_dropped_before", dropped))
	}
	s.log.LogAttrs(ctx, level, what, attrs...)
	return k, msg, requestID
}

// errLogBudget bounds answerFor's lines: ten per ten seconds, the rest
// counted and reported by the next line let through.
func errLogBudget() *reqlog.Budget { return &reqlog.Budget{Lines: 10, Window: 10 * time.Second} }

// clientMessage is the one place that chooses what a client is told about
// err (wtf's Error{Code, Message}, with the cause kept apart): the message
// of a *clientError (input the transport refused, in words about that
// input), the text of a *leaf.TombstoneError (it names the client's tag and
// the lowest start allowed) or of a *leaf.ShapeError (the tag and the shape
// it must be created with), the generator's text of a used-up format width
// (the tag, its format and the bound), the request's own tag for a tag not found,
// else the row's own message. The error's text is never shown otherwise: it
// may carry a driver's message, a host and port, or a Go type.
func clientMessage(err error, k errorKind, tag string) string {
	if k.status == http.StatusInternalServerError {
		return k.msg
	}
	var ce clientSafe
	if errors.As(err, &ce) {
		return oneLine(ce.Error())
	}
	var te *leaf.TombstoneError
	if errors.As(err, &te) {
		return oneLine(te.Error())
	}
	var se *leaf.ShapeError
	if errors.As(err, &se) {
		return oneLine(se.Error())
	}
	var noe *leaf.NotOwnerError
	if errors.As(err, &noe) {
		return oneLine(noe.Error()) // the tag, and its owner or when one takes over
	}
	if k.err == leaf.ErrOrderedTag && leaf.ValidateTag(tag) == nil {
		return "tag " + tag + ": " + k.msg
	}
	if k.err == idformat.ErrWidthExceeded || k.err == leaf.ErrFormattedRange {
		return oneLine(err.Error()) // the generator's: the tag, its format (and the bound)
	}
	if k.err == leaf.ErrTagNotFound && leaf.ValidateTag(tag) == nil {
		return "tag " + strconv.Quote(tag) + ": tag not found" // as the generator words it
	}
	return k.msg
}

// requestTag is the tag a request names, if any: the {tag} of a /v2 route,
// the {key} of a Leaf segment route.
func requestTag(r *http.Request) string {
	if tag := r.PathValue("tag"); tag != "" {
		return tag
	}
	return leafKey(r.URL.Path)
}

// leafKey is the {key} of a Leaf segment route's path, or "".
func leafKey(path string) string {
	if key, ok := strings.CutPrefix(path, segmentGetPrefix); ok {
		return key
	}
	return ""
}

// clientSafe is an error whose text is written for the client.
type clientSafe interface {
	error
	clientSafe()
}

// notFound answers 404 for a path no route matches.
func (s *Server) notFound(style errorStyle) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, style, &clientError{errNoRoute, "no route for " + truncate(r.URL.Path, 100)})
	})
}

// methodNotAllowed answers 405 with the Allow header set to allow.
func (s *Server) methodNotAllowed(style errorStyle, allow []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Allow"] = allow
		s.writeError(w, r, style, methodError(r.Method, allow[0]))
	})
}

func methodError(method, allow string) error {
	return &clientError{errMethodNotAllowed, "method " + truncate(method, 20) + " not allowed; use " + allow}
}

// clientError is an error about the client's own input, with a message
// written for the client, that still matches a sentinel (and so a row of
// the error table). Only the transport makes them, from what it checks
// before a generator sees the request: whatever a generator returns is
// answered with its row's message instead.
type clientError struct {
	err error
	msg string
}

func (e *clientError) Error() string { return e.msg }
func (e *clientError) Unwrap() error { return e.err }
func (e *clientError) clientSafe()   {}

// asClient marks err, which the transport's own checks of the request
// returned, as written for the client; nil stays nil.
func asClient(err error) error {
	if err == nil {
		return nil
	}
	return &clientError{err, err.Error()}
}

// decodeID takes apart an ID from the request. An ID the layout cannot have
// produced is the client's error, told in the transport's words: the
// generator's may say more than the client needs.
func decodeID(snow SnowflakeGenerator, id int64) (leaf.SnowflakeParts, error) {
	if id < 1 {
		return leaf.SnowflakeParts{}, asClient(fmt.Errorf("%w: snowflake ID %d is not positive", leaf.ErrInvalidArgument, id))
	}
	parts, err := snow.Decode(id)
	if errors.Is(err, leaf.ErrInvalidArgument) {
		err = asClient(fmt.Errorf("%w: snowflake ID %d cannot have been issued with this server's layout (its time or worker is out of range)",
			leaf.ErrInvalidArgument, id))
	}
	return parts, err
}

// validTag is leaf.ValidateTag on a tag from the request.
func validTag(tag string) error { return asClient(leaf.ValidateTag(tag)) }

// parseCount is leaf.ParseCount on a count from the request.
func parseCount(s string) (int, error) {
	n, err := leaf.ParseCount(s)
	return n, asClient(err)
}

// oneLine keeps an error message on one line: the text bodies are one line,
// and a message may carry text from a driver or a client (a path may hold an
// escaped newline).
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}

// truncate shortens s to at most n bytes plus an ellipsis, for messages and
// logs that may carry client input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
