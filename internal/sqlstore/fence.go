package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leafgo/leaf"
)

// stripeFence is what a store expects leaf_stripe to record: plain, no
// record or one of a store of one database (what CheckSingleDatabase accepts); else
// exactly rec (stripe and cluster).
type stripeFence struct {
	plain bool
	rec   leaf.StripeRecord
}

// expectPlain fences the store's reserves: from now on a reserve commits
// only while the database records no stripe, or one of a store of one
// database, as CheckSingleDatabase accepted when the store opened (mysql.Open,
// postgres.Open), so that a `leaf db migrate` run while it is still
// serving stops it at its next reserve rather than letting it issue its
// old numbers as IDs next to the new layout's.
func (t *Stripes) expectPlain() {
	t.s.fence.Store(&stripeFence{plain: true})
}

// ExpectStripe fences the store's reserves by rec: from now on a reserve commits
// only while the database records rec's stripe and cluster. A
// multi-database store sets it once it has checked the member's record
// against its list.
func (t *Stripes) ExpectStripe(rec leaf.StripeRecord) {
	t.s.fence.Store(&stripeFence{rec: rec})
}

// accepts reports whether the record read (ok: there is one) is what f
// expects.
func (f *stripeFence) accepts(rec leaf.StripeRecord, ok bool) bool {
	if f.plain {
		return !ok || rec.Stripe.Databases <= 1
	}
	return ok && rec.Same(f.rec)
}

// checkFence reads leaf_stripe's row inside the reserve's transaction,
// under a shared lock held to commit, and fails with leaf.ErrStripeLayout
// unless f accepts it. The reserve reads it after its UPDATE of the tag's
// row, not before: the reserve then holds the tag's row lock while it
// reads the record, so a migration that writes the record and then reads
// the tag's row with a locking read either waits for this reserve (whose
// range it then counts) or wrote the record before this read (and fences
// it). Read first, a reserve that found no record (no row to lock on
// PostgreSQL) could update the tag's row after the migration had read it.
// Holding the shared lock makes a record write wait for the reserves that
// read the old one.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, f *stripeFence) error {
	var (
		rec          leaf.StripeRecord
		index, count int64
	)
	ok := true
	err := tx.QueryRowContext(ctx, s.q.fence).Scan(&index, &count, &rec.Stripe.Block, &rec.Cluster)
	if errors.Is(err, sql.ErrNoRows) {
		ok, err = false, nil
	}
	if err != nil {
		return fmt.Errorf("read stripe record: %w", err)
	}
	rec.Stripe.Index, rec.Stripe.Databases = int(index), int(count)
	if f.accepts(rec, ok) {
		return nil
	}
	got := "no stripe record"
	if ok {
		got = "that it is " + rec.String()
	}
	want := "no stripe record (a store of one database)"
	if !f.plain {
		want = "that it is " + f.rec.String()
	}
	return fmt.Errorf("%w: the database now records %s, but this server opened it expecting %s:"+
		" it was set up or migrated (`leaf db init`, `leaf db migrate`) while this server ran, and the server must not issue under its old layout;"+
		" restart the server with the list of databases the records name, in their recorded order",
		leaf.ErrStripeLayout, got, want)
}
