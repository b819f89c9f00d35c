// Package client is the Go client of leaf: it calls a cluster of leaf
// servers over the /v2 JSON API (net/http, nothing else), fails over from
// one server to the next, and can hand out segment IDs from ranges it
// leases, Tinyid-style, at in-process speed.
//
//	c, err := client.New([]string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"})
//	id, err := c.NextID(ctx, "order")                  // one segment ID, one request
//	ids, err := c.NextIDs(ctx, "order", 100)           // a batch
//	start, end, err := c.NextRange(ctx, "order", 1000) // a lease of [start, end)
//	sf, err := c.SnowflakeID(ctx)
//	parts, err := c.Decode(ctx, sf)
//
//	b, err := c.Buffered("order") // IDs from local leases
//	defer b.Close()
//	id, err = b.NextID(ctx)       // one atomic add
//
// # Failover
//
// Each call starts at the next server in round-robin order (each Client's
// rotation starts at a random server; with zones, the next of its own
// zone's, see Zones). A transport error, an attempt that
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
// # Zones
//
// A cluster spread over data centres (zones) is best called in the
// caller's own, crossing over only when it fails. NewZoned takes each
// server's zone, WithZone the client's:
//
//	c, err := client.NewZoned([]client.Endpoint{
//		{URL: "http://10.1.0.1:8080", Zone: "dc1"}, {URL: "http://10.1.0.2:8080", Zone: "dc1"},
//		{URL: "http://10.2.0.1:8080", Zone: "dc2"}, {URL: "http://10.2.0.2:8080", Zone: "dc2"},
//	}, client.WithZone("dc1"))
//
// Calls go round robin to the own zone's servers, and fail over as above:
// to the own zone's other servers first, then to the other zones' (a
// server without a zone is in another zone). Once every server of the own
// zone has failed and cools down, calls go straight to the other zones;
// when a cool-down ends that server is tried first again, and the calls
// come back as soon as it answers. One Warn line marks the move away, one
// Info line the return. Stats counts the requests and failures of each
// server (ByZone sums them per zone). A Buffered leases through its
// Client, so it has the same preference. WithZone naming a zone that no
// endpoint is in is an error, since a typo would send every call across
// zones; a client in a zone without servers leaves WithZone out. Without
// WithZone the zones only label Stats and logs.
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
// Client.Buffered returns a Buffered for one tag. It leases ranges through
// Client.NextRange and holds two leases: the current one, from which NextID
// takes IDs with one atomic add (no lock, no allocation; tens of millions of IDs
// per second), and the next one, leased in the background once the current
// one is 20% used (WithPrefetch). The lease size follows the rate: from
// 10,000 IDs (WithRangeSize), while a lease would last under a second
// (WithAdaptiveRange) the next is what would last a second at the rate
// seen, at least twice the last, up to 10,000,000 (WithMaxRangeSize), in
// ranges of up to leaf.MaxRange (1,000,000) IDs, one request each, as far
// as the server's current segment holds them, each handed out as it
// arrives; it halves back when the rate drops. A call that finds no
// ID at hand waits for the lease in flight until its context is done. No ID
// is ever handed out twice; IDs increase within a range, and from range to
// range while the ranges come from one server, but may go back when a
// range comes from another server. The unused IDs of the leases held are skipped when
// the process exits.
//
// # Periodic tags
//
// A periodic tag (created with a period: day, month or year) restarts at
// its start value each period, so its IDs are unique only together with
// their period. NextIDPeriod, NextIDsPeriod and NextRangePeriod return
// the period (yyyymmdd, yyyymm or yyyy in the tag's time zone) with the IDs;
// NextID, NextIDs and Range answer the numbers alone. A Buffered refuses a
// periodic tag with ErrPeriodicTag: its leases would hand out a past
// period's IDs once the period turned.
//
// # Ordered tags
//
// An ordered tag's IDs strictly increase in the order the cluster issues
// them: one server, the tag's owner, issues them, and the others forward
// its requests (or, configured so, redirect them, which the Client
// follows). NextID and NextIDs work on any server; a call that starts
// after another's answer arrived gets larger IDs. While the owner is
// being replaced (it died, and its lease has to run out) the servers
// answer 503 with a Retry-After, which the Client retries as any 503.
// Range refuses an ordered tag, and a Buffered fails with ErrOrderedTag
// (matching leaf.ErrOrderedTag): a client's cache would hand the IDs out
// of order.
//
// A forwarded answer names the owner (header Leaf-Owner). When it is one of
// the endpoints, the Client calls it first for the tag from then on, in any
// zone, sparing the forward: see WithOwnerRouting.
package client
