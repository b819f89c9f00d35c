package inmem

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leafgo/leaf"
)

var _ leaf.OrderedStore = (*SegmentStore)(nil)

// tagOwner is the in-memory leaf_tag_owner row of an ordered tag.
type tagOwner struct {
	owner   string // "" when no one owns the tag
	token   int64
	expires time.Time
}

// now is the store's clock, the database's in the SQL stores: Left is
// counted by it, and a takeover needs the lease run out by it as well as
// watched unrenewed (AcquireTag). Inside a testing/synctest bubble it is
// the bubble's fake clock.
func (s *SegmentStore) now() time.Time { return time.Now() }

// leaseLocked answers a row as a leaf.TagLease at now. s.mu must be held.
func leaseLocked(tag string, o *tagOwner, now time.Time) leaf.TagLease {
	l := leaf.TagLease{Tag: tag, Owner: o.owner, Token: o.token}
	if o.owner != "" {
		l.Left, l.Version = o.expires.Sub(now), o.expires.UnixNano()
	}
	return l
}

// extendLocked makes o's lease end ttl from now, or, where that would not
// pass its end less than a lease beyond it (a clock that stands still, as
// a testing/synctest bubble's between sleeps), a nanosecond past it, as
// the SQL stores' newUntil does: the Version only grows while the clock
// stalls, and never returns to a value it had. s.mu must be held.
func (o *tagOwner) extendLocked(now time.Time, ttl time.Duration) {
	e := now.Add(ttl)
	if old := o.expires; !o.expires.IsZero() && !old.Before(e) && old.Sub(e) <= ttl {
		e = old.Add(time.Nanosecond)
	}
	o.expires = e
}

// checkLease validates what names a lease: the owner, and the token when
// one is given (> 0 asked), and the ttl when one is given.
func checkLease(owner string, token int64, withToken bool, ttl time.Duration, withTTL bool) error {
	if err := leaf.ValidateOwner(owner); err != nil {
		return err
	}
	if withToken {
		if err := leaf.ValidateToken(token); err != nil {
			return err
		}
	}
	if withTTL {
		return leaf.ValidateLeaseTTL(ttl)
	}
	return nil
}

// TagLease reads the tag's lease; ok is false when the tag is not ordered.
func (s *SegmentStore) TagLease(ctx context.Context, tag string) (leaf.TagLease, bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagLease{}, false, err
	}
	if err := s.begin(ctx, fmt.Sprintf("read the lease of %q", tag)); err != nil {
		return leaf.TagLease{}, false, err
	}
	defer s.mu.Unlock()
	o, ok := s.owners[tag]
	if !ok {
		return leaf.TagLease{}, false, nil
	}
	return leaseLocked(tag, o, s.now()), true, nil
}

// AcquireTag makes owner the owner for ttl, with a new token, if the row
// has no owner, or if it still holds the very lease watched and that ran
// out by the store's clock; it answers the lease as it stands.
func (s *SegmentStore) AcquireTag(ctx context.Context, tag, owner string, ttl time.Duration, watched leaf.TagLease) (leaf.TagLease, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagLease{}, err
	}
	if err := checkLease(owner, 0, false, ttl, true); err != nil {
		return leaf.TagLease{}, err
	}
	op := fmt.Sprintf("acquire %q", tag)
	if err := s.begin(ctx, op); err != nil {
		return leaf.TagLease{}, err
	}
	defer s.mu.Unlock()
	o, ok := s.owners[tag]
	if !ok {
		return leaf.TagLease{}, fmt.Errorf("inmem: %s: the tag is not ordered: %w", op, leaf.ErrTagNotFound)
	}
	now := s.now()
	if o.owner == "" || leaseLocked(tag, o, now).Same(watched) && !now.Before(o.expires) {
		s.tokens[tag]++
		o.extendLocked(now, ttl)
		o.owner, o.token = owner, s.tokens[tag]
	}
	return leaseLocked(tag, o, now), nil
}

// ReserveOwned reserves as Reserve does if owner holds the tag's lease
// with token, whatever the clock says; leaf.ErrLeaseLost otherwise, with
// nothing reserved.
func (s *SegmentStore) ReserveOwned(ctx context.Context, tag, owner string, token int64, step int) (leaf.Reservation, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Reservation{}, err
	}
	if err := checkLease(owner, token, true, 0, false); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q for %s token %d", tag, owner, token)
	if err := s.delayReserve(ctx, op); err != nil {
		return leaf.Reservation{}, err
	}
	if err := s.begin(ctx, op); err != nil {
		return leaf.Reservation{}, err
	}
	defer s.mu.Unlock()
	if _, ok := s.rows[tag]; !ok {
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
	}
	o, ok := s.owners[tag]
	switch {
	case !ok:
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: the tag is not ordered any more: %w", op, leaf.ErrLeaseLost)
	case o.owner == "":
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: no one holds it (token now %d): %w", op, o.token, leaf.ErrLeaseLost)
	case o.owner != owner || o.token != token:
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: held by %s with token %d: %w", op, o.owner, o.token, leaf.ErrLeaseLost)
	}
	return s.reserveLocked(op, tag, step)
}

// RenewTag extends owner's lease with token to ttl from now, whatever the
// clock says of it (the token decides); leaf.ErrLeaseLost otherwise.
func (s *SegmentStore) RenewTag(ctx context.Context, tag, owner string, token int64, ttl time.Duration) (leaf.TagLease, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagLease{}, err
	}
	if err := checkLease(owner, token, true, ttl, true); err != nil {
		return leaf.TagLease{}, err
	}
	op := fmt.Sprintf("renew %q", tag)
	if err := s.begin(ctx, op); err != nil {
		return leaf.TagLease{}, err
	}
	defer s.mu.Unlock()
	now := s.now()
	o, ok := s.owners[tag]
	switch {
	case !ok:
		return leaf.TagLease{}, fmt.Errorf("inmem: %s: the tag is no longer ordered: %w", op, leaf.ErrLeaseLost)
	case o.owner != owner || o.token != token:
		return leaf.TagLease{}, fmt.Errorf("inmem: %s: owned by %q with token %d: %w", op, o.owner, o.token, leaf.ErrLeaseLost)
	}
	o.extendLocked(now, ttl)
	return leaseLocked(tag, o, now), nil
}

// RenewTags renews each lease as RenewTag does, under one lock.
func (s *SegmentStore) RenewTags(ctx context.Context, owner string, leases []leaf.TagToken, ttl time.Duration) ([]leaf.LeaseResult, error) {
	if err := leaf.ValidateRenewal(owner, leases, ttl); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("renew %d leases", len(leases))
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.now()
	out := make([]leaf.LeaseResult, len(leases))
	// A tag given twice is renewed once and answered twice, as the SQL
	// stores' one UPDATE does: a second extension at the same instant
	// would move the Version the first answered.
	renewed := map[string]leaf.TagLease{}
	for i, l := range leases {
		o, ok := s.owners[l.Tag]
		if r, done := renewed[l.Tag]; done && r.Token == l.Token {
			out[i].Lease = r
			continue
		}
		switch {
		case !ok:
			out[i].Err = fmt.Errorf("inmem: renew %q: the tag is no longer ordered: %w", l.Tag, leaf.ErrLeaseLost)
		case o.owner != owner || o.token != l.Token:
			out[i].Err = fmt.Errorf("inmem: renew %q: owned by %q with token %d: %w", l.Tag, o.owner, o.token, leaf.ErrLeaseLost)
		default:
			o.extendLocked(now, ttl)
			out[i].Lease = leaseLocked(l.Tag, o, now)
			renewed[l.Tag] = out[i].Lease
		}
	}
	return out, nil
}

// ReleaseTag ends owner's lease with token at once and reports whether it
// did.
func (s *SegmentStore) ReleaseTag(ctx context.Context, tag, owner string, token int64) (bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return false, err
	}
	if err := checkLease(owner, token, true, 0, false); err != nil {
		return false, err
	}
	if err := s.begin(ctx, fmt.Sprintf("release %q", tag)); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	o, ok := s.owners[tag]
	if !ok || o.owner != owner || o.token != token {
		return false, nil
	}
	o.owner, o.expires = "", time.Time{}
	return true, nil
}

// SetOrdered marks the tag ordered (no owner yet) or plain. A tag with a
// shape cannot be ordered: leaf.ErrOrderedTag.
func (s *SegmentStore) SetOrdered(ctx context.Context, tag string, ordered bool) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	op := fmt.Sprintf("set %q ordered=%t", tag, ordered)
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.rows[tag]; !ok {
		return fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
	}
	if !ordered {
		delete(s.owners, tag)
		return nil
	}
	if shape := s.shapes[tag]; !shape.IsPlain() {
		return fmt.Errorf("inmem: %s: the tag's shape is %s: %w", op, shape, leaf.ErrOrderedTag)
	}
	if _, ok := s.owners[tag]; !ok {
		// The token continues from the tag's earlier rows, so that it
		// never returns to a value it had.
		s.owners[tag] = &tagOwner{token: s.tokens[tag]}
	}
	return nil
}

// OrderedTagsIn answers which of tags are ordered.
func (s *SegmentStore) OrderedTagsIn(ctx context.Context, tags []string) ([]string, error) {
	for _, t := range tags {
		if err := leaf.ValidateTag(t); err != nil {
			return nil, err
		}
	}
	if err := s.begin(ctx, "read which tags are ordered"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []string{}
	for _, t := range tags {
		if _, ok := s.owners[t]; ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// OrderedTags lists the ordered tags after the tag after, in name order,
// at most limit of them (limit <= 0: all).
func (s *SegmentStore) OrderedTags(ctx context.Context, after string, limit int) ([]leaf.TagLease, error) {
	if after != "" {
		if err := leaf.ValidateTag(after); err != nil {
			return nil, fmt.Errorf("%w: cursor after: %w", leaf.ErrInvalidArgument, err)
		}
	}
	if err := s.begin(ctx, "list ordered tags"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var tags []string
	for t := range s.owners {
		if t > after {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	if limit > 0 && len(tags) > limit {
		tags = tags[:limit]
	}
	now := s.now()
	out := make([]leaf.TagLease, len(tags))
	for i, t := range tags {
		out[i] = leaseLocked(t, s.owners[t], now)
	}
	return out, nil
}
