package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
)

// A claim on a worker ID is a lease kept in a persistent node, not the
// ZooKeeper session: a session lasts seconds and ends with any outage
// longer than that, while a lease is meant to ride out a ZooKeeper restart
// or a network blip (Config.Lease, a minute by default). The node's data
// names the holder (its instance identity, Config.Holder) and the lease's
// length; its version is the renewal counter. The holder renews by
// compare-and-set on the version it last wrote and stops issuing before its
// lease can run out (the snowflake generator counts the lease from before
// each renewal is sent). Another process takes the claim over only after
// it has seen the same version unchanged for the lease's length on its own
// monotonic clock, counted from the answer that showed it, and then by
// compare-and-set on that version: the holder's renewal, if it came, wins.
// No wall clock is compared with another, so neither a clock stepped on
// ZooKeeper nor one on the holder can let two processes issue at once.
//
// A holder released its claim when the node names no holder (or is gone);
// the claim is then taken at once. A holder finding its own identity in the
// node takes it back at once too (leaf.WorkerClaim.Resumed): the identity
// is locked while a process uses it, so the earlier holder is dead.

// claimRecord is the data of a lease node: Registry's node under
// /snowflake/{Name}/lease, RecycleRegistry's mark of an ID (whose timestamp
// is the ID's high-water mark). Port is a string, as in Java Leaf's nodes.
type claimRecord struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	Timestamp int64  `json:"timestamp"`
	// Holder is the instance identity holding the lease, "" when released.
	Holder string `json:"holder,omitempty"`
	// LeaseMs is the lease's length, the holder's Config.Lease: a newcomer
	// waits the longer of it and its own.
	LeaseMs int64 `json:"lease_ms,omitempty"`
	// Clock is the holder's clock at its last renewal, Unix ms, for an
	// operator reading the node.
	Clock int64 `json:"clock,omitempty"`
}

func (c claimRecord) encode() []byte {
	b, _ := json.Marshal(c)
	return b
}

// parseClaim reads a lease node. A record without a timestamp is refused:
// a mark must say what it protects.
func parseClaim(data []byte) (claimRecord, error) {
	var c claimRecord
	if err := json.Unmarshal(data, &c); err != nil {
		return c, err
	}
	if _, err := markOf(data); err != nil {
		return c, err
	}
	return c, nil
}

// lease is what a holder needs to renew a lease node.
type leaseHold struct {
	path    string
	version int32
	rec     claimRecord
}

// newClaim is the record a holder writes when it takes or renews a lease.
func (c *client) newClaim(ep leaf.Endpoint, mark int64) claimRecord {
	return claimRecord{IP: ep.IP, Port: strconv.Itoa(ep.Port), Timestamp: mark,
		Holder: c.cfg.Holder, LeaseMs: c.cfg.Lease.Milliseconds(), Clock: c.now()}
}

// leaseWait is how long a newcomer waits after first seeing a held lease's
// version before it may take it: the longer of our lease and the holder's,
// plus a margin for the drift between the two monotonic clocks.
func (c *client) leaseWait(held claimRecord) time.Duration {
	return max(c.cfg.Lease, time.Duration(held.LeaseMs)*time.Millisecond) + leaseMargin(c.cfg.Lease)
}

// leaseMargin allows for clocks that run at slightly different rates: 1%
// of the lease, at least a second.
func leaseMargin(lease time.Duration) time.Duration { return max(time.Second, lease/100) }

// LeaseClaimWait is how long a Register may wait for a lease of lease
// length held by another process to lapse before it fails with
// leaf.ErrWorkerInUse: a lease, its margin, and a second for round trips.
func LeaseClaimWait(lease time.Duration) time.Duration {
	if lease == 0 {
		lease = DefaultLease
	}
	return lease + leaseMargin(lease) + time.Second
}

// heldBy is another process's lease on a node, as a newcomer found it.
type heldBy struct {
	path    string
	rec     claimRecord
	version int32
	seen    time.Time // when the answer that showed this version came
}

func (h *heldBy) describe() string {
	return fmt.Sprintf("holder %s (endpoint %s:%s, lease %v, last renewed at %s by its clock, node version %d)",
		h.rec.Holder, h.rec.IP, h.rec.Port, time.Duration(h.rec.LeaseMs)*time.Millisecond,
		time.UnixMilli(h.rec.Clock).UTC().Format("2006-01-02T15:04:05.000Z"), h.version)
}

// errHeld is returned by tryLease for a lease another process holds.
var errHeld = errors.New("held by another process")

// tryLease makes one attempt at the lease node path: it creates the node,
// or takes it over if it names no holder, our own identity, or is held by a
// version the caller has watched long enough (lapsed, non-nil). It returns
// the hold, the record it replaced (zero if it created the node) and
// whether the record was ours. A lease held by another process is errHeld
// with that lease; zk errors pass.
func (c *client) tryLease(path string, rec claimRecord, lapsed *heldBy) (leaseHold, claimRecord, bool, *heldBy, error) {
	data, st, err := c.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = c.conn.Create(path, rec.encode(), zk.FlagPersistent, openACL)
		if errors.Is(err, zk.ErrNoNode) {
			if err = c.ensurePath(parentOf(path)); err == nil {
				_, err = c.conn.Create(path, rec.encode(), zk.FlagPersistent, openACL)
			}
		}
		if errors.Is(err, zk.ErrNodeExists) {
			return leaseHold{}, claimRecord{}, false, nil, errRetry
		}
		if err != nil {
			return leaseHold{}, claimRecord{}, false, nil, fmt.Errorf("zookeeper: create %s: %w", path, err)
		}
		return leaseHold{path: path, version: 0, rec: rec}, claimRecord{}, false, nil, nil
	}
	if err != nil {
		return leaseHold{}, claimRecord{}, false, nil, fmt.Errorf("zookeeper: read %s: %w", path, err)
	}
	seen := time.Now()
	prev, perr := parseClaim(data)
	if perr != nil {
		// Not ours to interpret, and maybe protecting IDs: never taken.
		return leaseHold{}, claimRecord{}, false, nil, fmt.Errorf("%w: zookeeper: %s holds %q, not a lease record: %v; remove it only if no server holds this claim",
			leaf.ErrWorkerInUse, path, truncate(string(data), 80), perr)
	}
	mine := prev.Holder != "" && prev.Holder == c.cfg.Holder
	free := prev.Holder == "" || mine || (lapsed != nil && lapsed.version == st.Version)
	if !free {
		return leaseHold{}, prev, false, &heldBy{path: path, rec: prev, version: st.Version, seen: seen}, errHeld
	}
	st, err = c.conn.Set(path, rec.encode(), st.Version)
	switch {
	case errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode):
		return leaseHold{}, claimRecord{}, false, nil, errRetry
	case err != nil:
		return leaseHold{}, claimRecord{}, false, nil, fmt.Errorf("zookeeper: write %s: %w", path, err)
	}
	return leaseHold{path: path, version: st.Version, rec: rec}, prev, mine, nil, nil
}

// errRetry: the node changed under an attempt; look again.
var errRetry = errors.New("changed meanwhile")

// acquireLease takes the lease node path, waiting for another process's
// lease to lapse (see the top of this file) up to maxWait or ctx: a holder
// that renews meanwhile restarts the wait, and one still renewing at the
// end is a refusal (leaf.ErrWorkerInUse, describing it, from inUse).
// rec is built anew for each attempt, so that its clock is current.
func (c *client) acquireLease(ctx context.Context, path string, rec func() claimRecord, maxWait time.Duration,
	inUse func(h *heldBy, waited time.Duration, cause error) error) (leaseHold, claimRecord, bool, error) {
	start := time.Now()
	var watched *heldBy
	for attempt := 0; ; attempt++ {
		hold, prev, mine, held, err := c.tryLease(path, rec(), watched)
		switch {
		case err == nil:
			if watched != nil {
				c.log.Info("lease taken over: its holder stopped renewing it", "node", path,
					"previous", watched.describe(), "waited", time.Since(start).Round(time.Millisecond))
			}
			return hold, prev, mine, nil
		case errors.Is(err, errRetry):
			if attempt > 100 {
				return leaseHold{}, claimRecord{}, false, fmt.Errorf("zookeeper: %s keeps changing", path)
			}
			continue
		case !errors.Is(err, errHeld):
			return leaseHold{}, claimRecord{}, false, err
		}
		if watched == nil || watched.version != held.version {
			if watched == nil {
				c.log.Warn("lease held by another process (a live server with the same claim, or one cut off from ZooKeeper that stops issuing when its lease ends); waiting for it to lapse",
					"node", path, "held_by", held.describe(), "max_wait", maxWait)
			}
			watched = held // a new version: the wait starts again from its answer
		}
		// Wake at the lapse, or earlier if the node changes (a renewal, a
		// release, a deletion): GetW's watch fires on any of them. A lapse
		// that cannot come within the caller's bounds is a refusal now,
		// not after a wait that ends the same way.
		until := watched.seen.Add(c.leaseWait(watched.rec))
		if time.Since(start)+time.Until(until) > maxWait {
			return leaseHold{}, claimRecord{}, false, inUse(watched, time.Since(start), nil)
		}
		if d, ok := ctx.Deadline(); ok && d.Before(until) {
			return leaseHold{}, claimRecord{}, false, inUse(watched, time.Since(start),
				fmt.Errorf("the lease could lapse at the earliest in %v, after the caller's deadline", time.Until(until).Round(time.Millisecond)))
		}
		_, st, changed, err := c.conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return leaseHold{}, claimRecord{}, false, fmt.Errorf("zookeeper: watch %s: %w", path, err)
		}
		if st.Version != watched.version {
			continue
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return leaseHold{}, claimRecord{}, false, inUse(watched, time.Since(start), ctx.Err())
		}
		t.Stop()
	}
}

// renewLease writes rec over our lease node, if it is still at the version
// we last wrote. ErrWorkerLost when it is not: another process took the
// claim over (our lease had lapsed) or an operator removed it.
func (c *client) renewLease(h *leaseHold, rec claimRecord) error {
	st, err := c.conn.Set(h.path, rec.encode(), h.version)
	if errors.Is(err, zk.ErrBadVersion) {
		// A write of ours may have landed without its answer reaching us
		// (ZooKeeper died between the two): the node then names our own
		// identity, which no other process can hold while we run, and its
		// version is ours to go on from.
		data, cur, gerr := c.conn.Get(h.path)
		other, perr := parseClaim(data)
		if gerr == nil && perr == nil && other.Holder != "" && other.Holder == c.cfg.Holder {
			h.version = cur.Version
			st, err = c.conn.Set(h.path, rec.encode(), h.version)
		}
	}
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		who := "another process"
		if data, _, gerr := c.conn.Get(h.path); gerr == nil {
			if other, perr := parseClaim(data); perr == nil {
				who = fmt.Sprintf("%q (endpoint %s:%s)", other.Holder, other.IP, other.Port)
			}
		}
		return fmt.Errorf("%w: zookeeper: the lease %s was taken over by %s after ours lapsed", leaf.ErrWorkerLost, h.path, who)
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: zookeeper: the lease %s was deleted", leaf.ErrWorkerLost, h.path)
	case err != nil:
		return fmt.Errorf("zookeeper: renew the lease %s: %w", h.path, err)
	}
	h.version, h.rec = st.Version, rec
	return nil
}

// parentOf is the parent of a node's path.
func parentOf(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
