package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leafgo/leaf"
)

// Defaults of Config.
const (
	DefaultPrefix = "/leaf/snowflake/"
	// DefaultTTL is Config.TTL's default (etcd keeps leases across a
	// restart and a leader election).
	DefaultTTL         = leaf.DefaultClaimLease
	DefaultDialTimeout = 5 * time.Second
	// MinTTL is the shortest lease accepted. etcd itself raises shorter
	// leases to about 1.5 election timeouts (2 s with its defaults).
	MinTTL = 2 * time.Second
)

// Config configures Open.
type Config struct {
	// Endpoints are the etcd client URLs or host:port pairs. Required.
	Endpoints []string
	// Prefix is the key namespace, starting and ending with "/".
	// Default DefaultPrefix.
	Prefix string
	// Name is leaf.name, the service whose workers share the ID pool; keys
	// live under Prefix+Name+"/". Required; no "/".
	Name string
	// TTL is the lease's time to live, whole seconds, at least MinTTL: a
	// crashed holder's ID returns to the pool this long after its last
	// heartbeat. Heartbeats must come well within it. Default DefaultTTL.
	TTL time.Duration
	// DialTimeout bounds Open's check that etcd answers. Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Logger receives the registry's own messages (the etcd client's are
	// discarded). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock whose readings the registry publishes for the peer
	// clock check (PeerClocks): the snowflake generator's. Default time.Now.
	Now func() time.Time
	// Holder is this server's instance identity (local.Instance), written
	// into its worker key: RegisterID takes back at once an ID whose key
	// names it (the server's previous run, killed, whose lease has not run
	// out) instead of waiting the lease out. Empty: none, so a restart
	// waits.
	Holder string
}

// DefaultConfig returns the defaults a zero field of Config takes;
// Endpoints and Name have none.
func DefaultConfig() Config {
	return Config{Prefix: DefaultPrefix, TTL: DefaultTTL, DialTimeout: DefaultDialTimeout, Logger: slog.Default(), Now: time.Now}
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
	if c.Prefix == "" {
		c.Prefix = d.Prefix
	}
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if len(c.Endpoints) == 0 {
		return c, fmt.Errorf("%w: etcd: no endpoints", leaf.ErrInvalidArgument)
	}
	for _, ep := range c.Endpoints {
		if strings.TrimSpace(ep) == "" {
			return c, fmt.Errorf("%w: etcd: empty endpoint", leaf.ErrInvalidArgument)
		}
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") || !printable(c.Prefix) {
		return c, fmt.Errorf("%w: etcd: prefix %q must start and end with \"/\" and be printable UTF-8",
			leaf.ErrInvalidArgument, truncate(c.Prefix, 60))
	}
	if c.Name == "" || strings.Contains(c.Name, "/") || !printable(c.Name) {
		return c, fmt.Errorf("%w: etcd: name %q must be non-empty printable UTF-8 without \"/\"",
			leaf.ErrInvalidArgument, truncate(c.Name, 60))
	}
	// etcd leases are whole seconds; rounding would silently change the
	// promise the configuration makes.
	if c.TTL < MinTTL || c.TTL%time.Second != 0 {
		return c, fmt.Errorf("%w: etcd: TTL %v, want whole seconds, at least %v", leaf.ErrInvalidArgument, c.TTL, MinTTL)
	}
	if c.DialTimeout < 0 {
		return c, fmt.Errorf("%w: etcd: dial timeout %v is negative", leaf.ErrInvalidArgument, c.DialTimeout)
	}
	return c, nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Registry is a leaf.WorkerRegistry on etcd. One Registry serves one server;
// its methods are safe for concurrent use but run one at a time. The etcd
// client retries while the server is unreachable, so a call whose context
// has no deadline is given one of TTL.
type Registry struct {
	cfg       Config
	cli       *clientv3.Client
	log       *slog.Logger
	workerDir string // {Prefix}{Name}/worker/
	markDir   string // {Prefix}{Name}/mark/

	// sem serialises Register, Heartbeat, Release and Close (a channel
	// rather than a mutex so that waiting honours the caller's context);
	// it guards the fields below.
	sem    chan struct{}
	closed bool
	claim  *claim // nil when no ID is held

	closeOnce sync.Once
	closeErr  error
}

// claim is the ID this registry holds.
type claim struct {
	id     int64
	ep     leaf.Endpoint
	lease  clientv3.LeaseID
	ttl    time.Duration // as granted by etcd, which may raise the asked TTL
	rev    int64         // create revision of the worker key: tells our key from a later holder's
	since  int64         // the worker key's timestamp: when the ID was claimed, Unix ms
	worker string        // worker key
	mark   string        // mark key
}

// record is the value of worker and mark keys. Port is a string, as in Java
// Leaf's ZooKeeper node data, so tools that read those read these.
type record struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	Timestamp int64  `json:"timestamp"`
	// Clock, in worker keys only, is the holder's clock at its last
	// heartbeat (Unix ms), for PeerClocks. Worker keys written before it
	// existed lack it and are left out of the peer clock check.
	Clock *int64 `json:"clock,omitempty"`
	// Holder, in worker keys only, is the holder's instance identity
	// (Config.Holder), if it has one.
	Holder string `json:"holder,omitempty"`
}

func encode(ep leaf.Endpoint, ts int64) string {
	b, _ := json.Marshal(record{IP: ep.IP, Port: strconv.Itoa(ep.Port), Timestamp: ts})
	return string(b)
}

// encodeWorker is a worker key's value: ts is when the ID was claimed,
// clock the holder's clock reading now, holder its identity.
func encodeWorker(ep leaf.Endpoint, ts, clock int64, holder string) string {
	b, _ := json.Marshal(record{IP: ep.IP, Port: strconv.Itoa(ep.Port), Timestamp: ts, Clock: &clock, Holder: holder})
	return string(b)
}

// markOf reads a mark's timestamp; only that field matters, so a record with
// a numeric port still reads.
func markOf(value []byte) (int64, error) {
	var m struct {
		Timestamp *int64 `json:"timestamp"`
	}
	if err := json.Unmarshal(value, &m); err != nil {
		return 0, err
	}
	if m.Timestamp == nil || *m.Timestamp < 0 {
		return 0, errors.New("no timestamp")
	}
	return *m.Timestamp, nil
}

// Open connects to etcd and checks that it answers within DialTimeout (the
// client dials lazily, so without the check a dead server would show only at
// Register).
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// Without keep-alive pings a connection whose peer vanished (no RST)
		// would hang every call until TCP gives up, minutes later. 10 s is
		// gRPC's floor; etcd accepts pings every 5 s.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		// The client logs every retry and reconnect at warn level with zap;
		// our errors carry what matters.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: client for %v: %w", cfg.Endpoints, err)
	}
	base := cfg.Prefix + cfg.Name + "/"
	r := &Registry{
		cfg:       cfg,
		cli:       cli,
		log:       cfg.Logger.With("registry", "etcd", "namespace", base),
		workerDir: base + "worker/",
		markDir:   base + "mark/",
		sem:       make(chan struct{}, 1),
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	// A linearizable read goes through the leader: it proves a quorum
	// answers, not just that a socket opens.
	if _, err := cli.Get(pctx, base, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd: %v did not answer (dial timeout %v): %w", cfg.Endpoints, cfg.DialTimeout, err)
	}
	return r, nil
}

// lock takes the registry's semaphore, or fails with ctx's error.
func (r *Registry) lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("etcd: %w", ctx.Err())
	}
	if r.closed {
		<-r.sem
		return fmt.Errorf("etcd: registry %w", leaf.ErrClosed)
	}
	return nil
}

func (r *Registry) unlock() { <-r.sem }

// bound gives a context without a deadline one of TTL: etcd calls retry
// while the server is unreachable, and a call that outlasts the lease is
// pointless anyway.
func (r *Registry) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.cfg.TTL)
}

// cleanupCtx is for undoing after a failure: it survives the caller's
// cancellation, which may be what failed.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

func (r *Registry) revoke(ctx context.Context, lease clientv3.LeaseID) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if _, err := r.cli.Revoke(cctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// Harmless: the lease expires after its TTL.
		r.log.Warn("revoking an unused lease failed", "lease", int64(lease), "err", err)
	}
}

// Register claims the lowest free worker ID in [0, maxID] whose high-water
// mark has passed. A claim this registry still holds is given up first.
func (r *Registry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	if err := r.lock(ctx); err != nil {
		return leaf.WorkerClaim{}, err
	}
	defer r.unlock()
	ctx, cancel := r.bound(ctx)
	defer cancel()
	r.giveUp(ctx)

	// Taken before the grant: the lease lasts at least TTL from here.
	t0 := time.Now()
	g, err := r.cli.Grant(ctx, int64(r.cfg.TTL/time.Second))
	if err != nil {
		return leaf.WorkerClaim{}, fmt.Errorf("etcd: grant lease: %w", err)
	}
	c, hw, err := r.claimID(ctx, ep, maxID, g.ID)
	if err != nil {
		r.revoke(ctx, g.ID)
		return leaf.WorkerClaim{}, err
	}
	c.ttl = time.Duration(g.TTL) * time.Second
	r.claim = c
	r.log.Debug("worker ID claimed", "worker_id", c.id, "high_water", hw, "lease", int64(g.ID), "ttl", c.ttl)
	return leaf.WorkerClaim{WorkerID: c.id, HighWater: hw, Expires: t0.Add(c.ttl)}, nil
}

// giveUp drops the claim this registry holds, if any: the caller has given
// it up (it registers again), and its last mark protects the ID.
func (r *Registry) giveUp(ctx context.Context) {
	if old := r.claim; old != nil {
		r.claim = nil
		r.revoke(ctx, old.lease)
	}
}

// claimID takes the lowest free ID whose mark has passed, attaching its
// worker key to lease, and returns the claim with the ID's old mark.
func (r *Registry) claimID(ctx context.Context, ep leaf.Endpoint, maxID int64, lease clientv3.LeaseID) (*claim, int64, error) {
	// One snapshot of both directories picks the candidates; the claim
	// transaction re-checks both, so the snapshot only saves writes.
	snap, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.workerDir, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(r.markDir, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: list workers: %w", err)
	}
	taken := make(map[int64]bool)
	r.addTaken(taken, snap.Responses[0].GetResponseRange().Kvs)
	now := time.Now().UnixMilli()
	for _, kv := range snap.Responses[1].GetResponseRange().Kvs {
		n, ok := r.idOf(r.markDir, kv.Key)
		if !ok {
			continue
		}
		// A mark in the future, or one that cannot be read, rules the ID
		// out for now; the transaction decides for the rest.
		if ts, err := markOf(kv.Value); err != nil || ts > now {
			taken[n] = true
		}
	}

	for n := int64(0); n >= 0 && n <= maxID; n++ {
		if taken[n] {
			continue
		}
		c := &claim{id: n, ep: ep, lease: lease, since: time.Now().UnixMilli(),
			worker: r.workerDir + strconv.FormatInt(n, 10), mark: r.markDir + strconv.FormatInt(n, 10)}
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(c.worker), "=", 0)).
			Then(
				clientv3.OpPut(c.worker, encodeWorker(ep, c.since, r.cfg.Now().UnixMilli(), r.cfg.Holder), clientv3.WithLease(lease)),
				clientv3.OpGet(c.worker),
				clientv3.OpGet(c.mark),
			).
			// Lost the race: learn every ID taken meanwhile, not just n.
			Else(clientv3.OpGet(r.workerDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())).
			Commit()
		if err != nil {
			return nil, 0, fmt.Errorf("etcd: claim worker %d: %w", n, err)
		}
		if !resp.Succeeded {
			r.addTaken(taken, resp.Responses[0].GetResponseRange().Kvs)
			taken[n] = true
			continue
		}
		c.rev = resp.Responses[1].GetResponseRange().Kvs[0].CreateRevision

		var hw, markRev int64
		if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
			markRev = kvs[0].ModRevision
			hw, err = markOf(kvs[0].Value)
			if err != nil {
				r.log.Warn("unreadable high-water mark: worker ID skipped", "key", c.mark, "value", truncate(string(kvs[0].Value), 100), "err", err)
			}
		}
		now := time.Now().UnixMilli()
		if err != nil || hw > now {
			// The previous holder promised IDs up to its mark, or we cannot
			// tell: hand back n and take the next.
			if err := r.unclaim(ctx, c); err != nil {
				return nil, 0, err
			}
			taken[n] = true
			continue
		}
		// Record that the ID is in use from now on; guarded so that a mark
		// written since our read (impossible while we hold the key, unless
		// our lease is gone) is never overwritten.
		put, err := r.cli.Txn(ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(c.worker), "=", c.rev),
				clientv3.Compare(clientv3.ModRevision(c.mark), "=", markRev),
			).
			Then(clientv3.OpPut(c.mark, encode(ep, now))).
			Commit()
		if err != nil {
			return nil, 0, fmt.Errorf("etcd: store mark of worker %d: %w", n, err)
		}
		if !put.Succeeded {
			return nil, 0, fmt.Errorf("etcd: worker %d: key or mark changed while registering (lease expired?)", n)
		}
		return c, hw, nil
	}
	return nil, 0, fmt.Errorf("%w: etcd: no worker ID in [0, %d] is free under %s", leaf.ErrWorkerIDsExhausted, maxID, r.workerDir)
}

// unclaim deletes c's worker key if it is still ours.
func (r *Registry) unclaim(ctx context.Context, c *claim) error {
	_, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.worker), "=", c.rev)).
		Then(clientv3.OpDelete(c.worker)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: hand back worker %d: %w", c.id, err)
	}
	return nil
}

// addTaken adds the IDs of a worker-directory listing to taken.
func (r *Registry) addTaken(taken map[int64]bool, kvs []*mvccpb.KeyValue) {
	for _, kv := range kvs {
		if n, ok := r.idOf(r.workerDir, kv.Key); ok {
			taken[n] = true
		}
	}
}

// idOf parses the ID of a key in dir; foreign keys are ignored.
func (r *Registry) idOf(dir string, key []byte) (int64, bool) {
	s, ok := strings.CutPrefix(string(key), dir)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// Heartbeat renews the lease once, stores mark as the ID's high-water mark
// and publishes the clock's reading (Config.Now) in the worker key for the
// other servers' PeerClocks. The returned expiry is counted from before the renewal was sent, so
// it is never later than etcd's.
func (r *Registry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	if err := r.lock(ctx); err != nil {
		return time.Time{}, err
	}
	defer r.unlock()
	c := r.claim
	if c == nil {
		return time.Time{}, fmt.Errorf("%w: etcd: no worker ID registered", leaf.ErrWorkerLost)
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()

	t0 := time.Now()
	ka, err := r.cli.KeepAliveOnce(ctx, c.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && ka.TTL <= 0) {
		r.claim = nil
		return time.Time{}, fmt.Errorf("%w: etcd: worker %d: lease expired", leaf.ErrWorkerLost, c.id)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("etcd: worker %d: renew lease: %w", c.id, err)
	}
	if err := r.storeMark(ctx, c, mark, true); err != nil {
		return time.Time{}, err
	}
	return t0.Add(time.Duration(ka.TTL) * time.Second), nil
}

// storeMark writes c's mark, and with publish our clock's reading in the
// worker key (keeping its lease), if c's worker key is still ours; otherwise
// the claim is lost.
func (r *Registry) storeMark(ctx context.Context, c *claim, mark int64, publish bool) error {
	ops := []clientv3.Op{clientv3.OpPut(c.mark, encode(c.ep, mark))}
	if publish {
		ops = append(ops, clientv3.OpPut(c.worker, encodeWorker(c.ep, c.since, r.cfg.Now().UnixMilli(), r.cfg.Holder), clientv3.WithIgnoreLease()))
	}
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.worker), "=", c.rev)).
		Then(ops...).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: worker %d: store mark: %w", c.id, err)
	}
	if !resp.Succeeded {
		r.claim = nil
		return fmt.Errorf("%w: etcd: worker %d: key %s is gone or another server's", leaf.ErrWorkerLost, c.id, c.worker)
	}
	return nil
}

// Release stores mark and revokes the lease, which deletes the worker key:
// the ID is free at once, protected by its mark. Without a claim (never
// registered, released, or lost) it does nothing.
func (r *Registry) Release(ctx context.Context, mark int64) error {
	if err := r.lock(ctx); err != nil {
		return err
	}
	defer r.unlock()
	c := r.claim
	if c == nil {
		return nil
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()

	if err := r.storeMark(ctx, c, mark, false); err != nil {
		if errors.Is(err, leaf.ErrWorkerLost) {
			r.revoke(ctx, c.lease)
		}
		// On other errors the claim stays: Release may be retried.
		return err
	}
	if _, err := r.cli.Revoke(ctx, c.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The mark is stored; the key goes when the lease expires.
		return fmt.Errorf("etcd: worker %d: revoke lease: %w", c.id, err)
	}
	r.claim = nil
	return nil
}

// maxPeers caps PeerClocks' listing: a deployment has at most as many live
// servers as worker IDs, 1024 in Leaf's layout.
const maxPeers = 1024

// PeerClocks returns the clock offsets of the other live workers (at most
// 1024): the reading each published with its last heartbeat (or its claim)
// minus our clock (Config.Now) at the middle of the listing's round trip.
//
// etcd's answers carry no server time to measure against, so each offset is
// biased low by the age of the peer's reading: at most one heartbeat
// interval (about 1s) plus half a round trip. A skew threshold must be well
// above that. A worker key without a reading (written by an older version)
// is left out.
func (r *Registry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	if err := r.lock(ctx); err != nil {
		return nil, err
	}
	defer r.unlock()
	own := ""
	if r.claim != nil {
		own = r.claim.worker
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()

	t0 := r.cfg.Now()
	resp, err := r.cli.Get(ctx, r.workerDir, clientv3.WithPrefix(), clientv3.WithLimit(maxPeers+1))
	if err != nil {
		return nil, fmt.Errorf("etcd: peer clocks: list workers: %w", err)
	}
	t1 := r.cfg.Now()
	at := t0.Add(t1.Sub(t0) / 2).UnixMilli()
	var peers []leaf.PeerClock
	for _, kv := range resp.Kvs {
		n, ok := r.idOf(r.workerDir, kv.Key)
		if !ok || string(kv.Key) == own || len(peers) == maxPeers {
			continue
		}
		var rec record
		if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Clock == nil {
			continue
		}
		peers = append(peers, leaf.PeerClock{
			Endpoint: rec.IP + ":" + rec.Port,
			WorkerID: n,
			Offset:   time.Duration(*rec.Clock-at) * time.Millisecond,
		})
	}
	return peers, nil
}

// Close closes the client without releasing: a held ID returns to the pool
// when its lease expires. Calls after Close fail with leaf.ErrClosed.
func (r *Registry) Close() error {
	// The client is closed before taking the semaphore: Close must not wait
	// behind a call stuck on a dead server, and closing the client makes
	// that call fail.
	r.closeOnce.Do(func() {
		if err := r.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			r.closeErr = fmt.Errorf("etcd: close: %w", err)
		}
	})
	r.sem <- struct{}{}
	r.closed = true
	r.unlock()
	return r.closeErr
}

var _ leaf.WorkerRegistry = (*Registry)(nil)
