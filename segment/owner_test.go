package segment_test

import (
	"errors"
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
	s := settings(st, func(s *segment.Config) { s.Owner = owner })
	first, err := segment.New(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := segment.New(bg, s); !errors.Is(err, leaf.ErrInvalidArgument) {
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
