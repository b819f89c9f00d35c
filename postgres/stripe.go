package postgres

import (
	"context"

	"github.com/leafgo/leaf"
)

// OpenMember is Open for a database that is one of several of a segment
// store (package multidb): it accepts a database whose leaf_stripe says so,
// and leaves checking the record against the list of databases to the
// caller.
func OpenMember(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, false)
}

// ExpectStripe fences the store's reserves by rec: from now on a reserve
// commits only while the database records rec's stripe and cluster, read
// under a shared lock in the reserve's own transaction, and fails with
// leaf.ErrStripeLayout otherwise. multidb sets it once it has checked the
// record against its list, so that a migration run while the server is up
// stops the server's reserves on this database at once.
func (s *Store) ExpectStripe(rec leaf.StripeRecord) { s.stripes.Expect(rec) }

// ReadStripe reads the database's stripe record; ok is false when it has
// none.
func (s *Store) ReadStripe(ctx context.Context) (rec leaf.StripeRecord, ok bool, err error) {
	return s.stripes.Read(ctx)
}

// WriteStripe records rec unless the database has a record, and reports
// whether it did.
func (s *Store) WriteStripe(ctx context.Context, rec leaf.StripeRecord) (bool, error) {
	return s.stripes.Write(ctx, rec)
}

// ReplaceStripe sets the record to rec if it is still old (compare and
// set), and reports whether it did.
func (s *Store) ReplaceStripe(ctx context.Context, old, rec leaf.StripeRecord) (bool, error) {
	return s.stripes.Replace(ctx, old, rec)
}

// Used reports whether leaf_alloc or leaf_alloc_tombstone has any row.
func (s *Store) Used(ctx context.Context) (bool, error) { return s.stripes.Used(ctx) }

// Tombstones lists every tombstone: name → max_id.
func (s *Store) Tombstones(ctx context.Context) (map[string]int64, error) {
	return s.stripes.Tombstones(ctx)
}

// LockedAllocs lists every row as Allocs does, read under shared row
// locks: it waits for the reserves in flight.
func (s *Store) LockedAllocs(ctx context.Context) ([]leaf.Alloc, error) {
	return s.stripes.LockedAllocs(ctx)
}

// RaiseAlloc makes a.Tag's max_id at least a.MaxID, inserting the row if it
// is missing; it never lowers max_id.
func (s *Store) RaiseAlloc(ctx context.Context, a leaf.Alloc) error {
	return s.stripes.RaiseAlloc(ctx, a)
}

// RaiseTombstone makes tag's tombstone at least maxID; it never lowers it.
func (s *Store) RaiseTombstone(ctx context.Context, tag string, maxID int64) error {
	return s.stripes.RaiseTombstone(ctx, tag, maxID)
}
