package httpapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
)

// fakeGen is an in-memory SegmentGenerator: per tag, a counter that starts at
// the row's max_id. It validates tags like the real one and counts the calls
// that reached it with an invalid tag, which the handlers must never make.
type fakeGen struct {
	mu       sync.Mutex
	rows     map[string]*leaf.Alloc
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
		rows: map[string]*leaf.Alloc{},
		next: map[string]int64{},
		fail: map[string]error{},
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
	if err := leaf.ValidateCount(n); err != nil {
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
