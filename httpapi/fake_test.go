package httpapi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/tagpage"
)

// fakeGen is an in-memory SegmentGenerator: per tag, a counter that starts at
// the row's max_id. It validates tags like the real one and counts the calls
// that reached it with an invalid tag, which the handlers must never make.
type fakeGen struct {
	mu       sync.Mutex
	rows     map[string]*leaf.Alloc
	shapes   map[string]leaf.TagShape
	next     map[string]int64
	fail     map[string]error // ID calls for this tag fail with the error
	degraded []string
	maxRange int   // NextRange leases at most this many IDs (0: no limit)
	badCalls int   // calls with a tag ValidateTag refuses
	idCalls  int64 // NextID, NextIDs and NextRange calls
}

var _ SegmentGenerator = (*fakeGen)(nil)

var fakeTime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func newFakeGen(tags ...string) *fakeGen {
	g := &fakeGen{
		rows:   map[string]*leaf.Alloc{},
		shapes: map[string]leaf.TagShape{},
		next:   map[string]int64{},
		fail:   map[string]error{},
	}
	for _, t := range tags {
		g.rows[t] = &leaf.Alloc{Tag: t, MaxID: 1, Step: 1000, Description: "test " + t, UpdateTime: fakeTime}
		g.next[t] = 1
	}
	return g
}

func (g *fakeGen) setFail(tag string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		delete(g.fail, tag)
		return
	}
	g.fail[tag] = err
}

func (g *fakeGen) setDegraded(reasons ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.degraded = reasons
}

// check is the start of every call taking a tag; g.mu is held.
func (g *fakeGen) check(tag string) error {
	if err := leaf.ValidateTag(tag); err != nil {
		g.badCalls++
		return err
	}
	if err := g.fail[tag]; err != nil {
		return fmt.Errorf("fake: %w", err)
	}
	if _, ok := g.rows[tag]; !ok {
		return fmt.Errorf("fake: %q: %w", tag, leaf.ErrTagNotFound)
	}
	return nil
}

// take reserves n IDs; g.mu is held.
func (g *fakeGen) take(tag string, n int) int64 {
	g.idCalls++
	id := g.next[tag]
	g.next[tag] += int64(n)
	if g.next[tag] > g.rows[tag].MaxID {
		g.rows[tag].MaxID = g.next[tag]
	}
	return id
}

func (g *fakeGen) NextID(ctx context.Context, tag string) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return 0, err
	}
	return g.take(tag, 1), nil
}

func (g *fakeGen) NextIDs(ctx context.Context, tag string, n int, dst []int64) ([]int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return dst, err
	}
	if err := leaf.ValidateCount(n); err != nil {
		g.badCalls++
		return dst, err
	}
	first := g.take(tag, n)
	for i := range int64(n) {
		dst = append(dst, first+i)
	}
	return dst, nil
}

func (g *fakeGen) NextRange(ctx context.Context, tag string, n int) (int64, int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return 0, 0, err
	}
	if err := leaf.ValidateRangeCount(n); err != nil {
		g.badCalls++
		return 0, 0, err
	}
	if g.maxRange > 0 && n > g.maxRange {
		n = g.maxRange
	}
	start := g.take(tag, n)
	return start, start + int64(n), nil
}

func (g *fakeGen) Status() []leaf.SegmentStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []leaf.SegmentStatus
	for tag, row := range g.rows {
		out = append(out, leaf.SegmentStatus{
			Tag: tag, InitOK: true, NextReady: true, Pos: 0, Step: row.Step, MinStep: row.Step,
			Buffers: [2]leaf.RangeState{
				{Start: 1, Value: g.next[tag], Max: 1001, Step: 1000},
				{Start: 1001, Value: 1001, Max: 3001, Step: 2000},
			},
		})
	}
	slices.SortFunc(out, func(a, b leaf.SegmentStatus) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

func (g *fakeGen) Totals() leaf.SegmentTotals { return totalsOf(g.Status(), 0) }

func (g *fakeGen) Busiest(n int, also ...string) []leaf.SegmentStatus {
	return busiestOf(g.Status(), n, also)
}

// totalsOf is what a generator whose tags in use are st, of known names,
// reports as its totals.
func totalsOf(st []leaf.SegmentStatus, known int) leaf.SegmentTotals {
	t := leaf.SegmentTotals{Known: max(known, len(st)), Active: len(st)}
	for _, s := range st {
		t.Issued += s.Issued
		t.Loads += s.Loads
		t.LoadErrors += s.LoadErrors
		t.Waits += s.Waits
		t.GivenBack += s.GivenBack
		t.Rate += s.Rate
	}
	return t
}

// busiestOf is what a generator whose tags in use are st answers Busiest
// with: the n busiest and those named in also, sorted by tag.
func busiestOf(st []leaf.SegmentStatus, n int, also []string) []leaf.SegmentStatus {
	ranked := slices.Clone(st)
	slices.SortFunc(ranked, func(a, b leaf.SegmentStatus) int {
		if leaf.Busier(&a, &b) {
			return -1
		}
		if leaf.Busier(&b, &a) {
			return 1
		}
		return 0
	})
	out := slices.Clone(ranked[:min(n, len(ranked))])
	for _, s := range ranked[len(out):] {
		if slices.Contains(also, s.Tag) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b leaf.SegmentStatus) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

// Known answers as the real generator does: a tag with a row is known
// (whatever its ID calls would do); for others, the lookup's failure or
// ErrTagNotFound. A fake has no lookup budget.
func (g *fakeGen) Known(_ context.Context, tag string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := leaf.ValidateTag(tag); err == nil && g.rows[tag] != nil {
		return nil
	}
	return g.check(tag)
}

func (g *fakeGen) Degraded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.degraded)
}

func (g *fakeGen) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.fail["*"]; err != nil {
		return nil, err
	}
	var out []leaf.Alloc
	for _, row := range g.rows {
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b leaf.Alloc) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

func (g *fakeGen) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	if err := tagpage.Check(prefix, after, limit); err != nil {
		g.mu.Lock()
		g.badCalls++
		g.mu.Unlock()
		return nil, err
	}
	all, err := g.Allocs(ctx)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(a leaf.Alloc) bool { return !tagpage.Match(a.Tag, prefix, after) })
	return all[:min(len(all), limit)], nil
}

func (g *fakeGen) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return leaf.Alloc{}, err
	}
	return *g.rows[tag], nil
}

func (g *fakeGen) CreateTag(ctx context.Context, a leaf.Alloc) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := leaf.ValidateAlloc(a); err != nil {
		g.badCalls++
		return err
	}
	if _, ok := g.rows[a.Tag]; ok {
		return fmt.Errorf("fake: %q: %w", a.Tag, leaf.ErrTagExists)
	}
	if a.MaxID == 0 { // no start: a store with no tombstone starts at 1
		a.MaxID = 1
	}
	a.UpdateTime = fakeTime
	g.rows[a.Tag] = &a
	g.next[a.Tag] = a.MaxID
	return nil
}

func (g *fakeGen) SetStep(ctx context.Context, tag string, step int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return err
	}
	if err := leaf.ValidateStep(step); err != nil {
		g.badCalls++
		return err
	}
	g.rows[tag].Step = step
	return nil
}

func (g *fakeGen) DeleteTag(ctx context.Context, tag string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return err
	}
	delete(g.rows, tag)
	delete(g.next, tag)
	return nil
}

func (g *fakeGen) invalidCalls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.badCalls
}

// Leaf's snowflake layout, which fakeSnowflake composes and decodes IDs with:
// 41 bits of milliseconds since leafEpoch, 10 bits of worker ID, 12 bits of
// sequence.
const (
	leafEpoch    = 1288834974657
	workerBits   = 10
	sequenceBits = 12
	maxWorkerID  = 1<<workerBits - 1
	maxSequence  = 1<<sequenceBits - 1
)

// leafCompose builds an ID from its parts with Leaf's layout.
func leafCompose(ms, worker, seq int64) int64 {
	return (ms-leafEpoch)<<(workerBits+sequenceBits) | worker<<sequenceBits | seq
}

// fakeSnowflake is an in-memory SnowflakeGenerator whose clock is a counter:
// each ID is composed with Leaf's layout from its worker ID, the clock's
// millisecond and a sequence that counts up, the millisecond moving on when
// the sequence runs out. IDs therefore strictly increase, and Decode really
// takes apart what NextID built. It is safe for concurrent use, and NextID
// allocates nothing, so the benchmarks can use it.
type fakeSnowflake struct {
	mu       sync.Mutex
	worker   int64
	ms       int64 // the clock: Unix ms of the next ID
	seq      int64 // sequence of the next ID
	last     leaf.SnowflakeParts
	lastKey  string
	fail     error // ID calls fail with it
	degraded []string
	calls    int // NextID and NextIDs calls, failed ones included
	badCalls int // calls with a key that is neither "" (the /v2 routes) nor a valid tag, or a bad count
}

var _ SnowflakeGenerator = (*fakeSnowflake)(nil)

// Leaf's sample (LEAF-REFERENCE §1.7): worker 5, 1590000000000 ms, sequence
// 42 is the ID 1263177670456266794.
const (
	sampleWorker = 5
	sampleMs     = 1590000000000
	sampleSeq    = 42
	sampleID     = 1263177670456266794
)

// newFakeSnowflake returns a fake whose first ID is Leaf's sample.
func newFakeSnowflake() *fakeSnowflake {
	return &fakeSnowflake{worker: sampleWorker, ms: sampleMs, seq: sampleSeq}
}

func (f *fakeSnowflake) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

func (f *fakeSnowflake) setDegraded(reasons ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.degraded = reasons
}

// check is the start of every ID call; f.mu is held.
func (f *fakeSnowflake) check(key string) error {
	f.calls++
	f.lastKey = key
	if key != "" && leaf.ValidateTag(key) != nil {
		f.badCalls++
	}
	if f.fail != nil {
		return fmt.Errorf("fake snowflake: %w", f.fail)
	}
	return nil
}

// take issues the next ID; f.mu is held.
func (f *fakeSnowflake) take() int64 {
	id := leafCompose(f.ms, f.worker, f.seq)
	f.last = leaf.SnowflakeParts{ID: id, Timestamp: f.ms, WorkerID: f.worker, Sequence: f.seq}
	if f.seq++; f.seq > maxSequence {
		f.ms++
		f.seq = 0
	}
	return id
}

func (f *fakeSnowflake) NextID(_ context.Context, key string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(key); err != nil {
		return 0, err
	}
	return f.take(), nil
}

func (f *fakeSnowflake) NextIDs(_ context.Context, key string, n int, dst []int64) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(key); err != nil {
		return dst, err
	}
	if err := leaf.ValidateCount(n); err != nil {
		f.badCalls++
		return dst, err
	}
	for range n {
		dst = append(dst, f.take())
	}
	return dst, nil
}

// Decode refuses what this fake cannot have issued: IDs that are not
// positive, and IDs stamped after its clock.
func (f *fakeSnowflake) Decode(id int64) (leaf.SnowflakeParts, error) {
	if id <= 0 {
		return leaf.SnowflakeParts{}, fmt.Errorf("%w: snowflake ID %d is not positive", leaf.ErrInvalidArgument, id)
	}
	p := leaf.SnowflakeParts{
		ID:        id,
		Timestamp: id>>(workerBits+sequenceBits) + leafEpoch,
		WorkerID:  id >> sequenceBits & maxWorkerID,
		Sequence:  id & maxSequence,
	}
	f.mu.Lock()
	now := f.ms
	f.mu.Unlock()
	if p.Timestamp > now {
		return leaf.SnowflakeParts{}, fmt.Errorf("%w: snowflake ID %d is stamped %d, after the clock (%d)", leaf.ErrInvalidArgument, id, p.Timestamp, now)
	}
	return p, nil
}

func (f *fakeSnowflake) Status() leaf.WorkerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return leaf.WorkerStatus{
		Registry:      "local",
		Endpoint:      "127.0.0.1:8080",
		Layout:        "leaf",
		WorkerID:      f.worker,
		HighWater:     f.ms + 3000,
		LastIssued:    f.last.Timestamp,
		LastHeartbeat: fakeTime,
		Rollbacks:     2,
		MaxRollbackMs: 3,
	}
}

func (f *fakeSnowflake) Degraded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.degraded)
}

func (f *fakeSnowflake) lastParts() leaf.SnowflakeParts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeSnowflake) counts() (calls, badCalls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.badCalls
}

// The fake's tags are plain: the period methods name no period. A shape
// given at creation is kept and shown; periodic routing is tested on the
// real generator (periods_test.go).

func (g *fakeGen) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	id, err := g.NextID(ctx, tag)
	return id, "", err
}

func (g *fakeGen) NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error) {
	dst, err := g.NextIDs(ctx, tag, n, dst)
	return dst, "", err
}

func (g *fakeGen) Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error) {
	if use != leaf.ByClient {
		// Forwarded ranges are orderedFake's.
		return leaf.IDRange{}, fmt.Errorf("%w: fakeGen takes no range by use %d", leaf.ErrInvalidArgument, use)
	}
	s, e, err := g.NextRange(ctx, tag, n)
	return leaf.IDRange{Start: s, End: e}, err
}

func (g *fakeGen) CreateShapedTag(ctx context.Context, a leaf.Alloc, shape leaf.TagShape) error {
	if err := g.CreateTag(ctx, a); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !shape.IsPlain() {
		g.shapes[a.Tag] = shape.Canonical()
	}
	return nil
}

func (g *fakeGen) TagShape(ctx context.Context, tag string) (leaf.TagShape, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return leaf.TagShape{}, err
	}
	return g.shapes[tag], nil
}

func (g *fakeGen) PrunePeriods(ctx context.Context, tag string, pr leaf.Prune) (leaf.PruneResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return leaf.PruneResult{}, err
	}
	return leaf.PruneResult{}, fmt.Errorf("%w: tag %s has no period", leaf.ErrInvalidArgument, tag)
}

func (g *fakeGen) TagShapes(ctx context.Context, tags []string) (map[string]leaf.TagShape, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]leaf.TagShape{}
	for _, t := range tags {
		if sh, ok := g.shapes[t]; ok {
			out[t] = sh
		}
	}
	return out, nil
}

func (g *fakeGen) Periods(ctx context.Context, tag, before string, limit int) ([]leaf.PeriodAlloc, error) {
	return []leaf.PeriodAlloc{}, nil
}

func (g *fakeGen) CountPeriods(ctx context.Context, tag string) (int, error) { return 0, nil }

// Decode decodes a plain tag's IDs: the number itself, below max_id.
func (g *fakeGen) Decode(ctx context.Context, tag, id string) (leaf.DecodedID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(tag); err != nil {
		return leaf.DecodedID{}, err
	}
	raw, err := strconv.ParseInt(id, 10, 64)
	if err != nil || raw < 1 || raw >= g.next[tag] {
		return leaf.DecodedID{}, fmt.Errorf("%w: tag %s has not issued ID %q", leaf.ErrInvalidArgument, tag, id)
	}
	return leaf.DecodedID{Tag: tag, ID: id, Raw: raw}, nil
}
