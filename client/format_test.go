package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// The client answers a formatted tag's IDs as its format writes them; a
// tag without a format is refused by the formatted methods; the width
// running out is ErrFormatExhausted, not retried; a Buffered refuses a
// formatted tag.
func TestFormattedTag(t *testing.T) {
	st := newStore(t, 10, "plain")
	for tag, shape := range map[string]leaf.TagShape{
		"orders": {Period: leaf.PeriodDay, Format: leaf.IDFormat{Prefix: "ORD-", Width: 6}},
		"tiny":   {Format: leaf.IDFormat{Width: 1, Radix: leaf.Radix62}},
	} {
		if err := st.CreateShapedTag(context.Background(), leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}, shape); err != nil {
			t.Fatal(err)
		}
	}
	clk := testutil.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	s := serve(t, httpapi.Config{Segment: startSegment(t, st, func(s *segment.Config) { s.Now = clk.Now })})
	c := newClient(t, []string{s.URL})
	ctx := testutil.Context(t, time.Minute)

	if got, err := c.NextIDFormatted(ctx, "orders"); err != nil || got != "ORD-20261124-000001" {
		t.Errorf("NextIDFormatted = %q, %v; want ORD-20261124-000001", got, err)
	}
	got, err := c.NextIDsFormatted(ctx, "orders", 3)
	if want := []string{"ORD-20261124-000002", "ORD-20261124-000003", "ORD-20261124-000004"}; err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("NextIDsFormatted = %q, %v; want %q", got, err, want)
	}
	if id, period, err := c.NextIDPeriod(ctx, "orders"); err != nil || id != 5 || period != "20261124" {
		t.Errorf("NextIDPeriod = %d %q, %v: the numbers stay", id, period, err)
	}
	if _, err := c.NextIDFormatted(ctx, "plain"); !errors.Is(err, client.ErrNotFormatted) {
		t.Errorf("NextIDFormatted of a plain tag: %v, want ErrNotFormatted", err)
	}
	if _, err := c.NextIDsFormatted(ctx, "plain", 2); !errors.Is(err, client.ErrNotFormatted) {
		t.Errorf("NextIDsFormatted of a plain tag: %v, want ErrNotFormatted", err)
	}
	if _, _, err := c.NextRange(ctx, "orders", 5); !errors.Is(err, client.ErrFormattedTag) || !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("Range of a formatted tag: %v, want ErrFormattedTag", err)
	}

	// tiny holds 61 sequences (radix 62, one digit).
	all, err := c.NextIDsFormatted(ctx, "tiny", 61)
	if err != nil || len(all) != 61 || all[0] != "1" || all[9] != "A" || all[60] != "z" {
		t.Fatalf("61 IDs of tiny: %q, %v", all, err)
	}
	if _, err := c.NextIDFormatted(ctx, "tiny"); !errors.Is(err, client.ErrFormatExhausted) {
		t.Fatalf("NextIDFormatted past the width: %v, want ErrFormatExhausted", err)
	}
	var ce *client.Error
	if _, err := c.NextIDsFormatted(ctx, "tiny", 1); !errors.As(err, &ce) || ce.StatusCode != 503 || ce.Code != "format_exhausted" {
		t.Fatalf("NextIDsFormatted past the width: %v, want a 503 format_exhausted", err)
	}

	b, err := c.Buffered("orders")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for range 2 { // refused at once, and from then on
		if _, err := b.NextID(ctx); !errors.Is(err, client.ErrFormattedTag) {
			t.Fatalf("Buffered.NextID of a formatted tag: %v, want ErrFormattedTag", err)
		}
	}
}

// Many goroutines take a formatted tag's IDs through one client: all
// unique.
func TestFormattedHammer(t *testing.T) {
	st := newStore(t, 10)
	if err := st.CreateShapedTag(context.Background(), leaf.Alloc{Tag: "h", MaxID: 1, Step: 20},
		leaf.TagShape{Format: leaf.IDFormat{Prefix: "h", Width: 5, Radix: leaf.Radix36}}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, httpapi.Config{Segment: startSegment(t, st, nil)})
	c := newClient(t, []string{s.URL})
	const workers, calls = 8, 50
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := testutil.Context(t, time.Minute)
			for i := range calls {
				var got []string
				if (w+i)%2 == 0 {
					one, err := c.NextIDFormatted(ctx, "h")
					if err != nil {
						t.Error(err)
						return
					}
					got = []string{one}
				} else {
					var err error
					if got, err = c.NextIDsFormatted(ctx, "h", 5); err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				for _, f := range got {
					if seen[f] || len(f) != 6 {
						t.Errorf("formatted ID %q: repeated or not 6 bytes", f)
					}
					seen[f] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := workers * calls / 2 * (1 + 5); len(seen) != want {
		t.Errorf("%d formatted IDs, want %d", len(seen), want)
	}
}
