package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leafgo/leaf"
)

// A segment store is only as unique as leaf_alloc, and leaf_alloc lives on a
// replicated database. When the database fails over to a replica that had
// not received the last reserves (asynchronous replication, a replica
// promoted with lag), the ranges of those reserves are reserved again and
// handed out twice. The store detects a failover and fences the new primary
// before anyone reserves from it:
//
//   - leaf_failover's one row names the database that serves reserves (its
//     identity: Dialect.Identity, e.g. MariaDB's server_id, a Galera
//     cluster's state UUID, PostgreSQL's system identifier and timeline),
//     and is replicated with leaf_alloc. Every reserve reads it under a
//     shared lock in its own transaction: a database whose identity differs
//     from the row is one the row was copied to, a replica promoted since.
//     The reserve is refused (ErrFailover) and the row is marked fencing,
//     with the new identity and the next epoch.
//   - While the row says fencing, no reserve commits. Every live server
//     (each store polls the row every Poll) reports what it knows: it raises
//     each tag it reserved within the last Lag to the end of its highest
//     range there, with GREATEST, under a shared lock of the row, so that
//     its report lands before the fence ends or not at all.
//   - Once a server has watched the row fencing for Window on its own
//     monotonic clock, it ends the fence in one transaction holding the row's
//     lock: every tag (and tombstone) is raised by MarginSteps of its step,
//     for what no live server could report (the servers that died with
//     their ranges, a server cut off for the whole window), and the row says
//     serving again. The gap is reported in the row and the status.
//   - A store never accepts a range that starts below one it was given for
//     the same tag within Lag: whatever the identities say, a database that
//     hands out a range again went back in time, and it is fenced the same
//     way.
//
// A switch that lost nothing (semi-synchronous replication, Galera, a
// synchronous standby) is fenced too: it changes the identity (not Galera's,
// which is the cluster's), and costs the margin's gap; MarginSteps 0 makes
// such a fence free. What the store cannot cover: a replica promoted with
// a lag longer than Lag, or one that lost ranges of servers that all died
// (or were cut off for the whole window) beyond the margin.

// FailoverSchema is leaf_failover in portable SQL, as SQLite and PostgreSQL
// create it (MySQL writes its own). One row, id 1.
const FailoverSchema = `CREATE TABLE IF NOT EXISTS leaf_failover (
  id          INT          NOT NULL,
  db_identity VARCHAR(255) NOT NULL,
  epoch       BIGINT       NOT NULL,
  state       VARCHAR(16)  NOT NULL,
  gap         BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
)`

// The states of leaf_failover's row.
const (
	stateServing = "serving"
	stateFencing = "fencing"
)

// ErrFailover is the answer of a reserve that met a failover: the database
// behind the store changed, or went back in time, and no range is reserved
// from it until it is fenced. It wraps leaf.ErrNotReady: the servers issue
// from their buffers meanwhile, and retry.
var ErrFailover = fmt.Errorf("%w: the database failed over and is being fenced", leaf.ErrNotReady)

// FailoverConfig configure the fence (see the top of this file).
type FailoverConfig struct {
	// Poll is how often a store reads leaf_failover's row. Default 1s.
	Poll time.Duration
	// Window is how long a fence waits for the live servers' reports: a few
	// Polls. Default 5s.
	Window time.Duration
	// Lag is how long a store remembers its reserves to report them: the
	// longest replication lag the fence covers. Default 1m.
	Lag time.Duration
	// MarginSteps is how far beyond what the live servers report every tag
	// is raised, in steps of the tag's stored step. Default 1000; 0 for a
	// database that loses nothing in a failover.
	MarginSteps int64
	// Identity is an SQL expression for the identity of the database a
	// connection reaches (see the top of this file). Required.
	Identity string
	// Logger receives the fence's events. Default slog.Default().
	Logger *slog.Logger
}

// DefaultFailoverConfig returns the defaults every field documents. A
// zero Poll, Window, Lag or Logger takes its default; MarginSteps is
// taken as set (0: no margin), so start from this; Identity has none.
func DefaultFailoverConfig() FailoverConfig {
	return FailoverConfig{Poll: time.Second, Window: 5 * time.Second, Lag: time.Minute, MarginSteps: 1000, Logger: slog.Default()}
}

// Validate reports what WatchFailover would refuse in c.
func (c FailoverConfig) Validate() error {
	switch {
	case c.Identity == "":
		return fmt.Errorf("failover fence: %w: no database identity", leaf.ErrInvalidArgument)
	case c.MarginSteps < 0:
		return fmt.Errorf("failover fence: %w: margin of %d steps is negative", leaf.ErrInvalidArgument, c.MarginSteps)
	}
	return nil
}

// FailoverStatus is the fence's state as a store last saw it.
type FailoverStatus struct {
	// State is "serving", "fencing" (a failover detected, reserves refused
	// until the fence ends) or "" before the first look.
	State string
	// Identity is the database the row names; Live the one this store's
	// connection reaches.
	Identity, Live string
	// Epoch counts the fences since the row was made.
	Epoch int64
	// Fences counts the fences this store saw; Detected the failovers it
	// detected itself; Reported the fences it reported its ranges to.
	Fences, Detected, Reported int64
	// Gap is the margin the last fence added to every tag, in IDs summed
	// over the tags (0: none yet, or MarginSteps 0).
	Gap int64
	// Err is the last poll's error, "" when it succeeded.
	Err string
}

// failover is a store's part of the fence.
type failover struct {
	s   *Store
	set FailoverConfig
	// The statements: the row with the live identity (check: under a
	// shared lock, in a reserve's transaction), the compare-and-set that
	// starts a fence, and the end of one.
	check, read, lockUpdate, begin, end, raise, raiseTo, seed string

	mu      sync.Mutex
	recent  map[string]recentRange // per tag, its highest range end within Lag
	swept   time.Time
	status  FailoverStatus
	watched int64     // the epoch whose fencing state is watched
	since   time.Time // when it was first seen
	stop    chan struct{}
	done    chan struct{}
}

// recentRange is the end of a tag's highest range reserved here, and when.
type recentRange struct {
	end int64
	at  time.Time
}

// WatchFailover turns the fence on for this store: it makes leaf_failover's
// row if missing (naming the database reached now), checks it in every
// reserve from now on, and polls it every Poll until Close. The dialect
// must name an Identity.
func (s *Store) WatchFailover(ctx context.Context, set FailoverConfig) error {
	if err := set.Validate(); err != nil {
		return fmt.Errorf("%s: %w", s.d.Name, err)
	}
	def := DefaultFailoverConfig()
	if set.Poll <= 0 {
		set.Poll = def.Poll
	}
	if set.Window <= 0 {
		set.Window = def.Window
	}
	if set.Lag <= 0 {
		set.Lag = def.Lag
	}
	if set.Logger == nil {
		set.Logger = def.Logger
	}
	f := &failover{s: s, set: set, recent: map[string]recentRange{}, stop: make(chan struct{}), done: make(chan struct{})}
	cols := "SELECT db_identity, epoch, state, gap, " + set.Identity + " FROM leaf_failover WHERE id = 1"
	f.check = cols + s.forShare
	f.read = cols
	f.lockUpdate = "SELECT db_identity, epoch, state FROM leaf_failover WHERE id = 1" + s.forUpdate()
	f.begin = "UPDATE leaf_failover SET db_identity = ?, epoch = epoch + 1, state = '" + stateFencing + "' WHERE id = 1 AND epoch = ? AND state = '" + stateServing + "'"
	f.end = "UPDATE leaf_failover SET state = '" + stateServing + "', gap = ? WHERE id = 1 AND epoch = ?"
	f.raise = "UPDATE leaf_alloc SET max_id = max_id + step * ?"
	// A report raises a tag to the end of a range; the condition keeps it
	// from lowering one (GREATEST, portably).
	f.raiseTo = "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ? AND max_id < ?"
	f.seed = "INSERT INTO leaf_failover (id, db_identity, epoch, state, gap) SELECT 1, " + set.Identity + ", 1, '" + stateServing + "', 0"
	if s.d.Dollar {
		for _, p := range []*string{&f.begin, &f.end, &f.raise, &f.raiseTo} {
			*p = Rebind(*p)
		}
	}
	if err := f.ensureRow(ctx); err != nil {
		return fmt.Errorf("%s: failover fence: %w", s.d.Name, err)
	}
	s.fo.Store(f)
	go f.loop()
	return nil
}

// forUpdate is the dialect's exclusive row lock clause, "" without locking
// reads.
func (s *Store) forUpdate() string {
	if s.d.LockingReads {
		return " FOR UPDATE"
	}
	return ""
}

// ensureRow makes the row if it is missing: a racing server may make it
// first, which is as good.
func (f *failover) ensureRow(ctx context.Context) error {
	var id, state, live string
	var epoch, gap int64
	err := f.s.db.QueryRowContext(ctx, f.read).Scan(&id, &epoch, &state, &gap, &live)
	if err == nil {
		f.note(id, live, state, epoch, gap, nil)
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read leaf_failover: %w", err)
	}
	if _, err := f.s.db.ExecContext(ctx, f.seed); err != nil && !f.s.d.IsUniqueViolation(err) {
		return fmt.Errorf("make leaf_failover's row: %w", err)
	}
	if err := f.s.db.QueryRowContext(ctx, f.read).Scan(&id, &epoch, &state, &gap, &live); err != nil {
		return fmt.Errorf("read leaf_failover: %w", err)
	}
	f.note(id, live, state, epoch, gap, nil)
	return nil
}

// note records what a read of the row showed.
func (f *failover) note(id, live, state string, epoch, gap int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.status.Err = err.Error()
		return
	}
	if f.status.Epoch != 0 && epoch > f.status.Epoch && state == stateFencing {
		f.status.Fences++
	}
	f.status.State, f.status.Identity, f.status.Live, f.status.Epoch, f.status.Gap, f.status.Err = state, id, live, epoch, gap, ""
}

// checkReserve runs in a reserve's transaction, after its UPDATE: the
// reserve commits only if the row says serving and names the database the
// transaction runs on. start is the reserved range's start: below a range
// this store was given for the tag within Lag, the database went back.
func (f *failover) checkReserve(ctx context.Context, tx *sql.Tx, tag string, start int64) error {
	var id, state, live string
	var epoch, gap int64
	if err := tx.QueryRowContext(ctx, f.check).Scan(&id, &epoch, &state, &gap, &live); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			// The row did not reach this database: it is not the one the
			// store was opened on, or a fresh copy without it.
			return &failoverError{from: "(no leaf_failover row)", to: "(this database)", epoch: 0, detected: true}
		}
		return fmt.Errorf("read leaf_failover: %w", err)
	}
	switch {
	case state == stateFencing:
		return &failoverError{from: id, to: live, epoch: epoch}
	case id != live:
		return &failoverError{from: id, to: live, epoch: epoch, detected: true}
	}
	f.mu.Lock()
	r, ok := f.recent[tag]
	f.mu.Unlock()
	if ok && start < r.end && time.Since(r.at) <= f.set.Lag {
		return &failoverError{from: id, to: live, epoch: epoch, detected: true,
			back: fmt.Sprintf("the range of %q starts at %d, below the end %d of a range reserved %v ago", tag, start, r.end, time.Since(r.at).Round(time.Millisecond))}
	}
	return nil
}

// reserved remembers a range reserved for tag, to report it in a fence.
func (f *failover) reserved(tag string, end int64) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.recent[tag]; !ok || end > r.end {
		f.recent[tag] = recentRange{end: end, at: now}
	}
	// Sweep what is older than Lag at most every Lag: the map holds the
	// tags reserved in the last two Lags.
	if now.Sub(f.swept) > f.set.Lag {
		for t, r := range f.recent {
			if now.Sub(r.at) > f.set.Lag {
				delete(f.recent, t)
			}
		}
		f.swept = now
	}
}

// gaveBack lowers what this store holds of tag to from: the unused tail of
// its range went back, and the next range may start there.
func (f *failover) gaveBack(tag string, from int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.recent[tag]; ok && r.end > from {
		r.end = from
		f.recent[tag] = r
	}
}

// failoverError is a reserve's refusal during a failover.
type failoverError struct {
	from, to string
	epoch    int64
	detected bool   // this reserve found it: the fence must begin
	back     string // a range handed out again, if that is how it showed
}

func (e *failoverError) Error() string {
	if e.back != "" {
		return fmt.Sprintf("%v: %s (database %s)", ErrFailover, e.back, e.to)
	}
	if e.detected {
		return fmt.Sprintf("%v: reserves went to database %s, while leaf_failover names %s", ErrFailover, e.to, e.from)
	}
	return fmt.Sprintf("%v: the fence of epoch %d is under way (database %s)", ErrFailover, e.epoch, e.to)
}

func (e *failoverError) Unwrap() error { return ErrFailover }

// afterRefusal starts the fence a reserve detected, and reports this
// store's ranges at once rather than at the next poll.
func (f *failover) afterRefusal(ctx context.Context, e *failoverError) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if e.detected {
		f.beginFence(ctx, e.to, e.epoch)
	}
	f.poll(ctx)
}

// beginFence marks the row fencing with identity live and the next epoch,
// if it still says serving at epoch: one server wins.
func (f *failover) beginFence(ctx context.Context, live string, epoch int64) {
	res, err := f.s.db.ExecContext(ctx, f.begin, live, epoch)
	if err != nil {
		f.set.Logger.Warn("segment store: could not start the failover fence", "store", f.s.d.Name, "err", err)
		return
	}
	if n, _ := res.RowsAffected(); n == 1 {
		f.mu.Lock()
		f.status.Detected++
		f.mu.Unlock()
		f.set.Logger.Error("segment store: the database failed over; no range is reserved until it is fenced",
			"store", f.s.d.Name, "database", live, "epoch", epoch+1, "window", f.set.Window, "margin_steps", f.set.MarginSteps)
	}
}

// loop polls the row until Close.
func (f *failover) loop() {
	defer close(f.done)
	t := time.NewTicker(f.set.Poll)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(f.set.Poll, 5*time.Second))
		f.poll(ctx)
		cancel()
	}
}

// poll reads the row and moves the fence on: it starts one when the
// database is not the one the row names, reports this store's ranges to a
// fence under way, and ends one watched for Window.
func (f *failover) poll(ctx context.Context) {
	var id, state, live string
	var epoch, gap int64
	err := f.s.db.QueryRowContext(ctx, f.read).Scan(&id, &epoch, &state, &gap, &live)
	if errors.Is(err, sql.ErrNoRows) {
		err = f.ensureRow(ctx)
		if err == nil {
			return
		}
	}
	if err != nil {
		f.note("", "", "", 0, 0, err)
		return
	}
	f.note(id, live, state, epoch, gap, nil)
	switch {
	case state == stateServing && id != live:
		f.beginFence(ctx, live, epoch)
	case state == stateFencing:
		f.report(ctx, epoch)
		f.mu.Lock()
		if f.watched != epoch {
			f.watched, f.since = epoch, time.Now()
		}
		due := time.Since(f.since) >= f.set.Window
		f.mu.Unlock()
		if due {
			f.endFence(ctx, epoch)
		}
	}
}

// report raises every tag this store reserved within Lag to the end of its
// highest range there, while the fence of epoch is under way: under a
// shared lock of the row, so that it lands before the fence ends or not at
// all.
func (f *failover) report(ctx context.Context, epoch int64) {
	f.mu.Lock()
	if f.status.Reported >= epoch {
		f.mu.Unlock()
		return
	}
	ranges := make(map[string]int64, len(f.recent))
	for tag, r := range f.recent {
		if time.Since(r.at) <= f.set.Lag {
			ranges[tag] = r.end
		}
	}
	f.mu.Unlock()
	err := f.s.inTx(ctx, func(tx *sql.Tx) error {
		var id, state, live string
		var e, gap int64
		if err := tx.QueryRowContext(ctx, f.check).Scan(&id, &e, &state, &gap, &live); err != nil {
			return err
		}
		if state != stateFencing || e != epoch {
			return errFenceOver
		}
		for tag, end := range ranges {
			if _, err := tx.ExecContext(ctx, f.raiseTo, end, tag, end); err != nil {
				return fmt.Errorf("raise %q to %d: %w", tag, end, err)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errFenceOver):
		f.set.Logger.Error("segment store: a failover fence ended before this server could report its ranges: IDs it issued from ranges the old database lost may be handed out again unless the margin covered them",
			"store", f.s.d.Name, "epoch", epoch)
		err = nil
	case err != nil:
		f.set.Logger.Warn("segment store: reporting ranges to the failover fence failed; retrying", "store", f.s.d.Name, "err", err)
		return
	}
	f.mu.Lock()
	f.status.Reported = max(f.status.Reported, epoch)
	f.mu.Unlock()
	if err == nil {
		f.set.Logger.Warn("segment store: reported this server's ranges to the failover fence", "store", f.s.d.Name, "epoch", epoch, "tags", len(ranges))
	}
}

var errFenceOver = errors.New("the fence is over")

// endFence raises every tag by the margin and lets reserves commit again,
// in one transaction holding the row's lock, if the fence of epoch is still
// under way.
func (f *failover) endFence(ctx context.Context, epoch int64) {
	var gap int64
	err := f.s.inTx(ctx, func(tx *sql.Tx) error {
		var id, state string
		var e int64
		if err := tx.QueryRowContext(ctx, f.lockUpdate).Scan(&id, &e, &state); err != nil {
			return err
		}
		if state != stateFencing || e != epoch {
			return errFenceOver
		}
		if f.set.MarginSteps > 0 {
			if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(step), 0) FROM leaf_alloc").Scan(&gap); err != nil {
				return fmt.Errorf("sum the steps: %w", err)
			}
			gap *= f.set.MarginSteps
			// Tombstones need no raise: a delete commits after every
			// reserve it counts, so if it reached the new database, they
			// did too.
			if _, err := tx.ExecContext(ctx, f.raise, f.set.MarginSteps); err != nil {
				return fmt.Errorf("raise the tags: %w", err)
			}
		}
		_, err := tx.ExecContext(ctx, f.end, gap, epoch)
		return err
	})
	switch {
	case errors.Is(err, errFenceOver):
		return
	case err != nil:
		f.set.Logger.Warn("segment store: ending the failover fence failed; retrying", "store", f.s.d.Name, "epoch", epoch, "err", err)
		return
	}
	f.mu.Lock()
	f.status.State, f.status.Gap = stateServing, gap
	f.mu.Unlock()
	f.set.Logger.Warn("segment store: the failover is fenced; reserves go on", "store", f.s.d.Name, "epoch", epoch,
		"margin_steps", f.set.MarginSteps, "gap_ids", gap)
}

// close stops the loop and waits for it.
func (f *failover) close() {
	close(f.stop)
	<-f.done
}

// FailoverStatus returns the fence's state as this store last saw it; ok is
// false when the fence is off.
func (s *Store) FailoverStatus() (st FailoverStatus, ok bool) {
	f := s.fo.Load()
	if f == nil {
		return FailoverStatus{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, true
}

// Retries counts the reserve attempts run again after a transient conflict:
// deadlocks, and on Galera the certification conflicts of reserves of one
// tag through different nodes.
func (s *Store) Retries() int64 { return s.retries.Load() }

// Degraded is the fence's reason the store is degraded (leaf.DegradedStore):
// a failover being fenced, or the row unreadable. Empty when the fence is
// off or all is well.
func (s *Store) Degraded() []string {
	st, ok := s.FailoverStatus()
	switch {
	case !ok:
		return nil
	case st.State == stateFencing:
		return []string{fmt.Sprintf("segment store failed over, fence %d under way: no range is reserved until it ends; tags issue from their buffers: database %s, was %s",
			st.Epoch, st.Live, st.Identity)}
	case st.Err != "":
		return []string{"segment store failover fence cannot read leaf_failover: " + st.Err}
	}
	return nil
}

// Fence fences the store's database now, for an operator who switched it by
// hand: the row is marked fencing (naming the database reached now, the
// next epoch) whatever it said, the running servers report their ranges
// during Window, and the fence ends with the margin. It returns the status
// once the fence is over. WatchFailover must be on.
func (s *Store) Fence(ctx context.Context) (FailoverStatus, error) {
	f := s.fo.Load()
	if f == nil {
		return FailoverStatus{}, fmt.Errorf("%s: fence: %w: the failover fence is off (WatchFailover)", s.d.Name, leaf.ErrInvalidArgument)
	}
	st, _ := s.FailoverStatus()
	force := "UPDATE leaf_failover SET db_identity = ?, epoch = epoch + 1, state = '" + stateFencing + "' WHERE id = 1 AND epoch = ?"
	if s.d.Dollar {
		force = Rebind(force)
	}
	res, err := s.db.ExecContext(ctx, force, st.Live, st.Epoch)
	if err != nil {
		return st, fmt.Errorf("%s: fence: %w", s.d.Name, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return st, fmt.Errorf("%s: fence: leaf_failover changed under the fence (another fence started): %w", s.d.Name, leaf.ErrNotReady)
	}
	epoch := st.Epoch + 1
	f.set.Logger.Warn("segment store: fencing the database by hand", "store", s.d.Name, "database", st.Live, "epoch", epoch, "window", f.set.Window)
	for {
		t := time.NewTimer(f.set.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, fmt.Errorf("%s: fence of epoch %d: %w", s.d.Name, epoch, ctx.Err())
		case <-t.C:
		}
		st, _ = s.FailoverStatus()
		if st.Epoch >= epoch && st.State == stateServing {
			return st, nil
		}
	}
}
