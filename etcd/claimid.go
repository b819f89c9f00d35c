package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/backoff"
)

// claimMargin is how long past the lease TTL RegisterID waits for an ID it
// found held: the holder's last renewal came before we looked, so a dead
// holder's key goes within TTL; the margin covers round trips.
const claimMargin = time.Second

// ClaimWait is the longest RegisterID waits for another holder's lease on
// the ID to lapse, for a registry of lease TTL ttl (0: DefaultTTL): the TTL
// plus a margin. A caller that wants a restart after kill -9 to succeed
// gives RegisterID this much more than its usual timeout.
func ClaimWait(ttl time.Duration) time.Duration {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	return ttl + claimMargin
}

// holder is another server's worker key as RegisterID found it.
type holder struct {
	endpoint string
	since    time.Time // when it claimed the ID
	identity string    // its instance identity, "" if none
}

func holderOf(kv *mvccpb.KeyValue) holder {
	var rec record
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return holder{endpoint: "(unreadable: " + truncate(string(kv.Value), 60) + ")"}
	}
	return holder{endpoint: rec.IP + ":" + rec.Port, since: time.UnixMilli(rec.Timestamp).UTC(), identity: rec.Holder}
}

// RegisterID claims worker ID id itself, for a server whose ID is fixed by
// its identity (package ordinal: a StatefulSet pod's ordinal), with
// Register's lease, heartbeat and mark: one transaction on the ID's worker
// key, which exists only while its holder's lease lives.
//
// A key that names this server's own instance identity (Config.Holder) is
// its previous run's, killed before it released: it is taken back at once,
// moved to the new lease (WorkerClaim.Resumed). While another server's key
// holds the ID, RegisterID waits for it to go, up to ClaimWait or ctx; if
// the key is still there then, it fails with an error wrapping
// leaf.ErrWorkerInUse that names the holder. The ID's
// high-water mark comes back as HighWater even when it lies ahead of the
// clock (the caller waits for its clock or refuses), and is never lowered.
// A claim this registry holds is given up first.
func (r *Registry) RegisterID(ctx context.Context, ep leaf.Endpoint, id int64) (leaf.WorkerClaim, error) {
	if err := ep.Validate(); err != nil {
		return leaf.WorkerClaim{}, err
	}
	if id < 0 {
		return leaf.WorkerClaim{}, fmt.Errorf("%w: etcd: worker ID %d is negative", leaf.ErrInvalidArgument, id)
	}
	if err := r.lock(ctx); err != nil {
		return leaf.WorkerClaim{}, err
	}
	defer r.unlock()
	wait := ClaimWait(r.cfg.TTL)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+r.cfg.TTL)
		defer cancel()
	}
	r.giveUp(ctx)

	n := strconv.FormatInt(id, 10)
	worker, mark := r.workerDir+n, r.markDir+n
	var (
		start time.Time
		held  *holder
	)
	for {
		// Taken before the grant: the lease lasts at least TTL from here.
		t0 := time.Now()
		g, err := r.cli.Grant(ctx, int64(r.cfg.TTL/time.Second))
		if err != nil {
			if held != nil && ctx.Err() != nil {
				return leaf.WorkerClaim{}, r.inUse(id, worker, *held, time.Since(start), ctx.Err())
			}
			return leaf.WorkerClaim{}, fmt.Errorf("etcd: grant lease: %w", err)
		}
		c := &claim{id: id, ep: ep, lease: g.ID, since: time.Now().UnixMilli(), worker: worker, mark: mark}
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(worker), "=", 0)).
			Then(
				clientv3.OpPut(worker, encodeWorker(ep, c.since, r.cfg.Now().UnixMilli(), r.cfg.Holder), clientv3.WithLease(g.ID)),
				clientv3.OpGet(worker),
				clientv3.OpGet(mark),
			).
			Else(clientv3.OpGet(worker)).
			Commit()
		if err != nil {
			r.revoke(ctx, g.ID)
			return leaf.WorkerClaim{}, fmt.Errorf("etcd: claim worker %d: %w", id, err)
		}
		if resp.Succeeded {
			hw, err := r.hold(ctx, c, g, resp)
			if err != nil {
				return leaf.WorkerClaim{}, err
			}
			if held != nil {
				r.log.Info("worker ID taken: the previous holder released it or its lease expired",
					"worker_id", id, "previous_holder", held.endpoint, "waited", time.Since(start).Round(time.Millisecond))
			}
			r.log.Debug("worker ID claimed", "worker_id", id, "high_water", hw, "lease", int64(g.ID), "ttl", c.ttl)
			return leaf.WorkerClaim{WorkerID: id, HighWater: hw, Expires: t0.Add(c.ttl)}, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			r.revoke(ctx, g.ID)
			continue // the Else branch read the key the If found: cannot happen, but nothing is held
		}
		h := holderOf(kvs[0])
		if h.identity != "" && h.identity == r.cfg.Holder {
			claim, ok, err := r.resume(ctx, c, kvs[0], g, t0)
			if err != nil || ok {
				return claim, err
			}
			continue // the key changed under us: look again
		}
		r.revoke(ctx, g.ID)
		if held == nil {
			start = time.Now()
			r.log.Warn("worker ID held by another server: either a live server with the same worker ID, "+
				"or this server's previous run stopped without releasing it (kill -9); waiting for its lease to lapse",
				"worker_id", id, "key", worker, "holder", h.endpoint, "claimed", h.since.Format(time.RFC3339), "max_wait", wait)
		}
		held = &h
		if time.Since(start) >= wait {
			return leaf.WorkerClaim{}, r.inUse(id, worker, h, time.Since(start), nil)
		}
		if err := r.awaitDelete(ctx, worker, resp.Header.Revision, start.Add(wait)); err != nil {
			return leaf.WorkerClaim{}, r.inUse(id, worker, h, time.Since(start), err)
		}
	}
}

// resume moves worker key kv, which names our own identity (our previous
// run's claim), to c's new lease g in one transaction guarded on the key's
// revision, and revokes the old lease. ok is false, with the new lease
// revoked, when the key changed meanwhile.
func (r *Registry) resume(ctx context.Context, c *claim, kv *mvccpb.KeyValue, g *clientv3.LeaseGrantResponse, t0 time.Time) (leaf.WorkerClaim, bool, error) {
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(c.worker), "=", kv.ModRevision)).
		Then(
			clientv3.OpPut(c.worker, encodeWorker(c.ep, c.since, r.cfg.Now().UnixMilli(), r.cfg.Holder), clientv3.WithLease(g.ID)),
			clientv3.OpGet(c.worker),
			clientv3.OpGet(c.mark),
		).
		Commit()
	if err != nil || !resp.Succeeded {
		r.revoke(ctx, g.ID)
		if err != nil {
			return leaf.WorkerClaim{}, false, fmt.Errorf("etcd: take back worker %d: %w", c.id, err)
		}
		return leaf.WorkerClaim{}, false, nil
	}
	// The old lease would delete nothing of ours now; it only holds etcd's
	// memory until it runs out.
	if old := clientv3.LeaseID(kv.Lease); old != clientv3.NoLease {
		r.revoke(ctx, old)
	}
	hw, err := r.hold(ctx, c, g, resp)
	if err != nil {
		return leaf.WorkerClaim{}, false, err
	}
	r.log.Info("worker ID taken back from this server's previous run", "worker_id", c.id, "high_water", hw, "lease", int64(g.ID))
	return leaf.WorkerClaim{WorkerID: c.id, HighWater: hw, Expires: t0.Add(c.ttl), Resumed: true}, true, nil
}

// hold makes c, whose worker key the transaction resp (Put, Get of the key,
// Get of the mark) put on lease g, the claim held, keeping the ID's mark
// (keepMark), and returns the mark. On failure the key and the lease go.
func (r *Registry) hold(ctx context.Context, c *claim, g *clientv3.LeaseGrantResponse, resp *clientv3.TxnResponse) (int64, error) {
	c.rev = resp.Responses[1].GetResponseRange().Kvs[0].CreateRevision
	hw, err := r.keepMark(ctx, c, resp.Responses[2].GetResponseRange().Kvs)
	if err != nil {
		if uerr := r.unclaim(ctx, c); uerr != nil {
			err = errors.Join(err, uerr)
		}
		r.revoke(ctx, g.ID)
		return 0, err
	}
	c.ttl = time.Duration(g.TTL) * time.Second
	r.claim = c
	return hw, nil
}

// keepMark reads the mark of c's ID (kvs, from the claim transaction) and
// stores the later of it and now, guarded on c's worker key and the mark's
// revision, so that the ID counts as used from now on and the mark never
// goes down. It returns the mark found (0: none).
func (r *Registry) keepMark(ctx context.Context, c *claim, kvs []*mvccpb.KeyValue) (int64, error) {
	var hw, markRev int64
	if len(kvs) > 0 {
		var err error
		markRev = kvs[0].ModRevision
		if hw, err = markOf(kvs[0].Value); err != nil {
			// Not claimed over: the mark is the only proof of what the
			// previous holder issued.
			return 0, fmt.Errorf("etcd: worker %d: the high-water mark %s is unreadable (%q: %v); repair it with the last holder's time, or delete it if no ID was ever issued under this worker",
				c.id, c.mark, truncate(string(kvs[0].Value), 100), err)
		}
	}
	put, err := r.cli.Txn(ctx).
		If(
			clientv3.Compare(clientv3.CreateRevision(c.worker), "=", c.rev),
			clientv3.Compare(clientv3.ModRevision(c.mark), "=", markRev),
		).
		Then(clientv3.OpPut(c.mark, encode(c.ep, max(hw, time.Now().UnixMilli())))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd: store mark of worker %d: %w", c.id, err)
	}
	if !put.Succeeded {
		return 0, fmt.Errorf("etcd: worker %d: key or mark changed while registering (lease expired?)", c.id)
	}
	return hw, nil
}

// awaitDelete waits until key is deleted after revision rev (its holder
// released it or its lease expired), until deadline, or until ctx is done:
// nil in the first two cases, ctx's error in the last. The watch starts
// from rev+1, so a deletion between our look and the watch is not missed.
func (r *Registry) awaitDelete(ctx context.Context, key string, rev int64, deadline time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	wch := r.cli.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			// A compacted revision or a lost leader: look again, after a
			// pause so that a persistent failure does not spin.
			r.log.Debug("watch of a held worker key failed; looking again", "key", key, "err", err)
			if backoff.Sleep(wctx, 100*time.Millisecond) != nil {
				return ctx.Err()
			}
			return nil
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	return ctx.Err()
}

// inUse is RegisterID's refusal: who holds the ID and for how long we
// waited.
func (r *Registry) inUse(id int64, key string, h holder, waited time.Duration, ctxErr error) error {
	why := fmt.Sprintf("its lease was still renewed after %v (lease TTL %v)", waited.Round(time.Millisecond), r.cfg.TTL)
	if ctxErr != nil {
		why = fmt.Sprintf("gave up after %v, before the lease TTL %v had passed", waited.Round(time.Millisecond), r.cfg.TTL)
	}
	claimed := "at an unknown time"
	if !h.since.IsZero() {
		claimed = h.since.Format("2006-01-02T15:04:05.000Z")
	}
	err := fmt.Errorf("%w: etcd: worker %d is held by %s (key %s, claimed %s); %s. "+
		"Another live server has this worker ID: stop it, or give this server another ID",
		leaf.ErrWorkerInUse, id, h.endpoint, key, claimed, why)
	if ctxErr != nil {
		return fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return err
}
