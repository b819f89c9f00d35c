package leaf

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A periodic tag (TagShape.Period set) keeps each of its periods in a row of
// leaf_alloc of its own, named PeriodRow(tag, key): "orders#20261124". The
// tag's own row holds the start value of every period in max_id and the
// step new periods copy; it is never reserved from. A period's row is made
// by the first server that needs it, from the tag's row.

// PeriodSep separates a tag from a period key in the name of the period's
// row. ValidateTag refuses it, so no tag can be a period row.
const PeriodSep = '#'

// MaxPeriodKeyLen is the length of the longest period key, a day's
// (yyyymmdd).
const MaxPeriodKeyLen = 8

// MaxPeriodicTagLen is the longest name a periodic tag may have: its period
// rows add PeriodSep and a key to it within biz_tag's MaxTagLen bytes.
const MaxPeriodicTagLen = MaxTagLen - 1 - MaxPeriodKeyLen

// PeriodRow is the name of the leaf_alloc row of tag's period key.
func PeriodRow(tag, key string) string { return tag + string(PeriodSep) + key }

// ValidateShapedTag checks the name of a tag about to be created with s:
// ValidateTag, and for a periodic tag at most MaxPeriodicTagLen bytes.
func ValidateShapedTag(tag string, s TagShape) error {
	if err := ValidateTag(tag); err != nil {
		return err
	}
	if s.Period != PeriodNone && len(tag) > MaxPeriodicTagLen {
		return fmt.Errorf("%w: %d bytes; a periodic tag's name has at most %d, leaving room for the period its rows add (%s%c20261124)",
			ErrInvalidTag, len(tag), MaxPeriodicTagLen, truncate(tag, 20), PeriodSep)
	}
	return nil
}

// Location is the zone of a TimeZone setting: UTC for "".
func Location(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %v", ErrInvalidArgument, truncate(tz, 40), err)
	}
	return loc, nil
}

// PeriodKey is the key of the period of p that holds t, in t's location:
// yyyymmdd, yyyymm or yyyy. It is "" for PeriodNone. Keys of one period
// sort as their periods do. Years outside 1..9999 have no key: their
// periods are those of the nearest year that has one.
func PeriodKey(p Period, t time.Time) string {
	y, m, d := t.Date()
	return periodKey(p, y, m, d)
}

func periodKey(p Period, y int, m time.Month, d int) string {
	y = min(max(y, 1), 9999)
	var b [MaxPeriodKeyLen]byte
	put := func(at, v, digits int) {
		for i := at + digits - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, y, 4)
	switch p {
	case PeriodYear:
		return string(b[:4])
	case PeriodMonth:
		put(4, int(m), 2)
		return string(b[:6])
	case PeriodDay:
		put(4, int(m), 2)
		put(6, d, 2)
		return string(b[:8])
	}
	return ""
}

// PeriodKeyBefore is the key of the period n periods before the one that
// holds t (n = 0: t's own), in t's location.
func PeriodKeyBefore(p Period, t time.Time, n int) string {
	y, m, d := t.Date()
	switch p {
	case PeriodDay:
		y, m, d = time.Date(y, m, d-n, 12, 0, 0, 0, time.UTC).Date()
	case PeriodMonth:
		y, m, _ = time.Date(y, m-time.Month(n), 1, 12, 0, 0, 0, time.UTC).Date()
	case PeriodYear:
		y -= n
	}
	return periodKey(p, y, m, d)
}

// ValidatePeriodKey checks a period key: 4, 6 or 8 digits, a year, a month
// or a day of the calendar. Errors wrap ErrInvalidArgument.
func ValidatePeriodKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: period %q: %s", ErrInvalidArgument, truncate(key, 20), why)
	}
	switch len(key) {
	case 4, 6, 8:
	default:
		return bad("want yyyy, yyyymm or yyyymmdd")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return bad("want digits only: yyyy, yyyymm or yyyymmdd")
		}
	}
	y, _ := strconv.Atoi(key[:4])
	if y < 1 {
		return bad("year 0000")
	}
	if len(key) >= 6 {
		m, _ := strconv.Atoi(key[4:6])
		if m < 1 || m > 12 {
			return bad("no such month")
		}
		if len(key) == 8 {
			d, _ := strconv.Atoi(key[6:8])
			if d < 1 || time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Day() != d {
				return bad("no such day")
			}
		}
	}
	return nil
}

// PeriodKeyLen is the length of p's keys; 0 for PeriodNone.
func PeriodKeyLen(p Period) int {
	switch p {
	case PeriodDay:
		return 8
	case PeriodMonth:
		return 6
	case PeriodYear:
		return 4
	}
	return 0
}

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
	// which periods are current: callers do (see PeriodKeyBefore).
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
