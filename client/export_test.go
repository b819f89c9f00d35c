package client

// StartAt makes c's next call start at endpoint i, for tests that need to
// know which server is tried first.
func StartAt(c *Client, i int) { c.rr.Store(uint64(i)) }
