package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/stripe"
)

// StripeSchema is leaf_stripe in portable SQL (MySQL writes its own): the
// one row (id 1) in which a database that is one of several of a segment
// store records its place (leaf.StripeRecord). A database of a store of one
// has no row.
const StripeSchema = `CREATE TABLE IF NOT EXISTS leaf_stripe (
  id         INT         NOT NULL,
  db_index   INT         NOT NULL,
  db_count   INT         NOT NULL,
  block      BIGINT      NOT NULL,
  cluster    VARCHAR(64) NOT NULL,
  created_at TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
)`

// Stripes keeps leaf_stripe and the other statements a multi-database store
// (package multidb) needs of one of its databases: whether it is unused,
// its tombstones, and the raises of a migration. It is a type of its own,
// not methods of Store, so that only the stores that create leaf_stripe
// (mysql, postgres) offer them.
type Stripes struct {
	s *Store
	q stripeQueries
}

type stripeQueries struct {
	read, write, replace       string
	anyRow, anyTomb            string
	tombstones, tombstone      string
	raiseAlloc, raiseTombstone string
	lockedAllocs               string
}

// NewStripes serves s's leaf_stripe, which the caller has created.
func NewStripes(s *Store) *Stripes {
	q := stripeQueries{
		read:    "SELECT db_index, db_count, block, cluster, created_at FROM leaf_stripe WHERE id = 1",
		write:   "INSERT INTO leaf_stripe (id, db_index, db_count, block, cluster, created_at) VALUES (1, ?, ?, ?, ?, CURRENT_TIMESTAMP) ON CONFLICT (id) DO NOTHING",
		replace: "UPDATE leaf_stripe SET db_index = ?, db_count = ?, block = ?, cluster = ?, created_at = CURRENT_TIMESTAMP WHERE id = 1 AND db_index = ? AND db_count = ? AND block = ? AND cluster = ?",
		anyRow:  "SELECT 1 FROM leaf_alloc LIMIT 1",
		anyTomb: "SELECT 1 FROM leaf_alloc_tombstone LIMIT 1",
		// Period rows' tombstones too: a migration must see them.
		tombstones: "SELECT biz_tag, max_id FROM leaf_alloc_tombstone",
		tombstone:  "SELECT max_id FROM leaf_alloc_tombstone WHERE biz_tag = ?",
		raiseAlloc: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)" +
			" ON CONFLICT (biz_tag) DO UPDATE SET max_id = CASE WHEN excluded.max_id > leaf_alloc.max_id THEN excluded.max_id ELSE leaf_alloc.max_id END",
		raiseTombstone: "INSERT INTO leaf_alloc_tombstone (biz_tag, max_id, deleted_at) VALUES (?, ?, CURRENT_TIMESTAMP)" +
			" ON CONFLICT (biz_tag) DO UPDATE SET max_id = CASE WHEN excluded.max_id > leaf_alloc_tombstone.max_id THEN excluded.max_id ELSE leaf_alloc_tombstone.max_id END",
	}
	// Shared row locks: see LockedAllocs.
	q.lockedAllocs = "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE " + notPeriod + s.forShare
	if s.d.OnDuplicateKey {
		// The raises name the value twice rather than VALUES(), which MySQL
		// 8.0.20 deprecates and MariaDB keeps.
		q.write = "INSERT IGNORE INTO leaf_stripe (id, db_index, db_count, block, cluster, created_at) VALUES (1, ?, ?, ?, ?, CURRENT_TIMESTAMP)"
		q.raiseAlloc = "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)" +
			" ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, ?)"
		q.raiseTombstone = "INSERT INTO leaf_alloc_tombstone (biz_tag, max_id, deleted_at) VALUES (?, ?, CURRENT_TIMESTAMP)" +
			" ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, ?)"
	}
	if s.d.Dollar {
		for _, p := range []*string{&q.write, &q.replace, &q.tombstone, &q.raiseAlloc, &q.raiseTombstone} {
			*p = Rebind(*p)
		}
	}
	return &Stripes{s: s, q: q}
}

// ReadStripe reads the record; ok is false when the database has none.
func (t *Stripes) ReadStripe(ctx context.Context) (rec leaf.StripeRecord, ok bool, err error) {
	const op = "read stripe record"
	if err := t.s.checkOpen(op); err != nil {
		return rec, false, err
	}
	var index, count int64
	var at dbTime
	err = t.s.db.QueryRowContext(ctx, t.q.read).Scan(&index, &count, &rec.Stripe.Block, &rec.Cluster, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return leaf.StripeRecord{}, false, nil
	}
	if err != nil {
		return leaf.StripeRecord{}, false, t.s.wrap(op, err)
	}
	rec.Stripe.Index, rec.Stripe.Databases, rec.CreatedAt = int(index), int(count), at.t
	return rec, true, nil
}

// WriteStripe records rec unless the database has a record; it reports whether
// it wrote. Two writers racing leave exactly one record, the first one's.
func (t *Stripes) WriteStripe(ctx context.Context, rec leaf.StripeRecord) (bool, error) {
	if err := stripe.ValidateRecord(rec); err != nil {
		return false, err
	}
	const op = "write stripe record"
	if err := t.s.checkOpen(op); err != nil {
		return false, err
	}
	st := rec.Stripe
	n, err := t.s.execCount(ctx, t.q.write, int64(st.Index), int64(st.Databases), st.Block, rec.Cluster)
	if err != nil {
		return false, t.s.wrap(op, err)
	}
	return n == 1, nil
}

// ReplaceStripe sets the record to rec if it still is old (its stripe and
// cluster): a compare-and-set, for a migration. It reports whether it
// replaced it.
func (t *Stripes) ReplaceStripe(ctx context.Context, old, rec leaf.StripeRecord) (bool, error) {
	if err := stripe.ValidateRecord(rec); err != nil {
		return false, err
	}
	const op = "replace stripe record"
	if err := t.s.checkOpen(op); err != nil {
		return false, err
	}
	st, o := rec.Stripe, old.Stripe
	n, err := t.s.execCount(ctx, t.q.replace, int64(st.Index), int64(st.Databases), st.Block, rec.Cluster,
		int64(o.Index), int64(o.Databases), o.Block, old.Cluster)
	if err != nil {
		return false, t.s.wrap(op, err)
	}
	// MySQL counts matched rows (clientFoundRows), so setting the record it
	// has counts too.
	return n == 1, nil
}

// Used reports whether leaf_alloc or leaf_alloc_tombstone holds any row:
// whether IDs may have been issued from the database.
func (t *Stripes) Used(ctx context.Context) (bool, error) {
	const op = "check for rows"
	if err := t.s.checkOpen(op); err != nil {
		return false, err
	}
	for _, q := range []string{t.q.anyRow, t.q.anyTomb} {
		var one int
		err := t.s.db.QueryRowContext(ctx, q).Scan(&one)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, t.s.wrap(op, err)
		}
	}
	return false, nil
}

// Tombstones lists every tombstone, periods' included (their names hold
// leaf.PeriodSep): name → the max_id recorded.
func (t *Stripes) Tombstones(ctx context.Context) (map[string]int64, error) {
	const op = "list tombstones"
	if err := t.s.checkOpen(op); err != nil {
		return nil, err
	}
	rows, err := t.s.db.QueryContext(ctx, t.q.tombstones)
	if err != nil {
		return nil, t.s.wrap(op, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var maxID int64
		if err := rows.Scan(&name, &maxID); err != nil {
			return nil, t.s.wrap(op, err)
		}
		out[name] = maxID
	}
	if err := rows.Err(); err != nil {
		return nil, t.s.wrap(op, err)
	}
	return out, nil
}

// Tombstone reads tag's tombstone: the highest max_id a deleted row of it
// had; ok is false when it was never deleted. A multi-database store reads
// it on every database before a create with a start, so that a start one
// database refuses is refused before any other creates the tag.
func (t *Stripes) Tombstone(ctx context.Context, tag string) (maxID int64, ok bool, err error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return 0, false, err
	}
	op := fmt.Sprintf("read the tombstone of %q", tag)
	if err := t.s.checkOpen(op); err != nil {
		return 0, false, err
	}
	switch err := t.s.db.QueryRowContext(ctx, t.q.tombstone, tag).Scan(&maxID); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, t.s.wrap(op, err)
	}
	return maxID, true, nil
}

// LockedAllocs lists every row as Store.Allocs does, but reads them under
// shared row locks, in a transaction of its own: it waits for the reserves
// in flight, which hold their tag's row lock until they commit, and reads
// what they committed. A migration reads its bounds so after writing the
// records that fence servers of the old layout: a reserve still running
// then either committed before the read, and counts, or reads the new
// record and rolls back.
func (t *Stripes) LockedAllocs(ctx context.Context) ([]leaf.Alloc, error) {
	const op = "list allocs under lock"
	if err := t.s.checkOpen(op); err != nil {
		return nil, err
	}
	var as []leaf.Alloc
	err := t.s.retry(ctx, func() (err error) {
		tx, err := t.s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		// Read-only: rolling back releases the locks as a commit would.
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, t.q.lockedAllocs)
		if err != nil {
			return err
		}
		defer rows.Close()
		as = []leaf.Alloc{}
		for rows.Next() {
			a, err := scanAlloc(rows)
			if err != nil {
				return err
			}
			as = append(as, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, t.s.wrap(op, err)
	}
	slices.SortFunc(as, func(a, b leaf.Alloc) int { return strings.Compare(a.Tag, b.Tag) })
	return as, nil
}

// RaiseMaxID makes a.Tag's max_id at least a.MaxID: it inserts the row with
// a's step and description if there is none, and never lowers max_id, so a
// migration may run it again, or on a database that has moved on. It
// moves the change counter.
func (t *Stripes) RaiseMaxID(ctx context.Context, a leaf.Alloc) error {
	if err := leaf.ValidateAlloc(a); err != nil {
		return err
	}
	if strings.ContainsRune(a.Tag, leaf.PeriodSep) {
		return fmt.Errorf("%w: %q is a period's row", leaf.ErrInvalidArgument, a.Tag)
	}
	op := fmt.Sprintf("raise %q", a.Tag)
	if err := t.s.checkOpen(op); err != nil {
		return err
	}
	desc := sql.NullString{String: a.Description, Valid: a.Description != ""}
	args := []any{a.Tag, a.MaxID, int64(a.Step), desc}
	if t.s.d.OnDuplicateKey {
		args = append(args, a.MaxID)
	}
	err := t.s.retry(ctx, func() error {
		return t.s.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, t.q.raiseAlloc, args...); err != nil {
				return err
			}
			return t.s.bumpVersion(ctx, tx)
		})
	})
	if err != nil {
		return t.s.wrap(op, err)
	}
	return nil
}

// RaiseTombstone makes tag's tombstone at least maxID, adding one if there
// is none; it never lowers one.
func (t *Stripes) RaiseTombstone(ctx context.Context, tag string, maxID int64) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if maxID < 1 {
		return fmt.Errorf("%w: tombstone %d of %q, want >= 1", leaf.ErrInvalidArgument, maxID, tag)
	}
	op := fmt.Sprintf("raise tombstone of %q", tag)
	if err := t.s.checkOpen(op); err != nil {
		return err
	}
	args := []any{tag, maxID}
	if t.s.d.OnDuplicateKey {
		args = append(args, maxID)
	}
	err := t.s.retry(ctx, func() error {
		_, err := t.s.db.ExecContext(ctx, t.q.raiseTombstone, args...)
		return err
	})
	if err != nil {
		return t.s.wrap(op, err)
	}
	return nil
}

// CheckSingleDatabase refuses a database that records a stripe of a store of several
// (db_count > 1) to a store opened on it alone: it would issue the IDs of
// the other databases' stripes as its own. name is the store's and the
// database's name for the message. What it accepts must hold at every
// reserve, not only now, so it then fences the reserves (expectPlain).
func (t *Stripes) CheckSingleDatabase(ctx context.Context, name string) error {
	rec, ok, err := t.ReadStripe(ctx)
	if err != nil {
		return err
	}
	if ok && rec.Stripe.Databases > 1 {
		return fmt.Errorf("%s: %s: %w: it records that it is %s of a segment store spread over several databases,"+
			" so on its own it would issue the IDs of the others; list all %d databases, in their recorded order, as the segment store's databases",
			t.s.d.Name, name, leaf.ErrStripeLayout, rec, rec.Stripe.Databases)
	}
	t.expectPlain()
	return nil
}
