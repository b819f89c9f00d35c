package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/faultstore"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

var bg = context.Background()

// settings is DefaultConfig on st, quiet unless -v, with tweaks applied.
func settings(st leaf.SegmentStore, tweaks ...func(*segment.Config)) segment.Config {
	s := segment.DefaultConfig()
	s.Store = st
	if !testing.Verbose() {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	for _, f := range tweaks {
		f(&s)
	}
	return s
}

func newGen(t *testing.T, s segment.Config) *segment.Generator {
	t.Helper()
	g, err := segment.New(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(bg) })
	return g
}

func next(t *testing.T, g *segment.Generator, tag string) int64 {
	t.Helper()
	id, err := g.NextID(bg, tag)
	if err != nil {
		t.Fatalf("NextID(%q): %v", tag, err)
	}
	return id
}

// TestSettingsValidation: New refuses every setting Validate refuses, with
// an error that names the field; DefaultConfig with a store is valid.
func TestSettingsValidation(t *testing.T) {
	st := testutil.Store(t)
	if err := settings(st).Validate(); err != nil {
		t.Fatalf("DefaultConfig with a store: %v", err)
	}
	for _, tc := range []struct {
		name  string
		tweak func(*segment.Config)
		want  string
	}{
		{"no store", func(s *segment.Config) { s.Store = nil }, "Store is required"},
		{"no logger", func(s *segment.Config) { s.Logger = nil }, "Logger is nil"},
		{"no clock", func(s *segment.Config) { s.Now = nil }, "Now is nil"},
		{"zero refresh", func(s *segment.Config) { s.RefreshInterval = 0 }, "RefreshInterval is 0s, want > 0"},
		{"negative refresh", func(s *segment.Config) { s.RefreshInterval = -time.Second }, "RefreshInterval is -1s"},
		{"zero health", func(s *segment.Config) { s.HealthInterval = 0 }, "HealthInterval"},
		{"zero negative TTL", func(s *segment.Config) { s.NegativeTTL = 0 }, "NegativeTTL"},
		{"zero wait", func(s *segment.Config) { s.WaitTimeout = 0 }, "WaitTimeout is 0s"},
		{"negative wait", func(s *segment.Config) { s.WaitTimeout = -1 }, "WaitTimeout"},
		{"zero store timeout", func(s *segment.Config) { s.StoreTimeout = 0 }, "StoreTimeout"},
		{"zero backoff", func(s *segment.Config) { s.RetryBackoff = 0 }, "RetryBackoff is 0s"},
		{"backoff cap below base", func(s *segment.Config) { s.MaxRetryBackoff = s.RetryBackoff / 2 }, "MaxRetryBackoff 25ms is below RetryBackoff 50ms"},
		{"zero idle", func(s *segment.Config) { s.IdleTimeout = 0 }, "IdleTimeout"},
		{"negative idle", func(s *segment.Config) { s.IdleTimeout = -time.Second }, "IdleTimeout"},
		{"max step zero", func(s *segment.Config) { s.MaxStep = 0 }, "MaxStep is 0, want 1..1000000"},
		{"max step too big", func(s *segment.Config) { s.MaxStep = leaf.MaxStep + 1 }, "MaxStep is 1000001"},
		{"max step negative", func(s *segment.Config) { s.MaxStep = -5 }, "MaxStep is -5"},
		{"no lookups", func(s *segment.Config) { s.LookupRate = 0 }, "LookupRate is 0"},
		{"negative lookups", func(s *segment.Config) { s.LookupRate = -1 }, "LookupRate is -1"},
		{"no burst", func(s *segment.Config) { s.LookupBurst = 0 }, "LookupBurst is 0"},
		{"no full refresh", func(s *segment.Config) { s.FullRefreshEvery = 0 }, "FullRefreshEvery is 0"},
		{"negative low buffer", func(s *segment.Config) { s.LowBuffer = -time.Second }, "LowBuffer is -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings(st, tc.tweak)
			_, err := segment.New(bg, s)
			testutil.ErrIs(t, err, leaf.ErrInvalidArgument)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error saying %q", err, tc.want)
			}
			if verr := s.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v, New = %v: want the same error", verr, err)
			}
		})
	}
}

func TestSequentialIDsFromOneServer(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "orders", MaxID: 1, Step: 10})
	g := newGen(t, settings(st))
	for want := int64(1); want <= 500; want++ {
		if got := next(t, g, "orders"); got != want {
			t.Fatalf("ID %d, want %d", got, want)
		}
	}
	ids, err := g.NextIDs(bg, "orders", 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != int64(501+i) {
			t.Fatalf("batch[%d] = %d, want %d", i, id, 501+i)
		}
	}
	start, end, err := g.NextRange(bg, "orders", 50)
	if err != nil || start != 1501 || end <= start || end > start+50 {
		t.Fatalf("NextRange = [%d,%d), %v; want [1501, <=1551)", start, end, err)
	}
}

func TestFirstRangeStartsAtStart(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1000, Step: 5})
	g := newGen(t, settings(st))
	if got := next(t, g, "t"); got != 1000 {
		t.Fatalf("first ID %d, want 1000", got)
	}
}

func TestBadInput(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 5})
	g := newGen(t, settings(st))
	for _, tag := range []string{"", "a b", "x/y", "semi;colon", "quote'", string(make([]byte, 129))} {
		_, err := g.NextID(bg, tag)
		testutil.ErrIs(t, err, leaf.ErrInvalidTag)
	}
	for _, n := range []int{0, -1, leaf.MaxBatch + 1} {
		_, err := g.NextIDs(bg, "t", n, nil)
		testutil.ErrIs(t, err, leaf.ErrInvalidCount)
	}
	for _, n := range []int{0, -1, leaf.MaxRange + 1} {
		_, _, err := g.NextRange(bg, "t", n)
		testutil.ErrIs(t, err, leaf.ErrInvalidCount)
	}
	// A range is two numbers: it may ask for more than a batch, and gets
	// at most what is left of the segment.
	if s, e, err := g.NextRange(bg, "t", leaf.MaxBatch+1); err != nil || e-s < 1 || e-s > 5 {
		t.Errorf("NextRange(MaxBatch+1) = [%d, %d), %v; want at most the step of 5", s, e, err)
	}
}

// TestTake: the ranges' one entry point refuses a use it does not know
// before it takes anything, and NextRange is Take by ByClient.
func TestTake(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10})
	g := newGen(t, settings(st))
	for _, use := range []leaf.RangeUse{0, leaf.ByForwarder + 1} {
		r, err := g.Take(bg, "t", 3, use)
		testutil.ErrIs(t, err, leaf.ErrInvalidArgument)
		if r != (leaf.IDRange{}) {
			t.Errorf("Take by use %d refused with %+v", use, r)
		}
	}
	r, err := g.Take(bg, "t", 3, leaf.ByClient)
	if err != nil || r != (leaf.IDRange{Start: 1, End: 4}) {
		t.Fatalf("Take by ByClient = %+v, %v; want [1, 4): nothing was taken before it", r, err)
	}
	if s, e, err := g.NextRange(bg, "t", 3); err != nil || s != 4 || e != 7 {
		t.Fatalf("NextRange = [%d, %d), %v; want [4, 7)", s, e, err)
	}
	if r, err = g.Take(bg, "t", 5, leaf.ByForwarder); err != nil || r != (leaf.IDRange{Start: 7, End: 11}) {
		t.Fatalf("Take by ByForwarder of a plain tag = %+v, %v; want the rest of the range, [7, 11)", r, err)
	}
	_, err = g.Take(bg, "t", 0, leaf.ByClient)
	testutil.ErrIs(t, err, leaf.ErrInvalidCount)
}

// countingStore counts the store calls of each kind, successful or not:
// each is one statement (or one transaction) on a SQL store.
type countingStore struct {
	*sqlite.Store
	mu    sync.Mutex
	calls map[string]int
}

func newCountingStore(st *sqlite.Store) *countingStore {
	return &countingStore{Store: st, calls: map[string]int{}}
}

func (c *countingStore) count(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

// Calls reports the calls of the kinds named, or of every kind.
func (c *countingStore) Calls(ops ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for op, k := range c.calls {
		if len(ops) == 0 || slices.Contains(ops, op) {
			n += k
		}
	}
	return n
}

func (c *countingStore) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	c.count("Reserve")
	return c.Store.Reserve(ctx, tag, step)
}

func (c *countingStore) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	c.count("Alloc")
	return c.Store.Alloc(ctx, tag)
}

func (c *countingStore) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	c.count("Allocs")
	return c.Store.Allocs(ctx)
}

func (c *countingStore) Tags(ctx context.Context) ([]string, error) {
	c.count("Tags")
	return c.Store.Tags(ctx)
}

func (c *countingStore) TagsVersion(ctx context.Context) (int64, error) {
	c.count("TagsVersion")
	return c.Store.TagsVersion(ctx)
}

func (c *countingStore) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	c.count("GiveBack")
	return c.Store.GiveBack(ctx, tag, from, expect)
}

func (c *countingStore) Ping(ctx context.Context) error {
	c.count("Ping")
	return c.Store.Ping(ctx)
}

func TestUnknownTag(t *testing.T) {
	st := newCountingStore(testutil.Store(t))
	g := newGen(t, settings(st, func(s *segment.Config) { s.NegativeTTL = time.Hour }))
	for range 3 {
		_, err := g.NextID(bg, "nope")
		testutil.ErrIs(t, err, leaf.ErrTagNotFound)
	}
	if _, err := st.Store.Alloc(bg, "nope"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Fatalf("an unknown tag created a row: %v", err)
	}
	// The lookup is one read, never a reserve: a made-up name takes no
	// write lock.
	if n, r := st.Calls("Alloc"), st.Calls("Reserve"); n != 1 || r != 0 {
		t.Fatalf("%d store lookups and %d reserves for the unknown tag, want 1 lookup (then the negative cache) and no reserve", n, r)
	}
	// Created through the generator: served at once despite the negative entry.
	if err := g.CreateTag(bg, leaf.Alloc{Tag: "nope", MaxID: 7, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, g, "nope"); got != 7 {
		t.Fatalf("first ID %d, want 7", got)
	}
}

func TestTagRefresh(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 5})
	g := newGen(t, settings(st, func(s *segment.Config) { s.RefreshInterval = 5 * time.Millisecond }))
	// Known from the initial listing, but no state until first use.
	if n, s := g.TagCount(), g.Status(); n != 1 || len(s) != 0 {
		t.Fatalf("TagCount %d, status %v; want tag a known from the initial listing and no state", n, s)
	}
	if err := st.CreateTag(bg, leaf.Alloc{Tag: "b", MaxID: 1, Step: 5}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "tag b picked up", func() bool { return g.TagCount() == 2 })
	next(t, g, "a")
	if s := g.Status(); len(s) != 1 || s[0].Tag != "a" {
		t.Fatalf("status %v after using a, want a alone", s)
	}
	if err := st.DeleteTag(bg, "a"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "tag a dropped", func() bool { return testutil.StatusOf(g, "a").Tag == "" && g.TagCount() == 1 })
	if _, err := g.NextID(bg, "a"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Fatalf("deleted tag: %v, want ErrTagNotFound", err)
	}
}

func TestDeleteTagThroughGenerator(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 5})
	g := newGen(t, settings(st))
	next(t, g, "a")
	if err := g.DeleteTag(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextID(bg, "a"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Fatalf("deleted tag: %v, want ErrTagNotFound", err)
	}
	testutil.ErrIs(t, g.DeleteTag(bg, "a"), leaf.ErrTagNotFound)
	testutil.ErrIs(t, g.SetStep(bg, "a", 10), leaf.ErrTagNotFound)
	testutil.ErrIs(t, g.SetStep(bg, "b", 0), leaf.ErrInvalidArgument)
	testutil.ErrIs(t, g.CreateTag(bg, leaf.Alloc{Tag: "c", MaxID: -1, Step: 5}), leaf.ErrInvalidArgument)
}

func TestPrefetchAtTenPercent(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
	g := newGen(t, settings(st))
	for range 10 { // IDs 1..10: value 11 is the trigger, not reached yet
		next(t, g, "t")
	}
	// The request that takes the trigger starts the load before it
	// returns, so a prefetch started too early is running or done by now.
	// The first load hands its range to the first request before it
	// counts itself: wait for its end, then no next range and one load
	// mean none was started.
	testutil.WaitFor(t, "the first load's end", func() bool { s := testutil.StatusOf(g, "t"); return !s.Loading && s.Loads >= 1 })
	if s := testutil.StatusOf(g, "t"); s.Loading || s.NextReady || s.Loads != 1 {
		t.Fatalf("after 10%% minus one: %+v, want one load, none running, and no next", s)
	}
	next(t, g, "t") // 11: the trigger
	if s := testutil.StatusOf(g, "t"); !s.Loading && !s.NextReady {
		t.Fatalf("after the trigger: %+v, want the next range loading or loaded", s)
	}
	// The load's end, when it counts itself, not only its range.
	testutil.WaitFor(t, "next range loaded", func() bool { s := testutil.StatusOf(g, "t"); return !s.Loading && s.NextReady })
	s := testutil.StatusOf(g, "t")
	if s.Loads != 2 || s.Buffers[1-s.Pos].Start != 101 || s.Buffers[1-s.Pos].Max != 201 {
		t.Fatalf("status %+v, want next range [101,201)", s)
	}
	if testutil.MaxID(t, st, "t") != 201 {
		t.Fatalf("max_id %d, want 201", testutil.MaxID(t, st, "t"))
	}
}

// TestWaitersQueueBehindLoad: requests that find both buffers empty wait for
// the one in-flight load instead of failing at once (Leaf#143).
func TestWaitersQueueBehindLoad(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 1000})
	st, faults := faultstore.Wrap(db)
	faults.SetDelay(150 * time.Millisecond)
	g := newGen(t, settings(st))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.NextID(bg, "t"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("waiter failed: %v", err)
	}
	if n := faults.Reserves(); n > 2 {
		t.Fatalf("%d reserves for a cold tag under 64 concurrent requests, want one load (plus at most one prefetch)", n)
	}
	// A request whose deadline ends before the load answers gets ErrNotReady.
	faults.SetDelay(time.Second)
	if err := db.CreateTag(bg, leaf.Alloc{Tag: "slow", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Millisecond)
	defer cancel()
	_, err := g.NextID(ctx, "slow")
	testutil.ErrIs(t, err, leaf.ErrNotReady)
}

func TestDefaultWaitTimeout(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10})
	st, faults := faultstore.Wrap(db)
	faults.SetDown(errors.New("connection refused"))
	g := newGen(t, settings(st, func(s *segment.Config) { s.WaitTimeout = 40 * time.Millisecond }))
	start := time.Now()
	_, err := g.NextID(bg, "t") // no deadline: WaitTimeout bounds it
	testutil.ErrIs(t, err, leaf.ErrNotReady)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("waited %s with a 40ms WaitTimeout", d)
	}
}

// TestWaitTimeoutCaps: WaitTimeout caps every wait of a request for a range,
// whatever the caller's deadline: with a store that hangs, a request with a
// 30s deadline gets ErrNotReady after WaitTimeout, one with a 50ms deadline
// after 50ms; for each request kind.
func TestWaitTimeoutCaps(t *testing.T) {
	const wait = 200 * time.Millisecond
	kinds := map[string]func(*segment.Generator, context.Context, string) error{
		"NextID": func(g *segment.Generator, ctx context.Context, tag string) error {
			_, err := g.NextID(ctx, tag)
			return err
		},
		"NextIDs": func(g *segment.Generator, ctx context.Context, tag string) error {
			_, err := g.NextIDs(ctx, tag, 5, nil)
			return err
		},
		"NextRange": func(g *segment.Generator, ctx context.Context, tag string) error {
			_, _, err := g.NextRange(ctx, tag, 5)
			return err
		},
	}
	deadlines := []struct {
		name        string
		deadline    time.Duration
		least, most time.Duration
	}{
		{"long deadline", 30 * time.Second, wait, wait + time.Second},
		{"short deadline", 50 * time.Millisecond, 50 * time.Millisecond, wait - 20*time.Millisecond},
	}
	var tags []leaf.Alloc
	for kind := range kinds {
		for _, d := range deadlines {
			tags = append(tags, leaf.Alloc{Tag: kind + "-" + strings.ReplaceAll(d.name, " ", "-"), MaxID: 1, Step: 10})
		}
	}
	db := testutil.Store(t, tags...)
	st, faults := faultstore.Wrap(db)
	faults.SetDelay(time.Hour) // every Reserve hangs
	g := newGen(t, settings(st, func(s *segment.Config) { s.WaitTimeout = wait; s.StoreTimeout = time.Hour }))
	t.Cleanup(func() {
		// Before newGen's Close: stop the hung loads at once.
		ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
		defer cancel()
		g.Close(ctx)
	})
	for kind, call := range kinds {
		for _, d := range deadlines {
			t.Run(kind+"/"+d.name, func(t *testing.T) {
				t.Parallel()
				// Timed from before the deadline is set: timed from after,
				// a pause between the two (a busy machine, -race) made the
				// call look as if it ended before its deadline.
				began := time.Now()
				ctx, cancel := context.WithTimeout(bg, d.deadline)
				defer cancel()
				err := call(g, ctx, kind+"-"+strings.ReplaceAll(d.name, " ", "-"))
				took := time.Since(began)
				testutil.ErrIs(t, err, leaf.ErrNotReady)
				if took < d.least || took > d.most {
					t.Errorf("%s with a %s deadline and a %s WaitTimeout answered after %s, want %s..%s",
						kind, d.deadline, wait, took, d.least, d.most)
				}
			})
		}
	}
}

// TestWaitTimeoutPerRequest: a batch that waits for several ranges waits
// WaitTimeout in all, not WaitTimeout per range.
func TestWaitTimeoutPerRequest(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10})
	st, faults := faultstore.Wrap(db)
	faults.SetDelay(150 * time.Millisecond) // each range takes 150ms: three take 450ms
	g := newGen(t, settings(st, func(s *segment.Config) { s.WaitTimeout = 200 * time.Millisecond }))
	began := time.Now()
	ids, err := g.NextIDs(bg, "t", 25, nil)
	took := time.Since(began)
	testutil.ErrIs(t, err, leaf.ErrNotReady)
	if took > 400*time.Millisecond {
		t.Errorf("NextIDs of three ranges answered after %s (%d IDs), want about the 200ms WaitTimeout", took, len(ids))
	}
}

// TestLoadRetryJitter: a failing load retries after pauses drawn with full
// jitter, below RetryBackoff doubling to MaxRetryBackoff, so that the tags
// of every server do not retry in step; the first retry comes within
// RetryBackoff.
func TestLoadRetryJitter(t *testing.T) {
	var logs testutil.LogBuffer
	db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10})
	st, faults := faultstore.Wrap(db)
	faults.SetDown(errors.New("store unplugged"))
	const base, maxBackoff = 4 * time.Millisecond, 16 * time.Millisecond
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		s.RetryBackoff = base
		s.MaxRetryBackoff = maxBackoff
		s.WaitTimeout = time.Millisecond
	}))
	if _, err := g.NextID(bg, "t"); !errors.Is(err, leaf.ErrNotReady) {
		t.Fatalf("NextID with the store down: %v", err)
	}
	var pauses []time.Duration
	testutil.WaitFor(t, "12 retries", func() bool {
		pauses = pauses[:0]
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec struct {
				Msg     string
				RetryIn time.Duration `json:"retry_in"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if rec.Msg == "segment load failed, retrying" {
				pauses = append(pauses, rec.RetryIn)
			}
		}
		return len(pauses) >= 12
	})
	bound := base
	distinct := map[time.Duration]bool{}
	for i, p := range pauses[:12] {
		if p < 0 || p >= bound {
			t.Errorf("pause %d: %s, want in [0, %s): all %v", i, p, bound, pauses)
		}
		distinct[p] = true
		bound = min(2*bound, maxBackoff)
	}
	if len(distinct) < 6 {
		t.Errorf("pauses %v: too few distinct values for jitter", pauses)
	}
}

// TestStoreOutage: with the store down the generator keeps issuing from its
// buffers, reports degraded, fails only once both buffers are empty, and
// recovers when the store returns.
func TestStoreOutage(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 1000})
	st, faults := faultstore.Wrap(db)
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.HealthInterval = 5 * time.Millisecond
		s.RetryBackoff = time.Millisecond
		s.MaxRetryBackoff = 5 * time.Millisecond
	}))
	for range 200 {
		next(t, g, "t")
	}
	testutil.WaitFor(t, "next range", func() bool { return testutil.StatusOf(g, "t").NextReady })
	faults.SetDown(errors.New("store unplugged"))
	testutil.WaitFor(t, "degraded", func() bool { return len(g.Degraded()) > 0 })
	// 800 left in the current range plus 1000 in the next: all served.
	for i := range 1800 {
		if _, err := g.NextID(bg, "t"); err != nil {
			t.Fatalf("ID %d during the outage: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	_, err := g.NextID(ctx, "t")
	cancel()
	testutil.ErrIs(t, err, leaf.ErrNotReady)
	faults.SetDown(nil)
	if got := next(t, g, "t"); got != 2001 {
		t.Fatalf("first ID after the outage %d, want 2001", got)
	}
	testutil.WaitFor(t, "healthy", func() bool { return len(g.Degraded()) == 0 })
}

func TestGiveBack(t *testing.T) {
	t.Run("current range", func(t *testing.T) {
		st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
		g := newGen(t, settings(st))
		for range 5 {
			next(t, g, "t")
		}
		if err := g.Close(bg); err != nil {
			t.Fatal(err)
		}
		if got := testutil.MaxID(t, st, "t"); got != 6 {
			t.Fatalf("max_id after give-back %d, want 6", got)
		}
		g2 := newGen(t, settings(st))
		if got := next(t, g2, "t"); got != 6 {
			t.Fatalf("first ID after restart %d, want 6", got)
		}
	})
	t.Run("contiguous next range", func(t *testing.T) {
		st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
		g := newGen(t, settings(st))
		for range 15 {
			next(t, g, "t")
		}
		testutil.WaitFor(t, "next range", func() bool { return testutil.StatusOf(g, "t").NextReady })
		if err := g.Close(bg); err != nil {
			t.Fatal(err)
		}
		if got := testutil.MaxID(t, st, "t"); got != 16 {
			t.Fatalf("max_id after give-back %d, want 16", got)
		}
	})
	t.Run("next range not contiguous", func(t *testing.T) {
		st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
		a := newGen(t, settings(st))
		b := newGen(t, settings(st))
		next(t, a, "t") // a: [1,101)
		next(t, b, "t") // b: [101,201)
		for range 15 {
			next(t, a, "t") // a prefetches [201,301)
		}
		testutil.WaitFor(t, "next range", func() bool { return testutil.StatusOf(a, "t").NextReady })
		if err := a.Close(bg); err != nil {
			t.Fatal(err)
		}
		if got := testutil.MaxID(t, st, "t"); got != 201 {
			t.Fatalf("max_id %d, want 201: only a's untouched next range comes back", got)
		}
		if got := next(t, b, "t"); got != 102 {
			t.Fatalf("b continues with %d, want 102", got)
		}
	})
	t.Run("someone reserved since", func(t *testing.T) {
		st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
		a := newGen(t, settings(st))
		b := newGen(t, settings(st))
		next(t, a, "t")
		next(t, b, "t")
		if err := a.Close(bg); err != nil {
			t.Fatal(err)
		}
		if got := testutil.MaxID(t, st, "t"); got != 201 {
			t.Fatalf("max_id %d, want 201 untouched", got)
		}
	})
	t.Run("range arriving during close", func(t *testing.T) {
		db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10})
		st, faults := faultstore.Wrap(db)
		g := newGen(t, settings(st))
		next(t, g, "t")
		faults.SetDelay(100 * time.Millisecond)
		for range 9 {
			next(t, g, "t") // 2..10; the load of [11,21) is in flight
		}
		if err := g.Close(bg); err != nil {
			t.Fatal(err)
		}
		if got := testutil.MaxID(t, st, "t"); got != 11 {
			t.Fatalf("max_id %d, want 11: the range reserved during close comes back", got)
		}
	})
	t.Run("crash gives nothing back", func(t *testing.T) {
		st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
		g := newGen(t, settings(st, func(s *segment.Config) { s.GiveBack = false }))
		next(t, g, "t")
		if err := g.Close(bg); err != nil {
			t.Fatal(err)
		}
		if got := testutil.MaxID(t, st, "t"); got != 101 {
			t.Fatalf("max_id %d, want 101", got)
		}
	})
}

func TestClosedGeneratorRefuses(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
	g := newGen(t, settings(st))
	next(t, g, "t")
	if err := g.Close(bg); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"t", "other"} {
		_, err := g.NextID(bg, tag)
		testutil.ErrIs(t, err, leaf.ErrClosed)
	}
}

// clock is an injected clock for the adaptive step.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestAdaptiveStep(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := newGen(t, settings(st, func(s *segment.Config) { s.Now = clk.Now; s.MaxStep = 800 }))

	// consume drains the current range, moves to the next one and pushes it
	// past 10%, which triggers exactly one load; it returns that load's step.
	consume := func() int {
		t.Helper()
		s := testutil.StatusOf(g, "t")
		if s.Loads == 0 {
			next(t, g, "t") // the first load, in the request
			// It hands the request its range before it counts itself.
			testutil.WaitFor(t, "the first load's end", func() bool { return testutil.StatusOf(g, "t").Loads == 1 })
		} else if _, err := g.NextIDs(bg, "t", int(s.Buffers[s.Pos].Remaining())+1, nil); err != nil {
			t.Fatal(err)
		}
		s = testutil.StatusOf(g, "t")
		cur := s.Buffers[s.Pos]
		if k := int(cur.Start + int64(cur.Step)/10 - cur.Value + 1); k > 0 {
			if _, err := g.NextIDs(bg, "t", k, nil); err != nil {
				t.Fatal(err)
			}
		}
		testutil.WaitFor(t, "load", func() bool { return testutil.StatusOf(g, "t").Loads == s.Loads+1 })
		return testutil.StatusOf(g, "t").Step
	}
	steps := []int{consume()} // loads 1 and 2 use the stored step
	for _, d := range []time.Duration{
		time.Minute,      // < 15m: double to 200
		14 * time.Minute, // double to 400
		time.Minute,      // double to 800 (MaxStep)
		time.Minute,      // capped: stays 800
		20 * time.Minute, // 15–30m: hold 800
		31 * time.Minute, // > 30m: halve to 400
		45 * time.Minute, // halve to 200
		time.Hour,        // halve to 100
		time.Hour,        // floor: stays 100
	} {
		clk.Advance(d)
		steps = append(steps, consume())
	}
	want := []int{100, 200, 400, 800, 800, 800, 400, 200, 100, 100}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	// The stored step is the floor: raising it lifts the step at once.
	if err := g.SetStep(bg, "t", 300); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	consume() // this load reads the new stored step
	clk.Advance(time.Hour)
	if got := consume(); got != 300 {
		t.Fatalf("step after stored step raised to 300 and a slow range: %d, want 300", got)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100000})
	g := newGen(t, settings(st))
	if _, err := g.NextIDs(bg, "t", 10001, nil); err == nil {
		t.Fatal("batch above the limit accepted")
	}
	for range 2 {
		if _, err := g.NextIDs(bg, "t", leaf.MaxBatch, nil); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "next range", func() bool { return testutil.StatusOf(g, "t").NextReady })
	if n := testing.AllocsPerRun(10000, func() { g.NextID(bg, "t") }); n != 0 {
		t.Fatalf("NextID allocates %.1f times per call on the hot path", n)
	}
}

func BenchmarkNextID(b *testing.B) {
	g := benchGen(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(bg, "t"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextIDParallel(b *testing.B) {
	g := benchGen(b)
	var errs atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(bg, "t"); err != nil {
				errs.Add(1)
			}
		}
	})
	if errs.Load() > 0 {
		b.Fatalf("%d errors", errs.Load())
	}
}

func BenchmarkNextIDs1000(b *testing.B) {
	g := benchGen(b)
	buf := make([]int64, 0, 1000)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = g.NextIDs(bg, "t", 1000, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchGen is a generator whose ranges are a million IDs: the benchmarks
// measure the hot path, with a reload every million IDs.
func benchGen(b *testing.B) *segment.Generator {
	st := testutil.Store(b)
	if err := st.CreateTag(bg, leaf.Alloc{Tag: "t", MaxID: 1, Step: leaf.MaxStep}); err != nil {
		b.Fatal(err)
	}
	g, err := segment.New(bg, settings(st, func(s *segment.Config) { s.Logger = slog.New(slog.DiscardHandler) }))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(bg) })
	return g
}

// TestStatusCounters checks the status fields behind metrics, /readyz and the
// monitor page: issued, remaining, rate and time until dry, load latency and
// errors, the low-buffer reason, and the IDs given back at Close.
func TestStatusCounters(t *testing.T) {
	db := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 1000})
	st, faults := faultstore.Wrap(db)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := newGen(t, settings(st, func(s *segment.Config) {
		s.Now = clk.Now
		s.LowBuffer = 10 * time.Second
		s.RetryBackoff = time.Millisecond
		s.MaxRetryBackoff = time.Millisecond
	}))
	if s := g.Status(); len(s) != 0 {
		t.Fatalf("status before any request: %+v; want no state", s)
	}
	// State begins at the first request: 400 IDs, then the sample the
	// rate starts from (the loop's samples, on the wall clock, come later).
	if _, err := g.NextIDs(bg, "t", 400, nil); err != nil {
		t.Fatal(err)
	}
	g.Sample()
	if s := testutil.StatusOf(g, "t"); s.SecondsLeft != -1 || s.Rate != 0 {
		t.Fatalf("tag with no rate yet: seconds_left %v, rate %v; want -1, 0", s.SecondsLeft, s.Rate)
	}
	// A load hands its range to the buffer before it counts itself and
	// stops loading, both at once (doublebuf): wait for the load's end.
	testutil.WaitFor(t, "next range loaded", func() bool { s := testutil.StatusOf(g, "t"); return !s.Loading && s.NextReady })
	clk.Advance(2 * time.Second)
	if _, err := g.NextIDs(bg, "t", 400, nil); err != nil {
		t.Fatal(err)
	}

	s := testutil.StatusOf(g, "t")
	want := leaf.SegmentStatus{Issued: 800, Loads: 2, Remaining: 200 + 1000, Rate: 200, SecondsLeft: 6}
	if s.Issued != want.Issued || s.Loads != want.Loads || s.Remaining != want.Remaining || s.Rate != want.Rate || s.SecondsLeft != want.SecondsLeft {
		t.Fatalf("status issued %d loads %d remaining %d rate %v seconds_left %v; want %d %d %d %v %v",
			s.Issued, s.Loads, s.Remaining, s.Rate, s.SecondsLeft, want.Issued, want.Loads, want.Remaining, want.Rate, want.SecondsLeft)
	}
	if h := s.LoadLatency; len(h.Bounds) == 0 || len(h.Counts) != len(h.Bounds) || !slices.IsSorted(h.Bounds) ||
		h.Counts[len(h.Counts)-1] != 2 || s.LoadSeconds <= 0 {
		t.Fatalf("load latency %+v (sum %v), want cumulative buckets ending at 2 loads", s.LoadLatency, s.LoadSeconds)
	}
	// 6s left is under the 10s threshold: degraded, with the numbers.
	reasons := g.Degraded()
	if len(reasons) != 1 || reasons[0] != "tag t: buffered IDs last 6.0s at 200 IDs/s (1200 left; the next range is loaded)" {
		t.Fatalf("Degraded = %q", reasons)
	}

	// Failed loads are counted.
	faults.SetDown(errors.New("store unplugged"))
	if _, err := g.NextIDs(bg, "t", 701, nil); err != nil { // past 10% of the next range: a load starts and fails
		t.Fatal(err)
	}
	testutil.WaitFor(t, "failed loads", func() bool { return testutil.StatusOf(g, "t").LoadErrors >= 2 })
	faults.SetDown(nil)
	testutil.WaitFor(t, "third range", func() bool { return testutil.StatusOf(g, "t").Loads == 3 })

	// Close gives back the unused tail: 1501 issued of [1, 4001), the third
	// range having the doubled step.
	if err := g.Close(bg); err != nil {
		t.Fatal(err)
	}
	if s := testutil.StatusOf(g, "t"); s.GivenBack != 2499 || s.Issued != 1501 {
		t.Fatalf("given back %d, issued %d; want 2499, 1501", s.GivenBack, s.Issued)
	}
	if tot := g.Totals(); tot.Issued != 1501 || tot.Loads != 3 || tot.GivenBack != 2499 || tot.Active != 1 || tot.Known != 1 ||
		tot.LoadErrors < 2 || tot.LoadLatency.Counts[len(tot.LoadLatency.Counts)-1] != 3 {
		t.Fatalf("Totals = %+v", tot)
	}
}

// TestLogLines: the generator logs one line per load and per step change,
// and nothing per request.
func TestLogLines(t *testing.T) {
	var logs testutil.LogBuffer
	st := testutil.Store(t, leaf.Alloc{Tag: "t", MaxID: 1, Step: 100})
	g := newGen(t, settings(st, func(s *segment.Config) { s.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }))
	for range 2000 {
		next(t, g, "t")
	}
	testutil.WaitFor(t, "loads to settle", func() bool { s := testutil.StatusOf(g, "t"); return !s.Loading && s.NextReady })
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		counts[rec.Msg]++
	}
	s := testutil.StatusOf(g, "t")
	// Steps 100, 100, 200, 400, 800, 1600 end at 3200: the sixth range
	// holds ID 2000, past its 10%, so the seventh (3200) is loaded too.
	if counts["segment loaded"] != int(s.Loads) || s.Loads != 7 {
		t.Errorf("%d load lines for %d loads, want 7: %v", counts["segment loaded"], s.Loads, counts)
	}
	if counts["segment step changed"] != 5 {
		t.Errorf("%d step-change lines, want 5 (100→200→400→800→1600→3200): %v", counts["segment step changed"], counts)
	}
	if len(counts) != 2 {
		t.Errorf("unexpected log lines: %v", counts)
	}
}

// staleStore answers its first lookup (Alloc) of a tag only when released,
// and then "not found": the read a lookup made before the tag was created.
type staleStore struct {
	*sqlite.Store
	tag              string
	entered, release chan struct{}
	once             sync.Once
}

func (s *staleStore) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	stale := false
	if tag == s.tag {
		s.once.Do(func() { stale = true })
	}
	if !stale {
		return s.Store.Alloc(ctx, tag)
	}
	close(s.entered)
	<-s.release
	return leaf.Alloc{}, fmt.Errorf("tag %q: %w", tag, leaf.ErrTagNotFound)
}

// A tag created while a lookup of it is in flight, or right after a client
// was told it does not exist, is served at once: the lookup's "not found"
// must not be cached after the creation, or the new tag would be refused for
// NegativeTTL. Both orders are checked, many times over, since the second
// is a race between the lookup's end and the client's next request.
func TestCreateTagDuringLookup(t *testing.T) {
	t.Run("created while the lookup is in flight", func(t *testing.T) {
		st := &staleStore{Store: testutil.Store(t), tag: "late", entered: make(chan struct{}), release: make(chan struct{})}
		g := newGen(t, settings(st, func(s *segment.Config) { s.NegativeTTL = time.Hour }))
		errc := make(chan error, 1)
		go func() { _, err := g.NextID(bg, "late"); errc <- err }()
		<-st.entered
		if err := g.CreateTag(bg, leaf.Alloc{Tag: "late", MaxID: 7, Step: 10}); err != nil {
			t.Fatal(err)
		}
		close(st.release)
		// That lookup read the store before the row existed.
		testutil.ErrIs(t, <-errc, leaf.ErrTagNotFound)
		if got := next(t, g, "late"); got != 7 {
			t.Fatalf("first ID %d, want 7", got)
		}
	})
	t.Run("created as soon as not found", func(t *testing.T) {
		for i := range 200 {
			g := newGen(t, settings(testutil.Store(t), func(s *segment.Config) { s.NegativeTTL = time.Hour }))
			tag := fmt.Sprintf("t%d", i)
			_, err := g.NextID(bg, tag)
			testutil.ErrIs(t, err, leaf.ErrTagNotFound)
			if err := g.CreateTag(bg, leaf.Alloc{Tag: tag, MaxID: 7, Step: 10}); err != nil {
				t.Fatal(err)
			}
			if got := next(t, g, tag); got != 7 {
				t.Fatalf("round %d: first ID %d, want 7", i, got)
			}
		}
	})
}

// A server whose DeleteTag finds the row already gone (another server
// deleted it) still drops its own buffers at once, not at its next refresh.
func TestDeleteTagAlreadyDeleted(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "a", MaxID: 1, Step: 100})
	g1 := newGen(t, settings(st, func(s *segment.Config) { s.RefreshInterval = time.Hour }))
	g2 := newGen(t, settings(st, func(s *segment.Config) { s.RefreshInterval = time.Hour }))
	next(t, g1, "a")
	next(t, g2, "a") // g2 holds IDs of [101, 201)
	if err := g1.DeleteTag(bg, "a"); err != nil {
		t.Fatal(err)
	}
	testutil.ErrIs(t, g2.DeleteTag(bg, "a"), leaf.ErrTagNotFound)
	if _, err := g2.NextID(bg, "a"); !errors.Is(err, leaf.ErrTagNotFound) {
		t.Fatalf("g2.NextID after its own DeleteTag: %v, want ErrTagNotFound", err)
	}
	if s := testutil.StatusOf(g2, "a"); s.Tag != "" {
		t.Fatalf("g2 still lists the tag: %+v", s)
	}
	// Created again without a start, through either: above every ID issued.
	if err := g2.CreateTag(bg, leaf.Alloc{Tag: "a", Step: 100}); err != nil {
		t.Fatal(err)
	}
	if id := next(t, g1, "a"); id < 201 {
		t.Fatalf("first ID after the re-creation %d, want >= 201", id)
	}
}
