package leaftest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/segment"
)

// EnvScaleRows names the environment variable that turns on RefreshCost:
// the number of rows to measure with (e.g. 1000000). Unset, RefreshCost
// skips: it is a measurement that takes seconds to minutes, kept out of the
// test suite; scripts/scale.sh sets it.
const EnvScaleRows = "LEAF_SCALE_ROWS"

// ScaleTag is the name RefreshCost's fill functions give row i (from 1):
// "scale-" and i in seven digits, so that names sort as numbers do.
func ScaleTag(i int) string { return fmt.Sprintf("scale-%07d", i) }

// RefreshCost measures what a generator's tag refresh costs on a store
// holding LEAF_SCALE_ROWS rows: the change-counter read that is the whole
// of a refresh when no tag was created or deleted, and the listing of every
// name that follows a change (and runs every FullRefreshEvery-th refresh anyway);
// then a generator's start-up and the heap its name set takes. fill inserts
// n rows named ScaleTag(1..n) into the database behind open, quickly (one
// INSERT ... SELECT from a generated sequence). The times are seen from the
// client, through the store's own driver: each is the database's time plus
// one loopback round trip.
func RefreshCost(t *testing.T, open Opener, fill func(t *testing.T, n int)) {
	t.Helper()
	n, err := strconv.Atoi(os.Getenv(EnvScaleRows))
	if err != nil || n <= 0 {
		t.Skipf("set %s to a number of rows to measure the refresh (scripts/scale.sh does)", EnvScaleRows)
	}
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	vs, ok := st.(leaf.SegmentVersioner)
	if !ok {
		t.Fatalf("%T keeps no change counter", st)
	}
	began := time.Now()
	fill(t, n)
	t.Logf("%d rows inserted in %v", n, time.Since(began).Round(time.Millisecond))

	const reads = 200
	durs := make([]time.Duration, 0, reads)
	for range reads {
		began := time.Now()
		if _, err := vs.TagsVersion(ctx); err != nil {
			t.Fatalf("TagsVersion: %v", err)
		}
		durs = append(durs, time.Since(began))
	}
	slices.Sort(durs)
	t.Logf("refresh with nothing changed (one change-counter read), %d reads: median %v, p99 %v, max %v",
		reads, durs[reads/2], durs[reads*99/100], durs[reads-1])

	var listing []time.Duration
	for range 3 {
		began := time.Now()
		tags, err := st.Tags(ctx)
		if err != nil {
			t.Fatalf("Tags: %v", err)
		}
		listing = append(listing, time.Since(began))
		if len(tags) != n {
			t.Fatalf("Tags listed %d, want %d", len(tags), n)
		}
	}
	slices.Sort(listing)
	t.Logf("full listing of %d names (after a change, and every FullRefreshEvery-th refresh): best %v, worst %v of 3",
		n, listing[0], listing[2])

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	began = time.Now()
	g, err := segment.New(ctx, segmentSettings(func(s *segment.Config) { s.Store, s.Logger = st, slog.New(slog.DiscardHandler) }))
	if err != nil {
		t.Fatalf("new generator: %v", err)
	}
	startup := time.Since(began)
	t.Cleanup(func() { g.Close(context.Background()) })
	if g.TagCount() != n {
		t.Fatalf("generator knows %d tags, want %d", g.TagCount(), n)
	}
	grown := float64(int64(heap()) - int64(before))
	t.Logf("generator start-up (one listing) %v; its name set holds %.1f MB (%.0f bytes a tag)",
		startup.Round(time.Millisecond), grown/1e6, grown/float64(n))
	if _, err := g.NextID(ctx, ScaleTag(n/2)); err != nil {
		t.Fatalf("NextID: %v", err)
	}
}
