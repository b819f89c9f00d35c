package leaf

import "errors"

// Sentinel errors, every one of the package. Callers test for them with
// errors.Is; transports map each to one status code (see httpapi) and the
// CLI to one exit code. They are grouped by what they are about.

// Requests: what a caller asked for is malformed or names nothing.
var (
	// ErrInvalidTag: a tag name is empty, longer than MaxTagLen bytes, or has a
	// byte outside [A-Za-z0-9._:-].
	ErrInvalidTag = errors.New("invalid tag")
	// ErrInvalidCount: a batch size outside 1..MaxBatch.
	ErrInvalidCount = errors.New("invalid count")
	// ErrInvalidArgument: any other malformed input (a step, a start ID, an ID to decode).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTagNotFound: the tag has no row in the store.
	ErrTagNotFound = errors.New("tag not found")
	// ErrTagExists: creating a tag that already has a row.
	ErrTagExists = errors.New("tag already exists")
	// ErrTagTombstoned: creating a tag again with a start at or below an ID
	// its deleted predecessor may have issued. The tombstone keeps the
	// highest such ID; a start above it is accepted.
	ErrTagTombstoned = errors.New("tag was deleted and its IDs may not be issued again")
)

// Issuing: no ID can be issued, for now or for good.
var (
	// ErrNotReady: no ID can be issued right now (buffers empty and the store
	// unreachable, or not initialised yet); retrying later may succeed.
	ErrNotReady = errors.New("not ready")
	// ErrClosed: the generator or store has been closed.
	ErrClosed = errors.New("closed")
	// ErrFormattedRange: a range of a formatted tag was asked for; a
	// client handing out its numbers would hand out IDs the tag's format
	// does not write.
	ErrFormattedRange = errors.New("a formatted tag's IDs cannot be leased as a range")
	// ErrOpaqueRange: a range of IDs asked of an opaque tag, whose IDs are
	// encoded one by one as they are issued: a range would hand out raw IDs.
	ErrOpaqueRange = errors.New("opaque tags issue no ranges")
)

// Snowflake workers: the clock and the claim on a worker ID.
var (
	// ErrClockBackwards: the clock went back further than the generator waits out.
	ErrClockBackwards = errors.New("clock moved backwards")
	// ErrClockSkew: the clock differs from the average of the live peers'
	// clocks by more than the configured threshold.
	ErrClockSkew = errors.New("clock skewed from the live peers")
	// ErrWorkerIDsExhausted: the registry has no worker ID left to hand out,
	// or the one it holds for this server is above the layout's maximum.
	ErrWorkerIDsExhausted = errors.New("worker IDs exhausted")
	// ErrWorkerLost: a snowflake worker's claim on its ID is gone (its lease
	// expired or another server took the ID); it must stop issuing.
	ErrWorkerLost = errors.New("worker ID lost")
	// ErrLeaseExpired: a snowflake worker's lease on its ID ran out before
	// its registry renewed it (the registry unreachable): it issues nothing
	// until a renewal succeeds, because past the lease another server may
	// take the ID.
	ErrLeaseExpired = errors.New("worker ID lease expired")
	// ErrWorkerInUse: another live server holds the claim this server needs
	// (its endpoint's or its worker ID's), typically a copied configuration
	// or two processes given one endpoint; this one must not issue under it.
	ErrWorkerInUse = errors.New("worker ID in use by another live server")
)

// Ordered tags (see OrderedStore): the owner's lease and forwarding to it.
var (
	// ErrNotOwner: an ordered tag's IDs are issued by another server, its
	// owner; a *NotOwnerError says which.
	ErrNotOwner = errors.New("not the owner of the ordered tag")
	// ErrLeaseLost: a renewal or a reserve found the lease released or
	// taken by another owner (another fencing token): the owner must have
	// stopped issuing.
	ErrLeaseLost = errors.New("lease of the ordered tag lost")
	// ErrOrderedTag: an operation that would break an ordered tag's order,
	// such as caching its IDs in a client or leasing them as a range to
	// one; or a shape an ordered tag cannot have.
	ErrOrderedTag = errors.New("not allowed for an ordered tag")
	// ErrOwnerUnreachable: the owner of an ordered tag did not answer a
	// forwarded request, or refused it, within the request's wait.
	ErrOwnerUnreachable = errors.New("the owner of the ordered tag could not be reached")
	// ErrOwnerBusy: too many requests for the tag already wait for its
	// owner.
	ErrOwnerBusy = errors.New("too many requests wait for the owner of the ordered tag")
)

// Stores over several databases (see Stripe).
var (
	// ErrStripeLayout: the databases' stripe records disagree with the list of
	// databases a server was given, with each other, or with a store of one
	// database (a database that is one of several opened on its own); the
	// server must not issue from them.
	ErrStripeLayout = errors.New("database stripe records disagree with the configuration")
)
