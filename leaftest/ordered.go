package leaftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// The ordered-tag subtests of TestSegmentStore: leaf.OrderedStore, the
// leases of ordered tags. Each skips on a store without it.

// Owners as servers write them: a base URL, '#', a nonce of the process.
const (
	ownerA = "http://10.0.0.1:8080#a1f3"
	ownerB = "http://10.0.0.2:8080#b7c9"
)

// longTTL is a lease no test outlives, so that "held" is not a race with
// the clock; shortTTL one a test waits out.
const (
	longTTL  = 10 * time.Minute
	shortTTL = 200 * time.Millisecond
)

func (storeSuite) ordered(t *testing.T, st leaf.SegmentStore) leaf.OrderedStore {
	t.Helper()
	os, ok := st.(leaf.OrderedStore)
	if !ok {
		t.Skipf("%T keeps no ordered tags", st)
	}
	return os
}

// openOrdered opens an instance and makes the ordered tags given (plain
// tags created, then marked).
func (s storeSuite) openOrdered(t *testing.T, open Opener, tags ...string) (leaf.SegmentStore, leaf.SegmentAdmin, leaf.OrderedStore) {
	t.Helper()
	st, adm := s.open(t, open)
	os := s.ordered(t, st)
	for _, tag := range tags {
		s.create(t, adm, tag, 1, 10)
		if err := os.SetOrdered(t.Context(), tag, true); err != nil {
			t.Fatalf("SetOrdered(%s, true): %v", tag, err)
		}
	}
	return st, adm, os
}

// lease reads the tag's lease, failing the test if it is not ordered.
func (storeSuite) lease(t *testing.T, os leaf.OrderedStore, tag string) leaf.TagLease {
	t.Helper()
	l, ok, err := os.TagLease(t.Context(), tag)
	if err != nil || !ok {
		t.Fatalf("TagLease(%s) = %+v, %v, %v; want an ordered tag", tag, l, ok, err)
	}
	if l.Tag != tag {
		t.Errorf("TagLease(%s).Tag = %q", tag, l.Tag)
	}
	return l
}

func (storeSuite) notOrdered(t *testing.T, os leaf.OrderedStore, tag string) {
	t.Helper()
	if l, ok, err := os.TagLease(t.Context(), tag); err != nil || ok {
		t.Errorf("TagLease(%s) = %+v, %v, %v; want not ordered", tag, l, ok, err)
	}
}

// acquire asks for the tag's lease watching none: it is taken only if
// the row has no owner.
func (s storeSuite) acquire(t *testing.T, os leaf.OrderedStore, tag, owner string, ttl time.Duration) leaf.TagLease {
	t.Helper()
	return s.takeOver(t, os, tag, owner, ttl, leaf.TagLease{})
}

// takeOver asks for the tag's lease having watched the lease watched.
func (storeSuite) takeOver(t *testing.T, os leaf.OrderedStore, tag, owner string, ttl time.Duration, watched leaf.TagLease) leaf.TagLease {
	t.Helper()
	l, err := os.AcquireTag(t.Context(), tag, owner, ttl, watched)
	if err != nil {
		t.Fatalf("AcquireTag(%s, %s, %v, watched %+v): %v", tag, owner, ttl, watched, err)
	}
	if l.Tag != tag {
		t.Errorf("AcquireTag(%s).Tag = %q", tag, l.Tag)
	}
	return l
}

// wantHeld checks that owner holds the lease with token, with time left
// but no more than ttl.
func (storeSuite) wantHeld(t *testing.T, what string, l leaf.TagLease, owner string, token int64, ttl time.Duration) {
	t.Helper()
	if l.Owner != owner || l.Token != token || !l.Held() || l.Left > ttl {
		t.Errorf("%s = owner %q token %d left %v; want %q, token %d, 0 < left <= %v", what, l.Owner, l.Token, l.Left, owner, token, ttl)
	}
}

// waitExpired polls the tag's lease until the store says it ran out: the
// store's clock decides, not the test's.
func (s storeSuite) waitExpired(t *testing.T, os leaf.OrderedStore, tag string) leaf.TagLease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		l, ok, err := os.TagLease(ctx, tag)
		if err != nil || !ok {
			t.Fatalf("TagLease(%s) while waiting for expiry = %+v, %v, %v", tag, l, ok, err)
		}
		if l.Left <= 0 {
			return l
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease of %s still has %v left after 30s", tag, l.Left)
		case <-time.After(min(l.Left, 10*time.Millisecond)):
		}
	}
}

// orderedMark: marking adds a row with no owner and token 0, seen by every
// instance; marking again changes nothing (not even a held lease);
// unmarking removes the row, and again is harmless.
func (s storeSuite) orderedMark(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm := s.open(t, open)
	os := s.ordered(t, st)
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	s.create(t, adm, "m", 1, 10)
	s.create(t, adm, "plain", 1, 10)
	s.notOrdered(t, os, "m")
	if err := os.SetOrdered(ctx, "m", true); err != nil {
		t.Fatalf("SetOrdered(m, true): %v", err)
	}
	for _, x := range []leaf.OrderedStore{os, os2} {
		if l := s.lease(t, x, "m"); l.Owner != "" || l.Token != 0 || l.Held() {
			t.Errorf("new ordered tag: %+v, want no owner, token 0", l)
		}
	}
	s.notOrdered(t, os, "plain")
	s.wantHeld(t, "AcquireTag(m)", s.acquire(t, os, "m", ownerA, longTTL), ownerA, 1, longTTL)
	if err := os2.SetOrdered(ctx, "m", true); err != nil {
		t.Fatalf("SetOrdered(m, true) again: %v", err)
	}
	s.wantHeld(t, "lease after marking again", s.lease(t, os2, "m"), ownerA, 1, longTTL)
	if err := os2.SetOrdered(ctx, "m", false); err != nil {
		t.Fatalf("SetOrdered(m, false): %v", err)
	}
	s.notOrdered(t, os, "m")
	s.notOrdered(t, os2, "m")
	if err := os.SetOrdered(ctx, "m", false); err != nil {
		t.Errorf("SetOrdered(m, false) on a plain tag: %v", err)
	}
	_, err := os.AcquireTag(ctx, "m", ownerA, longTTL, leaf.TagLease{})
	s.wantErr(t, "AcquireTag on an unmarked tag", err, leaf.ErrTagNotFound)
	// Marked again, the row starts over with no owner. Its token may start
	// over too (the SQL stores forget it with the row): a token guards no
	// IDs, see leaf.TagLease.Token.
	if err := os.SetOrdered(ctx, "m", true); err != nil {
		t.Fatalf("SetOrdered(m, true) after unmarking: %v", err)
	}
	if l := s.lease(t, os, "m"); l.Owner != "" || l.Held() {
		t.Errorf("marked again: %+v, want no owner", l)
	}
	// The tag itself is untouched by all of it.
	s.wantRange(t, s.reserve(t, st, "m", 0), 1, 10, 10)
}

// orderedShaped: a tag with a shape (a period, a format, opaque IDs) cannot
// be marked ordered: the store refuses it, as the generator does.
func (s storeSuite) orderedShaped(t *testing.T, open Opener) {
	ctx := t.Context()
	st, _ := s.open(t, open)
	sh := s.shaper(t, st)
	os := s.ordered(t, st)
	if err := sh.CreateShapedTag(ctx, leaf.Alloc{Tag: "daily", Step: 10}, leaf.TagShape{Period: leaf.PeriodDay}); err != nil {
		t.Fatal(err)
	}
	s.wantErr(t, "SetOrdered(daily, true)", os.SetOrdered(ctx, "daily", true), leaf.ErrOrderedTag)
	s.notOrdered(t, os, "daily")
	if err := os.SetOrdered(ctx, "daily", false); err != nil {
		t.Errorf("SetOrdered(daily, false): %v", err)
	}
}

// orderedNotFound: a tag without a leaf_alloc row cannot be marked, has no
// lease to take, renew or release.
func (s storeSuite) orderedNotFound(t *testing.T, open Opener) {
	ctx := t.Context()
	_, _, os := s.openOrdered(t, open, "exists")
	for _, ordered := range []bool{true, false} {
		s.wantErr(t, fmt.Sprintf("SetOrdered(ghost, %v)", ordered), os.SetOrdered(ctx, "ghost", ordered), leaf.ErrTagNotFound)
	}
	s.notOrdered(t, os, "ghost")
	_, err := os.AcquireTag(ctx, "ghost", ownerA, longTTL, leaf.TagLease{})
	s.wantErr(t, "AcquireTag(ghost)", err, leaf.ErrTagNotFound)
	if err != nil && !strings.Contains(err.Error(), "ghost") {
		t.Errorf("AcquireTag(ghost) error %q does not name the tag", err)
	}
	_, err = os.RenewTag(ctx, "ghost", ownerA, 1, longTTL)
	s.wantErr(t, "RenewTag(ghost)", err, leaf.ErrLeaseLost)
	if ok, err := os.ReleaseTag(ctx, "ghost", ownerA, 1); ok || err != nil {
		t.Errorf("ReleaseTag(ghost) = %v, %v; want false, nil", ok, err)
	}
	if ls, err := os.OrderedTags(ctx, "", 0); err != nil || len(ls) != 1 || ls[0].Tag != "exists" {
		t.Errorf("OrderedTags = %+v, %v; want only exists", ls, err)
	}
}

// orderedAcquire: a free lease goes to the first taker with token 1; a
// held one changes for no other owner, not even one that watched it (it
// has not run out), and all instances see its holder, the very same lease
// (Version and all). The holder asking again keeps it, token and all. An
// owner of the full width fits the store.
func (s storeSuite) orderedAcquire(t *testing.T, open Opener) {
	_, _, os := s.openOrdered(t, open, "acq", "wide")
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	taken := s.acquire(t, os, "acq", ownerA, longTTL)
	s.wantHeld(t, "AcquireTag(free)", taken, ownerA, 1, longTTL)
	s.wantHeld(t, "AcquireTag(held) by another owner", s.acquire(t, os2, "acq", ownerB, longTTL), ownerA, 1, longTTL)
	s.wantHeld(t, "AcquireTag(held) by another owner, same instance", s.acquire(t, os, "acq", ownerB, time.Second), ownerA, 1, longTTL)
	s.wantHeld(t, "AcquireTag(held) by another owner watching it", s.takeOver(t, os2, "acq", ownerB, longTTL, taken), ownerA, 1, longTTL)
	s.wantHeld(t, "AcquireTag(held) by the holder", s.acquire(t, os2, "acq", ownerA, longTTL), ownerA, 1, longTTL)
	for _, x := range []leaf.OrderedStore{os, os2} {
		l := s.lease(t, x, "acq")
		s.wantHeld(t, "TagLease(acq)", l, ownerA, 1, longTTL)
		if !l.Same(taken) {
			t.Errorf("TagLease(acq) = %+v, want the very lease AcquireTag answered, %+v", l, taken)
		}
	}
	wide := "http://" + strings.Repeat("w", 512-len("http://#n")) + "#n"
	if len(wide) != 512 {
		t.Fatalf("test owner is %d bytes", len(wide))
	}
	s.wantHeld(t, "AcquireTag by a 512-byte owner", s.acquire(t, os, "wide", wide, longTTL), wide, 1, longTTL)
	s.wantHeld(t, "TagLease(wide)", s.lease(t, os2, "wide"), wide, 1, longTTL)
	if _, err := os.RenewTag(t.Context(), "wide", wide, 1, longTTL); err != nil {
		t.Errorf("RenewTag by a 512-byte owner: %v", err)
	}
}

// orderedExpiry: a lease that ran out by the store's clock goes to no one
// who did not watch it: a taker watching nothing, or another lease
// (another owner, token or Version), changes nothing. One that watched the
// very lease takes it with the next token, and the old holder can then
// neither renew nor release it. Its own lease run out, an owner that takes
// it again watching it gets a new token.
func (s storeSuite) orderedExpiry(t *testing.T, open Opener) {
	ctx := t.Context()
	_, _, os := s.openOrdered(t, open, "exp")
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	taken := s.acquire(t, os, "exp", ownerA, shortTTL)
	s.wantHeld(t, "AcquireTag(exp, short)", taken, ownerA, 1, shortTTL)
	l := s.waitExpired(t, os2, "exp")
	if l.Owner != ownerA || l.Token != 1 || l.Held() || !l.Same(taken) {
		t.Errorf("expired lease = %+v, want the lease taken (%+v), not held", l, taken)
	}
	others := []leaf.TagLease{{}, l, l, l}
	others[1].Version++
	others[2].Token++
	others[3].Owner = ownerB
	for i, w := range others {
		if got := s.takeOver(t, os2, "exp", ownerB, longTTL, w); !got.Same(l) || got.Held() {
			t.Errorf("AcquireTag after expiry watching another lease (#%d, %+v) = %+v; want the run-out lease unchanged", i, w, got)
		}
	}
	s.wantHeld(t, "AcquireTag after expiry watching it", s.takeOver(t, os2, "exp", ownerB, longTTL, l), ownerB, 2, longTTL)
	_, err := os.RenewTag(ctx, "exp", ownerA, 1, longTTL)
	s.wantErr(t, "RenewTag by the old owner after a takeover", err, leaf.ErrLeaseLost)
	if err != nil && (!strings.Contains(err.Error(), "exp") || !strings.Contains(err.Error(), ownerB)) {
		t.Errorf("RenewTag error %q does not name the tag and its holder", err)
	}
	if ok, err := os.ReleaseTag(ctx, "exp", ownerA, 1); ok || err != nil {
		t.Errorf("ReleaseTag by the old owner = %v, %v; want false, nil", ok, err)
	}
	s.wantHeld(t, "lease after the old owner's attempts", s.lease(t, os, "exp"), ownerB, 2, longTTL)
	s.create(t, s.admin(t, st2), "exp2", 1, 10)
	if err := os.SetOrdered(ctx, "exp2", true); err != nil {
		t.Fatal(err)
	}
	s.acquire(t, os, "exp2", ownerA, shortTTL)
	l = s.waitExpired(t, os, "exp2")
	s.wantHeld(t, "AcquireTag by the same owner after expiry", s.takeOver(t, os, "exp2", ownerA, longTTL, l), ownerA, 2, longTTL)
}

// orderedRenewExpired: a lease that ran out by the store's clock but that
// no one took over is renewed by its holder, token and all: the token
// decides, not the clock (a clock stepped forward must not end every
// lease). The renewal changes the lease's Version.
func (s storeSuite) orderedRenewExpired(t *testing.T, open Opener) {
	ctx := t.Context()
	_, _, os := s.openOrdered(t, open, "late")
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	s.acquire(t, os, "late", ownerA, shortTTL)
	l := s.waitExpired(t, os2, "late")
	got, err := os2.RenewTag(ctx, "late", ownerA, 1, longTTL)
	if err != nil {
		t.Fatalf("RenewTag of a lease run out but not taken over: %v", err)
	}
	s.wantHeld(t, "RenewTag after expiry", got, ownerA, 1, longTTL)
	now := s.lease(t, os, "late")
	s.wantHeld(t, "lease renewed after expiry", now, ownerA, 1, longTTL)
	if now.Same(l) || !now.Same(got) {
		t.Errorf("lease renewed after expiry = %+v; want a new Version (was %+v), the one RenewTag answered (%+v)", now, l, got)
	}
	// The lease watched is gone: watching it takes nothing.
	s.wantHeld(t, "AcquireTag watching the lease before the renewal", s.takeOver(t, os2, "late", ownerB, longTTL, l), ownerA, 1, longTTL)
}

// orderedReserveOwned: the holder of a lease reserves with its token as
// Reserve does, even once the lease ran out by the store's clock (the
// token decides). Any other owner or token, a released lease, a plain
// tag: nothing is reserved, with ErrLeaseLost naming who holds the lease;
// once another took the lease over, the old token reserves nothing.
func (s storeSuite) orderedReserveOwned(t *testing.T, open Opener) {
	ctx := t.Context()
	st, adm, os := s.openOrdered(t, open, "own", "own-short")
	s.create(t, adm, "own-plain", 1, 10)
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	reserve := func(x leaf.OrderedStore, tag, owner string, token int64, step int) leaf.Reservation {
		t.Helper()
		r, err := x.ReserveOwned(ctx, tag, owner, token, step)
		if err != nil {
			t.Fatalf("ReserveOwned(%s, %s, %d, %d): %v", tag, owner, token, step, err)
		}
		if r.Tag != tag {
			t.Errorf("ReserveOwned(%s).Tag = %q", tag, r.Tag)
		}
		return r
	}
	refused := func(x leaf.OrderedStore, tag, owner string, token int64, holder string, maxID int64) {
		t.Helper()
		r, err := x.ReserveOwned(ctx, tag, owner, token, 0)
		what := fmt.Sprintf("ReserveOwned(%s, %s, %d)", tag, owner, token)
		s.wantErr(t, what, err, leaf.ErrLeaseLost)
		if errors.Is(err, leaf.ErrTagNotFound) {
			t.Errorf("%s: error %v matches ErrTagNotFound: the tag exists", what, err)
		}
		if err != nil && (!strings.Contains(err.Error(), tag) || !strings.Contains(err.Error(), holder)) {
			t.Errorf("%s: error %q does not name the tag and %q", what, err, holder)
		}
		if err == nil {
			t.Errorf("%s reserved %+v", what, r)
		}
		if a := s.alloc(t, st, tag); a.MaxID != maxID {
			t.Errorf("%s moved max_id to %d, want it still %d", what, a.MaxID, maxID)
		}
	}
	s.acquire(t, os, "own", ownerA, longTTL)
	s.wantRange(t, reserve(os2, "own", ownerA, 1, 0), 1, 10, 10)
	s.wantRange(t, reserve(os, "own", ownerA, 1, 25), 11, 25, 10)
	for _, c := range []struct {
		owner string
		token int64
	}{{ownerA, 2}, {ownerB, 1}, {strings.ToUpper(ownerA), 1}, {ownerA[:len(ownerA)-1], 1}} {
		refused(os2, "own", c.owner, c.token, ownerA, 36)
	}
	refused(os, "own-plain", ownerA, 1, "not ordered", 1)
	_, err := os.ReserveOwned(ctx, "own-ghost", ownerA, 1, 0)
	s.wantErr(t, "ReserveOwned of a tag without a row", err, leaf.ErrTagNotFound)

	s.acquire(t, os, "own-short", ownerA, shortTTL)
	l := s.waitExpired(t, os2, "own-short")
	s.wantRange(t, reserve(os, "own-short", ownerA, 1, 0), 1, 10, 10)
	s.wantHeld(t, "AcquireTag watching the run-out lease", s.takeOver(t, os2, "own-short", ownerB, longTTL, l), ownerB, 2, longTTL)
	refused(os, "own-short", ownerA, 1, ownerB, 11)
	s.wantRange(t, reserve(os2, "own-short", ownerB, 2, 0), 11, 10, 10)
	if ok, err := os2.ReleaseTag(ctx, "own-short", ownerB, 2); !ok || err != nil {
		t.Fatalf("ReleaseTag = %v, %v", ok, err)
	}
	refused(os, "own-short", ownerB, 2, "no one", 21)
}

// orderedReserveRace: an owner reserves over and over while its lease is
// released and taken by another owner, who then reserves. Every range the
// first got lies below the second's, and none was granted to it after the
// takeover returned: the check of the lease and the reserve are one
// transaction, which a takeover waits for or fences.
func (s storeSuite) orderedReserveRace(t *testing.T, open Opener) {
	ctx := t.Context()
	_, _, os := s.openOrdered(t, open, "fenced")
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	s.acquire(t, os, "fenced", ownerA, longTTL)
	var (
		wg       sync.WaitGroup
		took     = make(chan struct{})
		reserved = make(chan struct{}, 1)
		afterTo  int64 // the end of a range A asked for after the takeover returned
		maxEnd   int64
		lastErr  error
	)
	wg.Go(func() {
		// Should the very first reserve fail, the test goes on to report it.
		defer func() {
			select {
			case reserved <- struct{}{}:
			default:
			}
		}()
		for {
			late := false // sent after the takeover returned
			select {
			case <-took:
				late = true
			default:
			}
			r, err := os.ReserveOwned(ctx, "fenced", ownerA, 1, 1)
			if err != nil {
				lastErr = err
				return
			}
			maxEnd = max(maxEnd, r.MaxID)
			if late && afterTo == 0 {
				afterTo = r.MaxID
			}
			select {
			case reserved <- struct{}{}:
			default:
			}
		}
	})
	<-reserved
	if ok, err := os2.ReleaseTag(ctx, "fenced", ownerA, 1); !ok || err != nil {
		t.Fatalf("ReleaseTag = %v, %v", ok, err)
	}
	s.wantHeld(t, "AcquireTag after the release", s.acquire(t, os2, "fenced", ownerB, longTTL), ownerB, 2, longTTL)
	close(took)
	wg.Wait()
	s.wantErr(t, "the old owner's reserve after the takeover", lastErr, leaf.ErrLeaseLost)
	if afterTo != 0 {
		t.Errorf("the old owner reserved up to %d after the takeover returned", afterTo)
	}
	r, err := os2.ReserveOwned(ctx, "fenced", ownerB, 2, 1)
	if err != nil {
		t.Fatalf("the new owner's ReserveOwned: %v", err)
	}
	if r.Start() < maxEnd {
		t.Errorf("the new owner's range starts at %d, below the old owner's up to %d", r.Start(), maxEnd)
	}
}

func (storeSuite) admin(t *testing.T, st leaf.SegmentStore) leaf.SegmentAdmin {
	t.Helper()
	adm, ok := st.(leaf.SegmentAdmin)
	if !ok {
		t.Fatalf("%T has no admin", st)
	}
	return adm
}

// orderedRenew: only the holder with its token renews, to ttl from now,
// which changes the lease's Version; any other owner (one differing only
// in case included) or token is told the lease is lost, and the lease
// stays as it was.
func (s storeSuite) orderedRenew(t *testing.T, open Opener) {
	ctx := t.Context()
	_, _, os := s.openOrdered(t, open, "ren", "plain-now")
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	taken := s.acquire(t, os, "ren", ownerA, time.Minute)
	l, err := os2.RenewTag(ctx, "ren", ownerA, 1, 2*time.Minute)
	if err != nil {
		t.Fatalf("RenewTag: %v", err)
	}
	if l.Same(taken) || !l.Same(s.lease(t, os, "ren")) {
		t.Errorf("RenewTag = %+v: want a Version other than the lease taken (%+v), the one TagLease reads", l, taken)
	}
	// Left is the new end less the store's now, in one transaction: the
	// lease reaches past the minute it had.
	s.wantHeld(t, "RenewTag", l, ownerA, 1, 2*time.Minute)
	if l.Left <= time.Minute {
		t.Errorf("RenewTag to 2m left %v, want more than the 1m it had", l.Left)
	}
	for _, c := range []struct {
		name  string
		owner string
		token int64
	}{
		{"WrongToken", ownerA, 2},
		{"OlderToken", ownerA, 7},
		{"OtherOwner", ownerB, 1},
		{"OwnerInOtherCase", strings.ToUpper(ownerA), 1},
		{"OwnerPrefix", ownerA[:len(ownerA)-1], 1},
	} {
		_, err := os.RenewTag(ctx, "ren", c.owner, c.token, longTTL)
		s.wantErr(t, "RenewTag "+c.name, err, leaf.ErrLeaseLost)
	}
	s.wantHeld(t, "lease after refused renewals", s.lease(t, os, "ren"), ownerA, 1, 2*time.Minute)
	if now := s.lease(t, os, "ren"); now.Left <= time.Minute || !now.Same(l) {
		t.Errorf("a refused renewal changed the lease to %+v (was %+v)", now, l)
	}
	// Unmarked under its holder: the holder's next renewal fails.
	s.acquire(t, os, "plain-now", ownerA, longTTL)
	if err := os2.SetOrdered(ctx, "plain-now", false); err != nil {
		t.Fatal(err)
	}
	_, err = os.RenewTag(ctx, "plain-now", ownerA, 1, longTTL)
	s.wantErr(t, "RenewTag of an unmarked tag", err, leaf.ErrLeaseLost)
}

// orderedRenewTags: RenewTags answers each lease as RenewTag would, in the
// order given, in one call: the held leases, one run out by the store's
// clock but not taken over among them, are renewed to ttl from now; a
// wrong token, another owner's lease, a released lease, a plain tag and a
// missing one are lost, and stay as they were. A tag given twice
// is answered twice, as two RenewTag calls would be. Invalid input fails
// the whole call and renews nothing.
func (s storeSuite) orderedRenewTags(t *testing.T, open Opener) {
	ctx := t.Context()
	_, adm, os := s.openOrdered(t, open, "rn-held", "rn-held2", "rn-token", "rn-other", "rn-released", "rn-expired")
	s.create(t, adm, "rn-plain", 1, 10)
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	s.acquire(t, os, "rn-expired", ownerA, shortTTL)
	for _, tag := range []string{"rn-held", "rn-held2", "rn-token", "rn-released"} {
		s.acquire(t, os, tag, ownerA, time.Minute)
	}
	s.acquire(t, os, "rn-other", ownerB, time.Minute)
	if ok, err := os.ReleaseTag(ctx, "rn-released", ownerA, 1); !ok || err != nil {
		t.Fatalf("ReleaseTag(rn-released) = %v, %v", ok, err)
	}
	s.waitExpired(t, os, "rn-expired")

	leases := []leaf.TagToken{
		{Tag: "rn-token", Token: 2},
		{Tag: "rn-held", Token: 1},
		{Tag: "rn-other", Token: 1},
		{Tag: "rn-held2", Token: 1},
		{Tag: "rn-released", Token: 1},
		{Tag: "rn-expired", Token: 1},
		{Tag: "rn-plain", Token: 1},
		{Tag: "rn-ghost", Token: 1},
		{Tag: "rn-held", Token: 1},
	}
	got, err := os2.RenewTags(ctx, ownerA, leases, 2*time.Minute)
	if err != nil || len(got) != len(leases) {
		t.Fatalf("RenewTags(%d leases) = %d results, %v", len(leases), len(got), err)
	}
	for i, r := range got {
		what := fmt.Sprintf("RenewTags[%d] (%s token %d)", i, leases[i].Tag, leases[i].Token)
		if tag := leases[i].Tag; tag != "rn-held" && tag != "rn-held2" && tag != "rn-expired" {
			s.wantErr(t, what, r.Err, leaf.ErrLeaseLost)
			if r.Err != nil && !strings.Contains(r.Err.Error(), leases[i].Tag) {
				t.Errorf("%s: error %q does not name the tag", what, r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("%s: %v", what, r.Err)
			continue
		}
		if r.Lease.Tag != leases[i].Tag {
			t.Errorf("%s: Tag %q", what, r.Lease.Tag)
		}
		s.wantHeld(t, what, r.Lease, ownerA, 1, 2*time.Minute)
		if r.Lease.Left <= time.Minute {
			t.Errorf("%s: left %v, want more than the 1m it had", what, r.Lease.Left)
		}
	}
	for _, tag := range []string{"rn-held", "rn-held2", "rn-expired"} {
		l := s.lease(t, os, tag)
		s.wantHeld(t, tag+" after RenewTags", l, ownerA, 1, 2*time.Minute)
		if l.Left <= time.Minute {
			t.Errorf("%s after RenewTags: left %v, want more than the 1m it had", tag, l.Left)
		}
		for i, r := range got {
			if leases[i].Tag == tag && !r.Lease.Same(l) {
				t.Errorf("%s after RenewTags = %+v, not the lease RenewTags[%d] answered (%+v)", tag, l, i, r.Lease)
			}
		}
	}
	for _, c := range []struct {
		tag   string
		owner string
	}{{"rn-token", ownerA}, {"rn-other", ownerB}} {
		s.wantHeld(t, c.tag+" after RenewTags", s.lease(t, os, c.tag), c.owner, 1, time.Minute)
	}
	if l := s.lease(t, os, "rn-released"); l.Owner != "" || l.Held() {
		t.Errorf("rn-released after RenewTags = %+v, want no owner", l)
	}
	s.notOrdered(t, os, "rn-plain")
	s.notOrdered(t, os, "rn-ghost")

	for _, empty := range [][]leaf.TagToken{nil, {}} {
		if got, err := os.RenewTags(ctx, ownerA, empty, longTTL); err != nil || len(got) != 0 {
			t.Errorf("RenewTags(%#v) = %+v, %v; want nothing, nil", empty, got, err)
		}
	}

	// Each call names rn-held first: a renewal to longTTL would show.
	held := leaf.TagToken{Tag: "rn-held", Token: 1}
	for _, c := range []struct {
		name   string
		owner  string
		leases []leaf.TagToken
		ttl    time.Duration
		want   error
	}{
		{"EmptyOwner", "", []leaf.TagToken{held}, longTTL, leaf.ErrInvalidArgument},
		{"OwnerWithSpace", ownerA + " ", []leaf.TagToken{held}, longTTL, leaf.ErrInvalidArgument},
		{"ZeroTTL", ownerA, []leaf.TagToken{held}, 0, leaf.ErrInvalidArgument},
		{"NegativeTTL", ownerA, []leaf.TagToken{held}, -time.Second, leaf.ErrInvalidArgument},
		{"EmptyTag", ownerA, []leaf.TagToken{held, {Tag: "", Token: 1}}, longTTL, leaf.ErrInvalidTag},
		{"BadTag", ownerA, []leaf.TagToken{held, {Tag: "rn held", Token: 1}}, longTTL, leaf.ErrInvalidTag},
		{"ZeroToken", ownerA, []leaf.TagToken{held, {Tag: "rn-token", Token: 0}}, longTTL, leaf.ErrInvalidArgument},
		{"NegativeToken", ownerA, []leaf.TagToken{held, {Tag: "rn-token", Token: -1}}, longTTL, leaf.ErrInvalidArgument},
	} {
		got, err := os.RenewTags(ctx, c.owner, c.leases, c.ttl)
		s.wantErr(t, "RenewTags "+c.name, err, c.want)
		if got != nil {
			t.Errorf("RenewTags %s answered %+v beside its error", c.name, got)
		}
	}
	s.wantHeld(t, "rn-held after invalid RenewTags", s.lease(t, os, "rn-held"), ownerA, 1, 2*time.Minute)
}

// orderedRenewTagsMany: one call renews more leases than one batch holds,
// answering each in the order given (not the tags' order), the lost ones
// among them in each batch included.
func (s storeSuite) orderedRenewTagsMany(t *testing.T, open Opener) {
	ctx := t.Context()
	n := 2*leaf.MaxRenewBatch + 200
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("many-%04d", i)
	}
	_, adm, os := s.openOrdered(t, open)
	// Three transactions per tag: spread over a few connections.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan string)
	)
	for range 8 {
		wg.Go(func() {
			for tag := range next {
				err := adm.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10})
				if err == nil {
					err = os.SetOrdered(ctx, tag, true)
				}
				if err == nil {
					var l leaf.TagLease
					if l, err = os.AcquireTag(ctx, tag, ownerA, time.Minute, leaf.TagLease{}); err == nil && (l.Owner != ownerA || l.Token != 1) {
						err = fmt.Errorf("acquired %+v", l)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", tag, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, tag := range tags {
		next <- tag
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Asked in reverse; one lease lost in each batch of the call.
	leases := make([]leaf.TagToken, n)
	for i := range leases {
		leases[i] = leaf.TagToken{Tag: tags[n-1-i], Token: 1}
	}
	lost := map[string]bool{}
	for _, i := range []int{7, leaf.MaxRenewBatch + 250, n - 1} {
		tag := leases[i].Tag
		lost[tag] = true
		if ok, err := os.ReleaseTag(ctx, tag, ownerA, 1); !ok || err != nil {
			t.Fatalf("ReleaseTag(%s) = %v, %v", tag, ok, err)
		}
	}
	st2, _ := s.open(t, open)
	got, err := s.ordered(t, st2).RenewTags(ctx, ownerA, leases, 2*time.Minute)
	if err != nil || len(got) != n {
		t.Fatalf("RenewTags(%d leases) = %d results, %v", n, len(got), err)
	}
	bad := 0
	for i, r := range got {
		tag := leases[i].Tag
		switch {
		case lost[tag] && !errors.Is(r.Err, leaf.ErrLeaseLost):
			t.Errorf("RenewTags[%d] (%s, released) = %+v, %v; want ErrLeaseLost", i, tag, r.Lease, r.Err)
		case lost[tag]:
		case r.Err != nil || r.Lease.Tag != tag || r.Lease.Owner != ownerA || r.Lease.Token != 1 || r.Lease.Left <= time.Minute || r.Lease.Left > 2*time.Minute:
			t.Errorf("RenewTags[%d] (%s) = %+v, %v; want renewed to 1m < left <= 2m", i, tag, r.Lease, r.Err)
		default:
			continue
		}
		if bad++; bad >= 10 {
			t.Fatal("too many wrong results")
		}
	}
	ls, err := os.OrderedTags(ctx, "", 0)
	if err != nil || len(ls) != n {
		t.Fatalf("OrderedTags = %d leases, %v; want %d", len(ls), err, n)
	}
	for _, l := range ls {
		switch {
		case lost[l.Tag] && (l.Owner != "" || l.Held()):
			t.Errorf("%s after RenewTags = %+v, want released", l.Tag, l)
		case !lost[l.Tag] && (l.Owner != ownerA || l.Token != 1 || l.Left <= time.Minute || l.Left > 2*time.Minute):
			t.Errorf("%s after RenewTags = %+v, want %s's, 1m < left <= 2m", l.Tag, l, ownerA)
		default:
			continue
		}
		if bad++; bad >= 10 {
			t.Fatal("too many wrong leases")
		}
	}
}

// orderedRelease: the holder with its token ends its lease at once; the
// token stays, and another server takes over without waiting, with the
// next token.
func (s storeSuite) orderedRelease(t *testing.T, open Opener) {
	ctx := t.Context()
	_, _, os := s.openOrdered(t, open, "rel")
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	s.acquire(t, os, "rel", ownerA, longTTL)
	for _, c := range []struct {
		owner string
		token int64
	}{{ownerA, 2}, {ownerB, 1}, {strings.ToUpper(ownerA), 1}} {
		if ok, err := os.ReleaseTag(ctx, "rel", c.owner, c.token); ok || err != nil {
			t.Errorf("ReleaseTag(%s, %d) of another's lease = %v, %v; want false, nil", c.owner, c.token, ok, err)
		}
	}
	s.wantHeld(t, "lease after refused releases", s.lease(t, os, "rel"), ownerA, 1, longTTL)
	if ok, err := os.ReleaseTag(ctx, "rel", ownerA, 1); !ok || err != nil {
		t.Fatalf("ReleaseTag by the holder = %v, %v; want true", ok, err)
	}
	if l := s.lease(t, os2, "rel"); l.Owner != "" || l.Token != 1 || l.Held() || l.Left > 0 {
		t.Errorf("released lease = %+v, want no owner, token 1, no time left", l)
	}
	if ok, err := os.ReleaseTag(ctx, "rel", ownerA, 1); ok || err != nil {
		t.Errorf("ReleaseTag again = %v, %v; want false, nil", ok, err)
	}
	_, err := os.RenewTag(ctx, "rel", ownerA, 1, longTTL)
	s.wantErr(t, "RenewTag after release", err, leaf.ErrLeaseLost)
	s.wantHeld(t, "AcquireTag right after the release", s.acquire(t, os2, "rel", ownerB, longTTL), ownerB, 2, longTTL)
}

// orderedDeleteTag: deleting a tag deletes its lease in the same
// transaction; created again, the tag is plain.
func (s storeSuite) orderedDeleteTag(t *testing.T, open Opener) {
	ctx := t.Context()
	_, adm, os := s.openOrdered(t, open, "del", "kept")
	s.acquire(t, os, "del", ownerA, longTTL)
	s.acquire(t, os, "kept", ownerA, longTTL)
	if err := adm.DeleteTag(ctx, "del"); err != nil {
		t.Fatalf("DeleteTag: %v", err)
	}
	s.notOrdered(t, os, "del")
	_, err := os.RenewTag(ctx, "del", ownerA, 1, longTTL)
	s.wantErr(t, "RenewTag of a deleted tag", err, leaf.ErrLeaseLost)
	_, err = os.AcquireTag(ctx, "del", ownerB, longTTL, leaf.TagLease{})
	s.wantErr(t, "AcquireTag of a deleted tag", err, leaf.ErrTagNotFound)
	s.wantErr(t, "SetOrdered of a deleted tag", os.SetOrdered(ctx, "del", true), leaf.ErrTagNotFound)
	if ls, err := os.OrderedTags(ctx, "", 0); err != nil || len(ls) != 1 || ls[0].Tag != "kept" {
		t.Errorf("OrderedTags after the delete = %+v, %v; want only kept", ls, err)
	}
	s.create(t, adm, "del", 0, 10)
	s.notOrdered(t, os, "del")
	if err := os.SetOrdered(ctx, "del", true); err != nil {
		t.Fatalf("SetOrdered on the re-created tag: %v", err)
	}
	if l := s.lease(t, os, "del"); l.Owner != "" || l.Held() {
		t.Errorf("re-created and marked: %+v, want no owner", l)
	}
	s.wantHeld(t, "the other tag's lease", s.lease(t, os, "kept"), ownerA, 1, longTTL)
}

// orderedDeleteRace: a tag deleted while another server marks it leaves
// no lease behind, whichever goes first.
func (s storeSuite) orderedDeleteRace(t *testing.T, open Opener) {
	ctx := t.Context()
	_, adm, os := s.openOrdered(t, open)
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	for round := range 12 {
		s.create(t, adm, "race", 0, 10)
		var wg sync.WaitGroup
		var delErr, markErr error
		wg.Go(func() { delErr = adm.DeleteTag(ctx, "race") })
		wg.Go(func() { markErr = os2.SetOrdered(ctx, "race", true) })
		wg.Wait()
		if delErr != nil {
			t.Fatalf("round %d: DeleteTag: %v", round, delErr)
		}
		if markErr != nil && !errors.Is(markErr, leaf.ErrTagNotFound) {
			t.Fatalf("round %d: SetOrdered: %v", round, markErr)
		}
		s.notOrdered(t, os, "race")
	}
}

// orderedInvalid: malformed input is refused with its own error before
// any SQL (on a closed instance too), and changes nothing; valid input on
// a closed instance fails with leaf.ErrClosed.
func (s storeSuite) orderedInvalid(t *testing.T, open Opener) {
	ctx := t.Context()
	st, _, os := s.openOrdered(t, open, "victim")
	s.acquire(t, os, "victim", ownerA, longTTL)
	closedSt, err := open()
	if err != nil {
		t.Fatal(err)
	}
	closed := s.ordered(t, closedSt)
	if err := closedSt.Close(); err != nil {
		t.Fatal(err)
	}
	badTags := []string{"", strings.Repeat("a", leaf.MaxTagLen+1), "victim' OR '1'='1", "victim%", "vic tim", "?", "$1", "ünï", "a#b"}
	badOwners := []string{"", strings.Repeat("o", 513), "http://x:1#a b", "http://x:1#a ", "http://x:1#a\x00", "http://x:1#a\n", "http://ünï#a", "http://x:1#a\x7f"}
	type call struct {
		name string
		err  error
	}
	for _, x := range []leaf.OrderedStore{closed, os} {
		for _, tag := range badTags {
			for _, c := range []call{
				{"TagLease", func() error { _, _, err := x.TagLease(ctx, tag); return err }()},
				{"AcquireTag", func() error { _, err := x.AcquireTag(ctx, tag, ownerA, longTTL, leaf.TagLease{}); return err }()},
				{"RenewTag", func() error { _, err := x.RenewTag(ctx, tag, ownerA, 1, longTTL); return err }()},
				{"RenewTags", func() error {
					_, err := x.RenewTags(ctx, ownerA, []leaf.TagToken{{Tag: "victim", Token: 1}, {Tag: tag, Token: 1}}, longTTL)
					return err
				}()},
				{"ReleaseTag", func() error { _, err := x.ReleaseTag(ctx, tag, ownerA, 1); return err }()},
				{"ReserveOwned", func() error { _, err := x.ReserveOwned(ctx, tag, ownerA, 1, 0); return err }()},
				{"SetOrdered(true)", x.SetOrdered(ctx, tag, true)},
				{"SetOrdered(false)", x.SetOrdered(ctx, tag, false)},
			} {
				s.wantErr(t, fmt.Sprintf("%s(%q)", c.name, tag), c.err, leaf.ErrInvalidTag)
			}
			if tag != "" {
				_, err := x.OrderedTags(ctx, tag, 10)
				s.wantErr(t, fmt.Sprintf("OrderedTags(after %q)", tag), err, leaf.ErrInvalidArgument)
			}
			_, err := x.OrderedTagsIn(ctx, []string{"victim", tag})
			s.wantErr(t, fmt.Sprintf("OrderedTagsIn(victim, %q)", tag), err, leaf.ErrInvalidTag)
		}
		var calls []call
		for _, owner := range badOwners {
			calls = append(calls,
				call{"AcquireTag owner " + fmt.Sprintf("%.20q", owner), func() error { _, err := x.AcquireTag(ctx, "victim", owner, longTTL, leaf.TagLease{}); return err }()},
				call{"RenewTag owner " + fmt.Sprintf("%.20q", owner), func() error { _, err := x.RenewTag(ctx, "victim", owner, 1, longTTL); return err }()},
				call{"RenewTags owner " + fmt.Sprintf("%.20q", owner), func() error {
					_, err := x.RenewTags(ctx, owner, []leaf.TagToken{{Tag: "victim", Token: 1}}, longTTL)
					return err
				}()},
				call{"ReleaseTag owner " + fmt.Sprintf("%.20q", owner), func() error { _, err := x.ReleaseTag(ctx, "victim", owner, 1); return err }()},
				call{"ReserveOwned owner " + fmt.Sprintf("%.20q", owner), func() error { _, err := x.ReserveOwned(ctx, "victim", owner, 1, 0); return err }()},
			)
		}
		for _, ttl := range []time.Duration{0, -time.Second} {
			calls = append(calls,
				call{fmt.Sprintf("AcquireTag ttl %v", ttl), func() error { _, err := x.AcquireTag(ctx, "victim", ownerB, ttl, leaf.TagLease{}); return err }()},
				call{fmt.Sprintf("RenewTag ttl %v", ttl), func() error { _, err := x.RenewTag(ctx, "victim", ownerA, 1, ttl); return err }()},
				call{fmt.Sprintf("RenewTags ttl %v", ttl), func() error {
					_, err := x.RenewTags(ctx, ownerA, []leaf.TagToken{{Tag: "victim", Token: 1}}, ttl)
					return err
				}()},
			)
		}
		for _, token := range []int64{0, -1} {
			calls = append(calls,
				call{fmt.Sprintf("RenewTag token %d", token), func() error { _, err := x.RenewTag(ctx, "victim", ownerA, token, longTTL); return err }()},
				call{fmt.Sprintf("RenewTags token %d", token), func() error {
					_, err := x.RenewTags(ctx, ownerA, []leaf.TagToken{{Tag: "victim", Token: 1}, {Tag: "victim", Token: token}}, longTTL)
					return err
				}()},
				call{fmt.Sprintf("ReleaseTag token %d", token), func() error { _, err := x.ReleaseTag(ctx, "victim", ownerA, token); return err }()},
				call{fmt.Sprintf("ReserveOwned token %d", token), func() error { _, err := x.ReserveOwned(ctx, "victim", ownerA, token, 0); return err }()},
			)
		}
		for _, c := range calls {
			s.wantErr(t, c.name, c.err, leaf.ErrInvalidArgument)
		}
	}
	s.wantHeld(t, "lease after invalid calls", s.lease(t, os, "victim"), ownerA, 1, longTTL)
	if a := s.alloc(t, st, "victim"); a.MaxID != 1 {
		t.Errorf("max_id after invalid calls %d, want 1: an invalid ReserveOwned reserved", a.MaxID)
	}
	if ls, err := os.OrderedTags(ctx, "", 0); err != nil || len(ls) != 1 {
		t.Errorf("OrderedTags after invalid calls = %+v, %v; want only victim", ls, err)
	}

	if err := closedSt.Ping(ctx); !errors.Is(err, leaf.ErrClosed) {
		t.Fatalf("Ping after Close: %v, want ErrClosed", err)
	}
	for _, c := range []call{
		{"TagLease", func() error { _, _, err := closed.TagLease(ctx, "victim"); return err }()},
		{"AcquireTag", func() error { _, err := closed.AcquireTag(ctx, "victim", ownerB, longTTL, leaf.TagLease{}); return err }()},
		{"RenewTag", func() error { _, err := closed.RenewTag(ctx, "victim", ownerA, 1, longTTL); return err }()},
		{"RenewTags", func() error {
			_, err := closed.RenewTags(ctx, ownerA, []leaf.TagToken{{Tag: "victim", Token: 1}}, longTTL)
			return err
		}()},
		{"ReleaseTag", func() error { _, err := closed.ReleaseTag(ctx, "victim", ownerA, 1); return err }()},
		{"ReserveOwned", func() error { _, err := closed.ReserveOwned(ctx, "victim", ownerA, 1, 0); return err }()},
		{"SetOrdered", closed.SetOrdered(ctx, "victim", false)},
		{"OrderedTags", func() error { _, err := closed.OrderedTags(ctx, "", 0); return err }()},
		{"OrderedTagsIn", func() error { _, err := closed.OrderedTagsIn(ctx, []string{"victim"}); return err }()},
	} {
		s.wantErr(t, c.name+" on a closed instance", c.err, leaf.ErrClosed)
	}
}

// orderedRace: servers, each on its own instance, race to take a free
// lease, round after round. Exactly one wins each round, every loser is
// told who did, and the winner's token is the last one plus one: exactly
// one take was written.
func (s storeSuite) orderedRace(t *testing.T, open Opener) {
	const servers = 16
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	ctx := t.Context()
	_, _, first := s.openOrdered(t, open, "race")
	oss := []leaf.OrderedStore{first}
	for len(oss) < servers {
		st, _ := s.open(t, open)
		oss = append(oss, s.ordered(t, st))
	}
	owner := func(i int) string { return fmt.Sprintf("http://10.0.1.%d:8080#n%d", i, i) }
	var last int64
	for round := range rounds {
		got := make([]leaf.TagLease, servers)
		errs := make([]error, servers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, os := range oss {
			wg.Go(func() {
				<-start
				got[i], errs[i] = os.AcquireTag(ctx, "race", owner(i), longTTL, leaf.TagLease{})
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: AcquireTag: %v", round, err)
		}
		var winners []int
		for i, l := range got {
			if l.Owner == owner(i) {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d servers own the tag (%v), want exactly 1: %+v", round, len(winners), winners, got)
		}
		w := got[winners[0]]
		if w.Token != last+1 {
			t.Errorf("round %d: winner's token %d, want %d (the last + 1)", round, w.Token, last+1)
		}
		if w.Token <= last {
			t.Fatalf("round %d: token %d not above the last round's %d", round, w.Token, last)
		}
		for i, l := range got {
			if l.Owner != w.Owner || l.Token != w.Token || !l.Held() {
				t.Errorf("round %d: server %d was told %+v, want the winner %s with token %d held", round, i, l, w.Owner, w.Token)
			}
		}
		if ok, err := oss[winners[0]].ReleaseTag(ctx, "race", w.Owner, w.Token); !ok || err != nil {
			t.Fatalf("round %d: winner's ReleaseTag = %v, %v", round, ok, err)
		}
		last = w.Token
	}
	if l := s.lease(t, first, "race"); l.Token != int64(rounds) || l.Owner != "" {
		t.Errorf("after %d rounds: %+v, want token %d and no owner", rounds, l, rounds)
	}
}

// orderedTagsPage: OrderedTags walks the ordered tags (not the plain ones)
// in name order, in pages of at most limit, each lease as TagLease reads
// it.
func (s storeSuite) orderedTagsPage(t *testing.T, open Opener) {
	ctx := t.Context()
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("o%02d", i))
	}
	st, adm, os := s.openOrdered(t, open, want...)
	s.create(t, adm, "a-plain", 1, 10)
	s.create(t, adm, "z-plain", 1, 10)
	if err := os.SetOrdered(ctx, "o05", false); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(tag string) bool { return tag == "o05" })
	s.acquire(t, os, "o03", ownerA, longTTL)
	// Another instance walks, as another server would.
	st2, _ := s.open(t, open)
	os2 := s.ordered(t, st2)
	for _, limit := range []int{1, 3, 4, 9, 100} {
		var walked []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: more pages than tags", limit)
			}
			page, err := os2.OrderedTags(ctx, after, limit)
			if err != nil {
				t.Fatalf("OrderedTags(%q, %d): %v", after, limit, err)
			}
			if len(page) > limit {
				t.Errorf("OrderedTags(%q, %d) has %d rows", after, limit, len(page))
			}
			for _, l := range page {
				walked = append(walked, l.Tag)
				if l.Tag == "o03" {
					s.wantHeld(t, "listed o03", l, ownerA, 1, longTTL)
				} else if l.Owner != "" || l.Token != 0 || l.Held() {
					t.Errorf("listed %s = %+v, want no owner, token 0", l.Tag, l)
				}
			}
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].Tag
		}
		if !slices.Equal(walked, want) {
			t.Errorf("walk with limit %d = %v, want %v", limit, walked, want)
		}
	}
	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, want},
		{"", -1, want},
		{"o04", 2, []string{"o06", "o07"}},
		{"o05", 0, want[5:]},
		{"o09", 5, nil},
		{"p", 0, nil},
		{"a", 1, []string{"o00"}},
	} {
		ls, err := os.OrderedTags(ctx, c.after, c.limit)
		if err != nil {
			t.Errorf("OrderedTags(%q, %d): %v", c.after, c.limit, err)
			continue
		}
		var tags []string
		for _, l := range ls {
			tags = append(tags, l.Tag)
		}
		if !slices.Equal(tags, c.want) {
			t.Errorf("OrderedTags(%q, %d) = %v, want %v", c.after, c.limit, tags, c.want)
		}
	}
	// OrderedTagsIn answers for the tags it is asked about only: ordered
	// ones, not plain, unmarked or unknown ones, across statements of at
	// most 500 tags.
	ask := []string{"o03", "a-plain", "o05", "ghost", "o09"}
	for i := range 1200 {
		ask = append(ask, fmt.Sprintf("absent-%04d", i))
	}
	ask = append(ask, "o00")
	for _, c := range []struct {
		ask  []string
		want []string
	}{
		{nil, nil},
		{[]string{"a-plain", "ghost"}, nil},
		{[]string{"o07"}, []string{"o07"}},
		{ask, []string{"o00", "o03", "o09"}},
	} {
		got, err := os2.OrderedTagsIn(ctx, c.ask)
		if err != nil {
			t.Errorf("OrderedTagsIn(%d tags): %v", len(c.ask), err)
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("OrderedTagsIn(%.5q…) = %v, want %v", c.ask, got, c.want)
		}
	}
	// The plain tags are still plain and listed by Tags as ever.
	if tags := s.tags(t, st); len(tags) != 12 {
		t.Errorf("Tags = %v, want the 12 tags", tags)
	}
}
