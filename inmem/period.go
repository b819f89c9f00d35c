package inmem

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

var _ leaf.PeriodStore = (*SegmentStore)(nil)

// isPeriodRow reports whether a row is a period of a periodic tag.
func isPeriodRow(name string) bool { return strings.IndexByte(name, leaf.PeriodSep) >= 0 }

// periodKeysLocked lists the keys of tag's period rows, oldest first.
// s.mu must be held.
func (s *SegmentStore) periodKeysLocked(tag string) []string {
	prefix := tag + string(leaf.PeriodSep)
	var keys []string
	for name := range s.rows {
		if key, ok := strings.CutPrefix(name, prefix); ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// buryLocked deletes a row and records its tombstone. s.mu must be held.
func (s *SegmentStore) buryLocked(name string) {
	s.tombs[name] = max(s.tombs[name], s.rows[name].MaxID)
	delete(s.rows, name)
}

func checkPeriod(tag, key string) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	return tagshape.ValidatePeriodKey(key)
}

// ReservePeriod reserves from the row of tag's period key, making it first
// from tag's row (or the period's tombstone) if it is missing.
func (s *SegmentStore) ReservePeriod(ctx context.Context, tag, key string, step int) (leaf.Reservation, error) {
	if err := checkPeriod(tag, key); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q period %s", tag, key)
	if err := s.delayReserve(ctx, op); err != nil {
		return leaf.Reservation{}, err
	}
	if err := s.begin(ctx, op); err != nil {
		return leaf.Reservation{}, err
	}
	defer s.mu.Unlock()
	name := tagshape.PeriodRow(tag, key)
	a, ok := s.rows[name]
	if !ok {
		parent, ok := s.rows[tag]
		if !ok {
			return leaf.Reservation{}, fmt.Errorf("inmem: %s: %w", op, leaf.ErrTagNotFound)
		}
		a = leaf.Alloc{Tag: name, MaxID: max(parent.MaxID, s.tombs[name], 1), Step: parent.Step}
	}
	used := step
	if step <= 0 {
		used = a.Step
	}
	if a.MaxID > math.MaxInt64-int64(used) {
		return leaf.Reservation{}, fmt.Errorf("inmem: %s: %w: max_id %d + step %d overflows", op, leaf.ErrInvalidArgument, a.MaxID, used)
	}
	a.MaxID += int64(used)
	a.UpdateTime = time.Now()
	s.rows[name] = a
	s.reserves++
	return leaf.Reservation{Tag: name, MaxID: a.MaxID, Step: used, StoredStep: a.Step}, nil
}

// GiveBackPeriod is GiveBack on the row of tag's period key.
func (s *SegmentStore) GiveBackPeriod(ctx context.Context, tag, key string, from, expect int64) (bool, error) {
	if err := checkPeriod(tag, key); err != nil {
		return false, err
	}
	if from < 1 || from > expect {
		return false, fmt.Errorf("%w: give back %q period %s from %d at max_id %d: want 1 <= from <= max_id", leaf.ErrInvalidArgument, tag, key, from, expect)
	}
	if err := s.begin(ctx, fmt.Sprintf("give back %q period %s", tag, key)); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	name := tagshape.PeriodRow(tag, key)
	a, ok := s.rows[name]
	if !ok || a.MaxID != expect || from < s.tombs[name] {
		return false, nil
	}
	a.MaxID = from
	a.UpdateTime = time.Now()
	s.rows[name] = a
	return true, nil
}

// Periods lists at most limit of tag's period rows with keys below before
// ("": all), newest first.
func (s *SegmentStore) Periods(ctx context.Context, tag, before string, limit int) ([]leaf.PeriodAlloc, error) {
	if err := checkPeriodPage(tag, before, limit); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, fmt.Sprintf("list periods of %q", tag)); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	keys := s.periodKeysLocked(tag)
	out := []leaf.PeriodAlloc{}
	for i := len(keys) - 1; i >= 0 && len(out) < limit; i-- {
		if before == "" || keys[i] < before {
			a := s.rows[tagshape.PeriodRow(tag, keys[i])]
			out = append(out, leaf.PeriodAlloc{Key: keys[i], MaxID: a.MaxID, Step: a.Step, UpdateTime: a.UpdateTime})
		}
	}
	return out, nil
}

func checkPeriodPage(tag, before string, limit int) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if before != "" {
		if err := tagshape.ValidatePeriodKey(before); err != nil {
			return err
		}
	}
	if limit < 1 {
		return fmt.Errorf("%w: limit %d, want >= 1", leaf.ErrInvalidArgument, limit)
	}
	return nil
}

// CountPeriods counts tag's period rows.
func (s *SegmentStore) CountPeriods(ctx context.Context, tag string) (int, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return 0, err
	}
	if err := s.begin(ctx, fmt.Sprintf("count periods of %q", tag)); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return len(s.periodKeysLocked(tag)), nil
}

// PrunePeriods deletes tag's period rows with keys below before, keeping
// their tombstones, and returns them oldest first.
func (s *SegmentStore) PrunePeriods(ctx context.Context, tag, before string) ([]leaf.PeriodAlloc, error) {
	if err := checkPeriod(tag, before); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, fmt.Sprintf("prune periods of %q", tag)); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []leaf.PeriodAlloc{}
	for _, key := range s.periodKeysLocked(tag) {
		if key >= before {
			break
		}
		name := tagshape.PeriodRow(tag, key)
		a := s.rows[name]
		out = append(out, leaf.PeriodAlloc{Key: key, MaxID: a.MaxID, Step: a.Step, UpdateTime: a.UpdateTime})
		s.buryLocked(name)
	}
	return out, nil
}

// TagShapes reads the shapes of tags; plain tags are not in the map.
func (s *SegmentStore) TagShapes(ctx context.Context, tags []string) (map[string]leaf.TagShape, error) {
	for _, t := range tags {
		if err := leaf.ValidateTag(t); err != nil {
			return nil, err
		}
	}
	if err := s.begin(ctx, "read tag shapes"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string]leaf.TagShape{}
	for _, t := range tags {
		if sh, ok := s.shapes[t]; ok {
			out[t] = sh
		}
	}
	return out, nil
}
