package segment

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leafgo/leaf"
)

// This file keeps what the generator knows about tags it holds no state for:
// the set of names in the store, the budget of store lookups for names not
// in it, the refresh that keeps the set current, and the sweep that drops
// the state of tags nobody asks for.

// nameSet is the set of tag names in the store, as this server knows it: the
// sorted list of the last listing, plus the changes this server made or
// learned since (created, deleted, found by a lookup, found gone by a load),
// each stamped with when it was made, so that a listing which began before
// a change does not undo it. A sorted slice rather than a map: a name costs
// its string and 16 bytes, which matters at a million tags.
type nameSet struct {
	sorted []string
	delta  map[string]nameChange
	n      int // names in the set
}

type nameChange struct {
	present bool
	at      time.Time // wall clock, after the store confirmed the change
}

func (ns *nameSet) has(tag string) bool {
	if c, ok := ns.delta[tag]; ok {
		return c.present
	}
	_, ok := slices.BinarySearch(ns.sorted, tag)
	return ok
}

// set records that tag is, or is not, in the store as of at.
func (ns *nameSet) set(tag string, present bool, at time.Time) {
	was := ns.has(tag)
	if ns.delta == nil {
		ns.delta = map[string]nameChange{}
	}
	ns.delta[tag] = nameChange{present: present, at: at}
	switch {
	case present && !was:
		ns.n++
	case !present && was:
		ns.n--
	}
}

// replace installs a listing (sorted, no duplicates) whose query began at
// started. Changes recorded before that are in the listing, or were undone
// by a later change the listing saw; later ones are kept on top of it.
func (ns *nameSet) replace(list []string, started time.Time) {
	ns.sorted = list
	ns.n = len(list)
	for t, c := range ns.delta {
		if c.at.Before(started) {
			delete(ns.delta, t)
			continue
		}
		_, listed := slices.BinarySearch(list, t)
		switch {
		case c.present && !listed:
			ns.n++
		case !c.present && listed:
			ns.n--
		}
	}
}

// tokenBucket paces the store lookups of names not in the set: rate a
// second, burst at once, shared by all names. The zero value refuses all.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newTokenBucket(rate float64, burst int) tokenBucket {
	return tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

func (b *tokenBucket) take(now time.Time) bool {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refresh keeps the name set current. With a store that keeps a change
// counter (leaf.SegmentVersioner) a refresh reads the counter, one
// primary-key read, and lists the tags only when it moved or at every
// FullRefreshEvery-th refresh: rows written by other tools or by Java Leaf
// do not move the counter. Tags gone from the listing lose their state.
// Config.Kinds refreshes what it keeps with each refresh (package
// ordered: which tags in use are ordered).
func (g *Generator) refresh(ctx context.Context) error {
	err := g.refreshNames(ctx)
	if err == nil && g.s.Kinds != nil {
		if err = g.s.Kinds.Refresh(ctx); err != nil {
			g.storeFailed(err)
		}
	}
	return err
}

func (g *Generator) refreshNames(ctx context.Context) error {
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	var (
		version   int64
		versionOK bool
	)
	if g.vers != nil {
		v, err := g.vers.TagsVersion(ctx)
		switch {
		case err == nil:
			version, versionOK = v, true
			if g.listed.Load() && g.versionOK && v == g.version && g.sinceListing+1 < g.s.FullRefreshEvery {
				g.sinceListing++
				g.versionReads.Add(1)
				g.storeOK()
				return nil
			}
		case g.versionOK || !g.listed.Load():
			// A store that is down fails the listing below as well; one
			// that answers without a counter (its row deleted by hand) is
			// listed at every refresh from now on, as one without the
			// table would be.
			g.s.Logger.Warn("segment tag change counter unreadable; listing every tag at each refresh", "err", err)
		}
	}
	list, err := g.s.Store.Tags(ctx)
	if err != nil {
		g.storeFailed(err)
		return fmt.Errorf("refresh tags: %w", err)
	}
	g.storeOK()
	g.listings.Add(1)
	g.sinceListing, g.version, g.versionOK = 0, version, versionOK

	// A row inserted by hand may carry a name no request can use.
	list = slices.DeleteFunc(list, func(t string) bool { return leaf.ValidateTag(t) != nil })
	if !slices.IsSorted(list) {
		slices.Sort(list)
	}
	list = slices.Compact(list)

	g.mu.Lock()
	g.names.replace(list, started)
	g.tagCount.Store(int64(g.names.n))
	for t := range g.negative {
		if g.names.has(t) {
			delete(g.negative, t)
		}
	}
	var gone []*buffer
	g.eachActiveLocked(func(b *buffer) {
		// A buffer made after the query began may be for a tag created
		// since; its first load decides.
		if !g.names.has(b.tag) && b.created.Before(started) {
			gone = append(gone, b)
		}
	})
	for _, b := range gone {
		// Stopped before they leave the maps: a kind's state ends (an
		// ordered tag's ownership) before a later state of the tag could
		// start.
		stopTag(b, fmt.Errorf("tag %q: %w", b.tag, leaf.ErrTagNotFound))
	}
	g.removeLocked(gone...)
	g.forgetShapesLocked(started)
	g.mu.Unlock()
	g.listed.Store(true)
	for _, b := range gone {
		g.s.Logger.Info("segment tag removed from store; dropped", "tag", b.tag)
	}
	return nil
}

// lookup asks the store whether a name not in the set has a row: one read,
// never a write, so names a client makes up cannot take row locks. The
// caller has taken a token from the lookup budget.
func (g *Generator) lookup(ctx context.Context, tag string) error {
	g.lookupCount.Add(1)
	ctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	_, err := g.s.Store.Alloc(ctx, tag)
	return err
}

// learn records that tag has a row, found by a lookup.
func (g *Generator) learn(tag string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.setNameLocked(tag, true)
}

// setNameLocked records a change to the name set. g.mu must be held.
func (g *Generator) setNameLocked(tag string, present bool) {
	g.names.set(tag, present, time.Now())
	if !present {
		g.shapes.Delete(tag)
	}
	g.tagCount.Store(int64(g.names.n))
}

// Known reports whether tag would be served, without issuing: nil for a tag
// in use or in the name set; for other names one store read within the
// lookup budget (LookupRate), else ErrTagNotFound at once (ErrNotReady
// before the tags were first listed). For HEAD-style checks, which must not
// let made-up names reach the store one for one.
func (g *Generator) Known(ctx context.Context, tag string) error {
	if b := (*g.hot.Load())[tag]; b != nil {
		return nil
	}
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	g.mu.Lock()
	if g.fresh[tag] != nil || g.names.has(tag) {
		g.mu.Unlock()
		return nil
	}
	if err := g.admitLookupLocked(tag); err != nil {
		g.mu.Unlock()
		return err
	}
	creates := g.creates
	g.mu.Unlock()
	err := g.lookup(ctx, tag)
	switch {
	case err == nil:
		g.learn(tag)
	case isNotFound(err):
		g.mu.Lock()
		g.rememberMissingLocked(tag, creates)
		g.mu.Unlock()
	}
	return err
}

// admitLookupLocked decides whether a name not in the set may be looked up
// in the store: not if the store said "no such tag" within NegativeTTL, nor
// once the lookup budget is spent. g.mu must be held.
func (g *Generator) admitLookupLocked(tag string) error {
	now := time.Now()
	if until, ok := g.negative[tag]; ok {
		if now.Before(until) {
			return fmt.Errorf("tag %q: %w", tag, leaf.ErrTagNotFound)
		}
		delete(g.negative, tag)
	}
	if g.lookupBudget.take(now) {
		return nil
	}
	g.refused.Add(1)
	if !g.listed.Load() {
		// The name may well exist: the tags have not been listed yet.
		return fmt.Errorf("tag %q: the tag list has not been read from the store yet: %w", tag, leaf.ErrNotReady)
	}
	return fmt.Errorf("tag %q: %w", tag, leaf.ErrTagNotFound)
}

// rememberMissingLocked records the store's "no such tag" for NegativeTTL
// and takes the name out of the set, unless a tag was created since the
// lookup began (g.creates was createsAtStart then): else it could record the
// absence after the CreateTag that should have cleared it (a client told
// "not found" creates the tag at once), and the new tag would be refused.
// g.mu must be held.
func (g *Generator) rememberMissingLocked(tag string, createsAtStart uint64) {
	if g.creates != createsAtStart {
		return
	}
	if len(g.negative) >= maxNegative {
		now := time.Now()
		for t, until := range g.negative {
			if now.After(until) {
				delete(g.negative, t)
			}
		}
		if len(g.negative) >= maxNegative {
			clear(g.negative)
		}
	}
	g.negative[tag] = time.Now().Add(g.s.NegativeTTL)
	if g.names.has(tag) {
		g.setNameLocked(tag, false)
	}
}

// sweep drops the state of tags without a request for IdleTimeout: their
// buffers are frozen as Close freezes them, taken out of the maps, and
// (with GiveBack) the unused tail of the latest range is given back
// with the store's conditional update, which applies only if no one
// reserved since. A later request finds no state and starts afresh with a
// new reservation; it never reuses a frozen range.
func (g *Generator) sweep(ctx context.Context) error {
	now := time.Now()
	g.mu.Lock()
	if g.closed.Load() {
		g.mu.Unlock()
		return nil
	}
	var (
		idle  []*buffer
		after []func(context.Context) // the kinds' give-backs and releases
	)
	g.eachActiveLocked(func(b *buffer) {
		if k := b.kind(); k != nil {
			drop, then := k.sweep(now, g.s.IdleTimeout)
			if drop {
				idle = append(idle, b)
			}
			if then != nil {
				after = append(after, then)
			}
			return
		}
		b.mu.Lock()
		if b.retireIfIdleLocked(now, g.s.IdleTimeout) {
			idle = append(idle, b)
		}
		b.mu.Unlock()
	})
	g.removeLocked(idle...)
	for _, b := range idle {
		// An idle tag costs its name only: its shape is read again,
		// with its first range, when it is asked for next.
		g.shapes.Delete(b.tag)
	}
	g.mu.Unlock()
	for _, f := range after {
		f(ctx)
	}
	if len(idle) == 0 {
		return nil
	}
	g.dropped.Add(uint64(len(idle)))
	var givenBack int64
	returned := 0
	for _, b := range idle {
		g.s.Logger.Debug("segment idle tag dropped", "tag", b.tag)
		if !g.s.GiveBack {
			continue
		}
		if b.kind() != nil {
			continue // a periodic tag's periods were given back as they went; a kind's IDs are abandoned
		}
		from, expect, ok := b.claimTail()
		if !ok {
			continue
		}
		if n, err := g.giveBack(ctx, b, from, expect); err != nil {
			g.s.Logger.Warn("segment give-back of an idle tag failed; its range is abandoned", "tag", b.tag, "err", err)
		} else if n > 0 {
			givenBack += n
			returned++
			g.mu.Lock()
			g.retired.givenBack += uint64(n)
			g.mu.Unlock()
		}
	}
	g.s.Logger.Info("segment idle tags dropped", "tags", len(idle), "idle_for", g.s.IdleTimeout,
		"ranges_given_back", returned, "ids_given_back", givenBack)
	return nil
}

// giveBackRange returns [from, expect) of b's row to the store if no one
// reserved since.
func (g *Generator) giveBackRange(ctx context.Context, b *buffer, from, expect int64) (bool, error) {
	b.mu.Lock()
	striped := b.striped
	b.mu.Unlock()
	if striped {
		return false, nil
	}
	return b.row.giveBack(ctx, from, expect)
}

// giveBack returns [from, expect) of b's tag to the store if no one reserved
// since, and reports how many IDs it returned.
func (g *Generator) giveBack(ctx context.Context, b *buffer, from, expect int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, g.s.StoreTimeout)
	defer cancel()
	ok, err := g.giveBackRange(ctx, b, from, expect)
	if err != nil || !ok {
		return 0, err
	}
	b.mu.Lock()
	b.givenBack += uint64(expect - from)
	b.mu.Unlock()
	return expect - from, nil
}

// find is the tag's buffer in any map, nil if it has none.
func (g *Generator) find(tag string) *buffer {
	if b := (*g.hot.Load())[tag]; b != nil {
		return b
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := g.fresh[tag]; b != nil {
		return b
	}
	return g.pending[tag]
}

// convert drops a tag's state whose kind changed (or may have): its
// buffers are stopped, its state leaves the maps, and its kind's release
// runs. Requests in flight and later ones look the tag up again. A
// buffer's unused IDs are abandoned, as a crash abandons them.
func (g *Generator) convert(ctx context.Context, b *buffer) {
	g.mu.Lock()
	stopTag(b, errRetired)
	g.removeLocked(b)
	g.mu.Unlock()
	if k := b.kind(); k != nil {
		k.release(ctx)
	}
}
