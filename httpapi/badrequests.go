package httpapi

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/leafgo/leaf/internal/apierr"
	"github.com/valyala/fasthttp"
)

// Requests the fast transport refuses before any route sees them: a garbage
// request line, headers or a body over the limits, a client too slow to
// send its request, a failed TLS handshake, a connection over MaxConns. Any
// client can send as many as it likes, so none of them gets a log line of its
// own: each is counted by reason (leaf_http_bad_requests_total through
// BadRequestObserver), and the log gets a summary, at most one line per
// badRequestSummaryEvery, with the counts since the previous line.

// badReason is why a request was refused; badRequestReasons names each.
type badReason uint8

const (
	badMalformed       badReason = iota // unparsable request line, header or URI
	badHeadersTooLarge                  // request line and headers over Limits.MaxHeaderBytes: 431
	badBodyTooLarge                     // body over Limits.MaxBodyBytes: 413
	badTimeout                          // not sent within Limits.ReadTimeout: 408
	badIncomplete                       // the client closed the connection mid-request
	badTLSHandshake                     // the TLS handshake failed (plain HTTP on a TLS port, a bad certificate)
	badTooManyConns                     // a connection over Limits.MaxConns, refused at accept
	numBadReasons
)

// badRequestReasons are the values of the reason label: a fixed set, so that
// the metric's series are bounded whatever clients send.
var badRequestReasons = [numBadReasons]string{
	badMalformed:       "malformed",
	badHeadersTooLarge: "headers_too_large",
	badBodyTooLarge:    "body_too_large",
	badTimeout:         "timeout",
	badIncomplete:      "incomplete",
	badTLSHandshake:    "tls_handshake",
	badTooManyConns:    "too_many_connections",
}

// badRequestSummaryEvery is the least time between two summary lines.
const badRequestSummaryEvery = time.Minute

// unmatchedRoute is the route label of a request no route matched: the
// ServeMux's catch-all pattern, under which requests refused unread are
// observed too.
const unmatchedRoute = "/"

// badRequests counts refused requests and writes the summary lines. The
// summary is written by the refusal that finds the previous line old enough,
// with no timer: nothing to stop, and a burst's tail shows up with the next
// refusal (the metric is always current).
type badRequests struct {
	log *slog.Logger
	obs BadRequestObserver // nil: not counted in a metric

	mu     sync.Mutex
	counts [numBadReasons]uint64 // since the last line
	sample string                // the first cause since the last line
	last   time.Time             // when the last line was written; zero: never
}

func newBadRequests(log *slog.Logger, obs RequestObserver) *badRequests {
	b := &badRequests{log: log}
	b.obs, _ = obs.(BadRequestObserver)
	return b
}

// add counts one refusal and, if the last summary is old enough, writes the
// next. cause is the refusal's error text, for the summary's sample: it may
// quote what the client sent, and is cut short.
func (b *badRequests) add(reason badReason, cause string) {
	if b.obs != nil {
		b.obs.ObserveBadRequest(badRequestReasons[reason])
	}
	now := time.Now()
	b.mu.Lock()
	b.counts[reason]++
	if b.sample == "" {
		b.sample = truncate(cause, 200)
	}
	if !b.last.IsZero() && now.Sub(b.last) < badRequestSummaryEvery {
		b.mu.Unlock()
		return
	}
	counts, sample := b.counts, b.sample
	b.counts, b.sample, b.last = [numBadReasons]uint64{}, "", now
	b.mu.Unlock()

	attrs := make([]any, 0, numBadReasons)
	for r, n := range counts {
		if n > 0 {
			attrs = append(attrs, slog.Uint64(badRequestReasons[r], n))
		}
	}
	b.log.Warn("httpapi: requests refused before routing, counted by reason in leaf_http_bad_requests_total; "+
		"this summary is written at most once a minute",
		slog.Group("refused", attrs...), slog.String("first_cause", sample))
}

// protocolError classifies an error fasthttp met reading a request: why, and
// the status and one-line message to answer with. A TLS connection whose
// handshake has not completed failed in the handshake, whatever the error
// says.
func protocolError(ctx *fasthttp.RequestCtx, err error) (badReason, int, string) {
	if st := ctx.TLSConnectionState(); st != nil && !st.HandshakeComplete {
		return badTLSHandshake, fasthttp.StatusBadRequest, "bad request"
	}
	var small *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &small):
		return badHeadersTooLarge, fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return badBodyTooLarge, fasthttp.StatusRequestEntityTooLarge, apierr.ErrBodyTooLarge.Error()
	case errors.As(err, &timeout) && timeout.Timeout():
		return badTimeout, fasthttp.StatusRequestTimeout, "request timeout"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badIncomplete, fasthttp.StatusBadRequest, "bad request"
	}
	return badMalformed, fasthttp.StatusBadRequest, "bad request"
}
