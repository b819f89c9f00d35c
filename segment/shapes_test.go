package segment_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/faultstore"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// TagShape reads a tag's shape once and serves it from memory after; a
// deleted tag's entry goes; a name the store does not hold is refused
// without caching anything.
func TestTagShapeCached(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10})
	st, faults := faultstore.Wrap(db)
	shape := leaf.TagShape{Format: leaf.IDFormat{Prefix: "INV", Width: 8, Radix: leaf.Radix36}}
	if err := db.CreateShapedTag(bg, leaf.Alloc{Tag: "inv", MaxID: 1, Step: 10}, shape); err != nil {
		t.Fatal(err)
	}
	g := newGen(t, settings(st))
	for _, c := range []struct {
		tag  string
		want leaf.TagShape
	}{{"plain", leaf.TagShape{}}, {"inv", shape}} {
		got, err := g.TagShape(bg, c.tag)
		if err != nil || got != c.want {
			t.Fatalf("TagShape(%s) = %v, %v; want %v", c.tag, got, err, c.want)
		}
	}
	// From memory: the store being down does not matter.
	faults.SetDown(errors.New("store unplugged"))
	if got, err := g.TagShape(bg, "inv"); err != nil || got != shape {
		t.Fatalf("cached TagShape(inv) = %v, %v", got, err)
	}
	faults.SetDown(nil)
	// A tag's first load caches its shape: through an outage, a tag with
	// IDs buffered still has it.
	if err := db.CreateShapedTag(bg, leaf.Alloc{Tag: "loaded", MaxID: 1, Step: 10}, shape); err != nil {
		t.Fatal(err)
	}
	next(t, g, "loaded")
	faults.SetDown(errors.New("store unplugged"))
	if got, err := g.TagShape(bg, "loaded"); err != nil || got != shape {
		t.Fatalf("TagShape(loaded) after its first load = %v, %v", got, err)
	}
	faults.SetDown(nil)
	if _, err := g.TagShape(bg, "nosuch"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Fatalf("TagShape(nosuch) = %v, want ErrTagNotFound", err)
	}
	if _, err := g.TagShape(bg, "bad tag"); !errors.Is(err, leaf.ErrInvalidTag) {
		t.Fatalf("TagShape(bad tag) = %v, want ErrInvalidTag", err)
	}
	if err := g.DeleteTag(bg, "inv"); err != nil {
		t.Fatal(err)
	}
	faults.SetDown(errors.New("store unplugged"))
	if _, err := g.TagShape(bg, "inv"); err == nil {
		t.Fatal("TagShape of a deleted tag answered from memory; want a store read (failing here)")
	}
}

// degradedFormat is the Degraded reasons about formats.
func degradedFormat(g *segment.Generator) []string {
	return slices.DeleteFunc(g.Degraded(), func(r string) bool { return !strings.Contains(r, "format") })
}

// Degraded warns before a tag's sequence outgrows its format's width: when
// it lasts less than LowBuffer at the tag's rate, when the next range would
// cross it, and once it has; never for tags without a width.
func TestFormatWarning(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 1000})
	for _, c := range []struct {
		tag   string
		shape leaf.TagShape
	}{
		{"w4", leaf.TagShape{Format: leaf.IDFormat{Prefix: "ORD-", Width: 4}}},
		{"w2", leaf.TagShape{Format: leaf.IDFormat{Width: 2}}},
		{"free", leaf.TagShape{Format: leaf.IDFormat{Prefix: "F", Radix: leaf.Radix62}}},
	} {
		if err := st.CreateShapedTag(bg, leaf.Alloc{Tag: c.tag, MaxID: 1, Step: 1000}, c.shape); err != nil {
			t.Fatal(err)
		}
	}
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.Now = clk.Now
		s.LowBuffer = 60 * time.Second
		s.MaxStep = 1000
	}))
	for tag, n := range map[string]int{"plain": 400, "w4": 400, "w2": 99, "free": 400} {
		if _, err := g.NextIDs(bg, tag, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The first loads read the shapes: /readyz itself never reads the
	// store.
	// w2 holds 99, all issued: its range of 1000 crossed it. w4's 9999 is
	// beyond the range's step, and nothing has a rate yet.
	// (Once its next load has been refused, the buffer's own reason says
	// so too.)
	want := "tag w2: format {seq:2} has run out: sequence 100 is past 99, the largest it holds"
	if r := degradedFormat(g); !slices.Contains(r, want) || slices.ContainsFunc(r, func(r string) bool { return !strings.HasPrefix(r, "tag w2: ") }) {
		t.Fatalf("Degraded = %q, want %q (and nothing about other tags)", r, want)
	}

	// A rate: 400 IDs in 2s, 200 IDs/s; w4 has 9999-800 = 9199 left, 46s.
	g.Sample()
	testutil.WaitFor(t, "next range", func() bool { return testutil.StatusOf(g, "w4").NextReady })
	clk.Advance(2 * time.Second)
	if _, err := g.NextIDs(bg, "w4", 400, nil); err != nil {
		t.Fatal(err)
	}
	w4 := "tag w4: format ORD-{seq:4} runs out in 46s at 200 IDs/s (9199 of 9999 left; next range step 1000)"
	if r := degradedFormat(g); !slices.Contains(r, want) || !slices.Contains(r, w4) {
		t.Fatalf("Degraded = %q, want %q and %q", r, want, w4)
	}
}

// A periodic tag's sequence restarts each period: the warning is about
// the current period's, and goes when a new period starts.
func TestFormatWarningPeriodic(t *testing.T) {
	loc := shanghai(t)
	st := testutil.Store(t)
	shape := leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Asia/Shanghai", Format: leaf.IDFormat{Prefix: "D", Width: 3}}
	if err := st.CreateShapedTag(bg, leaf.Alloc{Tag: "daily", MaxID: 1, Step: 10}, shape); err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, loc))
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.Now = clk.Now
		s.MaxStep = 10
	}))
	if _, _, err := g.NextIDsPeriod(bg, "daily", 985, nil); err != nil {
		t.Fatal(err)
	}
	if r := degradedFormat(g); len(r) != 0 {
		t.Fatalf("Degraded with 14 left and a step of 10: %q", r)
	}
	if _, _, err := g.NextIDsPeriod(bg, "daily", 5, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"tag daily: format D{period}-{seq:3} runs out at the next range (9 of 999 left; next range step 10)"}
	if r := degradedFormat(g); !slices.Equal(r, want) {
		t.Fatalf("Degraded = %q, want %q", r, want)
	}
	clk.Add(24 * time.Hour)
	if _, key := nextPeriod(t, g, "daily"); key != "20261124" {
		t.Fatalf("period %s, want 20261124", key)
	}
	if r := degradedFormat(g); len(r) != 0 {
		t.Fatalf("Degraded in a new period: %q", r)
	}
}
