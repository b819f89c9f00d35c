package client

import "time"

// StartAt makes c's next call start at endpoint i, for tests that need to
// know which server is tried first.
func StartAt(c *Client, i int) { c.rr.Store(uint64(i)) }

// SetClock replaces the clock a Buffered measures its rate with.
func SetClock(b *Buffered, now func() time.Time) {
	b.mu.Lock()
	b.now = now
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
