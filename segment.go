package leaf

import (
	"context"
	"fmt"
	"time"
)

// MaxStep is the largest step a tag may have (Leaf's cap on the adaptive step).
const MaxStep = 1_000_000

// Alloc is one row of leaf_alloc: a tag and the exclusive upper bound of the IDs
// already reserved for it.
type Alloc struct {
	Tag         string
	MaxID       int64
	Step        int
	Description string
	UpdateTime  time.Time
}

// IDRange is a run of IDs [Start, End) of one range, handed out by whoever
// took it rather than by the generator: Period is the key of a periodic
// tag's period the IDs belong to ("" for other tags), within which they
// are unique.
type IDRange struct {
	Start, End int64
	Period     string
}

// Check reports a range that cannot answer a take of at most n IDs: one
// not above 0, empty, or longer than n. The transports check what a
// generator returned with it before they answer, so that a broken
// generator is an internal error, never a range handed out.
func (r IDRange) Check(n int) error {
	if r.Start < 1 || r.End <= r.Start || r.End-r.Start > int64(n) {
		return fmt.Errorf("generator returned range [%d, %d) for at most %d IDs", r.Start, r.End, n)
	}
	return nil
}

// RangeUse says who hands an IDRange's IDs out, and so which tags'
// ranges are refused.
type RangeUse uint8

const (
	// ByClient: a client hands the IDs out itself (the range routes,
	// client.Buffered). Refused for an opaque or a formatted tag
	// (ErrOpaqueRange, ErrFormattedRange), whose IDs leave through their
	// encoding, and for an ordered tag (ErrOrderedTag), whose IDs a
	// client would hand out of order.
	ByClient RangeUse = iota + 1
	// ByForwarder: a server forwarding the requests of an ordered tag to
	// its owner hands them out at once, in order, to the requests it
	// batched. Refused for opaque, formatted and periodic tags; on a
	// server that does not own an ordered tag, a *NotOwnerError.
	ByForwarder
)

// Reservation is the outcome of one reserve transaction: the IDs
// [MaxID-Step, MaxID) now belong to the caller. Both numbers come from the row
// the transaction updated, never from a cached value.
type Reservation struct {
	Tag   string
	MaxID int64 // max_id after the update: the exclusive end of the range
	Step  int   // the step added by this update
	// StoredStep is the step column of the row as read in the same transaction;
	// the adaptive step never goes below it.
	StoredStep int
	// Stripe is the zero Stripe when the store is one database: the IDs
	// reserved are [Start(), MaxID). From a store that spans several, MaxID
	// and Step are in the numbers of the database that reserved them, and
	// the IDs are those stripe.Reserved yields.
	Stripe Stripe
}

// Start is the first ID of the reserved range.
func (r Reservation) Start() int64 { return r.MaxID - int64(r.Step) }

// SegmentStore keeps leaf_alloc. Implementations must be safe for concurrent use
// by many goroutines and many processes sharing one database.
type SegmentStore interface {
	// Tags lists every tag in the table.
	Tags(ctx context.Context) ([]string, error)
	// Allocs lists every row, ordered by tag.
	Allocs(ctx context.Context) ([]Alloc, error)
	// Alloc reads one row; ErrTagNotFound if there is none.
	Alloc(ctx context.Context, tag string) (Alloc, error)
	// Reserve atomically adds step to the tag's max_id (the stored step when
	// step <= 0) and returns the reserved range, read from the updated row in
	// the same transaction. ErrTagNotFound if the tag has no row; it never
	// creates one.
	Reserve(ctx context.Context, tag string, step int) (Reservation, error)
	// GiveBack sets max_id to from, but only if max_id still equals expect (no
	// one reserved since) and from is not below the tag's tombstone (the row
	// is not one re-created after a delete): it returns unused IDs at
	// graceful shutdown. It reports whether the row was updated.
	GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error)
	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// SegmentAdmin manages tags. Stores that support it are found by type assertion.
//
// A deleted tag leaves a tombstone: the highest max_id its rows ever had when
// they were deleted, kept beside leaf_alloc (which stays Leaf's table). Every
// ID issued under the deleted tag is below it, so a tag created again never
// hands those IDs out a second time.
type SegmentAdmin interface {
	// CreateTag inserts a row with MaxID as the first ID to issue; ErrTagExists
	// if the tag has one. MaxID 0 means "no start given": the row starts at
	// the tag's tombstone if it has one (continuing above every ID issued
	// under it), else at 1. A MaxID >= 1 below the tombstone fails with a
	// *TombstoneError (ErrTagTombstoned) naming the lowest start allowed. The
	// tombstone check and the insert are one transaction.
	CreateTag(ctx context.Context, a Alloc) error
	// SetStep changes the stored step; ErrTagNotFound if there is no row.
	SetStep(ctx context.Context, tag string, step int) error
	// DeleteTag removes the row and records its max_id in the tag's
	// tombstone (keeping the higher of that and any earlier tombstone), in
	// one transaction; ErrTagNotFound if there is no row.
	DeleteTag(ctx context.Context, tag string) error
}

// AllocPager is implemented by stores that list leaf_alloc a keyset page at
// a time, as every store of this module does; found by type assertion. Tag
// administration, the CLI's listings and a store over several databases
// read the rows with it, at a cost set by the page, not by the table.
type AllocPager interface {
	// AllocsPage lists at most limit rows whose tag begins with prefix
	// ("" for every tag) and sorts after the tag after ("" for the first
	// page), in the order of the store's biz_tag index. The last tag of a
	// page, passed as after, reads the next; rows created or deleted
	// between pages move no other row, so a walk sees every row that
	// exists throughout exactly once. Period rows (see PeriodStore) are
	// not listed. Invalid arguments wrap ErrInvalidArgument (an invalid
	// cursor, ErrInvalidTag too).
	AllocsPage(ctx context.Context, prefix, after string, limit int) ([]Alloc, error)
}

// SegmentVersioner is implemented by stores that keep a change counter of
// their tags beside leaf_alloc (leaf_alloc_version, one row): a number that
// every CreateTag and DeleteTag of the store moves in the transaction that
// makes its change. A generator reads it at each refresh, one primary-key
// read, and lists the tags only when it moved. Rows inserted or deleted by
// other tools, by Java Leaf or by an older server do not move it, so the
// generator still lists every tag now and then. Found by type assertion.
type SegmentVersioner interface {
	// TagsVersion reads the counter. It never returns to a value it had;
	// equal answers mean no tag was created or deleted through
	// SegmentAdmin in between.
	TagsVersion(ctx context.Context) (int64, error)
}

// DegradedStore is a segment store that can say why it is degraded beyond
// failing calls: a failover of its database being fenced (package
// sqlstore). The segment generator adds its reasons to its own, for
// /readyz. Found by type assertion on the segment store.
type DegradedStore interface {
	// Degraded lists the reasons, each a summary, then ": " and the cause;
	// empty when healthy. It does no database work.
	Degraded() []string
}

// TombstoneError is CreateTag's answer to a start below a deleted tag's
// tombstone. It matches ErrTagTombstoned with errors.Is.
type TombstoneError struct {
	Tag string
	// MinStart is the tombstone: the lowest start allowed. IDs below it may
	// have been issued under the deleted tag.
	MinStart int64
}

func (e *TombstoneError) Error() string {
	return fmt.Sprintf("tag %s was deleted; IDs below %d may have been issued under it; create it with start >= %d or without a start",
		e.Tag, e.MinStart, e.MinStart)
}

func (e *TombstoneError) Unwrap() error { return ErrTagTombstoned }

// ValidateStep checks a stored step: 1..MaxStep.
func ValidateStep(step int) error {
	if step < 1 || step > MaxStep {
		return fmt.Errorf("%w: step %d, want 1..%d", ErrInvalidArgument, step, MaxStep)
	}
	return nil
}

// ValidateAlloc checks a tag about to be created: valid name, step 1..MaxStep,
// first ID >= 1 or 0 for "no start given" (see SegmentAdmin.CreateTag),
// description at most 256 bytes.
func ValidateAlloc(a Alloc) error {
	if err := ValidateTag(a.Tag); err != nil {
		return err
	}
	if err := ValidateStep(a.Step); err != nil {
		return err
	}
	if a.MaxID < 0 {
		return fmt.Errorf("%w: start %d, want >= 1 (or none)", ErrInvalidArgument, a.MaxID)
	}
	if len(a.Description) > 256 {
		return fmt.Errorf("%w: description is %d bytes, at most 256", ErrInvalidArgument, len(a.Description))
	}
	return nil
}

// SegmentStatus describes one tag's buffers, for /cache, /v2/status and metrics.
type SegmentStatus struct {
	Tag string
	// Period is the key of the period the buffers hold IDs of, for a
	// periodic tag (the latest one this server issued from); "" for a plain
	// tag. The counters are the tag's, over all its periods.
	Period    string
	InitOK    bool          // the first range has been loaded
	NextReady bool          // the second buffer holds a range
	Pos       int           // which of the two buffers is current (0 or 1), as Leaf shows it
	Loading   bool          // a load is in flight
	Step      int           // the step the next load will use
	MinStep   int           // the stored step: the adaptive floor
	LastLoad  time.Time     // when the latest range was reserved; zero before the first
	LoadError string        // the last load's error; empty when it succeeded
	Buffers   [2]RangeState // indexed by buffer position, as Leaf's value0/max0, value1/max1
	Issued    uint64        // IDs issued since start
	Loads     uint64        // ranges reserved since start
	Waits     uint64        // requests that found both buffers empty and waited
	// LoadErrors counts failed reserve attempts since start.
	LoadErrors uint64
	// LoadSeconds is the total time spent in successful reserve calls, and
	// LoadLatency how long they took, by the generator's own bounds (the
	// count of all is Loads). Zero before the first timed load.
	LoadSeconds float64
	LoadLatency Histogram
	// GivenBack counts IDs returned to the store by a graceful Close.
	GivenBack uint64
	// Remaining is the IDs left in both buffers.
	Remaining int64
	// Rate is IDs issued per second over the last 10 seconds.
	Rate float64
	// SecondsLeft is Remaining/Rate: how long the buffers last at the current
	// rate if no range arrives. -1 when nothing is being issued.
	SecondsLeft float64
	// Ordered says the tag is ordered (see OrderedStore): one server at a
	// time, its owner, issues its IDs. The buffers are this server's while
	// it owns the tag, empty otherwise.
	Ordered bool
	// Owner is the ordered tag's owner as this server last saw it
	// (TagLease.Owner; this server's own identity while it owns the tag),
	// "" when unknown or no one owns it; OwnerToken is that lease's
	// fencing token.
	Owner      string
	OwnerToken int64
}

// SegmentTotals are a segment generator's counters over every tag since it
// started, including tags whose state it dropped since (idle, or deleted):
// unlike a sum over statuses they never go down, so metrics, the status
// summary and the monitor's history read them as counters and rates.
type SegmentTotals struct {
	Known  int // tag names known
	Active int // tags with state: asked for since they were last dropped

	Issued, Loads, LoadErrors, Waits, GivenBack uint64
	// LoadSeconds is the time spent in successful reserve calls, and
	// LoadLatency how long they took, by the generator's own bounds: always
	// all of them, zero counts before the first load.
	LoadSeconds float64
	LoadLatency Histogram
	// Rate is IDs issued per second over all tags, over the last 10
	// seconds.
	Rate float64

	Dropped      uint64 // tag states dropped after the idle timeout without a request
	Lookups      uint64 // store reads of names not in the tag list
	Refused      uint64 // names answered at once because the lookup budget was spent
	Listings     uint64 // reads of the whole tag list
	VersionReads uint64 // refreshes settled by the change counter alone
}

// Histogram counts durations by upper bound, as a Prometheus histogram
// does: Counts[i] is how many took at most Bounds[i] (cumulative), Bounds
// ascending. Durations above the last bound are in no bucket; the total
// count is kept beside the histogram. The zero value has no buckets.
// Bounds may be shared between values: read it, never write to it.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
}

// Busier orders tag statuses busiest first, as the status summary, the
// metrics and the monitor page all rank them: by IDs/s, then by IDs issued
// (so that idle slots go to the tags that mattered, and stay put), then by
// name, so that the order is the same on every read of the same traffic.
func Busier(a, b *SegmentStatus) bool {
	if a.Rate != b.Rate {
		return a.Rate > b.Rate
	}
	if a.Issued != b.Issued {
		return a.Issued > b.Issued
	}
	return a.Tag < b.Tag
}

// RangeState is one buffer: the range [Start, Max) with Value the next ID to issue.
type RangeState struct {
	Start int64
	Value int64
	Max   int64
	Step  int
}

// Remaining is how many IDs of the range are left.
func (r RangeState) Remaining() int64 {
	if r.Value >= r.Max {
		return 0
	}
	return r.Max - r.Value
}
