package leaftest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
)

// FencedStore is a SQL segment store with the failover fence
// (sqlstore.Store.WatchFailover).
type FencedStore interface {
	leaf.SegmentStore
	leaf.SegmentAdmin
	WatchFailover(ctx context.Context, set sqlstore.FailoverConfig) error
	FailoverStatus() (sqlstore.FailoverStatus, bool)
	DB() *sql.DB
}

// TestFailoverFence checks the failover fence on one real server, playing
// the two ways a failover shows to a store: the row of leaf_failover names
// another database than the one reserves reach (a replica promoted: the row
// was copied from its old primary), and a reserve hands out a range again
// (a database gone back in time, whatever it calls itself). In both, the
// last reserve is lost (max_id lowered as the replica never saw it); the
// store refuses to reserve, reports its own ranges, ends the fence after
// the window, and the next range lies above every range it was given, with
// the margin's gap. open opens a new store on the test's database; rebind
// writes a statement's ? placeholders as its database wants them.
func TestFailoverFence(t *testing.T, open func(t *testing.T) FencedStore, rebind func(string) string) {
	ctx := ctxFor(t)
	s := open(t)
	set := sqlstore.FailoverConfig{Poll: 50 * time.Millisecond, Window: 300 * time.Millisecond, Lag: time.Minute, MarginSteps: 10, Logger: quietLogger()}
	if err := s.WatchFailover(ctx, set); err != nil {
		t.Fatalf("WatchFailover: %v", err)
	}
	st, ok := s.FailoverStatus()
	if !ok || st.State != "serving" || st.Identity == "" || st.Identity != st.Live {
		t.Fatalf("status after WatchFailover: %+v, %v; want serving, naming the database reached", st, ok)
	}
	t.Logf("identity %q", st.Identity)
	if err := s.CreateTag(ctx, leaf.Alloc{Tag: "fenced", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	reserve := func() (leaf.Reservation, error) { return s.Reserve(ctx, "fenced", 0) }
	var last int64
	for range 2 {
		r, err := reserve()
		if err != nil {
			t.Fatal(err)
		}
		last = r.MaxID
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.DB().ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// waitFenced waits until the store has seen a fence end after fences
	// before it; then the next range must start at or above last, the end
	// of the highest range the store was given.
	waitFenced := func(fences int64) sqlstore.FailoverStatus {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, _ := s.FailoverStatus()
			if st.Fences > fences && st.State == "serving" {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fence did not end: %+v", st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	for _, c := range []struct {
		name     string
		failover func()
	}{
		{"identity changed", func() {
			// The replica promoted has the row of the old primary, and not
			// the last reserve.
			exec(rebind("UPDATE leaf_failover SET db_identity = ? WHERE id = 1"), "server_id:old-primary")
		}},
		{"range handed out again", func() {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _ := s.FailoverStatus()
			lost, err := reserve() // reaches the "old primary", then lost
			if err != nil {
				t.Fatal(err)
			}
			last = lost.MaxID
			exec(rebind("UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?"), lost.MaxID-int64(lost.Step), "fenced")
			c.failover()
			if _, err := reserve(); !errors.Is(err, sqlstore.ErrFailover) || !errors.Is(err, leaf.ErrNotReady) {
				t.Fatalf("reserve after the failover: %v, want ErrFailover (ErrNotReady)", err)
			}
			st := waitFenced(before.Fences)
			r, err := reserve()
			if err != nil {
				t.Fatalf("reserve after the fence: %v", err)
			}
			if start := r.MaxID - int64(r.Step); start < last {
				t.Fatalf("range [%d, %d) after the fence, below %d handed out before it", start, r.MaxID, last)
			}
			if st.Gap < 10*10 || st.Detected <= before.Detected || st.Reported < st.Epoch {
				t.Errorf("status after the fence: %+v, want a gap of at least 10 steps, a detection and a report", st)
			}
			last = r.MaxID
			t.Logf("fenced: %+v; next range [%d, %d)", st, r.MaxID-int64(r.Step), r.MaxID)
		})
	}

	// A give-back lowers max_id on purpose: the next range, starting where
	// the given-back tail did, is no database gone back in time.
	t.Run("give-back", func(t *testing.T) {
		before, _ := s.FailoverStatus()
		r, err := reserve()
		if err != nil {
			t.Fatal(err)
		}
		from := r.MaxID - int64(r.Step) + 1 // one ID of the range issued
		if ok, err := s.GiveBack(ctx, "fenced", from, r.MaxID); err != nil || !ok {
			t.Fatalf("GiveBack: %v, %v", ok, err)
		}
		next, err := reserve()
		if err != nil || next.MaxID-int64(next.Step) != from {
			t.Fatalf("reserve after a give-back: %+v, %v; want a range from %d and no failover", next, err, from)
		}
		if st, _ := s.FailoverStatus(); st.Detected != before.Detected || st.State != "serving" {
			t.Errorf("status after a give-back: %+v, want no failover detected", st)
		}
	})
}
