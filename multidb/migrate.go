package multidb

import (
	"context"

	"github.com/leafgo/leaf"
)

// Migratable is a Member that Migrate can move: mysql.Store and
// postgres.Store.
type Migratable interface {
	Member
	// Tombstones lists every tombstone: name → max_id.
	Tombstones(ctx context.Context) (map[string]int64, error)
	// RaiseAlloc makes a.Tag's max_id at least a.MaxID, inserting the row
	// (with a's step and description) if it is missing; it never lowers it.
	RaiseAlloc(ctx context.Context, a leaf.Alloc) error
	// RaiseTombstone makes tag's tombstone at least maxID; it never lowers
	// it.
	RaiseTombstone(ctx context.Context, tag string, maxID int64) error
}
