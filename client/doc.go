// Package client is the Go client of leaf: it calls a cluster of leaf
// servers over the /v2 JSON API (net/http, nothing else), fails over from
// one server to the next, and can hand out segment IDs from ranges it
// leases, Tinyid-style, at in-process speed.
//
//	c, err := client.New([]string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"})
//	id, err := c.NextID(ctx, "order")              // one segment ID, one request
//	ids, err := c.NextIDs(ctx, "order", 100)       // a batch
//	start, end, err := c.Range(ctx, "order", 1000) // a lease of [start, end)
//	sf, err := c.SnowflakeID(ctx)
//	parts, err := c.Decode(ctx, sf)
//
//	b, err := c.Buffered("order") // IDs from local leases
//	defer b.Close()
//	id, err = b.Next(ctx)         // one atomic add
//
// # Failover
//
// Each call starts at the next server in round-robin order (each Client's
// rotation starts at a random server). A transport error, an attempt that
// outlasts WithTimeout (default 1s), a 5xx (503 not ready, clock moved
// backwards, ...) or a garbled answer moves the call on to the next server,
// up to WithAttempts requests in all (default: one per server plus one, at
// least 3). A server that failed goes to the back of the line for a
// cool-down (WithCooldown, default 1s, lengthened by its Retry-After up to
// 10s). When every server has failed once in a call, the call pauses before
// the next round, unless its context would expire first: for a random time
// below a bound that starts at 50ms and doubles per round up to 1s (full
// jitter, so that clients that failed together do not retry together), or
// for the servers' Retry-After, up to 1s, if that is longer. A Buffered's
// background lease retries are jittered the same way, below 50ms doubling
// to 2s. A 4xx is the request's fault and is returned at once, never
// retried. The context bounds the whole call.
//
// Retrying is safe for uniqueness. An ID request whose answer is lost (a
// server that dies mid-answer, a timeout) may have been served: the server
// has then issued those IDs and will never issue them again, to anyone. The
// retry gets new IDs from the same or another server; the lost ones are just
// skipped. No retry can duplicate an ID. The same holds for leased ranges.
//
// # Errors
//
// A server's error answer is an *Error carrying the status, the body's
// "code" and the server's message. It matches the sentinels of package leaf
// with errors.Is: leaf.ErrTagNotFound (404 tag_not_found),
// leaf.ErrInvalidTag, leaf.ErrInvalidCount, leaf.ErrInvalidArgument (400),
// leaf.ErrNotReady (503 not_ready, and the server's own timeouts),
// leaf.ErrClockBackwards, leaf.ErrWorkerLost, leaf.ErrWorkerIDsExhausted,
// leaf.ErrClosed (503), leaf.ErrTagExists (409); ErrModeDisabled for a mode
// the server does not run. Invalid tags and counts are refused before any
// request, with the same sentinels. An attempt that timed out matches
// context.DeadlineExceeded. After failover, the error returned is the last
// attempt's.
//
// # Buffered
//
// Client.Buffered returns a Buffered for one tag. It leases ranges of up to
// 10,000 IDs (WithRangeSize; optionally adaptive, WithAdaptiveRange) through
// Client.Range and holds two: the current one, from which Next takes IDs
// with one atomic add (no lock, no allocation; tens of millions of IDs per
// second), and the next one, leased in the background once the current one
// is 20% used (WithPrefetch). A call that finds both used up waits for the
// lease in flight until its context is done. No ID is ever handed out twice;
// IDs increase within a lease, and from lease to lease while the leases come
// from one server, but may go back when a lease comes from another server.
// The unused IDs of the leases held are skipped when the process exits.
package client
