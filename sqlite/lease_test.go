package sqlite_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/sqlite"
)

// The leases of ordered tags, on the store's clock, here the fake one of a
// testing/synctest bubble, which stands still between sleeps: one owner at
// a time, a new token per owner, renewals fenced by token, a release that
// lets another take over at once, exact lease lengths. (It ran on the
// in-memory store of package inmem, the generator tests' store before
// they moved here.)
func TestOrderedLeasesFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s, err := sqlite.Open(ctx, testutil.SQLitePath(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		for _, tag := range []string{"a", "b", "c"} {
			if err := s.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok, err := s.TagLease(ctx, "a"); ok || err != nil {
			t.Fatalf("TagLease of a plain tag: ok %v, %v", ok, err)
		}
		if _, err := s.AcquireTag(ctx, "a", "x#1", time.Second, leaf.TagLease{}); !errors.Is(err, leaf.ErrTagNotFound) {
			t.Fatalf("AcquireTag of a plain tag: %v, want ErrTagNotFound", err)
		}
		if err := s.SetOrdered(ctx, "nope", true); !errors.Is(err, leaf.ErrTagNotFound) {
			t.Fatalf("SetOrdered of a missing tag: %v", err)
		}
		for _, tag := range []string{"c", "a"} {
			if err := s.SetOrdered(ctx, tag, true); err != nil {
				t.Fatal(err)
			}
		}
		if l, ok, err := s.TagLease(ctx, "a"); !ok || err != nil || l.Held() || l.Owner != "" {
			t.Fatalf("TagLease of a new ordered tag: %+v %v %v", l, ok, err)
		}

		l1, err := s.AcquireTag(ctx, "a", "http://x#1", 10*time.Second, leaf.TagLease{})
		if err != nil || l1.Owner != "http://x#1" || l1.Left != 10*time.Second || l1.Token < 1 {
			t.Fatalf("first AcquireTag: %+v, %v", l1, err)
		}
		l2, err := s.AcquireTag(ctx, "a", "http://y#2", 10*time.Second, l1)
		if err != nil || l2.Owner != "http://x#1" || l2.Token != l1.Token {
			t.Fatalf("AcquireTag of a held tag, watching it, changed it: %+v, %v", l2, err)
		}
		time.Sleep(4 * time.Second)
		if l, err := s.RenewTag(ctx, "a", "http://x#1", l1.Token, 10*time.Second); err != nil || l.Left != 10*time.Second {
			t.Fatalf("RenewTag: %+v, %v", l, err)
		}
		for _, c := range []struct {
			owner string
			token int64
		}{{"http://y#2", l1.Token}, {"http://x#1", l1.Token + 1}} {
			if _, err := s.RenewTag(ctx, "a", c.owner, c.token, time.Second); !errors.Is(err, leaf.ErrLeaseLost) {
				t.Errorf("RenewTag by %s with token %d: %v, want ErrLeaseLost", c.owner, c.token, err)
			}
		}
		time.Sleep(10 * time.Second) // the lease runs out
		ran, _, _ := s.TagLease(ctx, "a")
		if ran.Held() || ran.Left > 0 {
			t.Errorf("lease after it ran out: %+v", ran)
		}
		if l, err := s.AcquireTag(ctx, "a", "http://y#2", 10*time.Second, l1); err != nil || !l.Same(ran) {
			t.Fatalf("AcquireTag watching the lease before its renewal: %+v, %v; want %+v unchanged", l, err, ran)
		}
		l3, err := s.AcquireTag(ctx, "a", "http://y#2", 10*time.Second, ran)
		if err != nil || l3.Owner != "http://y#2" || l3.Token <= l1.Token {
			t.Fatalf("AcquireTag after the lease ran out: %+v, %v (first token %d)", l3, err, l1.Token)
		}
		if _, err := s.RenewTag(ctx, "a", "http://x#1", l1.Token, time.Second); !errors.Is(err, leaf.ErrLeaseLost) {
			t.Errorf("RenewTag after the lease was taken over: %v", err)
		}
		if _, err := s.ReserveOwned(ctx, "a", "http://x#1", l1.Token, 0); !errors.Is(err, leaf.ErrLeaseLost) {
			t.Errorf("ReserveOwned after the lease was taken over: %v", err)
		}
		if r, err := s.ReserveOwned(ctx, "a", "http://y#2", l3.Token, 0); err != nil || r.Start() != 1 {
			t.Errorf("ReserveOwned by the new owner: %+v, %v; want [1, 11)", r, err)
		}
		if ok, err := s.ReleaseTag(ctx, "a", "http://y#2", l1.Token); ok || err != nil {
			t.Errorf("ReleaseTag with an old token: %v, %v", ok, err)
		}
		if ok, err := s.ReleaseTag(ctx, "a", "http://y#2", l3.Token); !ok || err != nil {
			t.Errorf("ReleaseTag: %v, %v", ok, err)
		}
		l4, err := s.AcquireTag(ctx, "a", "http://x#1", 10*time.Second, leaf.TagLease{})
		if err != nil || l4.Owner != "http://x#1" || l4.Token <= l3.Token {
			t.Fatalf("AcquireTag after a release: %+v, %v", l4, err)
		}

		// Across a plain spell the lease starts over: no owner, and a
		// token that may return to a value it had (the SQL stores forget
		// it with the row; the owner's nonce tells tenures apart, see
		// sqlstore's leaf_tag_owner), where package inmem's went on.
		if err := s.SetOrdered(ctx, "a", false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RenewTag(ctx, "a", "http://x#1", l4.Token, time.Second); !errors.Is(err, leaf.ErrLeaseLost) {
			t.Errorf("RenewTag of a tag made plain: %v", err)
		}
		if err := s.SetOrdered(ctx, "a", true); err != nil {
			t.Fatal(err)
		}
		if l, _, err := s.TagLease(ctx, "a"); err != nil || l.Owner != "" || l.Held() {
			t.Errorf("lease after a plain spell: %+v, %v; want no owner", l, err)
		}
		if l, err := s.AcquireTag(ctx, "a", "http://x#1", time.Second, leaf.TagLease{}); err != nil || l.Owner != "http://x#1" || l.Token < 1 {
			t.Errorf("AcquireTag after a plain spell: %+v, %v", l, err)
		}

		list, err := s.OrderedTags(ctx, "", 0)
		if err != nil || len(list) != 2 || list[0].Tag != "a" || list[1].Tag != "c" || list[0].Owner != "http://x#1" {
			t.Fatalf("OrderedTags: %+v, %v", list, err)
		}
		if list, err := s.OrderedTags(ctx, "a", 1); err != nil || len(list) != 1 || list[0].Tag != "c" {
			t.Fatalf("OrderedTags after a: %+v, %v", list, err)
		}

		// Deleting the tag takes its lease; created again, it is plain.
		if err := s.DeleteTag(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateTag(ctx, leaf.Alloc{Tag: "a", Step: 10}); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.TagLease(ctx, "a"); ok {
			t.Error("a tag deleted and created again is still ordered")
		}
	})
}
