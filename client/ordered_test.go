package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/ordered"
	"github.com/leafgo/leaf/ordered/forward"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// lateHandler serves the handler set once the server's URL is known: a
// generator's owner identity is its server's URL.
type lateHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*l.h.Load()).ServeHTTP(w, r)
}

// orderedServer is a server on store as leaf serve wires one: forwarding
// the ordered tags it does not own, or with redirect, answering 307.
func orderedServer(t *testing.T, store *sqlite.Store, i int, redirect bool) (*server, *segment.Generator) {
	t.Helper()
	lh := &lateHandler{}
	s := serveHandler(t, lh)
	owner := fmt.Sprintf("%s#n%d", s.URL, i)
	cfg := segment.DefaultConfig()
	cfg.Store, cfg.Logger = store, testutil.Logger()
	gen, tags, err := ordered.NewGenerator(t.Context(), cfg, ordered.Config{Owner: owner, OwnerLease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gen.Close(context.Background()) })
	fwd, err := forward.New(forward.Config{Local: gen, Watcher: tags, Self: owner, Logger: testutil.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	hc := httpapi.Config{Segment: gen, Ordered: tags, Forward: fwd, Logger: testutil.Logger()}
	if redirect {
		hc.Forward = nil
	}
	var h http.Handler = httpapi.New(hc)
	lh.h.Store(&h)
	return s, gen
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
	a, _ := orderedServer(t, store, 0, false)
	b, _ := orderedServer(t, store, 1, false)
	r, _ := orderedServer(t, store, 2, true)
	// Without routing to the owner, so that the calls go through the
	// forwards and the redirects.
	c := newClient(t, []string{a.URL, b.URL, r.URL}, client.WithOwnerRouting(false))

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

	if _, _, err := c.NextRange(ctx, "seq", 10); !errors.Is(err, client.ErrOrderedTag) || !errors.Is(err, leaf.ErrOrderedTag) {
		t.Errorf("Range: %v, want ErrOrderedTag", err)
	}
	buf, err := c.Buffered("seq")
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	for range 2 { // the refusal is final: no lease is tried again
		if _, err := buf.NextID(ctx); !errors.Is(err, client.ErrOrderedTag) || !errors.Is(err, leaf.ErrOrderedTag) {
			t.Fatalf("Buffered.NextID: %v, want ErrOrderedTag", err)
		}
	}
}

// TestOrderedOwnerRouting: a client given every server sends an ordered
// tag's calls to its owner once a forwarded answer has named it, sparing the
// forward, and the IDs keep their order; when the owner goes away, the
// client finds the next one; with routing off, calls spread as for any tag.
func TestOrderedOwnerRouting(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t, time.Minute)
	store := newStore(t, 1000, "seq")
	if err := store.SetOrdered(ctx, "seq", true); err != nil {
		t.Fatal(err)
	}
	var srvs [3]*server
	var gens [3]*segment.Generator
	urls := make([]string, 3)
	for i := range srvs {
		srvs[i], gens[i] = orderedServer(t, store, i, false)
		urls[i] = srvs[i].URL
	}
	// The first server issues the first ID, and so owns the tag.
	if _, err := gens[0].NextID(ctx, "seq"); err != nil {
		t.Fatal(err)
	}
	// A long attempt timeout: the counts below assume no attempt is
	// given up on and sent again, whatever the machine's load.
	const patient = 30 * time.Second
	c := newClient(t, urls, client.WithTimeout(patient))
	requests := func(c *client.Client) []uint64 {
		var n []uint64
		for _, e := range c.Stats().Endpoints {
			n = append(n, e.Requests)
		}
		return n
	}

	// Concurrent callers: until a forwarded answer names the owner, calls
	// go round robin; after it, to the owner.
	const workers, each = 8, 100
	answers := testutil.AskConcurrently(t, workers, each, func(i int) ([]int64, error) {
		if i%3 == 0 {
			return c.NextIDs(ctx, "seq", 3)
		}
		id, err := c.NextID(ctx, "seq")
		return []int64{id}, err
	})
	testutil.CheckOrdered(t, answers)
	got := requests(c)
	if away := got[1] + got[2]; got[0] != workers*each-away || away > 3*workers {
		t.Errorf("requests per server %v: want all but the few sent before the owner was known (at most %d) at the owner, the first", got, 3*workers)
	}

	// The owner goes away (its lease released): the next calls fail over,
	// and once the tag's new owner is named, go to it.
	srvs[0].Close()
	if err := gens[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, a := range answers {
		last = max(last, slices.Max(a.IDs))
	}
	next := func(k int) {
		t.Helper()
		for range k {
			id, err := c.NextID(ctx, "seq")
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("%d after %d: want increasing", id, last)
			}
			last = id
		}
	}
	next(20)
	owner := -1
	for i := 1; i < 3; i++ {
		if _, err := gens[i].NextID(ctx, "seq"); err == nil {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("neither remaining server owns the tag")
	}
	before := requests(c)
	next(50)
	after := requests(c)
	if d := after[owner] - before[owner]; d != 50 {
		t.Errorf("the new owner (server %d) got %d of the last 50 calls, want all: requests per server %v", owner, d, after)
	}

	// A known owner lapses (the tag may have been made plain since): the
	// calls spread again until a forwarded answer names the owner anew.
	client.LapseOwners(c)
	next(10)
	before = requests(c)
	if away := before[0] + before[3-owner] - after[0] - after[3-owner]; away == 0 {
		t.Errorf("after the owner lapsed, no call went elsewhere: requests per server %v", before)
	}
	next(10)
	if d := requests(c)[owner] - before[owner]; d != 10 {
		t.Errorf("the owner, named again, got %d of the next 10 calls, want all", d)
	}

	// Routing off: the calls go round robin, as for any tag.
	off := newClient(t, urls[1:], client.WithOwnerRouting(false), client.WithTimeout(patient))
	for range 40 {
		if _, err := off.NextID(ctx, "seq"); err != nil {
			t.Fatal(err)
		}
	}
	if got := requests(off); got[0] != 20 || got[1] != 20 {
		t.Errorf("with routing off, requests per server %v, want 20 each", got)
	}

	// A server that redirects to the owner: after the first call, the
	// client calls the owner itself.
	r, _ := orderedServer(t, store, 3, true)
	viaRedirect := newClient(t, []string{r.URL, urls[owner]}, client.WithTimeout(patient))
	for range 20 {
		if _, err := viaRedirect.NextID(ctx, "seq"); err != nil {
			t.Fatal(err)
		}
	}
	if got := requests(viaRedirect); got[0] != 1 || got[1] != 19 {
		t.Errorf("through a redirecting server, requests per server %v, want the first at it and the rest at the owner", got)
	}
}
