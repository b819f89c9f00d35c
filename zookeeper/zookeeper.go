package zookeeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// DefaultLease is Config.Lease's default.
const DefaultLease = leaf.DefaultClaimLease

// MinLease is the shortest Config.Lease accepted: a holder renews every
// second, and a lease must outlive a few renewals.
const MinLease = 2 * time.Second

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
	// may clamp it). It bounds Open's wait for a session and how long the
	// live nodes of a dead server linger; it is not the lease. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Lease is how long a claim lasts without a renewal (see lease.go): the
	// holder stops issuing before it runs out, and another process takes
	// the claim only after it, so ZooKeeper may be unreachable this long
	// without a holder stopping. At least MinLease, millisecond resolution.
	// Default DefaultLease.
	Lease time.Duration
	// Holder is this server's instance identity (local.Instance), written
	// into its lease: a restart of the same server takes its claim back at
	// once instead of waiting the lease out. Empty: a new random identity
	// per registry, so a restart waits.
	Holder string
	// Logger receives the registry's messages; the ZooKeeper client's own go
	// to it at debug level. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock whose readings the registry publishes: in the live
	// nodes that PeerClocks compares, in a new node's first timestamp, and
	// (RecycleRegistry) as the time a high-water mark must have passed. It
	// should be the snowflake generator's clock. Default time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults a zero field of Config takes;
// Servers and Name have none.
func DefaultConfig() Config {
	return Config{SessionTimeout: DefaultSessionTimeout, Lease: DefaultLease, Logger: slog.Default(), Now: time.Now}
}

// Validate reports what Open would refuse in c, once its zero fields have
// taken their defaults.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults fills c's zero fields from DefaultConfig and validates c.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.SessionTimeout == 0 {
		c.SessionTimeout = d.SessionTimeout
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Lease == 0 {
		c.Lease = d.Lease
	}
	if c.Holder == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
		c.Holder = "process/" + hex.EncodeToString(b[:])
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
	if c.Lease < MinLease {
		return c, fmt.Errorf("%w: zookeeper: lease %v, want at least %v", leaf.ErrInvalidArgument, c.Lease, MinLease)
	}
	if len(c.Holder) > 200 || strings.ContainsFunc(c.Holder, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return c, fmt.Errorf("%w: zookeeper: holder %q must be at most 200 bytes of visible ASCII", leaf.ErrInvalidArgument, truncate(c.Holder, 60))
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

	// sem serialises the registry's calls, and is held by the goroutine
	// running one until it ends, even when the caller's context ended first
	// (the ZooKeeper client takes no context, so a call cannot be withdrawn):
	// the next call then sees the state that call left, never half of it.
	sem       chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
}

// zkLogger routes the ZooKeeper client's log to slog at debug level: it logs
// every reconnect, which the registry's errors already report.
type zkLogger struct{ c *client }

func (l zkLogger) Printf(format string, args ...any) {
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
		zk.WithLogger(zkLogger{c}), zk.WithEventCallback(onEvent), zk.WithDialer(handshakeDialer(cfg.SessionTimeout)))
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

// handshakeDialer dials as the ZooKeeper client does, on connections that
// wait at most limit for an answer. The client waits ten times its receive
// timeout (two thirds of the session timeout: 40s by default) for a server
// to answer its handshake, and every call of the registry queues behind
// it: a server that accepts the connection but does not answer (one still
// starting after a restart, on a busy host) held the heartbeats for 40s,
// past the lease, and the server stopped issuing. The Java client waits a
// session timeout; so does this one, then tries again. Reads after the
// handshake wait the receive timeout, below the limit: unchanged.
func handshakeDialer(limit time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: conn, limit: limit}, nil
	}
}

// cappedConn caps how far ahead a read deadline may be set.
type cappedConn struct {
	net.Conn
	limit time.Duration
}

func (c *cappedConn) SetReadDeadline(t time.Time) error {
	if latest := time.Now().Add(c.limit); !t.IsZero() && t.After(latest) {
		t = latest
	}
	return c.Conn.SetReadDeadline(t)
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
// node and never changes. The claim on it is a lease in
// /snowflake/{Name}/lease/{ip}:{port} (see lease.go), so that a second
// process given the same endpoint cannot take the same ID while the first
// may still issue, whether or not the first can reach ZooKeeper. A
// registered server also holds a live node for the peer clock check. One
// Registry serves one server; its methods are safe for concurrent use but
// run one at a time.
type Registry struct {
	c        *client
	dir      string // /snowflake/{Name}/forever
	leaseDir string // /snowflake/{Name}/lease

	// Guarded by c.sem.
	node  string // our node's path, "" while none is held
	ep    leaf.Endpoint
	id    int64
	lease *leaseHold // our lease, nil while none is held
	live  liveNode   // our live node under /snowflake/{Name}/temporary
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
	base := Root + "/" + c.cfg.Name
	return &Registry{c: c, dir: base + "/forever", leaseDir: base + "/lease", live: liveNode{c: c}}, nil
}

// Register returns ep's worker ID: the sequence of its node, created the
// first time ep registers, with the node's timestamp as the high-water mark
// (0 for a new node). An ID above maxID fails with ErrWorkerIDsExhausted;
// IDs are never wrapped round, which would share them.
//
// It first takes ep's lease. If another process holds it (another server
// given the same endpoint, or one with the endpoint cut off from ZooKeeper
// that has not yet stopped), Register waits up to ClaimWait, or until ctx
// ends, for it to lapse, and fails with ErrWorkerInUse if it is still
// renewed. A lease of our own instance identity (our previous run, killed)
// is taken back at once. Taking the lease first keeps servers that race
// with one new endpoint from each creating a node, which would spend a
// worker ID apiece.
func (r *Registry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	var claim leaf.WorkerClaim
	err := r.c.run(ctx, "register "+ep.String(), func() error {
		if r.lease != nil && r.ep != ep {
			// Registered under another endpoint before: that claim goes.
			r.dropLease()
		}
		r.node, r.ep, r.id = "", ep, -1
		// Taken before the lease is written: it lasts at least Lease from
		// here.
		t0 := time.Now()
		hold, prev, resumed, err := r.c.acquireLease(ctx, r.leaseDir+"/"+ep.String(),
			func() claimRecord { return r.c.newClaim(ep, 0) }, r.ClaimWait(),
			func(h *heldBy, waited time.Duration, cause error) error { return r.inUse(ep, h, waited, cause) })
		if err != nil {
			return err
		}
		r.lease = &hold
		node, id, hw, created, err := r.find(ep)
		if err != nil {
			return err
		}
		if id > maxID {
			r.dropLease()
			return fmt.Errorf("%w: zookeeper: endpoint %s holds worker ID %d (node %s), above the maximum %d; zk_normal never reuses an ID, so delete the nodes of endpoints gone for good or widen the worker ID bits",
				leaf.ErrWorkerIDsExhausted, ep, id, node, maxID)
		}
		r.node, r.id = node, id
		if _, _, err := r.refreshLive(); err != nil {
			// Only PeerClocks needs it, and Heartbeat tries again.
			r.c.log.Warn("could not write the live node", "endpoint", ep.String(), "err", err)
		}
		claim = leaf.WorkerClaim{WorkerID: id, HighWater: hw, Expires: t0.Add(r.c.cfg.Lease), Resumed: resumed}
		r.c.log.Info("worker ID registered", "endpoint", ep.String(), "worker_id", id, "node", node, "new", created,
			"high_water", hw, "resumed", resumed, "previous_holder", prev.Holder, "lease", r.c.cfg.Lease)
		return nil
	})
	return claim, err
}

// ClaimWait is the longest Register waits for another process's lease on
// its endpoint to lapse: the lease, a margin, and a second for round trips.
// Register's context should allow this much more than its usual bound.
func (r *Registry) ClaimWait() time.Duration { return LeaseClaimWait(r.c.cfg.Lease) }

// inUse is Register's refusal: who holds the endpoint's lease.
func (r *Registry) inUse(ep leaf.Endpoint, h *heldBy, waited time.Duration, cause error) error {
	const advice = "give each server its own endpoint (snowflake.endpoint, --snowflake-endpoint, or a distinct listen port) or stop the other server"
	what := fmt.Sprintf("zookeeper: endpoint %s is leased by another process: %s", ep, h.describe())
	if cause != nil {
		return fmt.Errorf("%w: %s; gave up after %v, before the lease could lapse: %w; %s", leaf.ErrWorkerInUse, what, waited.Round(time.Millisecond), cause, advice)
	}
	return fmt.Errorf("%w: %s; still renewed after %v; %s", leaf.ErrWorkerInUse, what, waited.Round(time.Millisecond), advice)
}

// dropLease gives our lease back, if ZooKeeper answers; otherwise it lapses.
func (r *Registry) dropLease() {
	if r.lease == nil {
		return
	}
	if err := r.c.conn.Delete(r.lease.path, r.lease.version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
		r.c.log.Warn("could not give back our lease; it lapses by itself", "node", r.lease.path, "err", err)
	}
	r.lease = nil
	r.live.drop()
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

// Heartbeat renews the endpoint's lease, then stores mark in the node's
// timestamp (unconditionally, as Java Leaf does: the lease says the ID is
// ours) and our clock's reading in the live node. The expiry is counted
// from before the renewal was sent. ErrWorkerLost means that the lease was
// taken over by another process after ours lapsed, or that the lease or
// the node was deleted.
func (r *Registry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	var expires time.Time
	err := r.c.run(ctx, "heartbeat", func() error {
		if r.lease == nil || r.node == "" {
			return fmt.Errorf("%w: zookeeper: no worker ID registered", leaf.ErrWorkerLost)
		}
		t0 := time.Now()
		if err := r.c.renewLease(r.lease, r.c.newClaim(r.ep, mark)); err != nil {
			if errors.Is(err, leaf.ErrWorkerLost) {
				r.lease, r.node = nil, ""
			}
			return err
		}
		if err := r.store(mark); err != nil {
			return err
		}
		expires = t0.Add(r.c.cfg.Lease)
		if _, _, err := r.refreshLive(); err != nil {
			// The lease is sound; only PeerClocks needs the live node.
			r.c.log.Warn("could not write the live node", "worker_id", r.id, "err", err)
		}
		return nil
	})
	return expires, err
}

// refreshLive writes our clock's reading into our live node (see
// liveNode.refresh). We hold the endpoint's lease: another session's node
// of the same name is a stale one of a previous holder (our own killed run,
// or a holder whose lease lapsed), and is replaced.
func (r *Registry) refreshLive() (int64, *zk.Stat, error) {
	return r.live.refresh(r.ep.String(), r.ep, r.id)
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
		ts, st, err := r.refreshLive()
		if err != nil {
			return err
		}
		peers, err = r.c.peerClocks(r.live.path, ts, st)
		return err
	})
	return peers, err
}

// Release stores mark in the node and gives the lease back, in one
// transaction, so that the next server with this endpoint starts at once;
// the node stays: the endpoint keeps its ID. If the lease is no longer ours
// nothing is written and Release fails with ErrWorkerLost.
func (r *Registry) Release(ctx context.Context, mark int64) error {
	return r.c.run(ctx, "release", func() error {
		if r.lease == nil || r.node == "" {
			return fmt.Errorf("%w: zookeeper: no worker ID registered", leaf.ErrWorkerLost)
		}
		_, err := r.c.conn.Multi(
			&zk.SetDataRequest{Path: r.node, Data: encode(r.ep, mark), Version: -1},
			&zk.DeleteRequest{Path: r.lease.path, Version: r.lease.version},
		)
		switch {
		case errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode):
			r.lease, r.node = nil, ""
			r.live.drop()
			return fmt.Errorf("%w: zookeeper: release: the lease or the node changed hands: %w", leaf.ErrWorkerLost, err)
		case err != nil:
			return fmt.Errorf("zookeeper: release: %w", err) // no answer: the caller may try again
		}
		r.lease, r.node = nil, ""
		r.live.drop()
		return nil
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
