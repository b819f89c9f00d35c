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

// now is the store's clock, the database's in the SQL stores: leases are
// judged by it alone, never by a caller's. Inside a testing/synctest bubble
// it is the bubble's fake clock.
func (s *SegmentStore) now() time.Time { return time.Now() }

// leaseLocked answers a row as a leaf.TagLease at now. s.mu must be held.
func leaseLocked(tag string, o *tagOwner, now time.Time) leaf.TagLease {
	l := leaf.TagLease{Tag: tag, Owner: o.owner, Token: o.token}
	if o.owner != "" {
		l.Left = o.expires.Sub(now)
	}
	return l
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

// AcquireTag makes owner the owner for ttl, with a new token, unless
// someone holds an unexpired lease; it answers the lease as it stands.
func (s *SegmentStore) AcquireTag(ctx context.Context, tag, owner string, ttl time.Duration) (leaf.TagLease, error) {
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
	if o.owner == "" || !now.Before(o.expires) {
		s.tokens[tag]++
		o.owner, o.token, o.expires = owner, s.tokens[tag], now.Add(ttl)
	}
	return leaseLocked(tag, o, now), nil
}

// RenewTag extends owner's unexpired lease with token to ttl from now;
// leaf.ErrLeaseLost otherwise.
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
	case !now.Before(o.expires):
		return leaf.TagLease{}, fmt.Errorf("inmem: %s: the lease ran out %s ago: %w", op, now.Sub(o.expires), leaf.ErrLeaseLost)
	}
	o.expires = now.Add(ttl)
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
	for i, l := range leases {
		o, ok := s.owners[l.Tag]
		switch {
		case !ok:
			out[i].Err = fmt.Errorf("inmem: renew %q: the tag is no longer ordered: %w", l.Tag, leaf.ErrLeaseLost)
		case o.owner != owner || o.token != l.Token:
			out[i].Err = fmt.Errorf("inmem: renew %q: owned by %q with token %d: %w", l.Tag, o.owner, o.token, leaf.ErrLeaseLost)
		case !now.Before(o.expires):
			out[i].Err = fmt.Errorf("inmem: renew %q: the lease ran out %s ago: %w", l.Tag, now.Sub(o.expires), leaf.ErrLeaseLost)
		default:
			o.expires = now.Add(ttl)
			out[i].Lease = leaseLocked(l.Tag, o, now)
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
