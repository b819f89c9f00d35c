package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// The client names a periodic tag's period; the methods without it still
// answer the numbers, and a Buffered refuses the tag.
func TestPeriodicTag(t *testing.T) {
	st := newStore(t, 10, "plain")
	if err := st.CreateShapedTag(context.Background(), leaf.Alloc{Tag: "monthly", MaxID: 1, Step: 10},
		leaf.TagShape{Period: leaf.PeriodMonth}); err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC))
	s := serve(t, httpapi.Config{Segment: startSegment(t, st, func(s *segment.Config) { s.Now = clk.Now })})
	c := newClient(t, []string{s.URL})
	ctx := testutil.Context(t, time.Minute)

	id, period, err := c.NextIDPeriod(ctx, "monthly")
	if err != nil || id != 1 || period != "202611" {
		t.Errorf("NextIDPeriod = %d %q, %v; want 1 in 202611", id, period, err)
	}
	if id, err := c.NextID(ctx, "monthly"); err != nil || id != 2 {
		t.Errorf("NextID = %d, %v; want 2", id, err)
	}
	ids, period, err := c.NextIDsPeriod(ctx, "monthly", 2)
	if err != nil || !slices.Equal(ids, []int64{3, 4}) || period != "202611" {
		t.Errorf("NextIDsPeriod = %v %q, %v", ids, period, err)
	}
	clk.Add(time.Second)
	start, end, period, err := c.NextRangePeriod(ctx, "monthly", 3)
	if err != nil || start != 1 || end != 4 || period != "202612" {
		t.Errorf("NextRangePeriod = [%d, %d) %q, %v; want [1, 4) in 202612", start, end, period, err)
	}
	if _, period, err := c.NextIDPeriod(ctx, "plain"); err != nil || period != "" {
		t.Errorf("NextIDPeriod of a plain tag: %q, %v", period, err)
	}

	b, err := c.Buffered("monthly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for range 2 { // refused at once, and from then on
		if _, err := b.NextID(ctx); !errors.Is(err, client.ErrPeriodicTag) || !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Fatalf("Buffered.NextID of a periodic tag: %v, want ErrPeriodicTag", err)
		}
	}
}
