package segment_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// Busiest reports the same statuses as Status for the n busiest tags and
// the tags asked for, and nothing else.
func TestBusiest(t *testing.T) {
	var rows []leaf.Alloc
	for i := range 20 {
		rows = append(rows, leaf.Alloc{Tag: fmt.Sprintf("t%02d", i), MaxID: 1, Step: 1000})
	}
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := newGen(t, settings(testutil.Store(t, rows...), func(s *segment.Config) { s.Now = clk.Now }))
	g.Sample()
	for i, r := range rows {
		if _, err := g.NextIDs(bg, r.Tag, 1+(i*7)%20, nil); err != nil { // rates in a scrambled order
			t.Fatal(err)
		}
	}
	clk.Advance(2 * time.Second)
	g.Sample()

	all := g.Status()
	byRank := slices.Clone(all)
	slices.SortFunc(byRank, func(a, b leaf.SegmentStatus) int {
		if leaf.Busier(&a, &b) {
			return -1
		}
		return 1
	})
	want := slices.Clone(byRank[:3])
	for _, st := range all {
		if st.Tag == "t00" || st.Tag == "t19" {
			if !slices.ContainsFunc(want, func(w leaf.SegmentStatus) bool { return w.Tag == st.Tag }) {
				want = append(want, st)
			}
		}
	}
	slices.SortFunc(want, func(a, b leaf.SegmentStatus) int { return strings.Compare(a.Tag, b.Tag) })
	got := g.Busiest(3, "t00", "t19", "not-in-use")
	if len(got) != len(want) {
		t.Fatalf("Busiest = %d statuses %v, want %d", len(got), tags(got), len(want))
	}
	for i := range want {
		if got[i].Tag != want[i].Tag || got[i].Rate != want[i].Rate || got[i].Issued != want[i].Issued || got[i].Remaining != want[i].Remaining {
			t.Errorf("Busiest[%d] = %s %.1f/s %d issued, want %s %.1f/s %d issued", i, got[i].Tag, got[i].Rate, got[i].Issued, want[i].Tag, want[i].Rate, want[i].Issued)
		}
	}
}

func tags(st []leaf.SegmentStatus) []string {
	var out []string
	for _, s := range st {
		out = append(out, s.Tag)
	}
	return out
}
