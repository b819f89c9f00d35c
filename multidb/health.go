package multidb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leafgo/leaf"
)

// probe runs until ctx ends: it waits for the earliest retry time of an
// unhealthy member, probes every member that is due, and starts again. A
// member that goes down wakes it, so that its timer covers the new member.
func (s *Store) probe(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.probeDue(ctx, time.Now())
		next := s.nextProbe()
		var tick <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-s.wake:
			timer.Stop()
		case <-tick:
		}
	}
}

// nextProbe is the earliest retry time of an unhealthy member; zero when all
// are healthy.
func (s *Store) nextProbe() time.Time {
	var next time.Time
	for _, m := range s.members {
		m.mu.Lock()
		if !m.healthy && (next.IsZero() || m.retryAt.Before(next)) {
			next = m.retryAt
		}
		m.mu.Unlock()
	}
	return next
}

// probeDue probes, at once, the unhealthy members whose retry time has come.
func (s *Store) probeDue(ctx context.Context, now time.Time) {
	var wg sync.WaitGroup
	for _, m := range s.members {
		m.mu.Lock()
		due := !m.healthy && !m.retryAt.After(now)
		m.mu.Unlock()
		if due {
			wg.Go(func() { s.probeOne(ctx, m) })
		}
	}
	wg.Wait()
}

// probeOne reads m's stripe record: that it answers shows the database and
// its tables are there (a ping would pass on a server whose database was
// dropped), and the record must still be the one the list expects, or
// say so for the first time for a member unreachable at Open.
func (s *Store) probeOne(ctx context.Context, m *member) {
	pctx, cancel := context.WithTimeout(ctx, s.opts.MemberTimeout)
	defer cancel()
	rec, ok, err := m.db.ReadStripe(pctx)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		err = m.check(rec, ok)
	}
	if err != nil {
		err = fmt.Errorf("%s: probe: %w", m.name, err)
		if errors.Is(err, leaf.ErrStripeLayout) {
			// Not an outage: the database answers for another place or
			// cluster. It stays out, and says so at every probe.
			s.opts.Logger.Error("multidb database disagrees with the list; it serves nothing", "db", m.name, "index", m.index, "err", err)
		}
		s.failedProbe(m, err)
		return
	}
	// Fenced before it serves: from here on its reserves commit only while
	// it records what was just checked.
	m.db.ExpectStripe(m.want)
	m.mu.Lock()
	wasVerified := m.verified
	m.verified, m.healthy, m.backoff = true, true, 0
	m.mu.Unlock()
	if !wasVerified {
		s.opts.Logger.Info("multidb database reachable and its stripe record verified", "db", m.name, "index", m.index)
	} else {
		s.opts.Logger.Info("multidb database healthy again", "db", m.name, "index", m.index)
	}
}

// check compares a record read from m with the one the list expects.
func (m *member) check(rec leaf.StripeRecord, ok bool) error {
	if !ok {
		return fmt.Errorf("%w: database %s (list position %d) has no stripe record; the others record %s",
			leaf.ErrStripeLayout, m.name, m.index, m.want)
	}
	if !rec.Same(m.want) {
		return mismatch(m.name, m.index, rec, m.want)
	}
	return nil
}

func mismatch(name string, index int, got, want leaf.StripeRecord) error {
	return fmt.Errorf("%w: database %s (list position %d) records that it is %s; the list makes it %s;"+
		" a list in another order, of another length or mixing clusters must not run: list the databases in their recorded order",
		leaf.ErrStripeLayout, name, index, got, want)
}
