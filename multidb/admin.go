package multidb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/stripe"
)

// PartialError is the answer of a tag administration that changed some
// databases and failed on others. Running the same operation again is
// safe, and finishes it once every database answers: a database that
// already has the change counts as done.
type PartialError struct {
	Op      string // "create", "set step of", "delete"
	Tag     string
	Done    []string // databases that have the change
	NotDone []string // databases that do not
	Err     error    // the failures of the databases in NotDone
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("multidb: %s %q: done on %s, not on %s (run it again once they answer): %v",
		e.Op, e.Tag, strings.Join(e.Done, ", "), strings.Join(e.NotDone, ", "), e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }

// outcome is how one database took an administration.
type outcome int

const (
	changed outcome = iota // it made the change
	already                // it had the change (ErrTagExists on create, ErrTagNotFound on delete)
	failed                 // it did not
)

// admin runs f on every database in list order, each within ReadTimeout,
// whether it is healthy or not: a tag exists on all databases or on none.
// classify says how each error counts; a nil error is a change. It returns
// nil when every database has the change and at least one made it,
// nothing when all already had it (the caller decides), and a
// *PartialError or the databases' failures otherwise.
func (s *Store) admin(ctx context.Context, op, tag string, f func(context.Context, *member) error, classify func(error) outcome) (allAlready bool, err error) {
	if s.closed.Load() {
		return false, fmt.Errorf("multidb: %s %q: %w", op, tag, leaf.ErrClosed)
	}
	var done, notDone []string
	var errs []error
	nAlready := 0
	for _, m := range s.members {
		mctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
		err := f(mctx, m)
		cancel()
		o := changed
		if err != nil {
			o = classify(err)
		}
		switch o {
		case changed:
			done = append(done, m.name)
		case already:
			done = append(done, m.name)
			nAlready++
		default:
			notDone = append(notDone, m.name)
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
			if ctx.Err() == nil && !isAnswer(err) {
				s.failed(m, fmt.Errorf("%s: %w", m.name, err), 0, true)
			}
		}
	}
	switch {
	case len(errs) == 0:
		return nAlready == len(s.members), nil
	case len(done) == 0:
		return false, fmt.Errorf("multidb: %s %q: %w", op, tag, errors.Join(errs...))
	default:
		return false, &PartialError{Op: op, Tag: tag, Done: done, NotDone: notDone, Err: errors.Join(errs...)}
	}
}

// CreateTag creates the tag on every database. a.MaxID, the first ID to
// issue, becomes on each database the smallest number whose ID is at
// least a.MaxID; 0 ("no start given") starts each at its tombstone or 1. A
// start below a database's tombstone fails with a *leaf.TombstoneError
// whose MinStart is in IDs. A database that already has the tag counts as
// done, so a create that failed part-way can be run again; only when every
// database has it is the answer leaf.ErrTagExists.
func (s *Store) CreateTag(ctx context.Context, a leaf.Alloc) error {
	if err := leaf.ValidateAlloc(a); err != nil {
		return err
	}
	starts := make([]int64, len(s.members))
	for i, m := range s.members {
		if a.MaxID == 0 {
			continue
		}
		x := max(firstNumber(m.stripe, a.MaxID), 1)
		if x > stripe.MaxNumber(m.stripe) {
			return fmt.Errorf("multidb: create %q: %w: start %d is past the last ID of database %s", a.Tag, leaf.ErrInvalidArgument, a.MaxID, m.name)
		}
		starts[i] = x
	}
	if a.MaxID != 0 {
		if err := s.checkTombstones(ctx, a.Tag, starts); err != nil {
			return err
		}
	}
	var tomb *leaf.TombstoneError
	all, err := s.admin(ctx, "create", a.Tag, func(ctx context.Context, m *member) error {
		b := a
		b.MaxID = starts[m.index]
		err := m.db.CreateTag(ctx, b)
		var te *leaf.TombstoneError
		if errors.As(err, &te) {
			// The lowest start in IDs whose number on this database is at
			// or above its tombstone: the ID after its number tomb-1.
			lowest := te.MinStart
			if m.stripe.Striped() && lowest >= 1 {
				lowest = stripe.ID(m.stripe, lowest-1) + 1
			}
			if tomb == nil || lowest > tomb.MinStart {
				tomb = &leaf.TombstoneError{Tag: a.Tag, MinStart: lowest}
			}
			return &leaf.TombstoneError{Tag: a.Tag, MinStart: lowest}
		}
		return err
	}, func(err error) outcome {
		if errors.Is(err, leaf.ErrTagExists) {
			return already
		}
		return failed
	})
	var partial *PartialError
	if tomb != nil && err != nil && !errors.As(err, &partial) {
		// No database took it: the start the caller may use is the one
		// above every database's tombstone.
		return fmt.Errorf("multidb: create %q: %w", a.Tag, tomb)
	}
	if err != nil {
		return err
	}
	if all {
		return fmt.Errorf("multidb: create %q: %w on every database", a.Tag, leaf.ErrTagExists)
	}
	return nil
}

// checkTombstones refuses a create at starts (numbers, one per member)
// that any member's tombstone is above, before any member creates the tag:
// otherwise the members below their tombstone refuse it while the others
// take it, and a create the caller is told failed leaves the tag on some
// databases (issuing there, moving TagsVersion). The refusal's MinStart is
// the lowest start in IDs above every member's tombstone. A member whose
// tombstone cannot be read is left to the create, whose own transaction
// checks it; so is a delete that commits between this read and the create.
func (s *Store) checkTombstones(ctx context.Context, tag string, starts []int64) error {
	if s.closed.Load() {
		return fmt.Errorf("multidb: create %q: %w", tag, leaf.ErrClosed)
	}
	res := s.each(ctx, s.members, s.opts.ReadTimeout, func(ctx context.Context, m *member) (any, error) {
		tomb, _, err := m.db.Tombstone(ctx, tag)
		return tomb, err
	})
	var refused *leaf.TombstoneError
	for _, r := range res {
		if r.err != nil {
			continue
		}
		tomb := r.v.(int64)
		if tomb <= starts[r.m.index] {
			continue
		}
		// The lowest start in IDs whose number on this database is at or
		// above its tombstone: the ID after its number tomb-1.
		lowest := tomb
		if r.m.stripe.Striped() {
			lowest = stripe.ID(r.m.stripe, tomb-1) + 1
		}
		if refused == nil || lowest > refused.MinStart {
			refused = &leaf.TombstoneError{Tag: tag, MinStart: lowest}
		}
	}
	if refused == nil {
		return nil
	}
	// ID is increasing, so a start at MinStart is at or above each
	// member's tombstone in its own numbers: every member takes it.
	return fmt.Errorf("multidb: create %q: %w", tag, refused)
}

// firstNumber is the smallest number x of stripe st with stripe.ID(st, x) >= id
// (id >= 0). With R = Databases·Block IDs per round, id = k·R + r: the stripe's
// block of round k covers the IDs k·R + Index·Block + [0, Block). Below
// that block the answer is its first number k·Block, inside it the number
// of id itself, above it the first number of round k+1; ID is increasing,
// so nothing smaller qualifies.
func firstNumber(st leaf.Stripe, id int64) int64 {
	if !st.Striped() {
		return id
	}
	round := int64(st.Databases) * st.Block
	k, r := id/round, id%round
	lo := int64(st.Index) * st.Block
	switch {
	case r < lo:
		return k * st.Block
	case r < lo+st.Block:
		return k*st.Block + r - lo
	default:
		return (k + 1) * st.Block
	}
}

// SetStep sets the stored step on every database; leaf.ErrTagNotFound when
// none has the tag. Running it again is safe.
func (s *Store) SetStep(ctx context.Context, tag string, step int) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if err := leaf.ValidateStep(step); err != nil {
		return err
	}
	notFound := 0
	_, err := s.admin(ctx, "set step of", tag, func(ctx context.Context, m *member) error {
		err := m.db.SetStep(ctx, tag, step)
		if errors.Is(err, leaf.ErrTagNotFound) {
			notFound++
		}
		return err
	}, func(error) outcome { return failed })
	if notFound == len(s.members) {
		return fmt.Errorf("multidb: set step of %q: %w", tag, leaf.ErrTagNotFound)
	}
	return err
}

// DeleteTag deletes the tag on every database, each leaving its tombstone.
// A database that has no row counts as done, so a delete that failed
// part-way can be run again; only when no database has the tag is the
// answer leaf.ErrTagNotFound.
func (s *Store) DeleteTag(ctx context.Context, tag string) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	all, err := s.admin(ctx, "delete", tag, func(ctx context.Context, m *member) error {
		return m.db.DeleteTag(ctx, tag)
	}, func(err error) outcome {
		if errors.Is(err, leaf.ErrTagNotFound) {
			return already
		}
		return failed
	})
	if err != nil {
		return err
	}
	if all {
		return fmt.Errorf("multidb: delete %q: %w", tag, leaf.ErrTagNotFound)
	}
	return nil
}
