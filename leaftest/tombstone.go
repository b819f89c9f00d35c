package leaftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// TombstoneSegment checks deleted tags across servers: segment generators,
// each on its own instance of the store from open (like servers sharing one
// database). A deleted tag's IDs never come back, the server that deletes
// drops the tag at once, and the others within their refresh interval, or
// as soon as they try to reserve.
func TombstoneSegment(t *testing.T, open Opener) {
	t.Run("HammerDeleteRecreate", func(t *testing.T) { tombstoneHammer(t, open) })
	t.Run("OtherServerDropsOnRefresh", func(t *testing.T) { otherDropsOnRefresh(t, open) })
	t.Run("OtherServerReserveNotFound", func(t *testing.T) { otherReserveNotFound(t, open) })
	t.Run("RecreatedBetweenRefreshes", func(t *testing.T) { recreatedBetweenRefreshes(t, open) })
}

// server is one generator on its own store instance.
type server struct {
	g   *segment.Generator
	st  leaf.SegmentStore
	adm leaf.SegmentAdmin
}

func newServer(t *testing.T, open Opener, s segment.Config) server {
	t.Helper()
	st, err := open()
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	adm, ok := st.(leaf.SegmentAdmin)
	if !ok {
		t.Fatalf("store %T has no admin", st)
	}
	s.Store = st
	g, err := segment.New(context.Background(), s)
	if err != nil {
		t.Fatalf("new generator: %v", err)
	}
	// Cleanups run last-in first-out: the generator closes (and gives
	// back) before its store.
	t.Cleanup(func() { _ = st.Close() })
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return server{g, st, adm}
}

func uniqueTag(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// tombstoneHammer: two servers issue IDs for one tag from many goroutines
// while the tag is deleted and created again (without a start) several
// times through one of them. Every ID either issued must be unique.
func tombstoneHammer(t *testing.T, open Opener) {
	const workers, cycles = 8, 6
	ctx := context.Background()
	tag := uniqueTag("tomb-hammer")
	set := segmentSettings(func(s *segment.Config) { s.MaxStep, s.WaitTimeout = 20, 5*time.Second })
	a := newServer(t, open, set)
	set.RefreshInterval = 20 * time.Millisecond
	b := newServer(t, open, set)
	if err := a.adm.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 20}); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	servers := []server{a, b}

	var (
		mu       sync.Mutex
		all      []int64
		wg       sync.WaitGroup
		stop     atomic.Bool
		notFound atomic.Int64
		maxSeen  [2]atomic.Int64
	)
	for i, s := range servers {
		for w := range workers {
			wg.Go(func() {
				var mine, buf []int64
				for call := 0; !stop.Load(); call++ {
					var err error
					buf = buf[:0]
					if call%4 == 3 {
						// IDs returned before an error were issued too.
						buf, err = s.g.NextIDs(ctx, tag, 5, buf)
					} else {
						var id int64
						if id, err = s.g.NextID(ctx, tag); err == nil {
							buf = append(buf, id)
						}
					}
					mine = append(mine, buf...)
					for _, id := range buf {
						raise(&maxSeen[i], id)
					}
					switch {
					case err == nil:
					case errors.Is(err, leaf.ErrTagNotFound) || errors.Is(err, leaf.ErrNotReady):
						// Between a delete and the creation after it.
						notFound.Add(1)
						time.Sleep(100 * time.Microsecond)
					default:
						t.Errorf("server %d worker %d: %v", i, w, err)
						stop.Store(true)
					}
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
		}
	}

	var lastStart int64
	for c := range cycles {
		time.Sleep(25 * time.Millisecond)
		if err := a.g.DeleteTag(ctx, tag); err != nil {
			t.Errorf("cycle %d: delete: %v", c, err)
			break
		}
		time.Sleep(2 * time.Millisecond)
		if err := a.g.CreateTag(ctx, leaf.Alloc{Tag: tag, Step: 20}); err != nil {
			t.Errorf("cycle %d: create: %v", c, err)
			break
		}
		row, err := a.st.Alloc(ctx, tag)
		if err != nil {
			t.Errorf("cycle %d: read row: %v", c, err)
			break
		}
		lastStart = row.MaxID // at or above the new row's start
	}
	// Both servers must serve the last incarnation of the tag.
	deadline := time.Now().Add(10 * time.Second)
	for !t.Failed() && (maxSeen[0].Load() < lastStart || maxSeen[1].Load() < lastStart) {
		if time.Now().After(deadline) {
			t.Errorf("after the last re-creation (row at %d) the servers issued at most %d and %d",
				lastStart, maxSeen[0].Load(), maxSeen[1].Load())
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	testutil.CheckUnique(t, all)
	if len(all) == 0 {
		t.Fatal("no IDs issued")
	}
	t.Logf("%d unique IDs in [%d, %d] over %d deletions; %d requests found the tag missing",
		len(all), all[0], all[len(all)-1], cycles, notFound.Load())
}

// otherDropsOnRefresh: a server that did not do the delete, and still has
// IDs buffered, stops issuing them within its refresh interval.
func otherDropsOnRefresh(t *testing.T, open Opener) {
	ctx := context.Background()
	const refresh = 50 * time.Millisecond
	tag := uniqueTag("tomb-refresh")
	a := newServer(t, open, segmentSettings(nil))
	b := newServer(t, open, segmentSettings(func(s *segment.Config) { s.RefreshInterval = refresh }))
	if err := a.adm.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 1000}); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	if _, err := b.g.NextID(ctx, tag); err != nil { // b holds [1, 1001)
		t.Fatalf("b: %v", err)
	}
	if _, err := a.g.NextID(ctx, tag); err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := a.g.DeleteTag(ctx, tag); err != nil {
		t.Fatalf("delete: %v", err)
	}
	deleted := time.Now()
	// The server that deleted drops the tag at once.
	if _, err := a.g.NextID(ctx, tag); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Errorf("a right after its delete: %v, want ErrTagNotFound", err)
	}
	// b issues from its buffer until its refresh finds the row gone.
	issued := 0
	for {
		_, err := b.g.NextID(ctx, tag)
		if errors.Is(err, leaf.ErrTagNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("b after the delete: %v", err)
		}
		issued++
		if took := time.Since(deleted); took > 10*refresh {
			t.Fatalf("b still issues the deleted tag %v after the delete (refresh interval %v)", took, refresh)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(deleted)
	if issued >= 999 {
		t.Errorf("b issued %d IDs after the delete: it ran out rather than dropped the tag", issued)
	}
	for _, st := range b.g.Status() {
		if st.Tag == tag {
			t.Errorf("b still lists the deleted tag: %+v", st)
		}
	}
	t.Logf("b dropped the deleted tag %v after the delete (refresh every %v), having issued %d buffered IDs", took.Round(time.Millisecond), refresh, issued)
}

// otherReserveNotFound: a server that did not do the delete answers "not
// found" as soon as it needs a range, without waiting for its refresh.
func otherReserveNotFound(t *testing.T, open Opener) {
	ctx := context.Background()
	tag := uniqueTag("tomb-reserve")
	a := newServer(t, open, segmentSettings(nil))
	b := newServer(t, open, segmentSettings(func(s *segment.Config) { s.RefreshInterval = time.Hour }))
	if err := a.adm.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 5}); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	if _, err := b.g.NextID(ctx, tag); err != nil {
		t.Fatalf("b: %v", err)
	}
	testutil.WaitFor(t, "b's second range", func() bool { return statusOf(b.g, tag).NextReady })
	if err := a.g.DeleteTag(ctx, tag); err != nil {
		t.Fatalf("delete: %v", err)
	}
	deleted := time.Now()
	issued := 0
	var err error
	for issued <= 10 {
		var id int64
		if id, err = b.g.NextID(ctx, tag); err != nil {
			break
		}
		if id >= 11 {
			t.Fatalf("b issued %d after the delete, beyond its two ranges [1, 11)", id)
		}
		issued++
	}
	if !errors.Is(err, leaf.ErrTagNotFound) {
		t.Fatalf("b after %d buffered IDs: %v, want ErrTagNotFound", issued, err)
	}
	if took := time.Since(deleted); took > 2*time.Second {
		t.Errorf("b took %v to find the tag gone", took)
	}
	if _, err := b.g.NextID(ctx, tag); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Errorf("b asked again: %v, want ErrTagNotFound", err)
	}
	if st := statusOf(b.g, tag); st.Tag != "" {
		t.Errorf("b still lists the deleted tag: %+v", st)
	}
}

// recreatedBetweenRefreshes: the tag is deleted and created again between
// two refreshes of a server that holds ranges of the old row. Those IDs lie
// below the tombstone, so the server may finish them; its next range comes
// from the new row.
func recreatedBetweenRefreshes(t *testing.T, open Opener) {
	ctx := context.Background()
	tag := uniqueTag("tomb-recreate")
	a := newServer(t, open, segmentSettings(nil))
	b := newServer(t, open, segmentSettings(func(s *segment.Config) { s.RefreshInterval = time.Hour }))
	if err := a.adm.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 5}); err != nil {
		t.Fatalf("create tag: %v", err)
	}
	var bIDs, aIDs []int64
	id, err := b.g.NextID(ctx, tag)
	if err != nil {
		t.Fatalf("b: %v", err)
	}
	bIDs = append(bIDs, id)
	// b: [1, 6), [6, 11)
	testutil.WaitFor(t, "b's second range", func() bool { return statusOf(b.g, tag).NextReady })
	if id, err = a.g.NextID(ctx, tag); err != nil { // a: [11, 16), maybe [16, 21) too
		t.Fatalf("a: %v", err)
	}
	aIDs = append(aIDs, id)
	testutil.WaitFor(t, "a's loads", func() bool { return !statusOf(a.g, tag).Loading })
	before, err := a.st.Alloc(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	tomb := before.MaxID
	if err := a.g.DeleteTag(ctx, tag); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := a.g.CreateTag(ctx, leaf.Alloc{Tag: tag, Step: 5}); err != nil {
		t.Fatalf("re-create: %v", err)
	}
	row, err := a.st.Alloc(ctx, tag)
	if err != nil || row.MaxID != tomb {
		t.Fatalf("re-created row: %+v, %v; want max_id %d, above every ID issued", row, err, tomb)
	}
	for range 30 {
		id, err := b.g.NextID(ctx, tag)
		if err != nil {
			t.Fatalf("b after the re-creation, having issued %v: %v", bIDs, err)
		}
		if id <= bIDs[len(bIDs)-1] {
			t.Fatalf("b issued %d after %d", id, bIDs[len(bIDs)-1])
		}
		if id >= 11 && id < tomb {
			t.Fatalf("b issued %d, from what a reserved before the delete, [11, %d)", id, tomb)
		}
		bIDs = append(bIDs, id)
		if id, err = a.g.NextID(ctx, tag); err != nil {
			t.Fatalf("a after the re-creation: %v", err)
		}
		aIDs = append(aIDs, id)
	}
	if last := bIDs[len(bIDs)-1]; last < tomb {
		t.Errorf("b never reserved from the new row: last ID %d", last)
	}
	all := slices.Concat(aIDs, bIDs)
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Errorf("duplicate ID %d (a issued %v, b issued %v)", all[i], aIDs, bIDs)
		}
	}
}

// raise sets m to v if v is larger.
func raise(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}
