package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
)

// ErrModeDisabled is matched by the error of a server that does not run the
// requested mode ("segment mode is disabled", "snowflake mode is disabled").
// It is not retried: servers of one cluster are configured alike.
var ErrModeDisabled = errors.New("mode disabled on the server")

// Error is an error answered by a server: a status other than 200 with, on
// the /v2 routes, a body {"error":"...","code":"..."}.
//
// errors.Is matches it against the sentinel of package leaf its code stands
// for (leaf.ErrTagNotFound for "tag_not_found", and so on; see the table in
// codeSentinels), or, for a body without a known code, the sentinel of its
// status (400: leaf.ErrInvalidArgument, 503: leaf.ErrNotReady).
type Error struct {
	// Method and URL are the request that was answered.
	Method, URL string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the body's "code" ("tag_not_found", "not_ready", ...); empty
	// when the body was not a /v2 error (a proxy's page, say).
	Code string
	// Message is the server's message: the body's "error", or the start of
	// a body that was not JSON.
	Message string
	// RetryAfter is the server's Retry-After header; 0 when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("leaf client: ")
	b.WriteString(e.Method)
	b.WriteByte(' ')
	b.WriteString(e.URL)
	b.WriteString(": ")
	b.WriteString(strconv.Itoa(e.StatusCode))
	if e.Code != "" {
		b.WriteByte(' ')
		b.WriteString(e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the sentinel the error stands for, or nil.
func (e *Error) Unwrap() error {
	if s, ok := codeSentinels[e.Code]; ok {
		return s
	}
	switch e.StatusCode {
	case http.StatusBadRequest:
		return leaf.ErrInvalidArgument
	case http.StatusServiceUnavailable:
		return leaf.ErrNotReady
	}
	return nil
}

// retryable reports whether another server (or the same one, later) may
// answer differently: any 5xx but format_exhausted, which every server
// answers alike. A 4xx is the request's fault and is never retried.
func (e *Error) retryable() bool { return e.StatusCode >= 500 && e.Code != "format_exhausted" }

// ErrFormatExhausted: the tag's sequence outgrew its ID format's width (a
// 503 "format_exhausted"). No server can write its IDs any more, so the
// call is not retried; a periodic tag's next period starts afresh.
var ErrFormatExhausted = errors.New("the tag's sequence outgrew its ID format's width")

// ErrFormattedTag: a tag with an ID format has no ranges (a 400
// "formatted_tag"): a lease would hand out bare numbers, not the tag's
// IDs. Buffered answers it; use NextFormatted.
var ErrFormattedTag = fmt.Errorf("%w: a formatted tag's IDs cannot be leased or buffered; use NextFormatted", leaf.ErrInvalidArgument)

// ErrOrderedTag: an ordered tag has no ranges (a 409 "ordered_tag"): its
// IDs strictly increase in the order the cluster issues them, and a lease
// cached in a client would hand them out of that order. Buffered answers
// it; Client.NextID and NextIDs serve an ordered tag from any server, in
// order. It matches leaf.ErrOrderedTag.
var ErrOrderedTag = fmt.Errorf("%w: an ordered tag's IDs cannot be leased or buffered, since a client's cache would hand them out of the order they were issued in; use NextID or NextIDs", leaf.ErrOrderedTag)

// ErrNotFormatted is the answer of NextFormatted and NextIDsFormatted for
// a tag without an ID format.
var ErrNotFormatted = fmt.Errorf("%w: the tag has no ID format; use NextID", leaf.ErrInvalidArgument)

// codeSentinels maps the "code" of a /v2 error body (httpapi's error table)
// back to the sentinel the server started from. The server's "timeout" and
// "canceled" mean its own wait ran out: for the caller that is a server not
// ready, not a deadline of its own.
var codeSentinels = map[string]error{
	"invalid_tag":          leaf.ErrInvalidTag,
	"invalid_count":        leaf.ErrInvalidCount,
	"invalid_argument":     leaf.ErrInvalidArgument,
	"tag_not_found":        leaf.ErrTagNotFound,
	"tag_exists":           leaf.ErrTagExists,
	"tag_tombstoned":       leaf.ErrTagTombstoned,
	"opaque_range":         leaf.ErrOpaqueRange,
	"not_ready":            leaf.ErrNotReady,
	"clock_backwards":      leaf.ErrClockBackwards,
	"worker_ids_exhausted": leaf.ErrWorkerIDsExhausted,
	"worker_lost":          leaf.ErrWorkerLost,
	"lease_expired":        leaf.ErrNotReady,
	"closed":               leaf.ErrClosed,
	"timeout":              leaf.ErrNotReady,
	"canceled":             leaf.ErrNotReady,
	"format_exhausted":     ErrFormatExhausted,
	"formatted_tag":        ErrFormattedTag,
	"ordered_tag":          ErrOrderedTag,
	"not_owner":            leaf.ErrNotOwner,
	"no_owner":             leaf.ErrNotReady,
	"lease_lost":           leaf.ErrNotReady,
	"owner_busy":           leaf.ErrNotReady,
	"owner_unreachable":    leaf.ErrNotReady,
	"segment_disabled":     ErrModeDisabled,
	"snowflake_disabled":   ErrModeDisabled,
}

// maxMessage bounds the message kept from a body that is not a /v2 error.
const maxMessage = 200

// plainMessage turns a non-JSON error body into one short line.
func plainMessage(body []byte) string {
	s := strings.TrimSpace(string(body))
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	return s
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// Anything else, or a time in the past, is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), time.Hour)
	}
	return 0
}
