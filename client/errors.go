package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
)

// ErrModeDisabled is matched by the error of a server that does not run the
// requested mode ("segment mode is disabled", "snowflake mode is disabled").
// It is not retried: servers of one cluster are configured alike.
var ErrModeDisabled = apierr.ErrModeDisabled

// Error is an error answered by a server: a status other than 200 with, on
// the /v2 routes, a body {"error":"...","code":"..."}.
//
// errors.Is matches it against the sentinel of package leaf its code stands
// for (leaf.ErrTagNotFound for "tag_not_found", and so on: the Means of the
// servers' error table, internal/apierr), or, for a body without a known code, the sentinel of its
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
	if k, ok := apierr.ByCode(e.Code); ok && k.Means != nil {
		return k.Means
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
func (e *Error) retryable() bool {
	return e.StatusCode >= 500 && !errors.Is(e, ErrFormatExhausted)
}

// ErrFormatExhausted: the tag's sequence outgrew its ID format's width (a
// 503 "format_exhausted"). No server can write its IDs any more, so the
// call is not retried; a periodic tag's next period starts afresh.
var ErrFormatExhausted = apierr.ErrFormatExhausted

// ErrFormattedTag: a tag with an ID format has no ranges (a 400
// "formatted_tag"): a lease would hand out bare numbers, not the tag's
// IDs. Buffered answers it; use NextIDFormatted. It matches
// leaf.ErrInvalidArgument.
var ErrFormattedTag = apierr.ErrFormattedTag

// ErrOrderedTag: an ordered tag has no ranges (a 409 "ordered_tag"): its
// IDs strictly increase in the order the cluster issues them, and a lease
// cached in a client would hand them out of that order. Buffered answers
// it; Client.NextID and NextIDs serve an ordered tag from any server, in
// order. It matches leaf.ErrOrderedTag.
var ErrOrderedTag = apierr.ErrOrderedTag

// ErrNotFormatted is the answer of NextIDFormatted and NextIDsFormatted for
// a tag without an ID format.
var ErrNotFormatted = fmt.Errorf("%w: the tag has no ID format; use NextID", leaf.ErrInvalidArgument)

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
