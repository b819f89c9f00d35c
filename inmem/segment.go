// Package inmem holds real, concurrency-safe in-memory implementations of the
// leaf seams, for tests: they follow the same contract as the SQL stores (and
// pass the same leaftest suites), and add fault injection so a test can take
// the "database" down or slow it.
package inmem

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/tagpage"
	"github.com/leafgo/leaf/tagshape"
)

// SegmentStore is an in-memory leaf_alloc: a leaf.SegmentStore and
// leaf.SegmentAdmin with the semantics of the SQL stores. One value may be
// shared by any number of generators, like one database by many servers.
// The zero value is not usable; call NewSegmentStore.
type SegmentStore struct {
	mu     sync.Mutex
	rows   map[string]leaf.Alloc
	tombs  map[string]int64 // leaf_alloc_tombstone: tag -> highest deleted max_id
	shapes map[string]leaf.TagShape
	// owners is leaf_tag_owner: a row per ordered tag. tokens keeps each
	// tag's highest fencing token, across the rows deleted and made again.
	owners   map[string]*tagOwner
	tokens   map[string]int64
	version  int64 // leaf_alloc_version: moved by CreateTag and DeleteTag
	down     error
	delay    time.Duration
	reserves int
}

var (
	_ leaf.SegmentStore     = (*SegmentStore)(nil)
	_ leaf.SegmentAdmin     = (*SegmentStore)(nil)
	_ leaf.SegmentVersioner = (*SegmentStore)(nil)
	_ leaf.TagShaper        = (*SegmentStore)(nil)
)

// NewSegmentStore returns an empty store.
func NewSegmentStore() *SegmentStore {
	return &SegmentStore{rows: map[string]leaf.Alloc{}, tombs: map[string]int64{}, shapes: map[string]leaf.TagShape{},
		owners: map[string]*tagOwner{}, tokens: map[string]int64{}}
}

// SetDown makes every call fail with err (wrapped) until SetDown(nil).
func (s *SegmentStore) SetDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = err
}

// SetDelay makes each Reserve wait d before it runs, or until its context
// ends, as a slow database would.
func (s *SegmentStore) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Reserves counts the reserves that succeeded.
func (s *SegmentStore) Reserves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserves
}

// begin locks the store for one call, after the checks every call shares.
// On success the caller must unlock s.mu.
func (s *SegmentStore) begin(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inmem: %s: %w", op, err)
	}
	s.mu.Lock()
	if s.down != nil {
		err := s.down
		s.mu.Unlock()
		return fmt.Errorf("inmem: %s: store down: %w", op, err)
	}
	return nil
}

// InsertForeign adds a row as Java Leaf's scripts or a hand-written INSERT
// would: no tombstone check and no change to TagsVersion. It replaces a row
// the tag already has.
func (s *SegmentStore) InsertForeign(a leaf.Alloc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.UpdateTime = time.Now()
	s.rows[a.Tag] = a
}

// TagsVersion reads the change counter that CreateTag and DeleteTag move.
func (s *SegmentStore) TagsVersion(ctx context.Context) (int64, error) {
	if err := s.begin(ctx, "read tags version"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return s.version, nil
}

// Tags lists every tag, in byte order.
func (s *SegmentStore) Tags(ctx context.Context) ([]string, error) {
	if err := s.begin(ctx, "list tags"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	tags := make([]string, 0, len(s.rows))
	for t := range s.rows {
		if !isPeriodRow(t) {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	return tags, nil
}

// Allocs lists every row, ordered by tag.
func (s *SegmentStore) Allocs(ctx context.Context) ([]leaf.Alloc, error) {
	if err := s.begin(ctx, "list allocs"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	as := make([]leaf.Alloc, 0, len(s.rows))
	for _, a := range s.rows {
		if !isPeriodRow(a.Tag) {
			as = append(as, a)
		}
	}
	slices.SortFunc(as, func(a, b leaf.Alloc) int { return strings.Compare(a.Tag, b.Tag) })
	return as, nil
}

// Alloc reads one row; leaf.ErrTagNotFound if there is none.
func (s *SegmentStore) Alloc(ctx context.Context, tag string) (leaf.Alloc, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Alloc{}, err
	}
	op := fmt.Sprintf("read %q", tag)
	if err := s.begin(ctx, op); err != nil {
		return leaf.Alloc{}, err
	}
	defer s.mu.Unlock()
	a, ok := s.rows[tag]
	if !ok {
		return leaf.Alloc{}, fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
	}
	return a, nil
}

// delayReserve waits out the configured delay of a reserve, or ctx.
func (s *SegmentStore) delayReserve(ctx context.Context, op string) error {
	s.mu.Lock()
	delay := s.delay
	s.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("inmem: %s: %w", op, ctx.Err())
	case <-t.C:
		return nil
	}
}

// Reserve adds step (the stored step when step <= 0) to the tag's max_id and
// returns the range, after the configured delay.
func (s *SegmentStore) Reserve(ctx context.Context, tag string, step int) (leaf.Reservation, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q", tag)
	if err := s.delayReserve(ctx, op); err != nil {
		return leaf.Reservation{}, err
	}
	if err := s.begin(ctx, op); err != nil {
		return leaf.Reservation{}, err
	}
	defer s.mu.Unlock()
	return s.reserveLocked(op, tag, step)
}

// reserveLocked is Reserve's update of the row. s.mu must be held.
func (s *SegmentStore) reserveLocked(op, tag string, step int) (leaf.Reservation, error) {
	a, ok := s.rows[tag]
	if !ok {
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
	}
	used := step
	if step <= 0 {
		used = a.Step
	}
	// The SQL stores fail the same way: BIGINT out of range.
	if a.MaxID > math.MaxInt64-int64(used) {
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: %w: max_id %d + step %d overflows", op, leaf.ErrInvalidArgument, a.MaxID, used)
	}
	a.MaxID += int64(used)
	a.UpdateTime = time.Now()
	s.rows[tag] = a
	s.reserves++
	return leaf.Reservation{Tag: tag, MaxID: a.MaxID, Step: used, StoredStep: a.Step}, nil
}

// GiveBack sets max_id to from if it still equals expect and from is not
// below the tag's tombstone, and reports whether it did.
func (s *SegmentStore) GiveBack(ctx context.Context, tag string, from, expect int64) (bool, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return false, err
	}
	if from < 1 || from > expect {
		return false, fmt.Errorf("%w: give back %q from %d at max_id %d: want 1 <= from <= max_id", leaf.ErrInvalidArgument, tag, from, expect)
	}
	if err := s.begin(ctx, fmt.Sprintf("give back %q", tag)); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	a, ok := s.rows[tag]
	if !ok || a.MaxID != expect || from < s.tombs[tag] {
		return false, nil
	}
	a.MaxID = from
	a.UpdateTime = time.Now()
	s.rows[tag] = a
	return true, nil
}

// Ping fails only while the store is down.
func (s *SegmentStore) Ping(ctx context.Context) error {
	if err := s.begin(ctx, "ping"); err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Close does nothing: the store holds no resources, and tests share one
// store among several generators, each of which may close it.
func (s *SegmentStore) Close() error { return nil }

// CreateTag inserts a plain tag; see CreateShapedTag.
func (s *SegmentStore) CreateTag(ctx context.Context, a leaf.Alloc) error {
	return s.CreateShapedTag(ctx, a, leaf.TagShape{})
}

// TagShape reads a tag's shape, the zero shape if it has none.
func (s *SegmentStore) TagShape(ctx context.Context, tag string) (leaf.TagShape, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return leaf.TagShape{}, err
	}
	if err := s.begin(ctx, fmt.Sprintf("shape of %q", tag)); err != nil {
		return leaf.TagShape{}, err
	}
	defer s.mu.Unlock()
	return s.shapes[tag], nil
}

// CreateShapedTag inserts a row whose MaxID is the first ID to issue: with
// MaxID 0, the tag's tombstone or 1. A start below the tombstone fails with
// a *leaf.TombstoneError, a shape other than the one the tag was deleted
// with with a *leaf.ShapeError.
func (s *SegmentStore) CreateShapedTag(ctx context.Context, a leaf.Alloc, shape leaf.TagShape) error {
	if err := leaf.ValidateAlloc(a); err != nil {
		return err
	}
	if err := tagshape.Validate(shape); err != nil {
		return err
	}
	if err := tagshape.ValidateTag(a.Tag, shape); err != nil {
		return err
	}
	shape = shape.Canonical()
	op := fmt.Sprintf("create %q", a.Tag)
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.rows[a.Tag]; ok {
		return fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagExists)
	}
	if kept, ok := s.shapes[a.Tag]; ok && kept != shape || !ok && s.hasTomb(a.Tag) && !shape.IsPlain() {
		if !ok {
			kept = leaf.TagShape{}
		}
		return fmt.Errorf("inmem: %s: %w", op, &leaf.ShapeError{Tag: a.Tag, Kept: kept})
	}
	tomb := s.tombs[a.Tag]
	switch {
	case a.MaxID == 0:
		a.MaxID = max(tomb, 1)
	case a.MaxID < tomb:
		return fmt.Errorf("inmem: %s: %w", op, &leaf.TombstoneError{Tag: a.Tag, MinStart: tomb})
	}
	a.UpdateTime = time.Now()
	s.rows[a.Tag] = a
	if !shape.IsPlain() {
		s.shapes[a.Tag] = shape
	}
	s.version++
	return nil
}

// hasTomb reports whether the tag was deleted before: a tag deleted plain
// stays plain.
func (s *SegmentStore) hasTomb(tag string) bool {
	_, ok := s.tombs[tag]
	return ok
}

// SetStep changes the stored step; leaf.ErrTagNotFound if there is no row.
func (s *SegmentStore) SetStep(ctx context.Context, tag string, step int) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if err := leaf.ValidateStep(step); err != nil {
		return err
	}
	op := fmt.Sprintf("set step of %q", tag)
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a, ok := s.rows[tag]
	if !ok {
		return fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
	}
	a.Step = step
	a.UpdateTime = time.Now()
	s.rows[tag] = a
	// New periods copy the tag's step; the current ones take it too.
	for _, key := range s.periodKeysLocked(tag) {
		p := s.rows[tagshape.PeriodRow(tag, key)]
		p.Step = step
		s.rows[p.Tag] = p
	}
	return nil
}

// DeleteTag removes the row, and the tag's lease if it is ordered, and
// records its max_id in the tag's tombstone; leaf.ErrTagNotFound if there
// is no row.
func (s *SegmentStore) DeleteTag(ctx context.Context, tag string) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	op := fmt.Sprintf("delete %q", tag)
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a, ok := s.rows[tag]
	if !ok {
		return fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
	}
	delete(s.rows, tag)
	delete(s.owners, tag) // a tag created again is plain
	s.tombs[tag] = max(s.tombs[tag], a.MaxID)
	for _, key := range s.periodKeysLocked(tag) {
		s.buryLocked(tagshape.PeriodRow(tag, key))
	}
	s.version++
	return nil
}

// AllocsPage lists at most limit rows whose tag begins with prefix and
// sorts after the tag after, in byte order, as the SQL stores do (see
// sqlstore.Store.AllocsPage). It scans every row: this is a test store.
func (s *SegmentStore) AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error) {
	if err := tagpage.Check(prefix, after, limit); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, "list allocs page"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var tags []string
	for t := range s.rows {
		if !isPeriodRow(t) && tagpage.Match(t, prefix, after) {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	tags = tags[:min(len(tags), limit)]
	page := make([]leaf.Alloc, len(tags))
	for i, t := range tags {
		page[i] = s.rows[t]
	}
	return page, nil
}
