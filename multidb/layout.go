package multidb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leafgo/leaf"
)

// Open checks the databases' stripe records against the list and returns
// the store over them.
//
//   - Every reachable database has a record: they must all record
//     len(dbs) databases, one block size and one cluster, and database i
//     index i. A database unreachable now is checked when it first answers,
//     and serves nothing before.
//   - No database has a record and none holds a row in leaf_alloc or its
//     tombstones: Open sets them up, database 0 first with a new cluster id,
//     then the others with the cluster database 0 records, each only if it
//     has no record yet, so servers starting at once agree; then it checks
//     them all. Every database must be reachable for this.
//   - Anything else (some records missing, or databases with rows and no
//     record) is refused: run Migrate.
//
// Errors wrap leaf.ErrStripeLayout and name the database. The store owns
// the databases once Open succeeds (Close closes them); when it fails they
// stay the caller's.
func Open(ctx context.Context, dbs []Database, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := checkList(dbs); err != nil {
		return nil, err
	}
	if opts.Block > leaf.MaxBlock {
		return nil, fmt.Errorf("multidb: %w: block %d, at most %d", leaf.ErrInvalidArgument, opts.Block, leaf.MaxBlock)
	}
	dbs = slices.Clone(dbs)
	var lazies []*lazy
	for i, d := range dbs {
		if d.Store == nil {
			l := &lazy{name: d.Name, connect: d.Connect}
			lazies = append(lazies, l)
			dbs[i].Store = l
		}
	}
	s, err := open(ctx, dbs, opts)
	if err != nil {
		for _, l := range lazies {
			_ = l.Close()
		}
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, dbs []Database, opts Options) (*Store, error) {
	recs := readRecords(ctx, dbs, opts.ReadTimeout)
	var (
		reachable, recorded int
		unreachable         []error
	)
	for _, r := range recs {
		switch {
		case r.err != nil:
			unreachable = append(unreachable, r.err)
		case r.ok:
			reachable++
			recorded++
		default:
			reachable++
		}
	}
	if reachable == 0 {
		return nil, fmt.Errorf("multidb: open: no database answered: %w", errors.Join(unreachable...))
	}
	if recorded > 0 && recorded < reachable && len(unreachable) == 0 {
		// Some records and not all: another server may be setting the
		// databases up right now, writing one record after the other.
		// Give it the time to finish rather than refuse.
		recs = awaitSetUp(ctx, dbs, recs, opts)
	}
	if recorded == 0 {
		if len(unreachable) > 0 {
			return nil, fmt.Errorf("multidb: open: the databases have no stripe records yet, and setting them up needs every database: %w", errors.Join(unreachable...))
		}
		var err error
		if recs, err = initialise(ctx, dbs, opts); err != nil {
			return nil, err
		}
	}
	want, err := checkRecords(dbs, recs)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:    opts,
		cluster: want.Cluster,
		block:   want.Stripe.Block,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	now := time.Now()
	for i, d := range dbs {
		w := want
		w.Stripe.Index = i
		m := &member{index: i, name: d.Name, db: d.Store, stripe: w.Stripe, want: w}
		if recs[i].err == nil {
			m.verified, m.healthy = true, true
		} else {
			m.lastErr, m.retryAt = recs[i].err.Error(), now
			opts.Logger.Warn("multidb database unreachable at open; it serves nothing until its stripe record is read", "db", d.Name, "index", i, "err", recs[i].err)
		}
		s.members = append(s.members, m)
	}
	pctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.probe(pctx)
	return s, nil
}

// checkList validates a list of databases.
func checkList(dbs []Database) error {
	if len(dbs) < 1 || len(dbs) > leaf.MaxStripes {
		return fmt.Errorf("multidb: %w: %d databases, want 1..%d", leaf.ErrInvalidArgument, len(dbs), leaf.MaxStripes)
	}
	for i, d := range dbs {
		if d.Store == nil && d.Connect == nil {
			return fmt.Errorf("multidb: %w: database %d (%s) has no store", leaf.ErrInvalidArgument, i, d.Name)
		}
		if d.Name == "" {
			return fmt.Errorf("multidb: %w: database %d has no name", leaf.ErrInvalidArgument, i)
		}
	}
	return nil
}

// record is a database's stripe record as read: err when it did not answer.
type record struct {
	rec leaf.StripeRecord
	ok  bool
	err error
}

func readRecords(ctx context.Context, dbs []Database, timeout time.Duration) []record {
	out := make([]record, len(dbs))
	done := make(chan struct{})
	for i, d := range dbs {
		go func() {
			defer func() { done <- struct{}{} }()
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rec, ok, err := d.Store.ReadStripe(rctx)
			if err != nil {
				err = fmt.Errorf("%s: read stripe record: %w", d.Name, err)
			}
			out[i] = record{rec: rec, ok: ok, err: err}
		}()
	}
	for range dbs {
		<-done
	}
	return out
}

// checkRecords checks the records of the databases that answered against
// the list: all must have one, of one cluster and block, for len(dbs)
// databases, database i recording index i. It returns database 0's record
// as the list expects it.
func checkRecords(dbs []Database, recs []record) (leaf.StripeRecord, error) {
	var (
		want     leaf.StripeRecord
		found    bool
		missing  []string
		recorded []string
	)
	for i, r := range recs {
		switch {
		case r.err != nil:
		case !r.ok:
			missing = append(missing, dbs[i].Name)
		default:
			recorded = append(recorded, dbs[i].Name)
			if !found {
				want, found = r.rec, true
				want.Stripe = leaf.Stripe{Index: 0, Of: len(dbs), Block: r.rec.Stripe.Block}
				want.CreatedAt = time.Time{}
			}
		}
	}
	if len(missing) > 0 {
		return want, fmt.Errorf("multidb: open: %w: %v record a stripe and %v do not;"+
			" a database with no record is not part of this store: to add databases, or to spread a store of one database over several,"+
			" stop the servers and run the migration (multidb.Migrate); if setting up new, empty databases was interrupted, delete their leaf_stripe rows and start again",
			leaf.ErrStripeLayout, recorded, missing)
	}
	for i, r := range recs {
		if r.err != nil {
			continue
		}
		w := want
		w.Stripe.Index = i
		if !r.rec.Same(w) {
			return want, fmt.Errorf("multidb: open: %w", mismatch(dbs[i].Name, i, r.rec, w))
		}
	}
	return want, nil
}

// initialise sets up databases with no record and no rows: database 0
// first, with a new cluster id, then the others with the cluster database
// 0 records, each written only where no record is. Two servers doing it at
// once both adopt the cluster of whichever wrote database 0 first. It
// returns the records as read back.
func initialise(ctx context.Context, dbs []Database, opts Options) ([]record, error) {
	for _, d := range dbs {
		rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		used, err := d.Store.Used(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("multidb: open: %s: %w", d.Name, err)
		}
		if used {
			return nil, fmt.Errorf("multidb: open: %w: database %s holds tags (or tombstones of deleted ones) and no stripe record:"+
				" its IDs were issued without stripes, and a new layout could issue them again;"+
				" stop the servers and run the migration (multidb.Migrate) to spread it over the databases",
				leaf.ErrStripeLayout, d.Name)
		}
	}
	cluster, err := NewCluster()
	if err != nil {
		return nil, err
	}
	write := func(i int, rec leaf.StripeRecord) error {
		wctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		defer cancel()
		if _, err := dbs[i].Store.WriteStripe(wctx, rec); err != nil {
			return fmt.Errorf("multidb: open: set up %s: %w", dbs[i].Name, err)
		}
		return nil
	}
	n := len(dbs)
	if err := write(0, leaf.StripeRecord{Stripe: leaf.Stripe{Index: 0, Of: n, Block: opts.Block}, Cluster: cluster}); err != nil {
		return nil, err
	}
	first := readRecords(ctx, dbs[:1], opts.ReadTimeout)[0]
	if first.err != nil {
		return nil, fmt.Errorf("multidb: open: set up: %w", first.err)
	}
	if !first.ok {
		return nil, fmt.Errorf("multidb: open: set up %s: its stripe record is missing after writing it", dbs[0].Name)
	}
	r0 := first.rec
	opts.Logger.Info("multidb setting up databases", "databases", n, "block", r0.Stripe.Block, "cluster", r0.Cluster)
	for i := 1; i < n; i++ {
		if err := write(i, leaf.StripeRecord{Stripe: leaf.Stripe{Index: i, Of: n, Block: r0.Stripe.Block}, Cluster: r0.Cluster}); err != nil {
			return nil, err
		}
	}
	recs := readRecords(ctx, dbs, opts.ReadTimeout)
	for _, r := range recs {
		if r.err != nil {
			return nil, fmt.Errorf("multidb: open: set up: %w", r.err)
		}
	}
	return recs, nil
}

// setUpWait bounds how long Open waits for another server to finish setting
// the databases up, and setUpPoll is how often it reads the records then.
const (
	setUpWait = 3 * time.Second
	setUpPoll = 50 * time.Millisecond
)

// awaitSetUp reads the records again until every database has one, while
// no database holds a row (a set-up in progress creates none): it returns
// the last records read.
func awaitSetUp(ctx context.Context, dbs []Database, recs []record, opts Options) []record {
	deadline := time.Now().Add(setUpWait)
	for time.Now().Before(deadline) {
		for _, d := range dbs {
			rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
			used, err := d.Store.Used(rctx)
			cancel()
			if err != nil || used {
				return recs
			}
		}
		t := time.NewTimer(setUpPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return recs
		case <-t.C:
		}
		recs = readRecords(ctx, dbs, opts.ReadTimeout)
		complete := true
		for _, r := range recs {
			complete = complete && r.err == nil && r.ok
		}
		if complete {
			return recs
		}
	}
	return recs
}

// NewCluster draws a cluster id: 16 random bytes in hex.
func NewCluster() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("multidb: draw a cluster id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
