package grpcapi_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/tagshape"
	"google.golang.org/grpc/codes"
)

// A tag with a format is answered with its IDs formatted too; a plain
// tag's answers carry none; a formatted tag has no ranges; a sequence past
// the width is FailedPrecondition with the tag, format and largest
// sequence, and no ID.
func TestFormattedTag(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10})
	for tag, f := range map[string]leaf.IDFormat{
		"inv":  {Prefix: "INV", Width: 4, Radix: leaf.Radix36},
		"tiny": {Prefix: "T-", Width: 1},
	} {
		if err := st.CreateShapedTag(t.Context(), leaf.Alloc{Tag: tag, MaxID: 1, Step: 5}, leaf.TagShape{Format: f}); err != nil {
			t.Fatal(err)
		}
	}
	c := client(t, grpcapi.Config{Segment: newSegment(t, st, nil)})
	ctx := ctxFor(t)

	one, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "inv"})
	if err != nil || one.GetId() != 1 || one.GetFormatted() != "INV0001" {
		t.Fatalf("NextID = %v, %v; want 1 INV0001", one, err)
	}
	batch, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "inv", Count: 40})
	if err != nil || len(batch.GetFormatted()) != 40 {
		t.Fatalf("NextIDs = %v, %v", batch, err)
	}
	for i, s := range batch.GetFormatted() {
		if _, seq, err := tagshape.Parse(leaf.IDFormat{Prefix: "INV", Width: 4, Radix: leaf.Radix36}, leaf.PeriodNone, s); err != nil || seq != batch.GetIds()[i] {
			t.Errorf("formatted[%d] = %q (%d, %v), want ID %d", i, s, seq, err, batch.GetIds()[i])
		}
	}
	if got := batch.GetFormatted()[39]; got != "INV0015" { // 41 in radix 36
		t.Errorf("last formatted %q, want INV0015", got)
	}
	plain, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "plain", Count: 2})
	if err != nil || plain.GetFormatted() != nil {
		t.Errorf("NextIDs of a plain tag = %v, %v; want nothing formatted", plain, err)
	}
	r, err := c.Range(ctx, &leafv1.RangeRequest{Tag: "inv", Count: 3})
	checkStatus(t, r != nil, err, codes.InvalidArgument, "tag inv has the ID format INV{seq:4:36}: its IDs cannot be leased")

	for i := int64(1); i <= 9; i++ {
		if one, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "tiny"}); err != nil || one.GetFormatted() != fmt.Sprintf("T-%d", i) {
			t.Fatalf("NextID(tiny) = %v, %v; want T-%d", one, err, i)
		}
	}
	one, err = c.NextID(ctx, &leafv1.NextIDRequest{Tag: "tiny"})
	checkStatus(t, one != nil, err, codes.FailedPrecondition, "tag tiny: ")
	checkStatus(t, one != nil, err, codes.FailedPrecondition, "format T-{seq:1} holds sequences up to 9")
	batch, err = c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "tiny", Count: 2})
	checkStatus(t, batch != nil, err, codes.FailedPrecondition, "holds sequences up to 9")
}

// Many goroutines on one connection take a formatted tag's IDs: every
// formatted ID is unique.
func TestFormattedHammer(t *testing.T) {
	st := testutil.Store(t)
	f := leaf.IDFormat{Prefix: "X:", Width: 6, Radix: leaf.Radix62}
	if err := st.CreateShapedTag(t.Context(), leaf.Alloc{Tag: "x", MaxID: 1, Step: 50}, leaf.TagShape{Format: f}); err != nil {
		t.Fatal(err)
	}
	c := client(t, grpcapi.Config{Segment: newSegment(t, st, nil)})
	const workers, calls = 16, 100
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := ctxFor(t)
			for i := range calls {
				var got []string
				if (w+i)%2 == 0 {
					one, err := c.NextID(ctx, &leafv1.NextIDRequest{Tag: "x"})
					if err != nil {
						t.Error(err)
						return
					}
					got = []string{one.GetFormatted()}
				} else {
					b, err := c.NextIDs(ctx, &leafv1.NextIDsRequest{Tag: "x", Count: 9})
					if err != nil {
						t.Error(err)
						return
					}
					got = b.GetFormatted()
				}
				mu.Lock()
				for _, s := range got {
					if seen[s] || len(s) != 8 {
						t.Errorf("formatted ID %q: repeated or not 8 bytes", s)
					}
					seen[s] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := workers * calls / 2 * (1 + 9); len(seen) != want {
		t.Errorf("%d formatted IDs, want %d", len(seen), want)
	}
}
