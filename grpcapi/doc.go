// Package grpcapi is leaf's gRPC transport: the leaf.v1.Leaf service of
// proto/leaf/v1/leaf.proto (generated code in package leafv1), the standard
// health service and server reflection. It mirrors the native JSON API of
// package httpapi.
//
//	NextID(tag)                  one segment ID
//	NextIDs(tag, count)          count (1..10000) strictly increasing segment IDs
//	Range(tag, count)            contiguous segment IDs [start, end), 1 <= end-start <= count,
//	                             leased from the server's buffers; shorter than count
//	                             when the current range has fewer left
//	SnowflakeNextID(key)         one snowflake ID; the key is optional and ignored
//	SnowflakeNextIDs(key, count) count (1..10000) strictly increasing snowflake IDs
//	Decode(id)                   id, timestamp_ms, worker_id, sequence of a snowflake ID
//
// The segment answers carry period, set for a periodic tag: the period
// (yyyymmdd, yyyymm or yyyy in the tag's time zone) every ID of the answer
// belongs to. A periodic tag restarts at its start value each period, so
// its IDs are unique only together with their period.
//
// Like httpapi, the package validates requests (leaf.ValidateTag,
// leaf.ValidateCount) before a generator sees them, calls a generator, and
// maps the generator's errors to status codes through one table (errors.go).
// It holds no ID logic. A call that fails answers a status and no ID; an ID
// that is not positive, a batch of the wrong size or order, or a range out of
// bounds from a generator is a bug, answered Internal rather than served.
//
// Status codes, tried in this order with errors.Is (the leaf sentinels come
// before the context errors they may wrap):
//
//	leaf.ErrInvalidTag              InvalidArgument   tag or key not 1-128 bytes of [A-Za-z0-9._:-]
//	leaf.ErrInvalidCount            InvalidArgument   count outside 1..10000
//	leaf.ErrInvalidArgument         InvalidArgument   an ID the snowflake layout cannot hold (Decode)
//	leaf.ErrTagNotFound             NotFound          no such tag in the store
//	leaf.ErrOpaqueRange             FailedPrecondition Range of an opaque tag
//	segment mode off                NotFound          "segment mode is disabled"
//	snowflake mode off              NotFound          "snowflake mode is disabled"
//	leaf.ErrNotReady                Unavailable+      buffers empty, store unreachable or slow
//	leaf.ErrClockBackwards          Unavailable+      clock behind the last snowflake ID
//	leaf.ErrWorkerIDsExhausted      Unavailable+      no worker ID to be had
//	leaf.ErrWorkerLost              Unavailable+      the worker's lease on its ID is gone
//	leaf.ErrWorkerInUse             Unavailable+      another live server holds the worker's claim
//	leaf.ErrClockSkew               Unavailable+      the clock is off the live peers' average
//	leaf.ErrClosed                  Unavailable+      the server is shutting down
//	rate limit exceeded             ResourceExhausted the client's wait in a RetryInfo
//	context.DeadlineExceeded        DeadlineExceeded  the call's deadline passed
//	context.Canceled                Canceled          the client went away
//	anything else                   Internal          a bug: logged, message "internal error"
//
// Unavailable+ carries a google.rpc.RetryInfo detail with a retry_delay of
// 1 s, as httpapi's 503 carries Retry-After: 1. The condition is expected to
// pass, here or on another server.
//
// Status messages are written for the client, as httpapi's: a refused
// request's says what is wrong with it ("invalid count: 0, want 1..10000");
// any other's is its row's ("not ready: no IDs can be issued right now;
// retry shortly"), never the generator's error text, which may carry a
// driver's message, a host and port, or a Go type. Every failed call carries
// a request ID, in the x-request-id trailer and a google.rpc.RequestInfo
// detail; an Internal, Unavailable or DeadlineExceeded is logged with that
// ID and its cause, at most ten lines per ten seconds.
//
// Deadlines: a segment call that finds both of its tag's buffers empty waits
// for the range being loaded until the call's deadline or the generator's
// WaitTimeout (segment.wait_timeout, 1 s by default), whichever comes first,
// and then answers Unavailable: a long deadline does not hold a caller
// through a store outage.
//
// Health (grpc.health.v1.Health) answers SERVING for "" and for
// "leaf.v1.Leaf" while the process runs, like httpapi's /healthz: a degraded
// generator keeps issuing from its buffers, so degradation does not make the
// service NOT_SERVING (see Register). A mode that is off is not unhealthy
// either: its methods answer NotFound at once.
//
// The Leaf methods are unary. A panic in a generator is not recovered here;
// add a recovery interceptor through the grpc.ServerOptions of NewServer if
// one is wanted.
package grpcapi
