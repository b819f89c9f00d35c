package inmem_test

import (
	"errors"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/inmem"
)

// A shape is fixed at creation and outlives the tag: created again, a tag
// keeps the shape it was deleted with, or is refused.
func TestTagShapeOutlivesDelete(t *testing.T) {
	ctx := t.Context()
	st := inmem.NewSegmentStore()
	daily := leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai", Format: leaf.IDFormat{Prefix: "ORD-", Width: 6}}
	if err := st.CreateShapedTag(ctx, leaf.Alloc{Tag: "orders", Step: 10}, daily); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTag(ctx, leaf.Alloc{Tag: "plain", Step: 10}); err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]leaf.TagShape{"orders": daily, "plain": {}, "never-created": {}} {
		if got, err := st.TagShape(ctx, tag); err != nil || got != want {
			t.Errorf("TagShape(%s) = %v, %v; want %v", tag, got, err, want)
		}
	}
	if err := st.CreateShapedTag(ctx, leaf.Alloc{Tag: "utc", Step: 10}, leaf.TagShape{Period: leaf.PeriodDay, Format: leaf.IDFormat{Width: 4}}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"orders", "plain", "utc"} {
		if err := st.DeleteTag(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		tag   string
		shape leaf.TagShape
		ok    bool
	}{
		{"orders", leaf.TagShape{}, false},
		{"orders", leaf.TagShape{Period: leaf.PeriodDay}, false},
		{"plain", leaf.TagShape{OpaqueBits: 32}, false},
		{"orders", daily, true},
		{"utc", leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "UTC", Format: leaf.IDFormat{Radix: 10, Width: 4}}, true},
		{"plain", leaf.TagShape{}, true},
	} {
		err := st.CreateShapedTag(ctx, leaf.Alloc{Tag: tc.tag, Step: 10}, tc.shape)
		var se *leaf.ShapeError
		switch {
		case tc.ok && err != nil:
			t.Errorf("create %s as %v: %v", tc.tag, tc.shape, err)
		case !tc.ok && (!errors.As(err, &se) || !errors.Is(err, leaf.ErrTagTombstoned)):
			t.Errorf("create %s as %v = %v, want a *leaf.ShapeError", tc.tag, tc.shape, err)
		}
	}
	if err := st.CreateShapedTag(ctx, leaf.Alloc{Tag: "bad", Step: 10}, leaf.TagShape{Period: "week"}); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("period week: %v, want ErrInvalidArgument", err)
	}
}
