package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
)

// Root is the top of every Leaf tree, as in Java Leaf.
const Root = "/snowflake"

// DefaultSessionTimeout is Java Leaf's Curator session timeout.
const DefaultSessionTimeout = 6 * time.Second

// seqDigits is the width of the sequence ZooKeeper appends (%010d).
const seqDigits = 10

// Config configures Open and OpenRecycle.
type Config struct {
	// Servers are the ZooKeeper servers, host:port each. Required.
	Servers []string
	// Name is leaf.name, the service whose servers share the ID pool: nodes
	// live under /snowflake/{Name}/. Required: letters, digits, '.', '_'
	// and '-'.
	Name string
	// SessionTimeout is the ZooKeeper session timeout asked for (the server
	// may clamp it). It bounds Open's wait for a session and, for
	// RecycleRegistry, is the lease: a crashed holder's ID returns to the
	// pool this long after ZooKeeper last heard from it. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Logger receives the registry's messages; the ZooKeeper client's own go
	// to it at debug level. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock whose readings the registry publishes: in the live
	// nodes that PeerClocks compares, in a new node's first timestamp, and
	// (RecycleRegistry) as the time a high-water mark must have passed. It
	// should be the snowflake generator's clock. Default time.Now.
	Now func() time.Time
}

// withDefaults fills the defaults in and validates c.
func (c Config) withDefaults() (Config, error) {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.Servers) == 0 {
		return c, fmt.Errorf("%w: zookeeper: no servers", leaf.ErrInvalidArgument)
	}
	for _, s := range c.Servers {
		host, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return c, fmt.Errorf("%w: zookeeper: server %q is not host:port", leaf.ErrInvalidArgument, truncate(s, 60))
		}
	}
	if err := leaf.ValidateClusterName(c.Name); err != nil {
		return c, fmt.Errorf("zookeeper: %w", err)
	}
	if c.SessionTimeout < 0 {
		return c, fmt.Errorf("%w: zookeeper: session timeout %v is negative", leaf.ErrInvalidArgument, c.SessionTimeout)
	}
	return c, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// record is the data of a forever node and of a mark: Java Leaf's
// Endpoint{String ip; String port; long timestamp}, in Jackson's field order.
// Port is a string, as Jackson writes it.
type record struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	Timestamp int64  `json:"timestamp"`
}

func encode(ep leaf.Endpoint, ts int64) []byte {
	b, _ := json.Marshal(record{IP: ep.IP, Port: strconv.Itoa(ep.Port), Timestamp: ts})
	return b
}

// markOf reads a record's timestamp. Only that field matters, so a record
// written by another tool with more fields or a numeric port still reads.
func markOf(data []byte) (int64, error) {
	var m struct {
		Timestamp *int64 `json:"timestamp"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, err
	}
	if m.Timestamp == nil || *m.Timestamp < 0 {
		return 0, errors.New("no timestamp")
	}
	return *m.Timestamp, nil
}

// parseNodeName takes a forever node's name, "{ip}:{port}-{seq}", apart.
// The sequence is after the LAST '-' (Java Leaf split on the first, which
// breaks on a path with a '-' in leaf.name: Leaf#161) and has exactly ten
// digits. Names of any other shape are not Leaf's, and ok is false.
func parseNodeName(name string) (endpoint string, seq int64, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || len(name)-i-1 != seqDigits {
		return "", 0, false
	}
	for _, b := range []byte(name[i+1:]) {
		if b < '0' || b > '9' {
			return "", 0, false
		}
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	endpoint = name[:i]
	if _, err := leaf.ParseEndpoint(endpoint); err != nil {
		return "", 0, false
	}
	return endpoint, seq, true
}

var openACL = zk.WorldACL(zk.PermAll) // Curator's default, so Java nodes and ours mix

// client is a ZooKeeper connection shared by both registries, with the
// serialisation of their calls.
type client struct {
	cfg     Config
	log     *slog.Logger
	conn    *zk.Conn
	liveDir string // /snowflake/{Name}/temporary

	// timeoutMs is the session timeout the server granted to the latest
	// session, 0 until one is seen; read from the client's log line (the
	// library keeps the value private).
	timeoutMs atomic.Int64

	// sem serialises the registry's calls, and is held by the goroutine
	// running one until it ends, even when the caller's context ended first
	// (the ZooKeeper client takes no context, so a call cannot be withdrawn):
	// the next call then sees the state that call left, never half of it.
	sem       chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
}

// authenticatedFormat is go-zookeeper v1.0.4's log line for a new session;
// its arguments are the session ID (int64) and the granted timeout in ms
// (int32).
const authenticatedFormat = "authenticated: id=%d, timeout=%d"

// zkLogger routes the ZooKeeper client's log to slog at debug level: it logs
// every reconnect, which the registry's errors already report.
type zkLogger struct{ c *client }

func (l zkLogger) Printf(format string, args ...any) {
	if format == authenticatedFormat && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.c.timeoutMs.Store(int64(ms))
		}
	}
	if l.c.log.Enabled(context.Background(), slog.LevelDebug) {
		l.c.log.Debug("zookeeper client: " + fmt.Sprintf(format, args...))
	}
}

// dial connects and waits for a session: zk.Connect only starts a goroutine
// that dials, so without the wait an unreachable server would show only as
// calls that hang. It waits at most SessionTimeout (and ctx).
func dial(ctx context.Context, cfg Config, registry string) (*client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &client{
		cfg:     cfg,
		log:     cfg.Logger.With("registry", registry, "name", cfg.Name),
		liveDir: Root + "/" + cfg.Name + "/temporary",
		sem:     make(chan struct{}, 1),
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	onEvent := func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		switch ev.State {
		case zk.StateHasSession:
			readyOnce.Do(func() { close(ready) })
		case zk.StateExpired:
			c.log.Warn("zookeeper session expired; the client opens a new one")
		}
	}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{c}), zk.WithEventCallback(onEvent))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: connect to %v: %w", cfg.Servers, err)
	}
	c.conn = conn
	t := time.NewTimer(cfg.SessionTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return c, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("no session within %v (state %v)", cfg.SessionTimeout, conn.State())
	}
	conn.Close()
	return nil, fmt.Errorf("zookeeper: connect to %v: %w", cfg.Servers, err)
}

// sessionTimeout is the timeout of the current session as the server
// granted it, or as asked if none was seen.
func (c *client) sessionTimeout() time.Duration {
	if ms := c.timeoutMs.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return c.cfg.SessionTimeout
}

// now reads the clock the registry publishes, in Unix ms.
func (c *client) now() int64 { return c.cfg.Now().UnixMilli() }

// run runs fn alone (see sem) and returns its error, or ctx's when ctx ends
// first; fn then finishes in the background.
func (c *client) run(ctx context.Context, what string, fn func() error) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("zookeeper: %s: %w", what, ctx.Err())
	}
	if c.closed.Load() {
		<-c.sem
		return fmt.Errorf("zookeeper: %s: registry %w", what, leaf.ErrClosed)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-c.sem }()
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("zookeeper: %s: %w", what, ctx.Err())
	}
}

// close ends the session; ZooKeeper deletes its ephemeral nodes at once.
func (c *client) close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.conn.Close()
	})
}

// ensurePath creates p and its missing parents, persistent and empty, as
// Curator's creatingParentsIfNeeded does.
func (c *client) ensurePath(p string) error {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := c.conn.Create(p[:i], nil, zk.FlagPersistent, openACL)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", p[:i], err)
		}
	}
	return nil
}

// Registry is a leaf.WorkerRegistry in Java Leaf's zk_normal layout (see the
// package documentation): an endpoint's worker ID is the sequence of its
// node and never changes. A registered server also holds its endpoint's live
// node, so that a second server given the same endpoint cannot take the
// same ID. One Registry serves one server; its methods are safe for
// concurrent use but run one at a time.
type Registry struct {
	c   *client
	dir string // /snowflake/{Name}/forever

	// Guarded by c.sem.
	node string // our node's path, "" while none is held
	ep   leaf.Endpoint
	id   int64
	// claim is our live node, /snowflake/{Name}/temporary/{ip}:{port}, ""
	// while none is held; claimSession is the session that owns it, to tell
	// a node our expired session took with it from one someone deleted.
	claim        string
	claimSession int64
}

var _ leaf.WorkerRegistry = (*Registry)(nil)

// Open connects to ZooKeeper and waits for a session, at most
// cfg.SessionTimeout, so that an unreachable server fails here and the
// caller can fall back to its cache.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	c, err := dial(ctx, cfg, "zookeeper")
	if err != nil {
		return nil, err
	}
	return &Registry{c: c, dir: Root + "/" + c.cfg.Name + "/forever"}, nil
}

// Register returns ep's worker ID: the sequence of its node, created the
// first time ep registers, with the node's timestamp as the high-water mark
// (0 for a new node). An ID above maxID fails with ErrWorkerIDsExhausted;
// IDs are never wrapped round, which would share them.
//
// It first claims ep's live node. If another session holds it (another
// server given the same endpoint, or the previous run of this one, killed,
// whose session has not expired yet), Register waits up to ClaimWait, or
// until ctx ends, for it to go, and fails with ErrWorkerInUse if it stays.
// Claiming first keeps servers that race with one new endpoint from each
// creating a node, which would spend a worker ID apiece.
func (r *Registry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	var claim leaf.WorkerClaim
	var holder atomic.Pointer[inUse] // the claim Register is waiting out
	err := r.c.run(ctx, "register "+ep.String(), func() error {
		r.node = ""
		if err := r.takeClaim(ctx, ep, &holder); err != nil {
			return err
		}
		r.ep, r.id = ep, -1
		node, id, hw, created, err := r.find(ep)
		if err != nil {
			return err
		}
		if id > maxID {
			r.dropClaim()
			return fmt.Errorf("%w: zookeeper: endpoint %s holds worker ID %d (node %s), above the maximum %d; zk_normal never reuses an ID, so delete the nodes of endpoints gone for good or widen the worker ID bits",
				leaf.ErrWorkerIDsExhausted, ep, id, node, maxID)
		}
		r.ep, r.id = ep, id
		if _, _, err := r.refreshClaim(); err != nil { // with the worker ID now
			return err
		}
		r.node = node
		claim = leaf.WorkerClaim{WorkerID: id, HighWater: hw}
		r.c.log.Info("worker ID registered", "endpoint", ep.String(), "worker_id", id, "node", node, "new", created, "high_water", hw)
		return nil
	})
	if err != nil && ctx.Err() != nil {
		// run gave up on ctx before the wait could say why: say it, so
		// that the caller does not take another live server for an
		// unreachable ZooKeeper (and fall back on its cached ID).
		if h := holder.Load(); h != nil {
			return leaf.WorkerClaim{}, h.err(ctx.Err())
		}
	}
	return claim, err
}

// ClaimWait is the longest Register waits for another session's live node
// of its endpoint to go: the session timeout, plus half of it because
// ZooKeeper expires sessions in batches a tick apart and grants no timeout
// below two ticks, plus a second for the news to reach us. A stale node of
// a previous run with a longer session timeout than ours may outlast it.
// Register's context should allow this much more than its usual bound.
func (r *Registry) ClaimWait() time.Duration { return ClaimWait(r.c.sessionTimeout()) }

// ClaimWait is Registry.ClaimWait for a session timeout, for a caller that
// needs the bound before it connects.
func ClaimWait(sessionTimeout time.Duration) time.Duration {
	return sessionTimeout + sessionTimeout/2 + time.Second
}

// inUse is a live node of another session that Register waits out.
type inUse struct {
	ep      leaf.Endpoint
	node    string
	session int64
	data    []byte
	wait    time.Duration
}

// err is the ErrWorkerInUse error for h; cause is why the wait ended early.
func (h *inUse) err(cause error) error {
	const advice = "give each server its own endpoint (snowflake.endpoint, --snowflake-endpoint, or a distinct listen port) or stop the other server"
	what := fmt.Sprintf("zookeeper: endpoint %s is claimed by ZooKeeper session %#x, another live server with this endpoint or a previous run of this one whose session has not expired: live node %s (%s)",
		h.ep, h.session, h.node, describeLive(h.data))
	if cause != nil {
		return fmt.Errorf("%w: %s, still there when the caller gave up waiting (ClaimWait is %v): %w; %s", leaf.ErrWorkerInUse, what, h.wait, cause, advice)
	}
	return fmt.Errorf("%w: %s, still there after %v; %s", leaf.ErrWorkerInUse, what, h.wait, advice)
}

// takeClaim makes our session the holder of ep's live node, waiting for
// another session's to go (see Register). holder is the other session's
// node while takeClaim waits for it, nil once the claim is ours.
func (r *Registry) takeClaim(ctx context.Context, ep leaf.Endpoint, holder *atomic.Pointer[inUse]) error {
	p := r.c.livePath(ep.String())
	if r.claim != "" && r.claim != p {
		// Registered under another endpoint before: that claim goes.
		if err := r.c.deleteLive(r.claim); err != nil {
			return fmt.Errorf("zookeeper: delete the live node %s: %w", r.claim, err)
		}
		r.claim = ""
	}
	wait := r.ClaimWait()
	start := time.Now()
	for {
		// The worker ID is not known yet (-1): Register writes it next.
		st, err := r.c.createLive(p, encodeLive(ep, -1, r.c.now()))
		if err == nil {
			r.claim, r.claimSession = p, st.EphemeralOwner
			if h := holder.Swap(nil); h != nil {
				r.c.log.Info("the other session's live node went; endpoint claimed", "endpoint", ep.String(), "node", p,
					"other_session", fmt.Sprintf("%#x", h.session), "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create the live node %s: %w", p, err)
		}
		ok, st, changed, err := r.c.conn.ExistsW(p)
		switch {
		case err != nil:
			return fmt.Errorf("zookeeper: check the live node %s: %w", p, err)
		case !ok:
			continue
		case st.EphemeralOwner == r.c.conn.SessionID():
			// Ours: a Register again in this session, or a create whose
			// answer was lost.
			r.claim, r.claimSession = p, st.EphemeralOwner
			holder.Store(nil)
			return nil
		}
		data, _, err := r.c.conn.Get(p) // for the messages only
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if r.claim == p {
			r.claim = "" // ours once, another's now
		}
		h := &inUse{ep: ep, node: p, session: st.EphemeralOwner, data: data, wait: wait}
		if holder.Swap(h) == nil {
			r.c.log.Warn("the endpoint's live node is held by another ZooKeeper session (another server with this endpoint, or a previous run of this one not yet expired); waiting for it to lapse",
				"endpoint", ep.String(), "node", p, "session", fmt.Sprintf("%#x", h.session), "holder", describeLive(data), "wait", wait)
		}
		left := wait - time.Since(start)
		if left <= 0 {
			return h.err(nil)
		}
		// Wake when the node changes (the holder's heartbeat) or goes.
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return h.err(ctx.Err())
		}
		t.Stop()
	}
}

// find returns ep's node, creating it if ep has none.
func (r *Registry) find(ep leaf.Endpoint) (node string, id, highWater int64, created bool, err error) {
	children, _, err := r.c.conn.Children(r.dir)
	if errors.Is(err, zk.ErrNoNode) {
		children, err = nil, r.c.ensurePath(r.dir)
	}
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("zookeeper: list %s: %w", r.dir, err)
	}
	want := ep.String()
	best, bestName := int64(-1), ""
	for _, name := range children {
		// Two nodes for one endpoint are the trace of a past race (two
		// starts of one endpoint): the lowest is the one Java took too.
		if e, seq, ok := parseNodeName(name); ok && e == want && (best < 0 || seq < best) {
			best, bestName = seq, name
		}
	}
	if best >= 0 {
		node = r.dir + "/" + bestName
		data, _, err := r.c.conn.Get(node)
		if err != nil {
			return "", 0, 0, false, fmt.Errorf("zookeeper: read %s: %w", node, err)
		}
		hw, err := markOf(data)
		if err != nil {
			return "", 0, 0, false, fmt.Errorf("zookeeper: node %s holds no Leaf timestamp (%q): %w", node, truncate(string(data), 80), err)
		}
		return node, best, hw, false, nil
	}

	node, err = r.c.conn.Create(r.dir+"/"+want+"-", encode(ep, r.c.now()), zk.FlagSequence, openACL)
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("zookeeper: create the node of %s under %s: %w", want, r.dir, err)
	}
	e, seq, ok := parseNodeName(path.Base(node))
	if !ok || e != want {
		return "", 0, 0, false, fmt.Errorf("zookeeper: created node %s has no sequence after %q", node, want+"-")
	}
	return node, seq, 0, true, nil
}

// Heartbeat stores mark in the node's timestamp, unconditionally as Java
// Leaf does, and our clock's reading in the live node. The claim does not
// expire: the zero time is returned. ErrWorkerLost means that the node or
// the live node is gone, or that another server with this endpoint took the
// live node while our session had expired.
func (r *Registry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	return time.Time{}, r.c.run(ctx, "heartbeat", func() error {
		if err := r.store(mark); err != nil {
			return err
		}
		_, _, err := r.refreshClaim()
		return err
	})
}

// refreshClaim writes our clock's reading into our live node and returns it
// with the node's Stat after the write.
func (r *Registry) refreshClaim() (int64, *zk.Stat, error) {
	if r.claim == "" {
		return 0, nil, fmt.Errorf("%w: zookeeper: no worker ID registered", leaf.ErrWorkerLost)
	}
	p := r.claim
	for attempt := 1; ; attempt++ {
		ok, st, err := r.c.conn.Exists(p)
		if err != nil {
			return 0, nil, fmt.Errorf("zookeeper: check the live node %s: %w", p, err)
		}
		session := r.c.conn.SessionID()
		ts := r.c.now()
		data := encodeLive(r.ep, r.id, ts)
		switch {
		case !ok && session != r.claimSession:
			// Our session expired and took the node with it, and no other
			// server has claimed the endpoint since: claim it again.
			st, err = r.c.createLive(p, data)
			switch {
			case errors.Is(err, zk.ErrNodeExists) && attempt < 3:
				continue // someone else's, or ours after a lost answer: look
			case err != nil:
				return 0, nil, fmt.Errorf("zookeeper: create the live node %s again: %w", p, err)
			}
			r.c.log.Warn("live node created again: the ZooKeeper session had expired", "node", p,
				"old_session", fmt.Sprintf("%#x", r.claimSession), "session", fmt.Sprintf("%#x", st.EphemeralOwner))
			r.claimSession = st.EphemeralOwner
			return ts, st, nil
		case !ok:
			return 0, nil, r.lostClaim(fmt.Sprintf("its live node %s was deleted", p))
		case st.EphemeralOwner != session:
			return 0, nil, r.lostClaim(fmt.Sprintf("its live node %s is held by ZooKeeper session %#x, not ours (%#x): another server with this endpoint claimed it while our session had expired",
				p, st.EphemeralOwner, session))
		}
		st, err = r.c.conn.Set(p, data, st.Version)
		switch {
		case (errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)) && attempt < 3:
			continue
		case err != nil:
			return 0, nil, fmt.Errorf("zookeeper: write the live node %s: %w", p, err)
		}
		r.claimSession = session
		return ts, st, nil
	}
}

// dropClaim deletes our live node. If ZooKeeper does not answer, the node
// goes with the session.
func (r *Registry) dropClaim() {
	if r.claim == "" {
		return
	}
	if err := r.c.deleteLive(r.claim); err != nil {
		r.c.log.Warn("could not delete our live node; it goes when the session ends", "node", r.claim, "err", err)
	}
	r.claim = ""
}

// lostClaim forgets the registration, whose live node is not ours any more,
// and returns the error saying so. The generator stops issuing and registers
// again, which waits for the other holder as a start does.
func (r *Registry) lostClaim(why string) error {
	ep, id := r.ep, r.id
	r.node, r.claim = "", ""
	return fmt.Errorf("%w: zookeeper: endpoint %s, worker %d: %s", leaf.ErrWorkerLost, ep, id, why)
}

// PeerClocks returns the clocks of the other live servers of the cluster
// (those holding a node under /snowflake/{Name}/temporary, of either
// registry; at most 1024), each as its offset from our clock. It first
// writes our clock's reading into our own live node, then measures each
// peer against ZooKeeper's clock (see client.peerClocks), so that the
// result does not depend on how long ago a peer last wrote. Nodes whose data
// it cannot read are skipped. It needs a registered worker: without one it
// fails with ErrWorkerLost, as Heartbeat does.
func (r *Registry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	var peers []leaf.PeerClock
	err := r.c.run(ctx, "peer clocks", func() error {
		if r.node == "" {
			return fmt.Errorf("%w: zookeeper: no worker ID registered", leaf.ErrWorkerLost)
		}
		ts, st, err := r.refreshClaim()
		if err != nil {
			return err
		}
		peers, err = r.c.peerClocks(r.claim, ts, st)
		return err
	})
	return peers, err
}

// Release stores mark as Heartbeat does and deletes the live node. The
// node stays: the endpoint keeps its ID for the next start.
func (r *Registry) Release(ctx context.Context, mark int64) error {
	return r.c.run(ctx, "release", func() error {
		err := r.store(mark)
		if err != nil && !errors.Is(err, leaf.ErrWorkerLost) {
			return err // no answer: the caller may try again
		}
		if r.claim != "" {
			if derr := r.c.deleteLive(r.claim); derr != nil {
				return errors.Join(err, fmt.Errorf("zookeeper: release: delete the live node %s: %w", r.claim, derr))
			}
			r.claim = ""
		}
		r.node = ""
		return err
	})
}

func (r *Registry) store(mark int64) error {
	if r.node == "" {
		return fmt.Errorf("%w: zookeeper: no worker ID registered", leaf.ErrWorkerLost)
	}
	_, err := r.c.conn.Set(r.node, encode(r.ep, mark), -1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		// Someone deleted the node. No one else can get its ID (sequences
		// never repeat), but the ID is no longer on record: registering
		// again gives the endpoint a new node that is.
		node := r.node
		r.node = ""
		return fmt.Errorf("%w: zookeeper: node %s was deleted", leaf.ErrWorkerLost, node)
	case err != nil:
		return fmt.Errorf("zookeeper: write the mark to %s: %w", r.node, err)
	}
	return nil
}

// Close ends the ZooKeeper session, which deletes the live node at once. It
// does not Release.
func (r *Registry) Close() error {
	r.c.close()
	return nil
}
