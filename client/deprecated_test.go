package client

import (
	"context"
	"testing"
)

// TestDeprecatedNames: the names of 0.x stay for one release (CHANGELOG),
// each the same call as its new name; a build without one fails here.
func TestDeprecatedNames(t *testing.T) {
	var _ interface {
		NextWithPeriod(context.Context, string) (int64, string, error)
		NextIDsWithPeriod(context.Context, string, int) ([]int64, string, error)
		NextFormatted(context.Context, string) (string, error)
		Range(context.Context, string, int) (int64, int64, error)
		RangeWithPeriod(context.Context, string, int) (int64, int64, string, error)
	} = (*Client)(nil)
	var _ interface {
		Next(context.Context) (int64, error)
	} = (*Buffered)(nil)
	// Each calls its new name: a closed Buffered answers both alike.
	c, err := New([]string{"http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Buffered("t")
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	_, oldErr := b.Next(t.Context())
	_, newErr := b.NextID(t.Context())
	if oldErr == nil || oldErr.Error() != newErr.Error() {
		t.Errorf("Next after Close = %v, NextID = %v; want the same error", oldErr, newErr)
	}
}
