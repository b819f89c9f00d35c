package leaf

import (
	"context"
	"time"
)

// A periodic tag (TagShape.Period set) keeps each of its periods in a row of
// leaf_alloc of its own, named tagshape.PeriodRow(tag, key):
// "orders#20261124". The tag's own row holds the start value of every
// period in max_id and the step new periods copy; it is never reserved
// from. A period's row is made by the first server that needs it, from the
// tag's row. Package tagshape keeps the calendar: the periods' keys.

// PeriodSep separates a tag from a period key in the name of the period's
// row. ValidateTag refuses it, so no tag can be a period row.
const PeriodSep = '#'

// MaxPeriodKeyLen is the length of the longest period key, a day's
// (yyyymmdd).
const MaxPeriodKeyLen = 8

// MaxPeriodicTagLen is the longest name a periodic tag may have: its period
// rows add PeriodSep and a key to it within biz_tag's MaxTagLen bytes.
const MaxPeriodicTagLen = MaxTagLen - 1 - MaxPeriodKeyLen

// PeriodAlloc is the row of one period of a periodic tag.
type PeriodAlloc struct {
	Key        string // yyyymmdd, yyyymm or yyyy
	MaxID      int64
	Step       int
	UpdateTime time.Time
}

// PeriodStore is implemented by stores that keep periodic tags. Found by
// type assertion; on a store without it periodic tags cannot issue.
//
// Period rows are not tags: Tags, Allocs and the paged listings leave them
// out, they do not move the change counter, and deleting a tag deletes
// them, leaving their tombstones, so that a tag created again (with the
// same shape: see TagShaper) continues each period above the IDs it issued.
type PeriodStore interface {
	// ReservePeriod is Reserve on the row of tag's period key, made first
	// if it is missing, by one insert that any number of servers may race:
	// it copies the step of tag's row and, as its start value, its max_id,
	// or starts at the period row's tombstone if the period was pruned (so
	// a pruned period never starts again at its start value).
	// ErrTagNotFound if tag has no row.
	ReservePeriod(ctx context.Context, tag, key string, step int) (Reservation, error)
	// GiveBackPeriod is GiveBack on the row of tag's period key.
	GiveBackPeriod(ctx context.Context, tag, key string, from, expect int64) (bool, error)
	// Periods lists at most limit of tag's period rows whose key sorts
	// below before ("": no bound), newest first: a keyset page.
	Periods(ctx context.Context, tag, before string, limit int) ([]PeriodAlloc, error)
	// CountPeriods counts tag's period rows.
	CountPeriods(ctx context.Context, tag string) (int, error)
	// PrunePeriods deletes tag's period rows whose key sorts below before
	// and records each one's max_id in its tombstone, in the transaction
	// that deletes it, and returns them, oldest first. It does not check
	// which periods are current: callers do (see tagshape.PeriodKeyBefore).
	PrunePeriods(ctx context.Context, tag, before string) ([]PeriodAlloc, error)
}

// Prune says which periods of a periodic tag to remove: those more than
// Keep periods back (Keep >= 2, counting the current period as the first),
// or those whose key sorts below Before. Exactly one is set. The current
// period and the one before are never removed: a server whose clock is a
// little behind may still issue in it.
type Prune struct {
	Keep   int
	Before string
}

// MaxPruneKeep bounds Prune.Keep: a hundred years of days.
const MaxPruneKeep = 36500

// PruneResult is what a prune removed: the periods with keys below Before,
// oldest first.
type PruneResult struct {
	Before  string
	Removed []PeriodAlloc
}
