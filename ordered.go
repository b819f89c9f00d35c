package leaf

import (
	"context"
	"fmt"
	"time"
)

// An ordered tag's IDs strictly increase in the order they are issued,
// across the cluster: one server at a time, its owner, issues them, under a
// lease on the tag kept in the segment store (table leaf_tag_owner, one row
// per ordered tag: a row marks the tag ordered). The other servers forward
// requests to the owner. What keeps the order, none of it resting on a
// clock that servers share:
//   - Each new owner gets a higher fencing token and issues from ranges it
//     reserves after taking the lease, with ReserveOwned: the store checks
//     the owner's token in the reserve's own transaction, so an owner whose
//     lease was taken over reserves nothing more, and every range of the
//     new owner lies above every range of the old.
//   - A server takes over a lease only when the row has no owner
//     (released), or when it has watched the very same lease (owner, token
//     and Version) go unrenewed for a whole lease on its own monotonic
//     clock (see TagLease.Version); the store grants it only if the row
//     still holds that lease and, as a second line, the lease ran out by
//     the store's clock.
//   - An owner stops issuing before its lease can run out by its own
//     monotonic clock, counted from before it sent the request that took or
//     renewed it, so it has stopped before a watching server may take over.
//
// What none of this covers: an owner whose monotonic clock stood still
// while real time passed (its host or VM suspended past the lease) may,
// once it wakes and before its next renewal or reserve finds the lease
// lost, issue the IDs it had already buffered, after the new owner issued
// higher ones. The reserve fence bounds that to the IDs already buffered.

// TagLease is an ordered tag's row: who owns it and until when.
type TagLease struct {
	Tag string
	// Owner identifies the owning server instance and says where to reach
	// it: its advertised base URL, a '#' and a nonce of the process
	// ("http://10.0.0.7:8080#5f2c…"). Empty when no one owns the tag.
	Owner string
	// Token is the fencing token: it grows with each new owner of the
	// tag's row, and every reserve of the owner checks it
	// (OrderedStore.ReserveOwned). A row made again after the tag was
	// deleted or unmarked starts over; that is safe because the fence
	// checks the owner with the token, owners differ by the nonce of their
	// process, and a process issues under one lease of a tag at a time
	// (the ranges of one that ended are never issued).
	Token int64
	// Left is how long the lease had to run when the store answered, by the
	// store's clock: the owner counts it from before it sent its request
	// and stops before it runs out. Zero or negative when the lease has run
	// out by the store's clock, which alone lets no one take it over (see
	// Version).
	Left time.Duration
	// Version is the lease's end as the store records it (lease_until), in
	// the store's own units: compare it for equality only. It changes with
	// every acquisition and renewal, to a value it did not have before
	// (past the last one, should the store's clock stand still); a
	// candidate compares it to tell a live owner's renewals from a dead
	// owner's silence, which a store's clock stepped forward cannot fake.
	Version int64
}

// Held reports whether someone owns the tag and the lease has time left.
func (l TagLease) Held() bool { return l.Owner != "" && l.Left > 0 }

// Same reports whether l and o are the very same lease: the same owner,
// token and Version. A row that shows the same lease over time was not
// renewed, taken or released in between.
func (l TagLease) Same(o TagLease) bool {
	return l.Owner == o.Owner && l.Token == o.Token && l.Version == o.Version
}

// OrderedStore keeps the leases of ordered tags. Stores that support
// ordered tags implement it; found by type assertion on the segment store.
// Every method is one short transaction on the tag's row (ReserveOwned's
// on its leaf_alloc row too).
type OrderedStore interface {
	// TagLease reads the tag's lease; ok is false when the tag is not
	// ordered (no row).
	TagLease(ctx context.Context, tag string) (l TagLease, ok bool, err error)
	// AcquireTag makes owner the owner for ttl, with a new token, if the
	// row has no owner (new, or released), or if it still holds the very
	// lease the caller watched (watched.Same) and that lease ran out by
	// the store's clock; otherwise it changes nothing. The caller passes
	// the lease it saw unrenewed for a whole lease (or its own, which it
	// knows it no longer issues under), else the zero TagLease. It answers
	// the lease as it stands afterwards: the caller owns the tag when
	// l.Owner == owner. ErrTagNotFound when the tag is not ordered.
	AcquireTag(ctx context.Context, tag, owner string, ttl time.Duration, watched TagLease) (TagLease, error)
	// ReserveOwned reserves a range of the tag as SegmentStore.Reserve
	// does, and in the same transaction checks that owner holds the tag's
	// lease with token, whatever any clock says of it; otherwise it
	// reserves nothing and fails with ErrLeaseLost, saying who holds it
	// (a tag no longer ordered has lost its lease too). ErrTagNotFound if
	// the tag has no leaf_alloc row. An owner reserves every range this
	// way, so that once its lease is taken over it reserves nothing more.
	ReserveOwned(ctx context.Context, tag, owner string, token int64, step int) (Reservation, error)
	// RenewTag extends the lease to ttl from now if owner still holds it
	// with token; ErrLeaseLost otherwise. The token decides, not the
	// store's clock: a lease that ran out by it but that no one took over
	// (which would have changed the token) was never interrupted.
	RenewTag(ctx context.Context, tag, owner string, token int64, ttl time.Duration) (TagLease, error)
	// RenewTags renews many of owner's leases as RenewTag renews one, in a
	// few transactions rather than one per tag: a server owning thousands
	// of ordered tags (a sequence per conversation) renews them all at a
	// cost set by their number over MaxRenewBatch. It answers one
	// LeaseResult per lease, in the order given. err is for the whole
	// call, with nothing renewed: an invalid tag (ErrInvalidTag), owner,
	// ttl or token (ErrInvalidArgument), a closed store.
	RenewTags(ctx context.Context, owner string, leases []TagToken, ttl time.Duration) ([]LeaseResult, error)
	// ReleaseTag ends the lease at once if owner holds it with token (a
	// graceful stop), so that another server takes over without waiting;
	// it reports whether it did.
	ReleaseTag(ctx context.Context, tag, owner string, token int64) (bool, error)
	// SetOrdered marks the tag ordered (inserting its row, no owner) or
	// plain (deleting it). ErrTagNotFound if the tag has no leaf_alloc row.
	SetOrdered(ctx context.Context, tag string, ordered bool) error
	// OrderedTags lists the ordered tags, in name order, after the tag
	// after, at most limit of them (limit <= 0: no limit).
	OrderedTags(ctx context.Context, after string, limit int) ([]TagLease, error)
	// OrderedTagsIn answers which of tags are ordered, in no particular
	// order: what a server checks of the tags it serves, at a cost set by
	// their number, not by the table's.
	OrderedTagsIn(ctx context.Context, tags []string) ([]string, error)
}

// TagToken names one lease of an ordered tag: the tag and the fencing
// token it was taken with.
type TagToken struct {
	Tag   string
	Token int64
}

// LeaseResult is RenewTags' answer for one lease: the lease as renewed, or
// Err, matching ErrLeaseLost when the owner no longer holds it (as
// RenewTag's), else the store's failure (the lease may be tried again).
type LeaseResult struct {
	Lease TagLease
	Err   error
}

// MaxRenewBatch is the most leases a store renews in one transaction.
const MaxRenewBatch = 500

// NotOwnerError is the answer of a server asked for an ordered tag it does
// not own. It matches ErrNotOwner with errors.Is.
type NotOwnerError struct {
	Tag string
	// Owner is the owner's identity (TagLease.Owner); URL the base URL to
	// forward to. Both are empty while the owner is unknown or dead and its
	// lease has not run out: Retry then says how long until a takeover.
	Owner, URL string
	Retry      time.Duration
}

func (e *NotOwnerError) Error() string {
	if e.URL == "" {
		return fmt.Sprintf("tag %s is ordered and no live server owns it; a server takes it over in %s", e.Tag, e.Retry.Round(time.Millisecond))
	}
	return fmt.Sprintf("tag %s is ordered and owned by %s", e.Tag, e.URL)
}

func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }

// OwnerURL is the base URL part of a TagLease.Owner: what precedes '#', the
// nonce of the owner's process. It is where a server that is not the owner
// forwards requests to, and what the transports show of an owner.
func OwnerURL(owner string) string {
	for i := range len(owner) {
		if owner[i] == '#' {
			return owner[:i]
		}
	}
	return owner
}

// MaxOwnerLen bounds TagLease.Owner, in bytes.
const MaxOwnerLen = 512

// ValidateOwner checks an owner identity: 1 to MaxOwnerLen bytes of
// visible ASCII. Renewals and releases compare it: no spaces, which MySQL's
// PAD SPACE collations ignore at the end of a string, and nothing a
// column's character set could refuse or change.
func ValidateOwner(owner string) error {
	if owner == "" {
		return fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	}
	if len(owner) > MaxOwnerLen {
		return fmt.Errorf("%w: owner is %d bytes, at most %d", ErrInvalidArgument, len(owner), MaxOwnerLen)
	}
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: owner has byte %#02x at offset %d; allowed: visible ASCII (0x21-0x7e)", ErrInvalidArgument, c, i)
		}
	}
	return nil
}

// ValidateLeaseTTL checks a lease's length: > 0.
func ValidateLeaseTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: lease ttl %v, want > 0", ErrInvalidArgument, ttl)
	}
	return nil
}

// ValidateRenewal checks the arguments of OrderedStore.RenewTags, as the
// stores do before they renew anything.
func ValidateRenewal(owner string, leases []TagToken, ttl time.Duration) error {
	if err := ValidateOwner(owner); err != nil {
		return err
	}
	if err := ValidateLeaseTTL(ttl); err != nil {
		return err
	}
	for _, l := range leases {
		if err := ValidateTag(l.Tag); err != nil {
			return err
		}
		if err := ValidateToken(l.Token); err != nil {
			return err
		}
	}
	return nil
}

// ValidateToken checks a fencing token: tokens start at 1 with a row's
// first owner, so a lower one names no lease.
func ValidateToken(token int64) error {
	if token < 1 {
		return fmt.Errorf("%w: token %d, want >= 1", ErrInvalidArgument, token)
	}
	return nil
}
