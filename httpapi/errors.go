package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/leafgo/leaf"
)

// Errors of the transport itself; they go through the same table as the
// generator's.
var (
	errNoRoute           = errors.New("not found")
	errMethodNotAllowed  = errors.New("method not allowed")
	errSegmentDisabled   = errors.New("segment mode is disabled")
	errSnowflakeDisabled = errors.New("snowflake mode is disabled")
	errBodyTooLarge      = errors.New("request body too large")
)

// errorKind is one row of the error table.
type errorKind struct {
	err    error
	status int
	code   string // the "code" of a /v2 error body
}

// errorTable maps every error a handler can meet to a status code. It is the
// only place that does so. Rows are tried in order with errors.Is, so an
// error wrapping several sentinels gets the first row's status: the leaf
// sentinels come before the context errors they may wrap.
//
// 503 carries Retry-After: the condition is expected to pass (a load in
// flight, a store coming back, the clock catching up); so does 429, with
// the client's own wait. 401 carries the Bearer challenge. An error in no row is
// a bug: 500, logged, and its text is not shown to the client.
var errorTable = [...]errorKind{
	{leaf.ErrInvalidTag, http.StatusBadRequest, "invalid_tag"},
	{leaf.ErrInvalidCount, http.StatusBadRequest, "invalid_count"},
	{leaf.ErrInvalidArgument, http.StatusBadRequest, "invalid_argument"},
	{leaf.ErrTagNotFound, http.StatusNotFound, "tag_not_found"},
	{leaf.ErrTagExists, http.StatusConflict, "tag_exists"},
	{leaf.ErrTagTombstoned, http.StatusConflict, "tag_tombstoned"},
	{leaf.ErrNotReady, http.StatusServiceUnavailable, "not_ready"},
	{leaf.ErrClockBackwards, http.StatusServiceUnavailable, "clock_backwards"},
	{leaf.ErrWorkerIDsExhausted, http.StatusServiceUnavailable, "worker_ids_exhausted"},
	{leaf.ErrWorkerLost, http.StatusServiceUnavailable, "worker_lost"},
	{leaf.ErrWorkerInUse, http.StatusServiceUnavailable, "worker_in_use"},
	{leaf.ErrClockSkew, http.StatusServiceUnavailable, "clock_skew"},
	{leaf.ErrClosed, http.StatusServiceUnavailable, "closed"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
	// The client gave up; it will not read the answer, and it is no bug.
	{context.Canceled, http.StatusServiceUnavailable, "canceled"},
	{errSegmentDisabled, http.StatusNotFound, "segment_disabled"},
	{errSnowflakeDisabled, http.StatusNotFound, "snowflake_disabled"},
	{errNoRoute, http.StatusNotFound, "not_found"},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed"},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge, "request_too_large"},
	{errUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{errRateLimited, http.StatusTooManyRequests, "rate_limited"},
}

var internalError = errorKind{nil, http.StatusInternalServerError, "internal"}

// classify finds err's row in the error table.
func classify(err error) errorKind {
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
	jsonStyle                // {"error":"...","code":"..."}
	leafJSONStyle            // {"errorMsg":"..."}
)

// writeError answers a request with err, its status taken from the error
// table. Internal errors are logged with the request and shown to the client
// only as "internal server error".
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, style errorStyle, err error) int {
	k, msg := s.answerFor(r.Context(), r.Method, r.URL.Path, err)
	h := w.Header()
	h["X-Content-Type-Options"] = noSniff
	switch k.status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		h["Retry-After"] = []string{retryAfter(err)}
	case http.StatusUnauthorized:
		h["Www-Authenticate"] = []string{wwwAuthenticate}
	}
	switch style {
	case jsonStyle:
		body, _ := json.Marshal(struct { // strings only: cannot fail
			Error string `json:"error"`
			Code  string `json:"code"`
		}{msg, k.code})
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

// answerFor finds err's row in the error table and the one-line message to
// answer with. An internal error is logged with the request here and shown
// to the client only as "internal server error". Both transports answer
// errors through it.
func (s *Server) answerFor(ctx context.Context, method, path string, err error) (errorKind, string) {
	k := classify(err)
	if k.status == http.StatusInternalServerError {
		s.log.ErrorContext(ctx, "httpapi: internal error", "method", method, "path", truncate(path, 200), "err", err)
		return k, "internal server error"
	}
	return k, oneLine(err.Error())
}

// notFound answers 404 for a path no route matches.
func (s *Server) notFound(style errorStyle) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, style, &wrapped{errNoRoute, "no route for " + truncate(r.URL.Path, 100)})
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
	return &wrapped{errMethodNotAllowed, "method " + truncate(method, 20) + " not allowed; use " + allow}
}

// wrapped is an error with its own message that still matches a sentinel.
type wrapped struct {
	err error
	msg string
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

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
