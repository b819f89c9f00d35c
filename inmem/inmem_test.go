package inmem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/leaftest"
)

func TestSegmentStore(t *testing.T) {
	leaftest.TestSegmentStore(t, func(t *testing.T) func() (leaf.SegmentStore, error) {
		// Instances on one database share one store.
		s := inmem.NewSegmentStore()
		return func() (leaf.SegmentStore, error) { return s, nil }
	}, leaftest.StoreTraits{})
}

var errBoom = errors.New("boom")

func TestSetDown(t *testing.T) {
	ctx := t.Context()
	s := inmem.NewSegmentStore()
	if err := s.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	s.SetDown(errBoom)
	calls := []struct {
		name string
		call func() error
	}{
		{"Reserve", func() error { _, err := s.Reserve(ctx, "t", 0); return err }},
		{"GiveBack", func() error { _, err := s.GiveBack(ctx, "t", 1, 11); return err }},
		{"Tags", func() error { _, err := s.Tags(ctx); return err }},
		{"Allocs", func() error { _, err := s.Allocs(ctx); return err }},
		{"Alloc", func() error { _, err := s.Alloc(ctx, "t"); return err }},
		{"Ping", func() error { return s.Ping(ctx) }},
		{"CreateTag", func() error { return s.CreateTag(ctx, leaf.Alloc{Tag: "u", MaxID: 1, Step: 1}) }},
		{"SetStep", func() error { return s.SetStep(ctx, "t", 5) }},
		{"DeleteTag", func() error { return s.DeleteTag(ctx, "t") }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, errBoom) {
			t.Errorf("%s while down: %v, want %v", c.name, err, errBoom)
		}
	}
	if n := s.Reserves(); n != 0 {
		t.Errorf("Reserves while down = %d", n)
	}
	s.SetDown(nil)
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Errorf("%s after SetDown(nil): %v", c.name, err)
		}
	}
	if n := s.Reserves(); n != 1 {
		t.Errorf("Reserves = %d, want 1", n)
	}
}

func TestSetDelay(t *testing.T) {
	s := inmem.NewSegmentStore()
	if err := s.CreateTag(t.Context(), leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	s.SetDelay(50 * time.Millisecond)
	begin := time.Now()
	if _, err := s.Reserve(t.Context(), "t", 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 50*time.Millisecond {
		t.Errorf("Reserve took %v with a 50ms delay", d)
	}

	// A context that ends first wins, and nothing is reserved.
	s.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Reserve(ctx, "t", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Reserve past its deadline: %v", err)
	}
	if n := s.Reserves(); n != 1 {
		t.Errorf("Reserves = %d, want 1", n)
	}
	s.SetDelay(0)
	a, err := s.Alloc(t.Context(), "t")
	if err != nil || a.MaxID != 11 {
		t.Errorf("Alloc = %+v, %v; want max_id 11", a, err)
	}
}
