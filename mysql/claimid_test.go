package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

// idRow reads the ip_port and max_timestamp of worker id's row.
func idRow(t *testing.T, db *sql.DB, id int64) (string, sql.NullInt64) {
	t.Helper()
	var (
		ipPort string
		mark   sql.NullInt64
	)
	if err := db.QueryRowContext(t.Context(), "SELECT ip_port, max_timestamp FROM leaf_workerid_alloc WHERE id = ?", id).Scan(&ipPort, &mark); err != nil {
		t.Fatalf("row of worker %d: %v", id, err)
	}
	return ipPort, mark
}

// TestRegisterID: a given worker ID, 0 included, is claimed under a row of
// its own with a lease that expires; refused with leaf.ErrWorkerInUse while
// another live server holds it (whether the caller or the registry stops
// waiting first) and when the ID is an endpoint's; handed over with its mark
// on Release and after a killed holder's lease lapses. Endpoints registered
// afterwards get IDs past those claimed by number.
func TestRegisterID(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	db := rawDB(t, dsn)
	ep0, ep1 := leaftest.TestEndpoint(0), leaftest.TestEndpoint(1)

	a := openLeased(t, dsn, 0)
	before := time.Now()
	ca, err := a.RegisterID(testutil.Context(t, 10*time.Second), ep0, 0)
	if err != nil {
		t.Fatalf("A: RegisterID(0): %v", err)
	}
	if ca.WorkerID != 0 || ca.HighWater != 0 || ca.Expires.Before(before) || ca.Expires.After(time.Now().Add(leaseTTL)) {
		t.Fatalf("A: claim %+v, want worker 0, no history, an expiry within the lease TTL %v", ca, leaseTTL)
	}
	if ipPort, _ := idRow(t, db, 0); ipPort != "worker-id/0" {
		t.Fatalf("row of worker 0 has ip_port %q, want worker-id/0", ipPort)
	}
	expires, err := a.Heartbeat(testutil.Context(t, 5*time.Second), time.Now().UnixMilli()+1000)
	if err != nil || time.Until(expires) <= 0 || time.Until(expires) > leaseTTL {
		t.Fatalf("A: Heartbeat = %v, %v; want an expiry within the lease TTL", expires, err)
	}
	holder := leaseHolder(t, db, 0)

	t.Run("held: refused after ClaimWait while the holder renews", func(t *testing.T) {
		stop := keepAlive(t, a)
		defer stop()
		b := openLeased(t, dsn, time.Hour) // only the database's clock times the lease
		_, err := b.RegisterID(testutil.Context(t, 30*time.Second), ep1, 0)
		if !errors.Is(err, leaf.ErrWorkerInUse) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("B: RegisterID(0) while A holds it = %v, want ErrWorkerInUse after its own wait", err)
		}
		for _, want := range []string{ep0.String(), holder, "Another live server has this worker ID"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
		// Long enough to look at the lease on a busy machine, shorter
		// than the wait.
		_, err = b.RegisterID(testutil.Context(t, b.ClaimWait()/2), ep1, 0)
		if !errors.Is(err, leaf.ErrWorkerInUse) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("B: RegisterID(0) with a deadline of half its wait = %v, want ErrWorkerInUse and DeadlineExceeded", err)
		}
	})

	t.Run("handed over on Release with the mark", func(t *testing.T) {
		mark := time.Now().UnixMilli() + 800
		if err := a.Release(testutil.Context(t, 5*time.Second), mark); err != nil {
			t.Fatalf("A: Release: %v", err)
		}
		b := openLeased(t, dsn, 0)
		cb, err := b.RegisterID(testutil.Context(t, 10*time.Second), ep1, 0)
		if err != nil || cb.WorkerID != 0 || cb.HighWater != mark {
			t.Fatalf("B: RegisterID(0) after A's Release = %+v, %v; want worker 0 with A's mark %d", cb, err, mark)
		}
	})

	t.Run("taken over once a killed holder's lease lapses", func(t *testing.T) {
		k := openLeased(t, dsn, 0)
		if _, err := k.RegisterID(testutil.Context(t, 10*time.Second), ep0, 7); err != nil {
			t.Fatal(err)
		}
		mark := time.Now().UnixMilli() + 300
		if _, err := k.Heartbeat(testutil.Context(t, 5*time.Second), mark); err != nil {
			t.Fatal(err)
		}
		_ = k.Close() // kill -9: no Release
		n := openLeased(t, dsn, 0)
		c, err := n.RegisterID(testutil.Context(t, 30*time.Second), ep1, 7)
		if err != nil || c.WorkerID != 7 || c.HighWater != mark {
			t.Fatalf("RegisterID(7) after its holder was killed = %+v, %v; want worker 7 with mark %d", c, err, mark)
		}
		if h := leaseHolder(t, db, 7); h == "" || strings.Contains(h, "unknown") {
			t.Fatalf("lease holder of 7: %q", h)
		}
	})

	t.Run("one ID space with endpoints", func(t *testing.T) {
		e := openLeased(t, dsn, 0)
		ce, err := e.Register(testutil.Context(t, 10*time.Second), leaf.Endpoint{IP: "10.9.0.1", Port: 8080}, leaftest.MaxWorkerID)
		if err != nil {
			t.Fatal(err)
		}
		if ce.WorkerID <= 7 {
			t.Errorf("an endpoint registered after IDs 0 and 7 were claimed by number got %d, want above them", ce.WorkerID)
		}
		f := openLeased(t, dsn, 0)
		_, err = f.RegisterID(testutil.Context(t, 10*time.Second), ep1, ce.WorkerID)
		if !errors.Is(err, leaf.ErrWorkerInUse) || !strings.Contains(err.Error(), "10.9.0.1:8080") {
			t.Fatalf("RegisterID(%d), an endpoint's ID = %v, want ErrWorkerInUse naming the endpoint", ce.WorkerID, err)
		}
	})

	t.Run("invalid input", func(t *testing.T) {
		g := openLeased(t, dsn, 0)
		ctx := testutil.Context(t, 10*time.Second)
		if _, err := g.RegisterID(ctx, ep0, -1); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("RegisterID(-1) = %v, want ErrInvalidArgument", err)
		}
		if _, err := g.RegisterID(ctx, leaf.Endpoint{IP: "x", Port: 1}, 1); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("RegisterID with a bad endpoint = %v, want ErrInvalidArgument", err)
		}
	})
}

// TestRegisterIDRace: servers racing for one new ID: exactly one wins, the
// others are refused with leaf.ErrWorkerInUse, and the ID has one row.
func TestRegisterIDRace(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t)
	leaftest.RegisterIDRace(t, func(t *testing.T) leaftest.IDClaimer { return openLeased(t, dsn, 0) })
	var rows int
	if err := rawDB(t, dsn).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM leaf_workerid_alloc").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d rows in leaf_workerid_alloc (%v), want one", rows, err)
	}
}
