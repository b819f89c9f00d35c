package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/leafgo/leaf"
)

// The leases of ordered tags (leaf.OrderedStore) live in leaf_tag_owner,
// one row per ordered tag.
//
// lease_until is a BIGINT of microseconds since the Unix epoch, not a
// TIMESTAMP: the type is the same in all three databases, Left is integer
// arithmetic, and no conversion through a session time zone is involved.
// MySQL converts TIMESTAMP columns and NOW() through the session's
// time_zone, where an hour repeats when daylight saving ends (a lease could
// look an hour longer or shorter), and SQLite has no time type at all. The
// clock is the database's (Dialect.ClockMicros) where it has one that all
// servers share, Go's on SQLite, whose file lives on one host. It decides
// nothing alone: it is the second line of a takeover (AcquireTag), and
// what Left is counted by.
//
// A new row's token is 0 and its first owner's 1. A new owner's IDs lie
// above an old owner's because it reserves its ranges after it takes the
// lease, from a max_id that only grows (and that a re-created tag starts
// above its tombstone), and because every reserve of an owner
// (ReserveOwned) checks, in its own transaction, that the row still names
// the owner with its token: an owner whose lease was taken over reserves
// nothing more, whatever any clock says. Deleting the row
// (SetOrdered false, DeleteTag) forgets the token, so a row made again
// counts from 0 once more, and a token can return to a value it had. The
// fence still tells owners apart, as it checks the owner (whose string
// carries a nonce of its process) with the token, and a process issues
// under one lease of a tag at a time. An owner of the deleted row finds,
// at its next renewal or reserve, no row or a row it does not hold: it
// stops issuing either way.
//
// lease_until is also the lease's Version (leaf.TagLease.Version): a
// candidate takes a lease over only once it saw the very same row for a
// whole lease (AcquireTag's watched), so every acquisition and renewal
// writes a value the row did not hold, even on a clock that stands still.

// OwnerSchema is leaf_tag_owner in portable SQL, as SQLite and PostgreSQL
// create it (MySQL writes its own). owner is the empty string when no one
// holds the lease.
const OwnerSchema = `CREATE TABLE IF NOT EXISTS leaf_tag_owner (
  tag         VARCHAR(128) NOT NULL,
  owner       VARCHAR(512) NOT NULL DEFAULT '',
  token       BIGINT       NOT NULL DEFAULT 0,
  lease_until BIGINT       NOT NULL DEFAULT 0,
  updated_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (tag)
)`

// MaxOwnerLen is the width of leaf_tag_owner.owner in bytes.
const MaxOwnerLen = leaf.MaxOwnerLen

// ownerQueries are the statements on leaf_tag_owner. clock is where the
// database's clock is read in each: a column of the reads, a value of the
// writes; with Go's clock the reads have no such column and the writes take
// the time as an argument.
type ownerQueries struct {
	read, lock, list, listLimit string
	// owned reads the owner and token inside a reserve, under a shared
	// lock (ReserveOwned).
	owned                      string
	set, release, mark, unmark string
	// The locking read of many rows and the UPDATE that extends many
	// leases: each is completed with an IN list of tags (lockIn + list +
	// lockInEnd, extendIn + list + ")") and then rebound.
	lockIn, lockInEnd, extendIn string
}

func newOwnerQueries(d Dialect, forUpdate, forShare string) ownerQueries {
	clockCol, clockVal := "", "?"
	if d.ClockMicros != "" {
		clockCol, clockVal = ", "+d.ClockMicros, d.ClockMicros
	}
	const cols = "SELECT owner, token, lease_until"
	q := ownerQueries{
		read:      cols + clockCol + " FROM leaf_tag_owner WHERE tag = ?",
		lock:      cols + clockCol + " FROM leaf_tag_owner WHERE tag = ?" + forUpdate,
		list:      "SELECT tag, owner, token, lease_until" + clockCol + " FROM leaf_tag_owner WHERE tag > ? ORDER BY tag",
		listLimit: "SELECT tag, owner, token, lease_until" + clockCol + " FROM leaf_tag_owner WHERE tag > ? ORDER BY tag LIMIT ?",
		owned:     "SELECT owner, token FROM leaf_tag_owner WHERE tag = ?" + forShare,
		set:       "UPDATE leaf_tag_owner SET owner = ?, token = ?, lease_until = ?, updated_at = CURRENT_TIMESTAMP WHERE tag = ?",
		// owner is never '' in the WHERE (leaf.ValidateOwner), so a matching row
		// always changes: MySQL's count of changed rows would do as well
		// as the matched rows the stores ask for (clientFoundRows).
		release: "UPDATE leaf_tag_owner SET owner = ?, lease_until = " + clockVal + ", updated_at = CURRENT_TIMESTAMP WHERE tag = ? AND owner = ? AND token = ?",
		mark:    "INSERT INTO leaf_tag_owner (tag, owner, token, lease_until, updated_at) VALUES (?, ?, 0, " + clockVal + ", CURRENT_TIMESTAMP) ON CONFLICT (tag) DO NOTHING",
		unmark:  "DELETE FROM leaf_tag_owner WHERE tag = ?",

		lockIn:    "SELECT tag, owner, token, lease_until" + clockCol + " FROM leaf_tag_owner WHERE tag IN (",
		lockInEnd: ") ORDER BY tag" + forUpdate,
		// owner = ? is the rows' check once more: they are locked, and
		// RenewTags counts the changed rows.
		extendIn: "UPDATE leaf_tag_owner SET lease_until = ?, updated_at = CURRENT_TIMESTAMP WHERE owner = ? AND tag IN (",
	}
	if d.OnDuplicateKey {
		// Not INSERT IGNORE, which would turn any other error into a warning.
		q.mark = "INSERT INTO leaf_tag_owner (tag, owner, token, lease_until, updated_at) VALUES (?, ?, 0, " + clockVal + ", CURRENT_TIMESTAMP) ON DUPLICATE KEY UPDATE tag = tag"
	}
	if d.Dollar {
		for _, p := range []*string{&q.read, &q.lock, &q.list, &q.listLimit, &q.owned, &q.set, &q.release, &q.mark, &q.unmark} {
			*p = Rebind(*p)
		}
	}
	return q
}

// goClock reports whether the store reads Go's clock rather than the
// database's.
func (s *Store) goClock() bool { return s.d.ClockMicros == "" }

// nowArgs are the arguments a write takes for clockVal: the time, with
// Go's clock (Config.Now), else none.
func (s *Store) nowArgs() []any {
	if s.goClock() {
		return []any{s.now().UnixMicro()}
	}
	return nil
}

// scanLease scans a row of read or lock (tag already known) or of list,
// and the database's time with it. With Go's clock the time is read after
// the row: a later now only makes the lease look shorter.
func (s *Store) scanLease(row interface{ Scan(...any) error }, l *leaf.TagLease, withTag bool) (until, now int64, err error) {
	dest := []any{&l.Owner, &l.Token, &until}
	if withTag {
		dest = append([]any{&l.Tag}, dest...)
	}
	if !s.goClock() {
		dest = append(dest, &now)
	}
	if err = row.Scan(dest...); err != nil {
		return 0, 0, err
	}
	if s.goClock() {
		now = s.now().UnixMicro()
	}
	l.Left, l.Version = leftOf(until, now), until
	return until, now, nil
}

// leftOf is until - now in microseconds as a Duration, saturated: the
// columns may hold anything a hand-written UPDATE put there.
func leftOf(until, now int64) time.Duration {
	d := until - now
	if (until >= now) != (d >= 0) { // the subtraction overflowed
		if until >= now {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	const limit = math.MaxInt64 / int64(time.Microsecond)
	switch {
	case d > limit:
		return math.MaxInt64
	case d < -limit:
		return math.MinInt64
	}
	return time.Duration(d) * time.Microsecond
}

// ttlMicros is ttl in whole microseconds, rounded up: the store's lease may
// outlast what the owner counts, never fall short of it.
func ttlMicros(ttl time.Duration) int64 {
	us := int64(ttl / time.Microsecond)
	if ttl%time.Microsecond != 0 {
		us++
	}
	return us
}

// newUntil is the end of a lease written at now for ttl over a row whose
// lease ended at old (several rows, for a batch): now + ttl, or, where that
// would not pass an old end less than a lease beyond it (a clock that
// stands still, as a session's fixed timestamp, or went back a little), a
// microsecond past it. So a row's Version only grows while its clock
// stalls: no renewal writes a value the row held before, which a watching
// server would take for a lease unrenewed. A clock stepped back by more
// than a lease gets now + ttl: its leases are not stretched by the step.
func newUntil(now int64, ttl time.Duration, old ...int64) int64 {
	lease := ttlMicros(ttl)
	base := now + lease
	u := base
	for _, o := range old {
		if o >= base && o-base <= lease {
			u = max(u, o+1)
		}
	}
	for slices.Contains(old, u) {
		u++
	}
	return u
}

// TagLease reads the tag's row; ok is false when the tag is not ordered.
// Left is counted by the database's clock in the same statement.
func (s *Store) TagLease(ctx context.Context, tag string) (leaf.TagLease, bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagLease{}, false, err
	}
	op := fmt.Sprintf("read the lease of %q", tag)
	if err := s.checkOpen(op); err != nil {
		return leaf.TagLease{}, false, err
	}
	l := leaf.TagLease{Tag: tag}
	_, _, err := s.scanLease(s.db.QueryRowContext(ctx, s.o.read, tag), &l, false)
	if errors.Is(err, sql.ErrNoRows) {
		return leaf.TagLease{}, false, nil
	}
	if err != nil {
		return leaf.TagLease{}, false, s.wrap(op, err)
	}
	return l, true, nil
}

// AcquireTag takes the lease for owner, with the next token, until ttl
// from now, if its row has no owner, or if the row still holds the very
// lease watched (same owner, token and lease_until) and that lease ran out
// by the store's clock; otherwise it changes nothing. It answers the row as
// it stands afterwards. The row is read under its lock, so of servers
// racing for a free row exactly one finds it free; the others find the
// winner, which is no longer the lease they watched.
//
// The store's clock is only the second line: a clock stepped forward makes
// every lease look run out, but no server watched a live owner's lease go
// unrenewed for a whole lease. With MySQL the time is that of the locking
// read's start, which may be before a wait for the row's lock: an earlier
// now makes a lease look longer (no takeover too early) and a new lease end
// earlier (the owner, counting from before it sent its request, still stops
// in time).
func (s *Store) AcquireTag(ctx context.Context, tag, owner string, ttl time.Duration, watched leaf.TagLease) (leaf.TagLease, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagLease{}, err
	}
	if err := leaf.ValidateOwner(owner); err != nil {
		return leaf.TagLease{}, err
	}
	if err := leaf.ValidateLeaseTTL(ttl); err != nil {
		return leaf.TagLease{}, err
	}
	op := fmt.Sprintf("acquire %q for %s", tag, owner)
	if err := s.checkOpen(op); err != nil {
		return leaf.TagLease{}, err
	}
	var l leaf.TagLease
	// Running it again is safe: an attempt that did commit left the lease
	// with owner, which the next attempt finds and keeps.
	err := s.retry(ctx, func() error {
		var err error
		l, err = s.leaseTx(ctx, tag, func(tx *sql.Tx, cur leaf.TagLease, until, now int64) (leaf.TagLease, error) {
			if cur.Owner != "" && (!cur.Same(watched) || until > now) {
				return cur, nil
			}
			next := leaf.TagLease{Tag: tag, Owner: owner, Token: cur.Token + 1, Version: newUntil(now, ttl, until)}
			if _, err := tx.ExecContext(ctx, s.o.set, owner, next.Token, next.Version, tag); err != nil {
				return cur, fmt.Errorf("take the lease: %w", err)
			}
			next.Left = leftOf(next.Version, now)
			return next, nil
		})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("%w: the tag is not ordered", leaf.ErrTagNotFound)
	}
	if err != nil {
		return leaf.TagLease{}, s.wrap(op, err)
	}
	return l, nil
}

// ReserveOwned reserves a range as Reserve does, in a transaction that
// also checks that owner holds the tag's lease with token (checkOwner),
// and rolls back with leaf.ErrLeaseLost if not.
func (s *Store) ReserveOwned(ctx context.Context, tag, owner string, token int64, step int) (leaf.Reservation, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Reservation{}, err
	}
	if err := leaf.ValidateOwner(owner); err != nil {
		return leaf.Reservation{}, err
	}
	if err := leaf.ValidateToken(token); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q for %s token %d", tag, owner, token)
	if err := s.checkOpen(op); err != nil {
		return leaf.Reservation{}, err
	}
	var r leaf.Reservation
	// Safe to run again for Reserve's reason; a lease lost meanwhile makes
	// the next attempt fail, with nothing reserved.
	err := s.retry(ctx, func() error {
		var err error
		r, err = s.reserveOnce(ctx, tag, step, &leaseHolder{owner: owner, token: token})
		return err
	})
	if err != nil {
		return leaf.Reservation{}, s.wrap(op, err)
	}
	return r, nil
}

// leaseHolder is who must hold an ordered tag's lease for a reserve to
// commit.
type leaseHolder struct {
	owner string
	token int64
}

// checkOwner reads the tag's lease inside a reserve's transaction, under a
// shared lock held to commit, and fails with leaf.ErrLeaseLost unless h
// holds it; no clock is consulted. The reserve reads it after its UPDATE
// of the tag's row, as it reads the stripe record: locks are then taken in
// the order DeleteTag and SetOrdered take them (leaf_alloc's row, then
// leaf_tag_owner's), and a takeover, which locks the lease's row, either
// commits before this read (which then fails) or waits for this reserve
// to commit (and the new owner, which reserves after, gets a range above
// this one).
func (s *Store) checkOwner(ctx context.Context, tx *sql.Tx, tag string, h *leaseHolder) error {
	var (
		owner string
		token int64
	)
	err := tx.QueryRowContext(ctx, s.o.owned, tag).Scan(&owner, &token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Not ErrTagNotFound: the tag is there, plain now.
		return fmt.Errorf("%w: the tag is not ordered any more", leaf.ErrLeaseLost)
	case err != nil:
		return fmt.Errorf("read the lease: %w", err)
	case owner == "":
		return fmt.Errorf("%w: no one holds it (released or taken over and released; token now %d)", leaf.ErrLeaseLost, token)
	case owner != h.owner || token != h.token:
		return fmt.Errorf("%w: held by %s with token %d", leaf.ErrLeaseLost, owner, token)
	}
	return nil
}

// RenewTag moves the end of owner's lease to ttl from now if owner holds it
// with token; otherwise it fails with leaf.ErrLeaseLost, saying what it
// found. The store's clock does not decide: a lease that ran out by it and
// that no one took over (a takeover changes the token) was never
// interrupted, and a clock stepped forward must not end every lease. A tag
// that is no longer ordered (no row) has lost its lease too; that error
// also matches leaf.ErrTagNotFound.
func (s *Store) RenewTag(ctx context.Context, tag, owner string, token int64, ttl time.Duration) (leaf.TagLease, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagLease{}, err
	}
	if err := leaf.ValidateOwner(owner); err != nil {
		return leaf.TagLease{}, err
	}
	if err := leaf.ValidateToken(token); err != nil {
		return leaf.TagLease{}, err
	}
	if err := leaf.ValidateLeaseTTL(ttl); err != nil {
		return leaf.TagLease{}, err
	}
	op := fmt.Sprintf("renew %q for %s token %d", tag, owner, token)
	if err := s.checkOpen(op); err != nil {
		return leaf.TagLease{}, err
	}
	var l leaf.TagLease
	err := s.retry(ctx, func() error {
		var err error
		l, err = s.leaseTx(ctx, tag, func(tx *sql.Tx, cur leaf.TagLease, until, now int64) (leaf.TagLease, error) {
			switch {
			case cur.Owner == "":
				return cur, fmt.Errorf("%w: no one holds it (released or taken over and released; token now %d)", leaf.ErrLeaseLost, cur.Token)
			case cur.Owner != owner || cur.Token != token:
				return cur, fmt.Errorf("%w: held by %s with token %d", leaf.ErrLeaseLost, cur.Owner, cur.Token)
			}
			end := newUntil(now, ttl, until)
			if _, err := tx.ExecContext(ctx, s.o.set, owner, token, end, tag); err != nil {
				return cur, fmt.Errorf("extend the lease: %w", err)
			}
			cur.Left, cur.Version = leftOf(end, now), end
			return cur, nil
		})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("%w: the tag is not ordered any more (%w)", leaf.ErrLeaseLost, leaf.ErrTagNotFound)
	}
	if err != nil {
		return leaf.TagLease{}, s.wrap(op, err)
	}
	return l, nil
}

// RenewTags renews owner's leases as RenewTag does, in one transaction
// per leaf.MaxRenewBatch of them: a locking read of the batch's rows in tag
// order (calls naming the same tags lock them in the same order), then one
// UPDATE of those still held, all to ttl from the latest time the read saw,
// so that no lease looks longer than it is (and to a value none of them
// held, see newUntil). A tag given twice is answered
// twice from its one row: renewed both times if both name the lease. A
// batch whose transaction fails answers that failure for each of its
// leases; the batches before it stay renewed, those after it are still
// tried.
func (s *Store) RenewTags(ctx context.Context, owner string, leases []leaf.TagToken, ttl time.Duration) ([]leaf.LeaseResult, error) {
	if err := leaf.ValidateRenewal(owner, leases, ttl); err != nil {
		return nil, err
	}
	if err := s.checkOpen(fmt.Sprintf("renew %d leases for %s", len(leases), owner)); err != nil {
		return nil, err
	}
	out := make([]leaf.LeaseResult, len(leases))
	for start := 0; start < len(leases); start += leaf.MaxRenewBatch {
		end := min(start+leaf.MaxRenewBatch, len(leases))
		s.renewBatch(ctx, owner, leases[start:end], ttl, out[start:end])
	}
	return out, nil
}

// lockedLease is a row of leaf_tag_owner read under its lock.
type lockedLease struct {
	l     leaf.TagLease
	until int64
}

// renewBatch renews leases in one transaction and answers each in out.
func (s *Store) renewBatch(ctx context.Context, owner string, leases []leaf.TagToken, ttl time.Duration, out []leaf.LeaseResult) {
	var (
		found map[string]lockedLease
		lost  []error // per lease; nil: renewed
		now   int64
		until int64 // the renewed leases' new end
	)
	err := s.retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			if found, now, err = s.lockLeases(ctx, tx, leases); err != nil {
				return fmt.Errorf("read the leases: %w", err)
			}
			lost = make([]error, len(leases))
			var (
				held []any   // the rows' tags, each once
				ends []int64 // and the ends of their leases
			)
			renewed := make(map[string]bool)
			for i, l := range leases {
				cur, ok := found[l.Tag]
				switch {
				case !ok:
					lost[i] = fmt.Errorf("%w: the tag is not ordered any more (%w)", leaf.ErrLeaseLost, leaf.ErrTagNotFound)
				case cur.l.Owner == "":
					lost[i] = fmt.Errorf("%w: no one holds it (released or taken over and released; token now %d)", leaf.ErrLeaseLost, cur.l.Token)
				case cur.l.Owner != owner || cur.l.Token != l.Token:
					lost[i] = fmt.Errorf("%w: held by %s with token %d", leaf.ErrLeaseLost, cur.l.Owner, cur.l.Token)
				case !renewed[cur.l.Tag]:
					renewed[cur.l.Tag] = true
					held, ends = append(held, cur.l.Tag), append(ends, cur.until)
				}
			}
			if len(held) == 0 {
				return nil
			}
			until = newUntil(now, ttl, ends...)
			args := append([]any{until, owner}, held...)
			res, err := tx.ExecContext(ctx, s.rebind(s.o.extendIn+placeholders(len(held))+")"), args...)
			if err != nil {
				return fmt.Errorf("extend the leases: %w", err)
			}
			// The rows are locked: anything else is a store gone wrong,
			// which must not answer leases as renewed that are not.
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("extend the leases: %w", err)
			}
			if n != int64(len(held)) {
				return fmt.Errorf("extend the leases: %d rows changed, want %d", n, len(held))
			}
			return nil
		})
	})
	for i, l := range leases {
		cause := err
		if cause == nil {
			cause = lost[i]
		}
		if cause != nil {
			out[i].Err = s.wrap(fmt.Sprintf("renew %q for %s token %d", l.Tag, owner, l.Token), cause)
			continue
		}
		out[i].Lease = leaf.TagLease{Tag: l.Tag, Owner: owner, Token: l.Token, Left: leftOf(until, now), Version: until}
	}
}

// lockLeases reads the rows of leases' tags under their locks and answers
// them by the tags as given, with the latest time the read saw: with the
// database's clock, read per row (PostgreSQL's clock_timestamp moves within
// a statement); with Go's, after the rows. A row the batch does not spell
// exactly answers the tags equal to it but for case: the database matched
// them by its collation (MySQL's ignores case, as in RenewTag's WHERE tag =
// ?; the others compare bytes and return no such row).
func (s *Store) lockLeases(ctx context.Context, tx *sql.Tx, leases []leaf.TagToken) (map[string]lockedLease, int64, error) {
	var tags []any
	asked := make(map[string]bool, len(leases))
	for _, l := range leases {
		if !asked[l.Tag] {
			asked[l.Tag] = true
			tags = append(tags, l.Tag)
		}
	}
	rows, err := tx.QueryContext(ctx, s.rebind(s.o.lockIn+placeholders(len(tags))+s.o.lockInEnd), tags...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	found := make(map[string]lockedLease, len(tags))
	folded := map[string]lockedLease{}
	var now int64
	for rows.Next() {
		var cur lockedLease
		var at int64
		if cur.until, at, err = s.scanLease(rows, &cur.l, true); err != nil {
			return nil, 0, err
		}
		now = max(now, at)
		if asked[cur.l.Tag] {
			found[cur.l.Tag] = cur
		} else {
			folded[strings.ToLower(cur.l.Tag)] = cur
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(folded) > 0 {
		for tag := range asked {
			if cur, ok := folded[strings.ToLower(tag)]; ok {
				if _, exact := found[tag]; !exact {
					found[tag] = cur
				}
			}
		}
	}
	return found, now, nil
}

// placeholders is the inside of an IN list of n arguments.
func placeholders(n int) string {
	return "?" + strings.Repeat(", ?", n-1)
}

// leaseTx runs change on the tag's row read under its lock, in one
// transaction that commits what change wrote unless it fails.
// sql.ErrNoRows when there is no row.
func (s *Store) leaseTx(ctx context.Context, tag string, change func(tx *sql.Tx, cur leaf.TagLease, until, now int64) (leaf.TagLease, error)) (l leaf.TagLease, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		cur := leaf.TagLease{Tag: tag}
		until, now, err := s.scanLease(tx.QueryRowContext(ctx, s.o.lock, tag), &cur, false)
		if errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err != nil {
			return fmt.Errorf("read the lease: %w", err)
		}
		l, err = change(tx, cur, until, now)
		return err
	})
	return l, err
}

// ReleaseTag ends owner's lease at once if it holds it with token: the row
// keeps its token (tokens never go back) and has no owner. It reports
// whether it did.
func (s *Store) ReleaseTag(ctx context.Context, tag, owner string, token int64) (bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return false, err
	}
	if err := leaf.ValidateOwner(owner); err != nil {
		return false, err
	}
	if err := leaf.ValidateToken(token); err != nil {
		return false, err
	}
	op := fmt.Sprintf("release %q for %s token %d", tag, owner, token)
	if err := s.checkOpen(op); err != nil {
		return false, err
	}
	var n int64
	// A retryable error rolled the statement back; a repeat that finds the
	// lease released already changes nothing.
	err := s.retry(ctx, func() (err error) {
		n, err = s.execCount(ctx, s.o.release, append(append([]any{""}, s.nowArgs()...), tag, owner, token)...)
		return err
	})
	if err != nil {
		return false, s.wrap(op, err)
	}
	return n == 1, nil
}

// SetOrdered marks the tag ordered, adding its row with no owner unless it
// has one, or plain, deleting its row. Marking reads the tag's leaf_alloc
// row under a shared lock first, so that a DeleteTag under way either
// finishes first (and the tag is not found) or waits and deletes the new
// row with the tag: no row outlives its tag. Unmarking deletes a row even
// when its tag is gone (a row left by hand-made SQL); ErrTagNotFound only
// when there was neither.
func (s *Store) SetOrdered(ctx context.Context, tag string, ordered bool) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	op := fmt.Sprintf("mark %q ordered", tag)
	if !ordered {
		op = fmt.Sprintf("mark %q plain", tag)
	}
	if err := s.checkOpen(op); err != nil {
		return err
	}
	err := s.retry(ctx, func() error { return s.setOrderedOnce(ctx, tag, ordered) })
	if err != nil {
		return s.wrap(op, err)
	}
	return nil
}

func (s *Store) setOrderedOnce(ctx context.Context, tag string, ordered bool) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if !ordered {
			res, err := tx.ExecContext(ctx, s.o.unmark, tag)
			if err != nil {
				return fmt.Errorf("delete the lease: %w", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("delete the lease: %w", err)
			}
			if n == 0 {
				var maxID, step int64
				err = tx.QueryRowContext(ctx, s.q.readBack, tag).Scan(&maxID, &step)
				if errors.Is(err, sql.ErrNoRows) {
					return leaf.ErrTagNotFound
				}
				if err != nil {
					return fmt.Errorf("read the tag's row: %w", err)
				}
			}
		} else {
			var maxID, step int64
			err := tx.QueryRowContext(ctx, s.q.parentShared, tag).Scan(&maxID, &step)
			if errors.Is(err, sql.ErrNoRows) {
				return leaf.ErrTagNotFound
			}
			if err != nil {
				return fmt.Errorf("read the tag's row: %w", err)
			}
			// A shape is written only with the tag's row, which the read
			// above holds: what it reads stands until the commit.
			shape, _, err := scanShape(tx.QueryRowContext(ctx, s.q.shape, tag))
			if err != nil {
				return fmt.Errorf("read the tag's shape: %w", err)
			}
			if !shape.IsPlain() {
				return fmt.Errorf("the tag's shape is %s: %w", shape, leaf.ErrOrderedTag)
			}
			args := append([]any{tag, ""}, s.nowArgs()...)
			if _, err = tx.ExecContext(ctx, s.o.mark, args...); err != nil {
				return fmt.Errorf("add the lease: %w", err)
			}
		}
		return nil
	})
}

// OrderedTagsIn answers which of tags have a row in leaf_tag_owner.
func (s *Store) OrderedTagsIn(ctx context.Context, tags []string) ([]string, error) {
	out := []string{}
	err := s.byTags(ctx, "read which tags are ordered", "SELECT tag FROM leaf_tag_owner WHERE tag IN (", tags, func(rows *sql.Rows) error {
		var tag string
		err := rows.Scan(&tag)
		out = append(out, tag)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OrderedTags lists the rows of ordered tags after the tag after ("" for
// the first), at most limit of them (limit <= 0: all), in the database's
// order of the tag column, as AllocsPage does: the last tag of a page,
// passed as after, reads the next.
func (s *Store) OrderedTags(ctx context.Context, after string, limit int) ([]leaf.TagLease, error) {
	if after != "" {
		if err := leaf.ValidateTag(after); err != nil {
			return nil, fmt.Errorf("%w: cursor after: %w", leaf.ErrInvalidArgument, err)
		}
	}
	const op = "list ordered tags"
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	query, args := s.o.list, []any{after}
	if limit > 0 {
		query, args = s.o.listLimit, []any{after, limit}
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	out := []leaf.TagLease{}
	for rows.Next() {
		var l leaf.TagLease
		if _, _, err := s.scanLease(rows, &l, true); err != nil {
			return nil, s.wrap(op, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}
