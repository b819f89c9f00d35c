package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

// TestRegisterID: a given worker ID is claimed with its mark, refused with
// leaf.ErrWorkerInUse while another live server holds it (however long the
// caller waits), free at once after the holder's Release and after its lease
// expires when it died without one. Its mark is handed over and never
// lowered, even when it lies ahead of the clock.
func TestRegisterID(t *testing.T) {
	addr := testutil.Etcd(t)
	cfg := namespace(t, addr)
	cfg.TTL = 2 * time.Second
	cli := admin(t, addr)
	ep0, ep1 := leaftest.TestEndpoint(0), leaftest.TestEndpoint(1)
	markKey := func(id int) string { return cfg.Prefix + cfg.Name + "/mark/" + strconv.Itoa(id) }
	workerKey := func(id int) string { return cfg.Prefix + cfg.Name + "/worker/" + strconv.Itoa(id) }

	a, b := open(t, cfg), open(t, cfg)
	ca, err := a.RegisterID(testutil.Context(t, 10*time.Second), ep0, 5)
	if err != nil {
		t.Fatalf("A: RegisterID(5): %v", err)
	}
	if ca.WorkerID != 5 || ca.HighWater != 0 || ca.Expires.IsZero() {
		t.Fatalf("A: claim %+v, want worker 5, no history, an expiry", ca)
	}

	t.Run("held: refused when the caller gives up", func(t *testing.T) {
		_, err := b.RegisterID(testutil.Context(t, 300*time.Millisecond), ep1, 5)
		if !errors.Is(err, leaf.ErrWorkerInUse) || !strings.Contains(err.Error(), ep0.String()) {
			t.Fatalf("B: RegisterID(5) while A holds it = %v, want ErrWorkerInUse naming %s", err, ep0)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("held: refused after ClaimWait while the holder renews", func(t *testing.T) {
		// A heartbeats throughout B's wait, as a live server does.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(300 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := a.Heartbeat(testutil.Context(t, 5*time.Second), time.Now().UnixMilli()+500); err != nil {
						t.Errorf("A: Heartbeat: %v", err)
						return
					}
				}
			}
		})
		_, err := b.RegisterID(testutil.Context(t, etcd.ClaimWait(cfg.TTL)+10*time.Second), ep1, 5)
		close(stop)
		wg.Wait()
		if !errors.Is(err, leaf.ErrWorkerInUse) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("B: RegisterID(5) = %v, want ErrWorkerInUse after its own wait, not the caller's deadline", err)
		}
		for _, want := range []string{ep0.String(), workerKey(5), "still renewed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
	})

	t.Run("another ID is free", func(t *testing.T) {
		c, err := b.RegisterID(testutil.Context(t, 10*time.Second), ep1, 6)
		if err != nil || c.WorkerID != 6 {
			t.Fatalf("B: RegisterID(6) = %+v, %v", c, err)
		}
		if err := b.Release(testutil.Context(t, 10*time.Second), time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("handed over on Release to a waiting server, with the mark", func(t *testing.T) {
		log := &testutil.LogBuffer{}
		cw := cfg
		cw.Logger = slog.New(slog.NewTextHandler(log, nil))
		w := open(t, cw)
		type result struct {
			c   leaf.WorkerClaim
			err error
		}
		got := make(chan result, 1)
		go func() {
			c, err := w.RegisterID(testutil.Context(t, 20*time.Second), ep1, 5)
			got <- result{c, err}
		}()
		// Release only once W waits on the held key, so that the handover
		// goes through the wait rather than a free key.
		for !strings.Contains(log.String(), "waiting for its lease to lapse") {
			select {
			case r := <-got:
				t.Fatalf("W: RegisterID(5) returned before waiting: %+v, %v", r.c, r.err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		mark := time.Now().UnixMilli() + 700
		if err := a.Release(testutil.Context(t, 10*time.Second), mark); err != nil {
			t.Fatalf("A: Release: %v", err)
		}
		r := <-got
		if r.err != nil || r.c.WorkerID != 5 || r.c.HighWater != mark {
			t.Fatalf("W: RegisterID(5) after A's Release = %+v, %v; want worker 5 with A's mark %d", r.c, r.err, mark)
		}
		if err := w.Release(testutil.Context(t, 10*time.Second), mark); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("taken over once a dead holder's lease expires", func(t *testing.T) {
		d := open(t, cfg)
		if _, err := d.RegisterID(testutil.Context(t, 10*time.Second), ep0, 7); err != nil {
			t.Fatal(err)
		}
		mark := time.Now().UnixMilli() + 300
		if _, err := d.Heartbeat(testutil.Context(t, 10*time.Second), mark); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(testutil.Context(t, 10*time.Second), workerKey(7))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("worker key of 7: %v %v", resp, err)
		}
		lease := clientv3.LeaseID(resp.Kvs[0].Lease)
		_ = d.Close() // kill -9: no Release, the lease runs on
		e := open(t, cfg)
		c, err := e.RegisterID(testutil.Context(t, etcd.ClaimWait(cfg.TTL)+10*time.Second), ep1, 7)
		if err != nil || c.WorkerID != 7 || c.HighWater != mark {
			t.Fatalf("E: RegisterID(7) after D died = %+v, %v; want worker 7 with D's mark %d", c, err, mark)
		}
		ttl, err := cli.TimeToLive(testutil.Context(t, 10*time.Second), lease)
		if err != nil || ttl.TTL != -1 {
			t.Fatalf("E took worker 7 while D's lease lives: TimeToLive = %+v, %v", ttl, err)
		}
	})

	t.Run("a mark ahead of the clock is returned and kept", func(t *testing.T) {
		ahead := time.Now().Add(time.Hour).UnixMilli()
		ctx := testutil.Context(t, 10*time.Second)
		if _, err := cli.Put(ctx, markKey(9), `{"ip":"10.9.9.9","port":"8080","timestamp":`+strconv.FormatInt(ahead, 10)+`}`); err != nil {
			t.Fatal(err)
		}
		f := open(t, cfg)
		c, err := f.RegisterID(ctx, ep0, 9)
		if err != nil || c.HighWater != ahead {
			t.Fatalf("RegisterID(9) = %+v, %v; want the mark %d", c, err, ahead)
		}
		resp, err := cli.Get(ctx, markKey(9))
		if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), strconv.FormatInt(ahead, 10)) {
			t.Fatalf("mark of 9 after the claim: %v %v; want %d kept", resp, err, ahead)
		}
	})

	t.Run("an unreadable mark is refused and the ID left free", func(t *testing.T) {
		ctx := testutil.Context(t, 10*time.Second)
		if _, err := cli.Put(ctx, markKey(10), "not json"); err != nil {
			t.Fatal(err)
		}
		g := open(t, cfg)
		if _, err := g.RegisterID(ctx, ep0, 10); err == nil || !strings.Contains(err.Error(), "unreadable") {
			t.Fatalf("RegisterID(10) with an unreadable mark = %v", err)
		}
		if resp, err := cli.Get(ctx, workerKey(10)); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("worker key of 10 after the refusal: %v %v", resp, err)
		}
	})

	t.Run("invalid input", func(t *testing.T) {
		ctx := testutil.Context(t, 10*time.Second)
		if _, err := b.RegisterID(ctx, ep0, -1); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("RegisterID(-1) = %v, want ErrInvalidArgument", err)
		}
		if _, err := b.RegisterID(ctx, leaf.Endpoint{IP: "x", Port: 1}, 1); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("RegisterID with a bad endpoint = %v, want ErrInvalidArgument", err)
		}
	})
}

// TestRegisterIDRace: servers racing for one ID: exactly one wins, the
// others are refused with leaf.ErrWorkerInUse.
func TestRegisterIDRace(t *testing.T) {
	cfg := namespace(t, testutil.Etcd(t))
	leaftest.RegisterIDRace(t, func(t *testing.T) leaftest.IDClaimer { return open(t, cfg) })
}
