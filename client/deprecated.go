package client

import "context"

// The names of 0.x, kept for one release so that callers can move at their
// pace; each is the operation of the same name on the server's generator.

// Deprecated: use NextIDPeriod.
func (c *Client) NextWithPeriod(ctx context.Context, tag string) (int64, string, error) {
	return c.NextIDPeriod(ctx, tag)
}

// Deprecated: use NextIDsPeriod.
func (c *Client) NextIDsWithPeriod(ctx context.Context, tag string, n int) ([]int64, string, error) {
	return c.NextIDsPeriod(ctx, tag, n)
}

// Deprecated: use NextIDFormatted.
func (c *Client) NextFormatted(ctx context.Context, tag string) (string, error) {
	return c.NextIDFormatted(ctx, tag)
}

// Deprecated: use NextRange.
func (c *Client) Range(ctx context.Context, tag string, n int) (start, end int64, err error) {
	return c.NextRange(ctx, tag, n)
}

// Deprecated: use NextRangePeriod.
func (c *Client) RangeWithPeriod(ctx context.Context, tag string, n int) (start, end int64, period string, err error) {
	return c.NextRangePeriod(ctx, tag, n)
}

// Deprecated: use NextID.
func (b *Buffered) Next(ctx context.Context) (int64, error) { return b.NextID(ctx) }
