package apierr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
	"google.golang.org/grpc/codes"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		err    error
		status int
		grpc   codes.Code
		code   string
	}{
		{leaf.ErrInvalidTag, 400, codes.InvalidArgument, "invalid_tag"},
		{leaf.ErrInvalidCount, 400, codes.InvalidArgument, "invalid_count"},
		{leaf.ErrInvalidArgument, 400, codes.InvalidArgument, "invalid_argument"},
		{leaf.ErrTagNotFound, 404, codes.NotFound, "tag_not_found"},
		{leaf.ErrTagExists, 409, codes.AlreadyExists, "tag_exists"},
		{leaf.ErrNotReady, 503, codes.Unavailable, "not_ready"},
		{leaf.ErrClockBackwards, 503, codes.Unavailable, "clock_backwards"},
		{leaf.ErrWorkerIDsExhausted, 503, codes.Unavailable, "worker_ids_exhausted"},
		{leaf.ErrWorkerLost, 503, codes.Unavailable, "worker_lost"},
		{leaf.ErrClosed, 503, codes.Unavailable, "closed"},
		{leaf.ErrOrderedTag, 409, codes.FailedPrecondition, "ordered_tag"},
		{leaf.ErrOwnerBusy, 503, codes.Unavailable, "owner_busy"},
		{context.DeadlineExceeded, 503, codes.DeadlineExceeded, "timeout"},
		{context.Canceled, 503, codes.Canceled, "canceled"},
		{ErrSegmentDisabled, 404, codes.NotFound, "segment_disabled"},
		{ErrSnowflakeDisabled, 404, codes.NotFound, "snowflake_disabled"},
		{ErrTagsDisabled, 404, codes.NotFound, "tags_disabled"},
		{ErrNoRoute, 404, codes.NotFound, "not_found"},
		{ErrMethodNotAllowed, 405, codes.Unimplemented, "method_not_allowed"},
		{ErrBodyTooLarge, 413, codes.InvalidArgument, "request_too_large"},
		{&RateLimitedError{Wait: time.Second}, 429, codes.ResourceExhausted, "rate_limited"},
		// A leaf sentinel wins over the context error it wraps, the width
		// and the lease over the ErrNotReady the issuer adds.
		{fmt.Errorf("%w: waiting for a load: %w", leaf.ErrNotReady, context.DeadlineExceeded), 503, codes.Unavailable, "not_ready"},
		{fmt.Errorf("%w: %w", leaf.ErrNotReady, tagshape.ErrWidthExceeded), 503, codes.FailedPrecondition, "format_exhausted"},
		{fmt.Errorf("%w: %w", leaf.ErrNotReady, leaf.ErrLeaseExpired), 503, codes.Unavailable, "lease_expired"},
		{fmt.Errorf("store: %w", leaf.ErrTagNotFound), 404, codes.NotFound, "tag_not_found"},
		// An owner named, or none alive.
		{&leaf.NotOwnerError{Tag: "t", URL: "http://10.0.0.9:8080"}, 409, codes.Unavailable, "not_owner"},
		{&leaf.NotOwnerError{Tag: "t"}, 503, codes.Unavailable, "no_owner"},
		{errors.New("boom"), 500, codes.Internal, "internal"},
		{io.EOF, 500, codes.Internal, "internal"},
	}
	for _, tt := range tests {
		k := Classify(fmt.Errorf("wrapped: %w", tt.err))
		if k.HTTP != tt.status || k.GRPC != tt.grpc || k.Code != tt.code {
			t.Errorf("Classify(%v) = %d %s %s, want %d %s %s", tt.err, k.HTTP, k.GRPC, k.Code, tt.status, tt.grpc, tt.code)
		}
	}
}

// TestByCode: every code names one row, which a client reads back; what a
// caller matches for it is the row's sentinel or one that says more.
func TestByCode(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		if seen[k.Code] {
			t.Errorf("code %q in two rows", k.Code)
		}
		seen[k.Code] = true
		got, ok := ByCode(k.Code)
		if !ok || got.Code != k.Code || got.HTTP != k.HTTP || got.Err != k.Err {
			t.Errorf("ByCode(%q) = %+v, %t; want %+v", k.Code, got, ok, k)
		}
		if k.Msg == "" || strings.ContainsAny(k.Msg, "\r\n") {
			t.Errorf("row %s: message %q, want one line", k.Code, k.Msg)
		}
		if k.Means != nil && k.Err != nil && !errors.Is(k.Means, k.Err) && !errors.Is(k.Means, leaf.ErrNotReady) &&
			!errors.Is(k.Means, ErrModeDisabled) && k.Means != ErrFormatExhausted && !errors.Is(k.Means, leaf.ErrInvalidArgument) {
			t.Errorf("row %s: a client's caller matches %v, unrelated to %v", k.Code, k.Means, k.Err)
		}
	}
	if _, ok := ByCode("no_such_code"); ok {
		t.Error("ByCode found a row for an unknown code")
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		tag  string
		want string
	}{
		{"an internal error's text stays on the server", errors.New("dial tcp 10.0.0.5:3306: refused"), "t", "internal server error"},
		{"a cause wrapped in a known row stays too", fmt.Errorf("%w: store: dial tcp 10.0.0.5:3306", leaf.ErrNotReady), "t", "not ready: no IDs can be issued right now; retry shortly"},
		{"the transport's words for the client", Client(leaf.ErrInvalidTag, "invalid tag: empty"), "", "invalid tag: empty"},
		{"on one line", Client(ErrNoRoute, "no route for /a\nb"), "", "no route for /a b"},
		{"tag not found names the client's tag", fmt.Errorf("mysql: %w", leaf.ErrTagNotFound), "orders", `tag "orders": tag not found`},
		{"but not an invalid one", leaf.ErrTagNotFound, "a\nb", "tag not found"},
		{"an ordered tag names it", leaf.ErrOrderedTag, "keep", "tag keep: " + Classify(leaf.ErrOrderedTag).Msg},
		{"the width the generator words", fmt.Errorf("tag t: %w: 1000 > 999", tagshape.ErrWidthExceeded), "t", "tag t: sequence outgrew the ID format's width: 1000 > 999"},
		{"a rate limit says the wait", &RateLimitedError{Wait: 2500 * time.Millisecond}, "", "rate limit exceeded for this client; retry after 3s"},
		{"no owner says when", &leaf.NotOwnerError{Tag: "t", Retry: 1500 * time.Millisecond}, "t", (&leaf.NotOwnerError{Tag: "t", Retry: 1500 * time.Millisecond}).Error()},
		{"a format's bug is internal", FormatError("t", errors.New("bad period")), "t", "internal server error"},
		{"a format's width is the client's", FormatError("t", tagshape.ErrWidthExceeded), "t", "tag t: sequence outgrew the ID format's width"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Message(tt.err, Classify(tt.err), tt.tag); got != tt.want {
				t.Errorf("Message(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
