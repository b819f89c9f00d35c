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

// RecycleRegistry is a leaf.WorkerRegistry that leases worker IDs: an ID is
// held by an ephemeral node of the holder's session and returns to the pool
// when the holder releases it or its session expires (see the package
// documentation). One RecycleRegistry serves one server; its methods are
// safe for concurrent use but run one at a time.
type RecycleRegistry struct {
	c        *client
	inuseDir string // /snowflake/{Name}/recycle/inuse
	markDir  string // /snowflake/{Name}/recycle/mark

	// Guarded by c.sem.
	dirsReady bool
	claim     *lease // nil while no ID is held
	// suspects are IDs whose inuse node this session may have created
	// without knowing (a create whose answer was lost, a claim abandoned
	// half-way): the next Register deletes them if they are ours.
	suspects map[int64]bool
	// live is our live node under /snowflake/{Name}/temporary, "" while
	// none is known to exist.
	live string
}

// lease is the ID a RecycleRegistry holds.
type lease struct {
	id      int64
	ep      leaf.Endpoint
	session int64 // the session owning the inuse node
	version int32 // the mark's version after our last write
	mark    int64 // the last mark written
	lost    bool  // Heartbeat found the claim gone
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
	return &RecycleRegistry{c: c, inuseDir: base + "/inuse", markDir: base + "/mark", suspects: map[int64]bool{}}, nil
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

// Register claims the lowest free worker ID in [0, maxID] whose high-water
// mark has passed, and returns it with that mark. The lease lasts a session
// timeout from the call's start unless Heartbeat renews it. A claim this
// registry still holds is given up first (its last mark protects the ID).
func (r *RecycleRegistry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	var claim leaf.WorkerClaim
	err := r.c.run(ctx, "register "+ep.String(), func() error {
		// Taken before the inuse node exists: the session, and so the
		// node, lives at least a session timeout past any request it sends.
		start := time.Now()
		if r.claim != nil {
			r.dropClaim()
		}
		for n := range r.suspects {
			r.dropOrphan(n)
		}
		if err := r.ensureDirs(); err != nil {
			return err
		}
		taken, err := r.listTaken()
		if err != nil {
			return err
		}
		protected := 0
		for n := int64(0); n >= 0 && n <= maxID; n++ {
			if taken[n] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("zookeeper: register %s: %w", ep, err)
			}
			got, hw, err := r.tryClaim(n, ep)
			switch {
			case err != nil:
				return err
			case got == claimProtected:
				protected++
				continue
			case got == claimBusy:
				// Racing servers took IDs since the listing: list again
				// rather than collide with each in turn (a failed create
				// is a write on the server).
				if taken, err = r.listTaken(); err != nil {
					return err
				}
				continue
			}
			if ctx.Err() != nil {
				// The caller has gone and will not use the ID; give it
				// back rather than hold it until the next Register.
				r.dropClaim()
				return fmt.Errorf("zookeeper: register %s: %w", ep, ctx.Err())
			}
			claim = leaf.WorkerClaim{WorkerID: n, HighWater: hw, Expires: start.Add(r.c.sessionTimeout())}
			if _, _, err := r.refreshLive(); err != nil {
				// Only PeerClocks needs it, and Heartbeat tries again.
				r.c.log.Warn("could not write the live node", "worker_id", n, "err", err)
			}
			r.c.log.Info("worker ID leased", "endpoint", ep.String(), "worker_id", n, "high_water", hw,
				"session", fmt.Sprintf("%#x", r.claim.session), "session_timeout", r.c.sessionTimeout())
			return nil
		}
		leased := 0
		for n := range taken {
			if n >= 0 && n <= maxID {
				leased++
			}
		}
		return fmt.Errorf("%w: zookeeper: all %d worker IDs under %s are leased (%d) or protected by a high-water mark in the future (%d)",
			leaf.ErrWorkerIDsExhausted, maxID+1, r.inuseDir, leased, protected)
	})
	return claim, err
}

// listTaken returns the IDs whose inuse node exists.
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

type claimResult int

const (
	claimWon       claimResult = iota // the ID is ours now
	claimBusy                         // another server holds the ID
	claimProtected                    // the ID's mark lies in the future
)

// tryClaim tries to take ID n. An error means ZooKeeper did not answer; a
// refused ID is a result.
func (r *RecycleRegistry) tryClaim(n int64, ep leaf.Endpoint) (claimResult, int64, error) {
	inuse, markPath := r.inusePath(n), r.markPath(n)
	_, err := r.c.conn.Create(inuse, encodeHolder(ep), zk.FlagEphemeral, openACL)
	if errors.Is(err, zk.ErrNoNode) {
		// Someone removed the tree since we created it.
		r.dirsReady = false
		if err = r.ensureDirs(); err == nil {
			_, err = r.c.conn.Create(inuse, encodeHolder(ep), zk.FlagEphemeral, openACL)
		}
	}
	switch {
	case errors.Is(err, zk.ErrNodeExists):
		if !r.suspects[n] {
			return claimBusy, 0, nil
		}
		// Ours all the same if our session owns it: a create whose answer
		// was lost.
		ok, st, err := r.c.conn.Exists(inuse)
		if err != nil {
			return 0, 0, fmt.Errorf("zookeeper: check %s: %w", inuse, err)
		}
		if !ok || st.EphemeralOwner == 0 || st.EphemeralOwner != r.c.conn.SessionID() {
			return claimBusy, 0, nil
		}
	case err != nil:
		r.suspects[n] = true
		return 0, 0, fmt.Errorf("zookeeper: create %s: %w", inuse, err)
	}

	// The inuse node keeps other servers off n from here on. Sync so that
	// the mark read is at least as new as the last write any holder made.
	if _, err := r.c.conn.Sync(r.markDir); err != nil {
		r.suspects[n] = true
		return 0, 0, fmt.Errorf("zookeeper: sync %s: %w", r.markDir, err)
	}
	data, st, err := r.c.conn.Get(markPath)
	version := int32(-1) // no mark yet
	var old int64
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		r.suspects[n] = true
		return 0, 0, fmt.Errorf("zookeeper: read %s: %w", markPath, err)
	default:
		version = st.Version
		if old, err = markOf(data); err != nil {
			// A mark we cannot read could hide any time: leave the ID alone.
			r.c.log.Warn("unreadable high-water mark; worker ID skipped", "node", markPath, "data", truncate(string(data), 80), "err", err)
			r.giveBack(n, version)
			return claimProtected, 0, nil
		}
	}
	now := r.c.now()
	if old > now {
		// The previous holder promised to issue nothing stamped before
		// its mark, which has not come yet.
		r.giveBack(n, version)
		return claimProtected, 0, nil
	}

	// Compare-and-set: a release or renewal of a previous holder that
	// lands after our read fails here, or makes this fail.
	if version < 0 {
		_, err = r.c.conn.Create(markPath, encode(ep, now), zk.FlagPersistent, openACL)
		version = 0
	} else {
		st, err = r.c.conn.Set(markPath, encode(ep, now), version)
		if err == nil {
			version = st.Version
		}
	}
	if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		r.dropOrphan(n)
		return claimBusy, 0, nil
	}
	if err != nil {
		r.suspects[n] = true
		return 0, 0, fmt.Errorf("zookeeper: write %s: %w", markPath, err)
	}

	// A stale release of a previous holder (one queued while its session
	// expired) may have deleted our inuse node before our write: check it
	// is still ours.
	ok, st, err := r.c.conn.Exists(inuse)
	if err != nil {
		r.suspects[n] = true
		return 0, 0, fmt.Errorf("zookeeper: check %s: %w", inuse, err)
	}
	session := r.c.conn.SessionID()
	if !ok || st.EphemeralOwner != session {
		return claimBusy, 0, nil
	}
	r.claim = &lease{id: n, ep: ep, session: session, version: version, mark: now}
	return claimWon, old, nil
}

// giveBack deletes our inuse node of n, provided n's mark still has version
// (-1: no mark): a claim or a release that changed the mark since we read it
// could have made the node someone else's.
func (r *RecycleRegistry) giveBack(n int64, version int32) {
	var err error
	if version < 0 {
		err = r.c.conn.Delete(r.inusePath(n), -1)
	} else {
		_, err = r.c.conn.Multi(
			&zk.CheckVersionRequest{Path: r.markPath(n), Version: version},
			&zk.DeleteRequest{Path: r.inusePath(n), Version: -1},
		)
	}
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		r.dropOrphan(n)
	}
}

// dropOrphan deletes n's inuse node if this session owns it and does not
// claim n, or remembers n as a suspect if ZooKeeper does not answer.
func (r *RecycleRegistry) dropOrphan(n int64) {
	err := func() error {
		inuse := r.inusePath(n)
		ok, st, err := r.c.conn.Exists(inuse)
		if err != nil || !ok || st.EphemeralOwner == 0 || st.EphemeralOwner != r.c.conn.SessionID() {
			return err
		}
		_, mst, err := r.c.conn.Get(r.markPath(n))
		switch {
		case errors.Is(err, zk.ErrNoNode):
			err = r.c.conn.Delete(inuse, -1)
		case err == nil:
			_, err = r.c.conn.Multi(
				&zk.CheckVersionRequest{Path: r.markPath(n), Version: mst.Version},
				&zk.DeleteRequest{Path: inuse, Version: -1},
			)
		}
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	}()
	if err != nil {
		r.suspects[n] = true
		r.c.log.Debug("could not delete an inuse node of ours", "worker_id", n, "err", err)
		return
	}
	delete(r.suspects, n)
}

// dropClaim gives the held ID back, storing its last mark.
func (r *RecycleRegistry) dropClaim() {
	r.dropLive()
	l := r.claim
	r.claim = nil
	if !l.lost && r.c.conn.SessionID() == l.session {
		if _, err := r.c.conn.Multi(
			&zk.SetDataRequest{Path: r.markPath(l.id), Data: encode(l.ep, l.mark), Version: l.version},
			&zk.DeleteRequest{Path: r.inusePath(l.id), Version: -1},
		); err == nil {
			return
		}
	}
	r.dropOrphan(l.id)
}

// lost marks the claim lost and returns the error saying so.
func (r *RecycleRegistry) lost(why string, err error) error {
	r.claim.lost = true
	if err != nil {
		return fmt.Errorf("%w: zookeeper: worker %d: %s: %w", leaf.ErrWorkerLost, r.claim.id, why, err)
	}
	return fmt.Errorf("%w: zookeeper: worker %d: %s", leaf.ErrWorkerLost, r.claim.id, why)
}

// held returns an error unless a live claim is held.
func (r *RecycleRegistry) held() error {
	switch {
	case r.claim == nil:
		return fmt.Errorf("%w: zookeeper: no worker ID held", leaf.ErrWorkerLost)
	case r.claim.lost:
		return fmt.Errorf("%w: zookeeper: worker %d was lost", leaf.ErrWorkerLost, r.claim.id)
	}
	return nil
}

// sessionGone tells whether the claim's session has expired: go-zookeeper
// changes the session ID only then (to 0 at once, to the new session's when
// it has one), and ZooKeeper deleted the inuse node with the old session.
func (r *RecycleRegistry) sessionGone() bool { return r.c.conn.SessionID() != r.claim.session }

// Heartbeat stores mark as the ID's high-water mark, if no other server
// wrote it since our last write, and checks that our session still owns the
// ID's inuse node. The lease then lasts at least a session timeout from the
// call: ZooKeeper expires a session only after hearing nothing from it for
// that long.
func (r *RecycleRegistry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	var expires time.Time
	err := r.c.run(ctx, "heartbeat", func() error {
		if err := r.held(); err != nil {
			return err
		}
		t0 := time.Now()
		if r.sessionGone() {
			return r.lost("the ZooKeeper session expired", nil)
		}
		l := r.claim
		st, err := r.c.conn.Set(r.markPath(l.id), encode(l.ep, mark), l.version)
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			return r.lost("another server wrote its high-water mark", nil)
		case errors.Is(err, zk.ErrNoNode):
			return r.lost("its high-water mark was deleted", nil)
		case errors.Is(err, zk.ErrSessionExpired) || err != nil && r.sessionGone():
			return r.lost("the ZooKeeper session expired", err)
		case err != nil:
			return fmt.Errorf("zookeeper: heartbeat of worker %d: %w", l.id, err)
		}
		l.version, l.mark = st.Version, mark

		ok, st, err := r.c.conn.Exists(r.inusePath(l.id))
		switch {
		case errors.Is(err, zk.ErrSessionExpired) || err != nil && r.sessionGone():
			return r.lost("the ZooKeeper session expired", err)
		case err != nil:
			return fmt.Errorf("zookeeper: heartbeat of worker %d: check %s: %w", l.id, r.inusePath(l.id), err)
		case !ok:
			return r.lost("its inuse node is gone (the session expired)", nil)
		case st.EphemeralOwner != l.session || r.sessionGone():
			return r.lost(fmt.Sprintf("its inuse node belongs to session %#x, not ours (%#x)", st.EphemeralOwner, l.session), nil)
		}
		expires = t0.Add(r.c.sessionTimeout())
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

// refreshLive writes our clock's reading into the live node of the lease,
// creating the node if it is missing, and returns the reading with the
// node's Stat after the write. The lease must have been checked: another
// session's node of the same name is then a stale one of a previous holder
// of the ID, and is replaced.
func (r *RecycleRegistry) refreshLive() (int64, *zk.Stat, error) {
	l := r.claim
	p := r.c.livePath(liveName(l.ep, l.id))
	if r.live != "" && r.live != p {
		r.dropLive()
	}
	for attempt := 1; ; attempt++ {
		ts := r.c.now()
		data := encodeLive(l.ep, l.id, ts)
		ok, st, err := r.c.conn.Exists(p)
		if err != nil {
			return 0, nil, fmt.Errorf("zookeeper: check the live node %s: %w", p, err)
		}
		switch {
		case !ok:
			st, err = r.c.createLive(p, data)
		case st.EphemeralOwner != r.c.conn.SessionID():
			err = r.c.conn.Delete(p, st.Version)
			if err == nil {
				err = zk.ErrNoNode // deleted: go round to create ours
			}
		default:
			st, err = r.c.conn.Set(p, data, st.Version)
		}
		switch {
		case (errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion)) && attempt < 3:
			continue
		case err != nil:
			return 0, nil, fmt.Errorf("zookeeper: write the live node %s: %w", p, err)
		}
		r.live = p
		return ts, st, nil
	}
}

// dropLive deletes our live node. If ZooKeeper does not answer, the node
// goes with the session, and PeerClocks skips it meanwhile.
func (r *RecycleRegistry) dropLive() {
	if r.live == "" {
		return
	}
	if err := r.c.deleteLive(r.live); err != nil {
		r.c.log.Debug("could not delete our live node", "node", r.live, "err", err)
	}
	r.live = ""
}

// PeerClocks returns the clocks of the other live servers of the cluster,
// as Registry.PeerClocks does (the live nodes of both registries share
// /snowflake/{Name}/temporary). It needs a held lease: without one it fails
// with ErrWorkerLost, as Heartbeat does.
func (r *RecycleRegistry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	var peers []leaf.PeerClock
	err := r.c.run(ctx, "peer clocks", func() error {
		if err := r.held(); err != nil {
			return err
		}
		if r.sessionGone() {
			return r.lost("the ZooKeeper session expired", nil)
		}
		ts, st, err := r.refreshLive()
		if err != nil {
			return err
		}
		peers, err = r.c.peerClocks(r.live, ts, st)
		return err
	})
	return peers, err
}

// Release stores mark as the ID's high-water mark and deletes its inuse
// node, in one transaction: the ID is free at once, protected by the mark.
func (r *RecycleRegistry) Release(ctx context.Context, mark int64) error {
	return r.c.run(ctx, "release", func() error {
		if err := r.held(); err != nil {
			if r.claim != nil {
				r.dropClaim() // a lost claim: delete the node if it is still ours
			}
			return err
		}
		l := r.claim
		r.dropLive()
		setMark := &zk.SetDataRequest{Path: r.markPath(l.id), Data: encode(l.ep, mark), Version: l.version}
		if !r.sessionGone() {
			res, err := r.c.conn.Multi(setMark, &zk.DeleteRequest{Path: r.inusePath(l.id), Version: -1})
			if err == nil {
				r.claim = nil
				return nil
			}
			if len(res) != 2 {
				// No answer; the caller may retry.
				return fmt.Errorf("zookeeper: release worker %d: %w", l.id, err)
			}
			if res[0].Error != nil {
				// The mark changed: another server holds the ID.
				r.claim = nil
				r.dropOrphan(l.id)
				return fmt.Errorf("%w: zookeeper: release worker %d: its high-water mark was rewritten: %w", leaf.ErrWorkerLost, l.id, res[0].Error)
			}
		}
		// The inuse node went with our session. If no one claimed the ID
		// since (the mark is unchanged), store the mark all the same.
		if _, err := r.c.conn.Set(setMark.Path, setMark.Data, setMark.Version); err != nil {
			if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
				r.claim = nil
				return fmt.Errorf("%w: zookeeper: release worker %d: %w", leaf.ErrWorkerLost, l.id, err)
			}
			return fmt.Errorf("zookeeper: release worker %d: %w", l.id, err)
		}
		r.claim = nil
		r.c.log.Warn("worker ID released after its lease had lapsed", "worker_id", l.id)
		return nil
	})
}

// Close ends the ZooKeeper session, which deletes the inuse node at once;
// the mark stays. It does not Release.
func (r *RecycleRegistry) Close() error {
	r.c.close()
	return nil
}
