package ordered_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// TestOwnerOncePerProcess: two live generators of one process may not share
// an owner identity (both would renew one lease and issue an ordered tag's
// IDs side by side); once the first is closed, the identity is free.
func TestOwnerOncePerProcess(t *testing.T) {
	const owner = "http://10.0.0.9:8080#once"
	st := testutil.Store(t)
	s := settings(st, func(s *conf) { s.Owner = owner })
	first, err := start(s)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := start(s); !errors.Is(err, leaf.ErrInvalidArgument) {
		if g != nil {
			g.Close(bg)
		}
		t.Fatalf("a second generator with owner %s: %v, want refused", owner, err)
	}
	if err := first.Close(bg); err != nil {
		t.Fatal(err)
	}
	newGen(t, s) // free again
}

// TestTagsOncePerGenerator: one Tags serve one generator; a second
// generator given them is refused, as two generators of one identity are.
func TestTagsOncePerGenerator(t *testing.T) {
	st := testutil.Store(t)
	g := newGen(t, settings(st, func(s *conf) { s.Owner = "http://10.0.0.9:8080#tags" }))
	s := settings(st)
	s.Kinds = g.Tags
	if g2, err := segment.New(bg, s.Config); err == nil || !strings.Contains(err.Error(), "attached to another generator") {
		if g2 != nil {
			g2.Close(bg)
		}
		t.Fatalf("a second generator on the same Tags: %v, want refused", err)
	}
}

// TestPlainGeneratorBesideOwner: a generator given no ordered Tags serves
// an ordered tag as a plain one (docs/ordered-tags.md): beside the tag's
// owner, the IDs of both, drawn at once, are still each issued once.
func TestPlainGeneratorBesideOwner(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 10})
	if err := st.SetOrdered(bg, "seq", true); err != nil {
		t.Fatal(err)
	}
	owner := newGen(t, settings(st, func(s *conf) { s.Owner = "http://10.0.0.9:8080#owner" }))
	plain, err := segment.New(bg, settings(st).Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close(bg) })
	const each = 2000
	ids := make([][]int64, 2)
	var wg sync.WaitGroup
	for i, g := range []interface {
		NextID(context.Context, string) (int64, error)
	}{owner, plain} {
		wg.Go(func() {
			for range each {
				id, err := g.NextID(bg, "seq")
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = append(ids[i], id)
			}
		})
	}
	wg.Wait()
	if st := testutil.StatusOf(plain, "seq"); st.Ordered {
		t.Errorf("the plain generator's status says ordered: %+v", st)
	}
	testutil.CheckUnique(t, append(ids[0], ids[1]...))
}
