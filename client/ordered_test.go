package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/internal/forward"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// lateHandler serves the handler set once the server's URL is known: a
// generator's owner identity is its server's URL.
type lateHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*l.h.Load()).ServeHTTP(w, r)
}

// orderedServer is a server on store as leaf serve wires one: forwarding
// the ordered tags it does not own, or with redirect, answering 307.
func orderedServer(t *testing.T, store *inmem.SegmentStore, i int, redirect bool) *server {
	t.Helper()
	lh := &lateHandler{}
	s := serveHandler(t, lh)
	owner := fmt.Sprintf("%s#n%d", s.URL, i)
	gen := startSegment(t, store, func(st *segment.Settings) { st.Owner, st.OwnerLease = owner, 2*time.Second })
	fwd, err := forward.New(forward.Settings{Local: gen, Self: owner, Logger: testutil.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	var seg httpapi.SegmentGenerator = forward.Wrap(gen, fwd)
	if redirect {
		seg = gen
	}
	var h http.Handler = httpapi.New(httpapi.Config{Segment: seg, Logger: testutil.Logger()})
	lh.h.Store(&h)
	return s
}

// TestOrderedTag: the client takes an ordered tag's IDs from any server,
// through a forwarding server and through a redirecting one, in order; its
// ranges and buffers are refused with ErrOrderedTag.
func TestOrderedTag(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t, time.Minute)
	store := newStore(t, 30, "seq")
	if err := store.SetOrdered(ctx, "seq", true); err != nil {
		t.Fatal(err)
	}
	a := orderedServer(t, store, 0, false)
	b := orderedServer(t, store, 1, false)
	r := orderedServer(t, store, 2, true)
	c := newClient(t, []string{a.URL, b.URL, r.URL})

	// Round robin over the three, one call after the other: the IDs
	// strictly increase, whoever owns the tag.
	var last int64
	for i := range 60 {
		var ids []int64
		var err error
		if i%2 == 0 {
			var id int64
			id, err = c.NextID(ctx, "seq")
			ids = []int64{id}
		} else {
			ids, err = c.NextIDs(ctx, "seq", 1+i%5)
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if ids[0] <= last {
			t.Fatalf("call %d: %v after %d, want increasing", i, ids, last)
		}
		last = ids[len(ids)-1]
	}

	if _, _, err := c.Range(ctx, "seq", 10); !errors.Is(err, client.ErrOrderedTag) || !errors.Is(err, leaf.ErrOrderedTag) {
		t.Errorf("Range: %v, want ErrOrderedTag", err)
	}
	buf, err := c.Buffered("seq")
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	for range 2 { // the refusal is final: no lease is tried again
		if _, err := buf.Next(ctx); !errors.Is(err, client.ErrOrderedTag) || !errors.Is(err, leaf.ErrOrderedTag) {
			t.Fatalf("Buffered.Next: %v, want ErrOrderedTag", err)
		}
	}
}
