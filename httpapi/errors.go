package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/reqlog"
	"github.com/leafgo/leaf/ordered/forward"
)

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
		k.HTTP = http.StatusTemporaryRedirect
		h["Location"] = []string{owner + r.URL.RequestURI()}
		h[forward.OwnerHeader] = []string{owner}
	}
	switch k.HTTP {
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
		}{msg, k.Code, id})
		writeBody(w, r, k.HTTP, appJSON, append(body, '\n'))
	case leafJSONStyle:
		body, _ := json.Marshal(struct { // a string only: cannot fail
			ErrorMsg string `json:"errorMsg"`
		}{msg})
		writeBody(w, r, k.HTTP, appJSON, append(body, '\n'))
	default:
		writeBody(w, r, k.HTTP, textPlain, []byte(msg+"\n"))
	}
	return k.HTTP
}

// answerFor finds err's row in the error table, the one-line message to
// answer with (apierr.Message; tag is the tag the request names, if any) and
// a new request ID for the answer. Both transports answer errors through it.
//
// A failure of the server's own (5xx, but for a client that gave up) is
// logged here with its cause and the request ID, within the server's log
// budget: an outage fails every request at once, and a line each would bury
// the log.
func (s *Server) answerFor(ctx context.Context, method, path, tag string, err error) (k apierr.Kind, msg, requestID string) {
	k = apierr.Classify(err)
	msg = apierr.Message(err, k, tag)
	requestID = reqlog.NewID()
	if k.HTTP < http.StatusInternalServerError || errors.Is(err, context.Canceled) {
		return k, msg, requestID
	}
	ok, dropped := s.errLog.Allow()
	if !ok {
		return k, msg, requestID
	}
	level, what := slog.LevelWarn, "httpapi: request failed"
	if k.HTTP == http.StatusInternalServerError {
		level, what = slog.LevelError, "httpapi: internal error"
	}
	attrs := []slog.Attr{
		slog.String("request_id", requestID),
		slog.String("method", truncate(method, 20)),
		slog.String("path", truncate(path, 200)),
		slog.Int("status", k.HTTP),
		slog.String("code", k.Code),
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

// notFound answers 404 for a path no route matches.
func (s *Server) notFound(style errorStyle) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, style, apierr.Client(apierr.ErrNoRoute, "no route for "+truncate(r.URL.Path, 100)))
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
	return apierr.Client(apierr.ErrMethodNotAllowed, "method "+truncate(method, 20)+" not allowed; use "+allow)
}

// decodeID takes apart an ID from the request. An ID the layout cannot have
// produced is the client's error, told in the transport's words: the
// generator's may say more than the client needs.
func decodeID(snow SnowflakeGenerator, id int64) (leaf.SnowflakeParts, error) {
	if id < 1 {
		return leaf.SnowflakeParts{}, apierr.AsClient(fmt.Errorf("%w: snowflake ID %d is not positive", leaf.ErrInvalidArgument, id))
	}
	parts, err := snow.Decode(id)
	if errors.Is(err, leaf.ErrInvalidArgument) {
		err = apierr.AsClient(fmt.Errorf("%w: snowflake ID %d cannot have been issued with this server's layout (its time or worker is out of range)",
			leaf.ErrInvalidArgument, id))
	}
	return parts, err
}

// validTag is leaf.ValidateTag on a tag from the request.
func validTag(tag string) error { return apierr.AsClient(leaf.ValidateTag(tag)) }

// parseCount is leaf.ParseCount on a count from the request.
func parseCount(s string) (int, error) {
	n, err := leaf.ParseCount(s)
	return n, apierr.AsClient(err)
}

// truncate shortens s to at most n bytes plus an ellipsis, for messages and
// logs that may carry client input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
