package testutil

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// ErrIs reports a test failure unless errors.Is(err, want).
func ErrIs(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// CheckUnique sorts ids and fails the test if any ID is in it twice, naming
// the first few.
func CheckUnique(t testing.TB, ids []int64) {
	t.Helper()
	slices.Sort(ids)
	dups := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			if dups < 10 {
				t.Errorf("duplicate ID %d", ids[i])
			}
			dups++
		}
	}
	if dups > 0 {
		t.Fatalf("%d duplicate IDs among %d", dups, len(ids))
	}
}

// Clock is a settable clock for segment.Config.Now, safe for concurrent
// use: tests move it across period boundaries.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock {
	c := new(Clock)
	c.Set(t)
	return c
}

// Now reads the clock.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// Offset is a clock that reads c moved by d: a server whose clock is off.
func (c *Clock) Offset(d time.Duration) func() time.Time {
	return func() time.Time { return c.Now().Add(d) }
}

// StatusOf is tag's entry in a generator's status listing, the zero
// status when it has none (no state for the tag there).
func StatusOf(g interface{ Status() []leaf.SegmentStatus }, tag string) leaf.SegmentStatus {
	for _, st := range g.Status() {
		if st.Tag == tag {
			return st
		}
	}
	return leaf.SegmentStatus{}
}

// MaxID is the max_id of tag's row in st.
func MaxID(t testing.TB, st leaf.SegmentStore, tag string) int64 {
	t.Helper()
	a, err := st.Alloc(context.Background(), tag)
	if err != nil {
		t.Fatal(err)
	}
	return a.MaxID
}
