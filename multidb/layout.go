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
	"github.com/leafgo/leaf/stripe"
)

// Open checks the databases' stripe records against the list and returns
// the store over them. Every reachable database must have a record: they
// must all record len(dbs) databases, one block size and one cluster, and
// database i index i. A database unreachable now is checked when it first
// answers, and serves nothing before. Open never writes a record: fresh
// databases are set up once with Init, a used one spread over several
// with Migrate, both run by the operator.
//
// Errors wrap leaf.ErrStripeLayout and name the database. The store owns
// the databases once Open succeeds (Close closes them); when it fails they
// stay the caller's.
func Open(ctx context.Context, dbs []Database, opts Config) (*Store, error) {
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

func open(ctx context.Context, dbs []Database, opts Config) (*Store, error) {
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
	if recorded == 0 {
		if len(unreachable) > 0 {
			return nil, fmt.Errorf("multidb: open: %w: the databases that answered have no stripe records, and the others did not answer: %w",
				leaf.ErrStripeLayout, errors.Join(unreachable...))
		}
		return nil, fmt.Errorf("multidb: open: %w: no database of the list has a stripe record: set up new, empty databases once with"+
			" `leaf db init` (multidb.Init), or spread a database in use over several with `leaf db migrate` (multidb.Migrate)", leaf.ErrStripeLayout)
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
			d.Store.ExpectStripe(w)
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
			} else if ok {
				// A hand-edited record (a block of 0) must not reach the
				// arithmetic of the stripes.
				if verr := stripe.ValidateRecord(rec); verr != nil {
					err = fmt.Errorf("%s: %w: its stripe record is invalid: %w", d.Name, leaf.ErrStripeLayout, verr)
				}
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
		case r.ok && isFence(r.rec.Cluster):
			return want, fmt.Errorf("multidb: open: %w: database %s records that a migration to %d databases is under way, or was interrupted:"+
				" run `leaf db migrate` again with the same lists, and start the servers with the new list once it is done",
				leaf.ErrStripeLayout, dbs[i].Name, r.rec.Stripe.Databases)
		case !r.ok:
			missing = append(missing, dbs[i].Name)
		default:
			recorded = append(recorded, dbs[i].Name)
			if !found {
				want, found = r.rec, true
				want.Stripe = leaf.Stripe{Index: 0, Databases: len(dbs), Block: r.rec.Stripe.Block}
				want.CreatedAt = time.Time{}
			}
		}
	}
	if len(missing) > 0 {
		return want, fmt.Errorf("multidb: open: %w: %v record a stripe and %v do not;"+
			" a database with no record is not part of this store: to add databases, or to spread a store of one database over several,"+
			" stop the servers and run the migration (`leaf db migrate`); if setting up new, empty databases was interrupted, delete their leaf_stripe rows and run `leaf db init` again",
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

// Init sets up new, empty databases as the stripes of one store, in list
// order, under a new cluster id, and returns it. It is the operator's
// step, run once before the servers start (`leaf db init`); Open never
// sets databases up. Servers that set up databases as they start would
// have to adopt a record another one wrote, and two servers given
// different lists that share the first database would then both run,
// with two databases in one stripe.
//
// Every database must answer, hold no tag or tombstone (else: Migrate)
// and have no record. Each record is written only where none is and read
// back: a concurrent Init stops at the first database the other one
// wrote, and reports which databases hold this cluster's records; those
// databases are empty, so deleting their leaf_stripe rows starts over.
func Init(ctx context.Context, dbs []Database, opts Config) (string, error) {
	if opts.Block < 0 {
		return "", fmt.Errorf("multidb: init: %w: block %d, want 1..%d (or 0: the default)", leaf.ErrInvalidArgument, opts.Block, leaf.MaxBlock)
	}
	opts = opts.withDefaults()
	if err := checkList(dbs); err != nil {
		return "", err
	}
	if opts.Block < 1 || opts.Block > leaf.MaxBlock {
		return "", fmt.Errorf("multidb: init: %w: block %d, want 1..%d", leaf.ErrInvalidArgument, opts.Block, leaf.MaxBlock)
	}
	dbs = slices.Clone(dbs)
	for i, d := range dbs {
		if d.Store == nil {
			m, err := d.Connect(ctx)
			if err != nil {
				return "", fmt.Errorf("multidb: init: %s: %w", d.Name, err)
			}
			defer m.Close()
			dbs[i].Store = m
		}
	}
	for i, r := range readRecords(ctx, dbs, opts.ReadTimeout) {
		switch {
		case r.err != nil:
			return "", fmt.Errorf("multidb: init needs every database: %w", r.err)
		case r.ok:
			return "", fmt.Errorf("multidb: init: %w: %s already records %s", leaf.ErrStripeLayout, dbs[i].Name, r.rec)
		}
		rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		used, err := dbs[i].Store.Used(rctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("multidb: init: %s: %w", dbs[i].Name, err)
		}
		if used {
			return "", fmt.Errorf("multidb: init: %w: database %s holds tags (or tombstones of deleted ones):"+
				" its IDs were issued without stripes, and a new layout could issue them again;"+
				" stop the servers and spread it over the databases with the migration (`leaf db migrate`)",
				leaf.ErrStripeLayout, dbs[i].Name)
		}
	}
	// No fence first, as Migrate writes: the databases are unused, and a
	// store of one database left running on one of them issues nothing
	// before it has a tag; once a record is written its reserves fail
	// (the store's fence refuses a record of several databases). Only a
	// tag created and reserved from between the check above and the write
	// below would slip through, which stopping the servers first rules out.
	cluster, err := NewCluster()
	if err != nil {
		return "", err
	}
	n := len(dbs)
	var written []string
	for i, d := range dbs {
		want := leaf.StripeRecord{Stripe: leaf.Stripe{Index: i, Databases: n, Block: opts.Block}, Cluster: cluster}
		wctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		_, err := d.Store.WriteStripe(wctx, want)
		cancel()
		if err != nil {
			return "", fmt.Errorf("multidb: init: write the record of %s (records written so far: %v): %w", d.Name, written, err)
		}
		got := readRecords(ctx, dbs[i:i+1], opts.ReadTimeout)[0]
		switch {
		case got.err != nil:
			return "", fmt.Errorf("multidb: init: read back the record of %s (records written so far: %v): %w", d.Name, written, got.err)
		case !got.ok || !got.rec.Same(want):
			return "", fmt.Errorf("multidb: init: %w: %s records %s, not the %s just written: another init ran at the same time;"+
				" this one wrote the records of %v, empty databases whose leaf_stripe rows may be deleted to start over",
				leaf.ErrStripeLayout, d.Name, got.rec, want, written)
		}
		written = append(written, d.Name)
	}
	opts.Logger.Info("multidb databases set up", "databases", n, "block", opts.Block, "cluster", cluster)
	return cluster, nil
}

// NewCluster draws a cluster id: 16 random bytes in hex.
func NewCluster() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("multidb: draw a cluster id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
