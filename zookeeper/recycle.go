package zookeeper

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
)

// RecycleRegistry is a leaf.WorkerRegistry that leases worker IDs from a
// pool: ID n's lease is its mark node, /snowflake/{Name}/recycle/mark/{n},
// which also keeps the ID's high-water mark (see lease.go and the package
// documentation). A holder's ephemeral node /recycle/inuse/{n} is only a
// hint that spares newcomers a look at IDs whose holder's session lives; the
// mark node decides. One RecycleRegistry serves one server; its methods are
// safe for concurrent use but run one at a time.
type RecycleRegistry struct {
	c        *client
	inuseDir string // /snowflake/{Name}/recycle/inuse
	markDir  string // /snowflake/{Name}/recycle/mark

	// Guarded by c.sem.
	dirsReady bool
	claim     *recycled // nil while no ID is held
	// live is our live node under /snowflake/{Name}/temporary.
	live liveNode
}

// recycled is the ID a RecycleRegistry holds.
type recycled struct {
	id    int64
	ep    leaf.Endpoint
	lease leaseHold
}

var _ leaf.WorkerRegistry = (*RecycleRegistry)(nil)

// OpenRecycle connects to ZooKeeper and waits for a session, at most
// cfg.SessionTimeout.
func OpenRecycle(ctx context.Context, cfg Config) (*RecycleRegistry, error) {
	c, err := dial(ctx, cfg, "zookeeper-recycle")
	if err != nil {
		return nil, err
	}
	base := Root + "/" + c.cfg.Name + "/recycle"
	return &RecycleRegistry{c: c, inuseDir: base + "/inuse", markDir: base + "/mark", live: liveNode{c: c}}, nil
}

func (r *RecycleRegistry) inusePath(n int64) string {
	return r.inuseDir + "/" + strconv.FormatInt(n, 10)
}

func (r *RecycleRegistry) markPath(n int64) string {
	return r.markDir + "/" + strconv.FormatInt(n, 10)
}

// holder is the data of an inuse node.
type holder struct {
	IP   string `json:"ip"`
	Port string `json:"port"`
}

func encodeHolder(ep leaf.Endpoint) []byte {
	b, _ := json.Marshal(holder{IP: ep.IP, Port: strconv.Itoa(ep.Port)})
	return b
}

// markReads is how many mark nodes Register reads at once: the client
// pipelines concurrent requests.
const markReads = 16

// idState is an ID's lease as Register found it.
type idState struct {
	n       int64
	rec     claimRecord
	version int32 // -1: no mark node
	seen    time.Time
	bad     bool // the mark cannot be read: left alone
}

// Register claims a worker ID in [0, maxID] and returns it with its
// high-water mark. In order of preference: an ID whose lease is our own
// (our previous run, killed: taken back at once, Resumed); a free one (no
// mark, or a released lease) whose mark has passed, lowest first; and only
// when none is free, one whose holder has stopped renewing its lease, after
// watching it unchanged for the lease's length. A claim this registry still
// holds is given up first.
func (r *RecycleRegistry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	var claim leaf.WorkerClaim
	err := r.c.run(ctx, "register "+ep.String(), func() error {
		if r.claim != nil {
			r.dropClaim()
		}
		if err := r.ensureDirs(); err != nil {
			return err
		}
		// Taken before any lease is written: it lasts at least Lease from
		// here.
		t0 := time.Now()
		taken, err := r.listTaken()
		if err != nil {
			return err
		}
		states, err := r.readMarks(maxID)
		if err != nil {
			return err
		}
		now := r.c.now()
		var own, lapsing []idState
		for _, st := range states {
			switch {
			case st.bad:
			case st.rec.Holder != "" && st.rec.Holder == r.c.cfg.Holder:
				own = append(own, st)
			case st.rec.Holder != "" && !taken[st.n]:
				// Held, and its holder's session is gone: dead, or cut
				// off and about to stop.
				lapsing = append(lapsing, st)
			}
		}
		slices.SortFunc(own, func(a, b idState) int { return cmp.Compare(a.n, b.n) })
		try := func(st idState) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, fmt.Errorf("zookeeper: register %s: %w", ep, err)
			}
			prev, ok, err := r.tryClaim(ep, st, false)
			if ok {
				claim = r.claimed(ep, st.n, prev, t0)
			}
			return ok, err
		}
		for _, st := range own {
			if ok, err := try(st); ok || err != nil {
				return err
			}
		}
		// Free IDs, lowest first: no mark, or a released lease whose mark
		// has passed, and no live session's hint.
		for n := int64(0); n <= maxID; n++ {
			st, ok := states[n]
			if !ok {
				st = idState{n: n, version: -1}
			}
			if taken[n] || st.bad || st.rec.Holder != "" || st.rec.Timestamp > now {
				continue
			}
			if ok, err := try(st); ok || err != nil {
				return err
			}
		}
		if len(lapsing) > 0 {
			n, prev, ok, err := r.awaitLapse(ctx, ep, lapsing)
			if err != nil {
				return err
			}
			if ok {
				claim = r.claimed(ep, n, prev, t0)
				return nil
			}
		}
		protected := 0
		for _, st := range states {
			if st.rec.Holder == "" && st.rec.Timestamp > now {
				protected++
			}
		}
		return fmt.Errorf("%w: zookeeper: all %d worker IDs under %s are leased (%d held by live sessions, %d by holders that kept renewing) or protected by a high-water mark in the future (%d)",
			leaf.ErrWorkerIDsExhausted, maxID+1, r.markDir, len(taken), len(lapsing), protected)
	})
	return claim, err
}

// claimed logs and returns the claim on ID n, just taken over prev (the
// record it replaced).
func (r *RecycleRegistry) claimed(ep leaf.Endpoint, n int64, prev claimRecord, t0 time.Time) leaf.WorkerClaim {
	resumed := prev.Holder != "" && prev.Holder == r.c.cfg.Holder
	if _, _, err := r.refreshLive(); err != nil {
		// Only PeerClocks needs it, and Heartbeat tries again.
		r.c.log.Warn("could not write the live node", "worker_id", n, "err", err)
	}
	r.c.log.Info("worker ID leased", "endpoint", ep.String(), "worker_id", n, "high_water", prev.Timestamp,
		"resumed", resumed, "previous_holder", prev.Holder, "lease", r.c.cfg.Lease)
	return leaf.WorkerClaim{WorkerID: n, HighWater: prev.Timestamp, Expires: t0.Add(r.c.cfg.Lease), Resumed: resumed}
}

// readMarks reads the mark nodes of IDs 0..maxID that exist.
func (r *RecycleRegistry) readMarks(maxID int64) (map[int64]idState, error) {
	names, _, err := r.c.conn.Children(r.markDir)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: list %s: %w", r.markDir, err)
	}
	var ids []int64
	for _, name := range names {
		if n, err := strconv.ParseInt(name, 10, 64); err == nil && n >= 0 && n <= maxID {
			ids = append(ids, n)
		}
	}
	slices.Sort(ids)
	states := make([]idState, len(ids))
	errs := make([]error, len(ids))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(markReads, len(ids)) {
		wg.Go(func() {
			for i := range next {
				states[i], errs[i] = r.readMark(ids[i])
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	out := make(map[int64]idState, len(ids))
	for i, st := range states {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if st.version >= 0 || st.bad {
			out[st.n] = st
		}
	}
	return out, nil
}

// readMark reads ID n's mark node; version -1 if there is none.
func (r *RecycleRegistry) readMark(n int64) (idState, error) {
	data, st, err := r.c.conn.Get(r.markPath(n))
	if errors.Is(err, zk.ErrNoNode) {
		return idState{n: n, version: -1}, nil
	}
	if err != nil {
		return idState{}, fmt.Errorf("zookeeper: read %s: %w", r.markPath(n), err)
	}
	rec, err := parseClaim(data)
	if err != nil {
		// A mark we cannot read could hide any time: leave the ID alone.
		r.c.log.Warn("unreadable high-water mark; worker ID skipped", "node", r.markPath(n), "data", truncate(string(data), 80), "err", err)
		return idState{n: n, version: st.Version, bad: true}, nil
	}
	return idState{n: n, rec: rec, version: st.Version, seen: time.Now()}, nil
}

// awaitLapse watches the leases of IDs whose holders' sessions are gone and
// takes the first that stays unchanged for its lease's length. It gives up
// after ClaimWait: holders that keep renewing are alive (cut off from the
// session but not from ZooKeeper, or back). ok is false when none lapsed.
func (r *RecycleRegistry) awaitLapse(ctx context.Context, ep leaf.Endpoint, lapsing []idState) (int64, claimRecord, bool, error) {
	deadline := time.Now().Add(r.ClaimWait())
	r.c.log.Warn("no free worker ID; waiting for the lease of one whose holder stopped renewing to lapse",
		"candidates", len(lapsing), "max_wait", r.ClaimWait())
	for len(lapsing) > 0 {
		// The earliest lapse among the candidates.
		slices.SortFunc(lapsing, func(a, b idState) int {
			return a.seen.Add(r.c.leaseWait(a.rec)).Compare(b.seen.Add(r.c.leaseWait(b.rec)))
		})
		first := lapsing[0]
		until := first.seen.Add(r.c.leaseWait(first.rec))
		if d, ok := ctx.Deadline(); until.After(deadline) || ok && d.Before(until) {
			// Not within our bounds: the pool is exhausted for this call.
			return 0, claimRecord{}, false, nil
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, claimRecord{}, false, fmt.Errorf("zookeeper: register %s: waiting for a lease to lapse: %w", ep, ctx.Err())
		}
		lapsing = lapsing[1:]
		cur, err := r.readMark(first.n)
		if err != nil {
			return 0, claimRecord{}, false, err
		}
		switch {
		case cur.bad:
			continue
		case cur.version != first.version:
			// Renewed, released or taken: watch the new version if it is
			// still held by someone else, else try it at once.
			if cur.version >= 0 && cur.rec.Holder != "" && cur.rec.Holder != r.c.cfg.Holder {
				lapsing = append(lapsing, cur)
				continue
			}
		}
		prev, ok, err := r.tryClaim(ep, cur, cur.version == first.version)
		if err != nil {
			return 0, claimRecord{}, false, err
		}
		if ok {
			return first.n, prev, true, nil
		}
	}
	return 0, claimRecord{}, false, nil
}

// ClaimWait is the longest Register waits for a lapsing lease when no ID is
// free.
func (r *RecycleRegistry) ClaimWait() time.Duration { return LeaseClaimWait(r.c.cfg.Lease) }

func (r *RecycleRegistry) ensureDirs() error {
	if r.dirsReady {
		return nil
	}
	if err := r.c.ensurePath(r.inuseDir); err != nil {
		return err
	}
	if err := r.c.ensurePath(r.markDir); err != nil {
		return err
	}
	r.dirsReady = true
	return nil
}

// listTaken returns the IDs whose inuse node exists: their holders'
// sessions live.
func (r *RecycleRegistry) listTaken() (map[int64]bool, error) {
	children, _, err := r.c.conn.Children(r.inuseDir)
	if errors.Is(err, zk.ErrNoNode) {
		// Someone removed the tree since we created it.
		r.dirsReady = false
		if err = r.ensureDirs(); err != nil {
			return nil, err
		}
		children, _, err = r.c.conn.Children(r.inuseDir)
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper: list %s: %w", r.inuseDir, err)
	}
	taken := make(map[int64]bool, len(children))
	for _, name := range children {
		if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			taken[n] = true
		}
	}
	return taken, nil
}

// tryClaim takes st's ID by compare-and-set on its mark node (tryLease's
// rules; lapsed says the caller watched st's held lease long enough): the
// lease is then ours, with the ID's mark kept as the node's timestamp. It
// returns the record it replaced (its timestamp is the ID's high-water
// mark), and writes the inuse hint of our session. false when the node
// changed since it was read, or is held.
func (r *RecycleRegistry) tryClaim(ep leaf.Endpoint, st idState, lapsed bool) (claimRecord, bool, error) {
	rec := r.c.newClaim(ep, st.rec.Timestamp)
	path := r.markPath(st.n)
	var watched *heldBy
	if lapsed {
		watched = &heldBy{path: path, rec: st.rec, version: st.version, seen: st.seen}
	}
	hold, prev, _, _, err := r.c.tryLease(path, rec, watched)
	switch {
	case errors.Is(err, errRetry) || errors.Is(err, errHeld):
		return claimRecord{}, false, nil
	case err != nil:
		return claimRecord{}, false, err
	}
	if prev.Timestamp > rec.Timestamp {
		// The mark moved between our read and the write: keep the later.
		rec.Timestamp = prev.Timestamp
		if err := r.c.renewLease(&hold, rec); err != nil {
			return claimRecord{}, false, nil
		}
	}
	prev.Timestamp = rec.Timestamp
	r.claim = &recycled{id: st.n, ep: ep, lease: hold}
	r.writeInuse()
	return prev, true, nil
}

// writeInuse makes the inuse hint of our ID belong to our session. It is
// only a hint: a failure is logged and the next heartbeat tries again.
func (r *RecycleRegistry) writeInuse() {
	p := r.inusePath(r.claim.id)
	ok, st, err := r.c.conn.Exists(p)
	if err == nil && ok && st.EphemeralOwner == r.c.conn.SessionID() {
		return
	}
	if err == nil && ok {
		// Another session's: a previous holder's, whose lease we hold now.
		err = r.c.conn.Delete(p, st.Version)
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
	}
	if err == nil {
		_, err = r.c.conn.Create(p, encodeHolder(r.claim.ep), zk.FlagEphemeral, openACL)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		r.c.log.Debug("could not write the inuse hint", "node", p, "err", err)
	}
}

// dropClaim gives the held ID back: its lease released with its last mark
// kept, its inuse hint deleted.
func (r *RecycleRegistry) dropClaim() {
	r.live.drop()
	l := r.claim
	r.claim = nil
	rec := l.lease.rec
	rec.Holder, rec.Clock = "", r.c.now()
	if err := r.c.renewLease(&l.lease, rec); err != nil {
		r.c.log.Debug("could not release a worker ID's lease; it lapses", "worker_id", l.id, "err", err)
	}
	r.deleteInuse(l.id)
}

// deleteInuse deletes ID n's inuse hint if our session owns it.
func (r *RecycleRegistry) deleteInuse(n int64) {
	if err := r.c.deleteLive(r.inusePath(n)); err != nil {
		r.c.log.Debug("could not delete the inuse hint; it goes with the session", "worker_id", n, "err", err)
	}
}

// Heartbeat renews the ID's lease, storing mark as its high-water mark, by
// compare-and-set on the version we last wrote, and keeps the inuse hint
// and the live node of our session. The expiry is counted from before the
// renewal was sent. ErrWorkerLost means another process took the ID over
// after our lease lapsed, or the mark was deleted.
func (r *RecycleRegistry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	var expires time.Time
	err := r.c.run(ctx, "heartbeat", func() error {
		if r.claim == nil {
			return fmt.Errorf("%w: zookeeper: no worker ID held", leaf.ErrWorkerLost)
		}
		t0 := time.Now()
		l := r.claim
		if err := r.c.renewLease(&l.lease, r.c.newClaim(l.ep, mark)); err != nil {
			if errors.Is(err, leaf.ErrWorkerLost) {
				r.claim = nil
				r.live.drop()
				r.deleteInuse(l.id)
				err = fmt.Errorf("worker %d: %w", l.id, err)
			}
			return err
		}
		expires = t0.Add(r.c.cfg.Lease)
		r.writeInuse()
		if _, _, err := r.refreshLive(); err != nil {
			// The lease is sound; only PeerClocks needs the live node.
			r.c.log.Warn("could not write the live node", "worker_id", l.id, "err", err)
		}
		return nil
	})
	return expires, err
}

// liveName is the name of a lease's live node: the endpoint with the worker
// ID, so that two servers given one endpoint (which lease two IDs) have a
// node each, and none is named like a Registry's "{ip}:{port}", which
// guards an endpoint.
func liveName(ep leaf.Endpoint, id int64) string {
	return ep.String() + "#w" + strconv.FormatInt(id, 10)
}

// refreshLive writes our clock's reading into the live node of the lease
// (see liveNode.refresh).
func (r *RecycleRegistry) refreshLive() (int64, *zk.Stat, error) {
	return r.live.refresh(liveName(r.claim.ep, r.claim.id), r.claim.ep, r.claim.id)
}

// PeerClocks returns the clocks of the other live servers of the cluster,
// as Registry.PeerClocks does (the live nodes of both registries share
// /snowflake/{Name}/temporary). It needs a held lease: without one it fails
// with ErrWorkerLost, as Heartbeat does.
func (r *RecycleRegistry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	var peers []leaf.PeerClock
	err := r.c.run(ctx, "peer clocks", func() error {
		if r.claim == nil {
			return fmt.Errorf("%w: zookeeper: no worker ID held", leaf.ErrWorkerLost)
		}
		ts, st, err := r.refreshLive()
		if err != nil {
			return err
		}
		peers, err = r.c.peerClocks(r.live.path, ts, st)
		return err
	})
	return peers, err
}

// Release stores mark as the ID's high-water mark and releases its lease,
// then deletes the inuse hint: the ID is free at once, protected by the
// mark. If another process took the ID over meanwhile, nothing is written
// and Release fails with ErrWorkerLost.
func (r *RecycleRegistry) Release(ctx context.Context, mark int64) error {
	return r.c.run(ctx, "release", func() error {
		if r.claim == nil {
			return fmt.Errorf("%w: zookeeper: no worker ID held", leaf.ErrWorkerLost)
		}
		l := r.claim
		rec := r.c.newClaim(l.ep, mark)
		rec.Holder = ""
		if err := r.c.renewLease(&l.lease, rec); err != nil {
			if !errors.Is(err, leaf.ErrWorkerLost) {
				return fmt.Errorf("zookeeper: release worker %d: %w", l.id, err) // the caller may retry
			}
			r.claim = nil
			r.live.drop()
			return fmt.Errorf("zookeeper: release worker %d: %w", l.id, err)
		}
		r.claim = nil
		r.live.drop()
		r.deleteInuse(l.id)
		return nil
	})
}

// Close ends the ZooKeeper session, which deletes the inuse and live nodes
// at once; the lease stays until it lapses. It does not Release.
func (r *RecycleRegistry) Close() error {
	r.c.close()
	return nil
}
