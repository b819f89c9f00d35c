package ordered_test

import (
	"errors"
	"strings"
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
