package client

import (
	"context"
	"sync"
	"time"
)

// StartAt makes c's next call start at endpoint i, for tests that need to
// know which server is tried first.
func StartAt(c *Client, i int) { c.rr.Store(uint64(i)) }

// SetClock replaces the clock a Buffered measures its rate with, and
// starts the measurement over: the first lease may already have been sized
// on the real clock, and an interval from a reading of one clock to one of
// the other would be a rate of nonsense (negative, under a fixed clock
// that is behind).
func SetClock(b *Buffered, now func() time.Time) {
	b.mu.Lock()
	b.now = now
	b.lastAt = time.Time{}
	b.mu.Unlock()
}

// LapseOwners makes every ordered tag's known owner lapse, as ownerTTL
// after it was learnt.
func LapseOwners(c *Client) {
	c.owners.Range(func(k, v any) bool {
		h := v.(ownerHint)
		h.until = 0
		c.owners.Store(k, h)
		return true
	})
}

// RecordPauses makes c record the pauses between rounds it asks for, and
// not sleep: the returned function lists them so far.
func RecordPauses(c *Client) func() []time.Duration {
	var (
		mu     sync.Mutex
		pauses []time.Duration
	)
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		pauses = append(pauses, d)
		mu.Unlock()
		return ctx.Err()
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), pauses...)
	}
}
