package multidb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/tagpage"
	"github.com/leafgo/leaf/stripe"
)

// Store lists a page itself, from its members' pages where they have one.
var _ leaf.AllocPager = (*Store)(nil)

// bound is the exclusive upper bound, in IDs, of the numbers below maxID
// of stripe st: every ID the database can have issued for a row at maxID
// is below it. A row at 0 or 1 has issued nothing, and is shown as it is.
func bound(st leaf.Stripe, maxID int64) int64 {
	if maxID <= 1 {
		return maxID
	}
	return stripe.ID(st, maxID-1) + 1
}

// merge folds database m's row into a, the tag's row so far, in IDs.
// first says a is empty.
func merge(a *leaf.Alloc, m *member, row leaf.Alloc, first bool) {
	b := bound(m.stripe, row.MaxID)
	if first {
		*a = row
		a.MaxID = b
		return
	}
	a.MaxID = max(a.MaxID, b)
	if row.UpdateTime.After(a.UpdateTime) {
		a.UpdateTime = row.UpdateTime
	}
}

// Tags lists the tags of every database that answers, merged, in byte
// order. A database that is down is left out: the others hold the same
// tags, since tag administration goes to all.
func (s *Store) Tags(ctx context.Context) ([]string, error) {
	res, err := s.read(ctx, "list tags", func(ctx context.Context, m *member) (any, error) {
		return m.db.Tags(ctx)
	})
	if err != nil {
		return nil, err
	}
	var tags []string
	for _, r := range res {
		tags = append(tags, r.v.([]string)...)
	}
	slices.Sort(tags)
	return slices.Compact(tags), nil
}

// Allocs lists the rows of every database that answers, one per tag, in
// byte order of the tags: MaxID is the highest bound in IDs over the
// databases (see Alloc), the step and description those of the first
// database in the list that has the row.
func (s *Store) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	res, err := s.read(ctx, "list allocs", func(ctx context.Context, m *member) (any, error) {
		return m.db.Allocs(ctx)
	})
	if err != nil {
		return nil, err
	}
	byTag := map[string]*leaf.Alloc{}
	for _, r := range res {
		for _, row := range r.v.([]leaf.Alloc) {
			a, ok := byTag[row.Tag]
			if !ok {
				a = new(leaf.Alloc)
				byTag[row.Tag] = a
			}
			merge(a, r.m, row, !ok)
		}
	}
	out := make([]leaf.Alloc, 0, len(byTag))
	for _, a := range byTag {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b leaf.Alloc) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// Alloc reads the tag's row from every database that answers: MaxID is the
// highest bound in IDs over them, max over the databases of ID(max_id-1)+1
// (0 or 1 where every database's row is at 0 or 1), the step and
// description those of the first database in the list that has the row.
// leaf.ErrTagNotFound when every database that answered has no row.
func (s *Store) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Alloc{}, err
	}
	op := fmt.Sprintf("read %q", tag)
	res := s.each(ctx, s.live(), s.opts.ReadTimeout, func(ctx context.Context, m *member) (any, error) {
		return m.db.Alloc(ctx, tag)
	})
	var (
		a     leaf.Alloc
		found bool
		errs  []error
	)
	for _, r := range res {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		merge(&a, r.m, r.v.(leaf.Alloc), !found)
		found = true
	}
	if found {
		return a, nil
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no database verified yet"))
	}
	return leaf.Alloc{}, joinErrs(op, errs, leaf.ErrTagNotFound)
}

// read runs f on the live databases and returns the answers of those that
// answered, in list order; it fails only when none did.
func (s *Store) read(ctx context.Context, op string, f func(context.Context, *member) (any, error)) ([]result, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("multidb: %s: %w", op, leaf.ErrClosed)
	}
	res := s.each(ctx, s.live(), s.opts.ReadTimeout, f)
	var errs []error
	ok := res[:0:0]
	for _, r := range res {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		ok = append(ok, r)
	}
	if len(ok) == 0 {
		if len(errs) == 0 {
			errs = append(errs, errors.New("no database verified yet"))
		}
		return nil, joinErrs(op, errs, nil)
	}
	return ok, nil
}

// AllocsPage lists at most limit rows whose tag begins with prefix and
// sorts after after, as the single-database stores do (a keyset page in
// the database's order of biz_tag). The first database in the list that
// answers decides which tags the page holds and their order; the others
// add their rows of those tags (from their own page, or read one by one
// where their page ended before). A tag missing from that database (its
// CreateTag failed there and was not run again) is listed once it is
// there.
func (s *Store) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	if err := tagpage.Check(prefix, after, limit); err != nil {
		return nil, err
	}
	res, err := s.read(ctx, "list allocs page", func(ctx context.Context, m *member) (any, error) {
		if p, ok := m.db.(leaf.AllocPager); ok {
			return p.AllocsPage(ctx, prefix, after, limit)
		}
		all, err := m.db.Allocs(ctx)
		if err != nil {
			return nil, err
		}
		all = slices.DeleteFunc(all, func(a leaf.Alloc) bool { return !tagpage.Match(a.Tag, prefix, after) })
		return all[:min(limit, len(all))], nil
	})
	if err != nil {
		return nil, err
	}
	ref := res[0].v.([]leaf.Alloc)
	out := make([]leaf.Alloc, len(ref))
	for i, row := range ref {
		merge(&out[i], res[0].m, row, true)
	}
	for _, r := range res[1:] {
		page := r.v.([]leaf.Alloc)
		rows := make(map[string]leaf.Alloc, len(page))
		for _, row := range page {
			rows[row.Tag] = row
		}
		for i := range out {
			row, ok := rows[out[i].Tag]
			if !ok && len(page) == limit {
				// The page may have ended before the tag (this database
				// has tags the first lacks): read the row itself.
				rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
				row, err = r.m.db.Alloc(rctx, out[i].Tag)
				cancel()
				ok = err == nil
				if err != nil && !errors.Is(err, leaf.ErrTagNotFound) {
					return nil, fmt.Errorf("multidb: list allocs page: %s: %w", r.m.name, err)
				}
			}
			if ok {
				merge(&out[i], r.m, row, false)
			}
		}
	}
	return out, nil
}

// TagsVersion is the sum of the databases' change counters
// (leaf.SegmentVersioner): each only grows, so the sum only grows, and an
// equal sum means no counter moved. It needs every database; while one is
// unhealthy it fails at once, and the generator lists the tags at each
// refresh instead.
func (s *Store) TagsVersion(ctx context.Context) (int64, error) {
	const op = "read tags version"
	if s.closed.Load() {
		return 0, fmt.Errorf("multidb: %s: %w", op, leaf.ErrClosed)
	}
	for _, m := range s.members {
		m.mu.Lock()
		healthy := m.healthy
		m.mu.Unlock()
		if !healthy {
			return 0, fmt.Errorf("multidb: %s: %s is unhealthy", op, m.name)
		}
		if _, ok := m.db.(leaf.SegmentVersioner); !ok {
			return 0, fmt.Errorf("multidb: %s: %s (%T) keeps no change counter", op, m.name, m.db)
		}
	}
	res := s.each(ctx, s.members, s.opts.ReadTimeout, func(ctx context.Context, m *member) (any, error) {
		return m.db.(leaf.SegmentVersioner).TagsVersion(ctx)
	})
	var sum int64
	var errs []error
	for _, r := range res {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		sum += r.v.(int64)
	}
	if len(errs) > 0 {
		return 0, joinErrs(op, errs, nil)
	}
	return sum, nil
}
