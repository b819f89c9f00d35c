package segment

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
)

// A stopped buffer's unused tail is claimed for a give-back once: the
// idle sweep and Close may both come to a past period's buffer, and a
// second give-back of one tail succeeds whenever another server has since
// reserved exactly that range, which it would then share.
func TestTailClaimedOnce(t *testing.T) {
	ctx := context.Background()
	st := testutil.Store(t)
	if err := st.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100}); err != nil {
		t.Fatal(err)
	}
	s := DefaultConfig()
	s.Store, s.Logger = st, slog.New(slog.DiscardHandler)
	g, err := New(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(ctx) })
	if _, err := g.NextIDs(ctx, "t", 10, nil); err != nil {
		t.Fatal(err)
	}
	b, err := g.buffer("t")
	if err != nil {
		t.Fatal(err)
	}
	b.ids.Stop(errors.New("stopped by the test"))
	from, expect, ok := b.claimTail()
	if !ok || from != 11 || expect < 101 {
		t.Fatalf("first claim = [%d, %d) %v, want the unused rest from 11", from, expect, ok)
	}
	if f, e, ok := b.claimTail(); ok {
		t.Fatalf("second claim = [%d, %d): a tail given back twice", f, e)
	}
}
