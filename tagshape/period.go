package tagshape

import (
	"fmt"
	"time"

	"github.com/leafgo/leaf"
)

// The period calendar of periodic tags (leaf.TagShape.Period): the keys of
// periods and the names of their leaf_alloc rows.

// PeriodRow is the name of the leaf_alloc row of tag's period key.
func PeriodRow(tag, key string) string { return tag + string(leaf.PeriodSep) + key }

// ValidateTag checks the name of a tag about to be created with shape s:
// leaf.ValidateTag, and for a periodic tag at most leaf.MaxPeriodicTagLen
// bytes, since its period rows add a key to the name.
func ValidateTag(tag string, s leaf.TagShape) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if s.Period != leaf.PeriodNone && len(tag) > leaf.MaxPeriodicTagLen {
		return fmt.Errorf("%w: %d bytes; a periodic tag's name has at most %d, leaving room for the period its rows add (%s%c20261124)",
			leaf.ErrInvalidTag, len(tag), leaf.MaxPeriodicTagLen, truncate(tag, 20), leaf.PeriodSep)
	}
	return nil
}

// Location is the zone of a TagShape.TimeZone setting: UTC for "".
func Location(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %v", leaf.ErrInvalidArgument, truncate(tz, 40), err)
	}
	return loc, nil
}

// PeriodKey is the key of the period of p that holds t, in t's location:
// yyyymmdd, yyyymm or yyyy. It is "" for leaf.PeriodNone. Keys of one period
// sort as their periods do. Years outside 1..9999 have no key: their
// periods are those of the nearest year that has one.
func PeriodKey(p leaf.Period, t time.Time) string {
	y, m, d := t.Date()
	return periodKey(p, y, m, d)
}

func periodKey(p leaf.Period, y int, m time.Month, d int) string {
	y = min(max(y, 1), 9999)
	var b [leaf.MaxPeriodKeyLen]byte
	put := func(at, v, digits int) {
		for i := at + digits - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, y, 4)
	switch p {
	case leaf.PeriodYear:
		return string(b[:4])
	case leaf.PeriodMonth:
		put(4, int(m), 2)
		return string(b[:6])
	case leaf.PeriodDay:
		put(4, int(m), 2)
		put(6, d, 2)
		return string(b[:8])
	}
	return ""
}

// PeriodKeyBefore is the key of the period n periods before the one that
// holds t (n = 0: t's own), in t's location.
func PeriodKeyBefore(p leaf.Period, t time.Time, n int) string {
	y, m, d := t.Date()
	switch p {
	case leaf.PeriodDay:
		y, m, d = time.Date(y, m, d-n, 12, 0, 0, 0, time.UTC).Date()
	case leaf.PeriodMonth:
		y, m, _ = time.Date(y, m-time.Month(n), 1, 12, 0, 0, 0, time.UTC).Date()
	case leaf.PeriodYear:
		y -= n
	}
	return periodKey(p, y, m, d)
}

// ValidatePeriodKey checks a period key: 4, 6 or 8 digits, a year, a month
// or a day of the calendar. Errors wrap leaf.ErrInvalidArgument.
func ValidatePeriodKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: period %q: %s", leaf.ErrInvalidArgument, truncate(key, 20), why)
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
	if key[:4] == "0000" {
		return bad("year 0000")
	}
	if msg := checkDate(key); msg != "" {
		return bad(msg)
	}
	return nil
}

// PeriodKeyLen is the length of p's keys; 0 for leaf.PeriodNone.
func PeriodKeyLen(p leaf.Period) int {
	switch p {
	case leaf.PeriodDay:
		return 8
	case leaf.PeriodMonth:
		return 6
	case leaf.PeriodYear:
		return 4
	}
	return 0
}
