package grpcapi_test

import (
	"slices"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// A periodic tag's answers name the period their IDs belong to; each period
// restarts at the start value. A plain tag's name none.
func TestPeriodicTag(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	st := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10})
	if err := st.CreateShapedTag(t.Context(), leaf.Alloc{Tag: "daily", MaxID: 1, Step: 10},
		leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai"}); err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(time.Date(2026, 11, 24, 23, 59, 59, 0, loc))
	c := client(t, grpcapi.Config{Segment: newSegment(t, st, func(s *segment.Config) { s.Now = clk.Now })})
	ctx := ctxFor(t)

	one, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "daily"})
	if err != nil || one.GetId() != 1 || one.GetPeriod() != "20261124" {
		t.Errorf("NextID = %v, %v; want 1 in 20261124", one, err)
	}
	batch, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "daily", Count: 3})
	if err != nil || !slices.Equal(batch.GetIds(), []int64{2, 3, 4}) || batch.GetPeriod() != "20261124" {
		t.Errorf("NextIDs = %v, %v", batch, err)
	}
	clk.Add(time.Second) // midnight in Shanghai
	r, err := c.Range(ctx, &leafv1.RangeRequest{Tag: "daily", Count: 4})
	if err != nil || r.GetStart() != 1 || r.GetEnd() != 5 || r.GetPeriod() != "20261125" {
		t.Errorf("Range = %v, %v; want [1, 5) in 20261125", r, err)
	}
	plain, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "plain"})
	if err != nil || plain.GetPeriod() != "" {
		t.Errorf("NextID of a plain tag = %v, %v; want no period", plain, err)
	}
}
