// Package multidb is a segment store spread over several independent
// databases (issue #17): each an ordinary MySQL/MariaDB or PostgreSQL store
// with Leaf's unchanged leaf_alloc, database i of N serving only the IDs of
// its stripe (leaf.Stripe: blocks of Block IDs, block number ≡ i mod N).
// The databases never need to agree, so a server keeps issuing while any
// one of them is alive.
//
// A reserve goes to one healthy database, round-robin, within a short
// per-database timeout; a database that fails or is slow is skipped for a
// backoff (1s doubling to 30s) and probed in the background until it
// answers again. Tag administration goes to every database.
//
// Every database records its place in leaf_stripe (leaf.StripeRecord).
// Open checks the records against the list it is given and refuses a list
// in another order, of another length, or mixing clusters. The operator
// writes the records: Init sets up new, empty databases; a database that
// holds rows and no record (a store of one database) becomes part of a
// multi-database store only through Migrate, which also adds databases to
// one.
package multidb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/stripe"
)

// Member is what the store needs of each database: a segment store with
// tag administration and a stripe record. mysql.Store and postgres.Store
// (opened with OpenMember) are members.
type Member interface {
	leaf.SegmentStore
	leaf.SegmentAdmin
	// ReadStripe reads the database's record; ok is false when it has none.
	ReadStripe(ctx context.Context) (rec leaf.StripeRecord, ok bool, err error)
	// WriteStripe writes rec unless the database has a record (two writers
	// racing leave the first one's), and reports whether it wrote.
	WriteStripe(ctx context.Context, rec leaf.StripeRecord) (bool, error)
	// ReplaceStripe sets the record to rec if it still records old's
	// stripe and cluster (compare and set), and reports whether it did.
	ReplaceStripe(ctx context.Context, old, rec leaf.StripeRecord) (bool, error)
	// Used reports whether leaf_alloc or its tombstones hold any row.
	Used(ctx context.Context) (bool, error)
	// Tombstone reads tag's tombstone (its highest deleted max_id); ok is
	// false when the tag was never deleted.
	Tombstone(ctx context.Context, tag string) (maxID int64, ok bool, err error)
	// ExpectStripe fences the member's reserves by rec: from then on a
	// reserve commits only while the database records rec (read in the
	// reserve's transaction), and fails with leaf.ErrStripeLayout
	// otherwise. The store calls it once it has checked the record against
	// its list, so that a database set up or migrated anew while the
	// server runs stops serving it at once, not at the next restart.
	ExpectStripe(rec leaf.StripeRecord)
}

// Database is one member and the name it goes by in messages and status:
// the caller's choice, never a DSN with a password.
type Database struct {
	Name string
	// Store is the open member. Or, when it is nil, Connect opens it (e.g.
	// mysql.OpenMember): Open then calls it, and a database that is down
	// does not keep the store from opening; it serves once a background
	// probe has opened it and checked its record.
	Store   Member
	Connect func(ctx context.Context) (Member, error)
}

// Defaults of Config.
const (
	DefaultMemberTimeout = time.Second
	DefaultReadTimeout   = 5 * time.Second
	DefaultBlock         = 10000
	DefaultMinBackoff    = time.Second
	DefaultMaxBackoff    = 30 * time.Second
)

// Config tunes a Store. DefaultConfig holds the defaults; a zero field
// takes its default, so the zero Config is DefaultConfig.
type Config struct {
	// MemberTimeout bounds one reserve on one database, and one probe of a
	// database marked unhealthy. It must be shorter than the generator's
	// wait budget, so that a hanging database costs one try and the next
	// database still answers in time. Default 1s.
	MemberTimeout time.Duration
	// ReadTimeout bounds the listings, tag administration and reading of
	// stripe records on one database. Default 5s.
	ReadTimeout time.Duration
	// Block is the IDs per block of databases set up by Init or Migrate;
	// databases that have records keep theirs. Default 10000.
	Block int64
	// MinBackoff and MaxBackoff bound how long a failed database is
	// skipped: MinBackoff after its first failure, doubling with each
	// failed probe up to MaxBackoff. Defaults 1s and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives health changes; default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults a zero field of Config takes.
func DefaultConfig() Config {
	return Config{
		MemberTimeout: DefaultMemberTimeout,
		ReadTimeout:   DefaultReadTimeout,
		Block:         DefaultBlock,
		MinBackoff:    DefaultMinBackoff,
		MaxBackoff:    DefaultMaxBackoff,
		Logger:        slog.Default(),
	}
}

// withDefaults fills o's zero fields from DefaultConfig.
func (o Config) withDefaults() Config {
	d := DefaultConfig()
	if o.MemberTimeout <= 0 {
		o.MemberTimeout = d.MemberTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = d.ReadTimeout
	}
	if o.Block <= 0 {
		o.Block = d.Block
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = d.MinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(d.MaxBackoff, o.MinBackoff)
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	return o
}

// Options is the old name of Config.
//
// Deprecated: use Config; Options goes in the release after the next.
type Options = Config

// Store is a leaf.SegmentStore, leaf.SegmentAdmin and
// leaf.SegmentVersioner over several databases. It is not a
// leaf.TagShaper nor a leaf.PeriodStore: it serves plain tags only.
type Store struct {
	members []*member
	opts    Config
	cluster string
	block   int64
	rr      atomic.Uint64

	wake   chan struct{} // a member went down: the prober recomputes its timer
	cancel context.CancelFunc
	done   chan struct{}
	closed atomic.Bool
}

var (
	_ leaf.SegmentStore     = (*Store)(nil)
	_ leaf.SegmentAdmin     = (*Store)(nil)
	_ leaf.SegmentVersioner = (*Store)(nil)
)

// member is one database and its health, guarded by mu.
type member struct {
	index  int
	name   string
	db     Member
	stripe leaf.Stripe
	want   leaf.StripeRecord // what its record must say

	mu sync.Mutex
	// verified: its record was read and matches want. A member that was
	// unreachable at Open is not, and serves nothing until a probe reads
	// its record.
	verified      bool
	healthy       bool
	lastErr       string
	reserves      uint64
	failures      uint64
	probeFailures uint64
	lastReserve   time.Time
	lastLatency   time.Duration
	maxID         int64 // highest end, in IDs, of a range it reserved
	backoff       time.Duration
	retryAt       time.Time
}

// DatabaseStatus is one database's health and ranges, as Databases reports
// them.
type DatabaseStatus struct {
	Index  int
	Name   string
	Stripe leaf.Stripe
	// Healthy: reserves go to it. Verified: its stripe record was read and
	// matches the list (false for a database unreachable since Open).
	Healthy, Verified bool
	LastError         string // the latest failure; kept after recovery
	Reserves          uint64 // successful reserves since Open
	// Failures counts the failed calls since Open: reserves, reads and tag
	// administration; ProbeFailures the failed background probes.
	Failures, ProbeFailures uint64
	LastReserve             time.Time
	LastLatency             time.Duration // of the latest reserve, failed or not
	// MaxID is the highest end, in IDs, of the ranges this server reserved
	// from it (exclusive): 0 before the first.
	MaxID int64
	// RetryAt is when an unhealthy database is probed next.
	RetryAt time.Time
}

// Databases reports every database's status, in list order. It does no
// database work.
func (s *Store) Databases() []DatabaseStatus {
	out := make([]DatabaseStatus, len(s.members))
	for i, m := range s.members {
		m.mu.Lock()
		out[i] = DatabaseStatus{
			Index: m.index, Name: m.name, Stripe: m.stripe,
			Healthy: m.healthy, Verified: m.verified, LastError: m.lastErr,
			Reserves: m.reserves, Failures: m.failures, ProbeFailures: m.probeFailures, LastReserve: m.lastReserve,
			LastLatency: m.lastLatency, MaxID: m.maxID,
		}
		if !m.healthy {
			out[i].RetryAt = m.retryAt
		}
		m.mu.Unlock()
	}
	return out
}

// Cluster is the cluster id the databases record, and Block their IDs per
// block.
func (s *Store) Cluster() string { return s.cluster }

// Block is the IDs per block of the stripes.
func (s *Store) Block() int64 { return s.block }

// Reserve reserves a range from one healthy database, trying the others in
// turn if it fails, and returns it with the database's Stripe: MaxID and
// Step are in that database's numbers, the IDs are r.Ranges. It fails only
// when every database failed; with leaf.ErrTagNotFound only when every
// database that answered said so.
func (s *Store) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q", tag)
	if s.closed.Load() {
		return leaf.Reservation{}, fmt.Errorf("multidb: %s: %w", op, leaf.ErrClosed)
	}
	var errs []error
	list := s.order()
	for _, m := range list {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		r, err := s.reserveOn(ctx, m, tag, step)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no database verified yet"))
	}
	if unverified := len(s.members) - len(list); unverified > 0 {
		// A database not tried (its record not verified yet) may hold the
		// tag: "not found" from the others would make the generator forget
		// a tag that exists.
		errs = append(errs, fmt.Errorf("%d of %d databases not verified yet: %w", unverified, len(s.members), leaf.ErrNotReady))
	}
	return leaf.Reservation{}, joinErrs(op, errs, leaf.ErrTagNotFound)
}

// order is the members a reserve tries: the healthy ones, round-robin
// over them so that each takes an even share, then the unhealthy ones
// whose probe is due first: a call tries every database before it gives
// up. Members whose record is not verified are never tried.
func (s *Store) order() []*member {
	n := len(s.members)
	healthy := make([]*member, 0, n)
	type sickMember struct {
		m       *member
		retryAt time.Time
	}
	var sick []sickMember
	for _, m := range s.members {
		m.mu.Lock()
		ok, verified, retryAt := m.healthy, m.verified, m.retryAt
		m.mu.Unlock()
		switch {
		case ok:
			healthy = append(healthy, m)
		case verified:
			sick = append(sick, sickMember{m, retryAt})
		}
	}
	out := make([]*member, 0, len(healthy)+len(sick))
	if len(healthy) > 0 {
		start := int(s.rr.Add(1) % uint64(len(healthy)))
		out = append(out, healthy[start:]...)
		out = append(out, healthy[:start]...)
	}
	slices.SortStableFunc(sick, func(a, b sickMember) int { return a.retryAt.Compare(b.retryAt) })
	for _, sm := range sick {
		out = append(out, sm.m)
	}
	return out
}

// errExhausted: a database's numbers reached the end of its stripe.
var errExhausted = errors.New("the database's numbers are past the last ID of its stripe")

func (s *Store) reserveOn(ctx context.Context, m *member, tag string, step int) (leaf.Reservation, error) {
	mctx, cancel := context.WithTimeout(ctx, s.opts.MemberTimeout)
	defer cancel()
	start := time.Now()
	r, err := m.db.Reserve(mctx, tag, step)
	latency := time.Since(start)
	if err == nil {
		// Numbers outside 0..MaxNumber have no ID of this stripe: an ID
		// computed from them would wrap or belong to another database.
		if r.Start() < 0 || r.MaxID-1 > stripe.MaxNumber(m.stripe) {
			err = fmt.Errorf("%w: range [%d, %d), last number %d", errExhausted, r.Start(), r.MaxID, stripe.MaxNumber(m.stripe))
		}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", m.name, err)
		if errors.Is(err, leaf.ErrStripeLayout) {
			s.unverify(m, err)
		}
		down := ctx.Err() == nil && !errors.Is(err, leaf.ErrTagNotFound) && !errors.Is(err, errExhausted)
		s.failed(m, err, latency, down)
		return leaf.Reservation{}, err
	}
	r.Stripe = m.stripe
	end := int64(0)
	stripe.Reserved(r, func(_, e int64) bool { end = e; return true })
	m.mu.Lock()
	m.reserves++
	m.lastReserve, m.lastLatency = start, latency
	m.maxID = max(m.maxID, end)
	wasDown := !m.healthy
	m.healthy, m.backoff = true, 0
	m.mu.Unlock()
	if wasDown {
		s.opts.Logger.Info("multidb database healthy again", "db", m.name, "index", m.index)
	}
	return r, nil
}

// unverify takes m out as a failed record check does: its reserve found
// a record other than the one checked (the database was set up or
// migrated anew, or another database put behind its address, while this
// server ran). It serves nothing until a probe finds the expected record
// again, which it will not after a migration: the server must be
// restarted with the new list.
func (s *Store) unverify(m *member, err error) {
	m.mu.Lock()
	m.verified = false
	m.mu.Unlock()
	s.opts.Logger.Error("multidb database's stripe record changed under this running server; it serves nothing: restart the server with the list of databases the records name",
		"db", m.name, "index", m.index, "err", err)
}

// failedProbe counts a failed probe of m and keeps it out for a longer
// backoff.
func (s *Store) failedProbe(m *member, err error) {
	m.mu.Lock()
	m.probeFailures++
	m.mu.Unlock()
	s.markDown(m, err, 0, true)
}

// failed counts a failed call on m, and with down marks it unhealthy.
func (s *Store) failed(m *member, err error, latency time.Duration, down bool) {
	m.mu.Lock()
	m.failures++
	m.mu.Unlock()
	s.markDown(m, err, latency, down)
}

// markDown records err, and with down marks m unhealthy: skipped for a
// backoff that doubles with each failure in a row.
func (s *Store) markDown(m *member, err error, latency time.Duration, down bool) {
	m.mu.Lock()
	m.lastErr = err.Error()
	if latency > 0 {
		m.lastLatency = latency
	}
	if !down {
		m.mu.Unlock()
		return
	}
	wasHealthy := m.healthy
	if wasHealthy || m.backoff == 0 {
		m.backoff = s.opts.MinBackoff
	} else {
		m.backoff = min(2*m.backoff, s.opts.MaxBackoff)
	}
	m.healthy = false
	m.retryAt = time.Now().Add(m.backoff)
	backoff := m.backoff
	m.mu.Unlock()
	if wasHealthy {
		s.opts.Logger.Warn("multidb database unhealthy; skipping it", "db", m.name, "index", m.index, "retry_in", backoff, "err", err)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// GiveBack returns (false, nil): a multi-database store never gives a
// range back. The generator passes only the numbers from and expect, which
// every database uses for IDs of its own: given back to any database but
// the one that reserved them, they would move its max_id below numbers it
// has issued. Keeping the tail wastes IDs, never repeats one.
// The arguments are still checked, as every store checks them: a caller's
// bad tag or range is its bug, whichever store it runs on.
func (s *Store) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return false, err
	}
	if from < 1 || from > expect {
		return false, fmt.Errorf("%w: give back %q from %d at max_id %d: want 1 <= from <= max_id", leaf.ErrInvalidArgument, tag, from, expect)
	}
	return false, nil
}

// Ping succeeds when any database answers: the store can issue while one
// is alive.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("multidb: ping: %w", leaf.ErrClosed)
	}
	res := s.each(ctx, s.live(), s.opts.MemberTimeout, func(ctx context.Context, m *member) (any, error) {
		return nil, m.db.Ping(ctx)
	})
	var errs []error
	for _, r := range res {
		if r.err == nil {
			return nil
		}
		errs = append(errs, r.err)
	}
	return joinErrs("ping", errs, nil)
}

// Close stops the prober and closes every database.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	<-s.done
	var errs []error
	for _, m := range s.members {
		if err := m.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("multidb: close: %w", errors.Join(errs...))
	}
	return nil
}

// result is one member's answer in each.
type result struct {
	m   *member
	v   any
	err error
}

// each runs f on every member of ms at once, each call bounded by timeout,
// and returns the answers in the order of ms. A failure other than a
// sentinel answer, while ctx is still live, marks the member unhealthy.
func (s *Store) each(ctx context.Context, ms []*member, timeout time.Duration, f func(context.Context, *member) (any, error)) []result {
	out := make([]result, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := f(mctx, m)
			if err != nil {
				err = fmt.Errorf("%s: %w", m.name, err)
				if ctx.Err() == nil && !isAnswer(err) {
					s.failed(m, err, 0, true)
				}
			}
			out[i] = result{m: m, v: v, err: err}
		})
	}
	wg.Wait()
	return out
}

// isAnswer reports an error that is the database's answer, not its
// failure.
func isAnswer(err error) bool {
	for _, e := range []error{leaf.ErrTagNotFound, leaf.ErrTagExists, leaf.ErrTagTombstoned, leaf.ErrInvalidArgument, leaf.ErrInvalidTag} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// live is the members to read from: the healthy ones, or every verified
// one when none is healthy.
func (s *Store) live() []*member {
	var healthy, verified []*member
	for _, m := range s.members {
		m.mu.Lock()
		if m.healthy {
			healthy = append(healthy, m)
		}
		if m.verified {
			verified = append(verified, m)
		}
		m.mu.Unlock()
	}
	if len(healthy) > 0 {
		return healthy
	}
	return verified
}

// joinErrs joins the databases' errors under op. sentinel (if not nil)
// stays detectable only when every error carries it: one database saying
// "not found" while another is down must not read as "not found".
func joinErrs(op string, errs []error, sentinel error) error {
	if sentinel != nil {
		all := true
		for _, e := range errs {
			all = all && errors.Is(e, sentinel)
		}
		if !all {
			errs = slices.Clone(errs)
			for i, e := range errs {
				if errors.Is(e, sentinel) {
					errs[i] = errors.New(e.Error())
				}
			}
		}
	}
	return fmt.Errorf("multidb: %s: %w", op, errors.Join(errs...))
}
