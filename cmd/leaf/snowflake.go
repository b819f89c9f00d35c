package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/ordinal"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/snowflake"
	"github.com/leafgo/leaf/zookeeper"
)

// clockNow is the snowflake generator's clock; nil means time.Now. Only a
// binary built with the chaos tag sets it (chaos.go), so that the chaos test
// can step one server's clock back; a release build cannot be told to lie
// about the time.
var clockNow func() time.Time

// buildEnv lists the LEAF_* variables a build reads itself, outside the
// configuration (the chaos build's clock file), so that serve does not warn
// about them as unknown.
var buildEnv []string

// knownEnv is every LEAF_* variable serve reads outside the configuration.
func knownEnv() []string { return append([]string{envServer}, buildEnv...) }

// snowflakeWorker is a running snowflake generator and the registry client
// it uses, closed in that order.
type snowflakeWorker struct {
	gen  *snowflake.Generator
	reg  leaf.WorkerRegistry
	inst *local.Instance // nil for the local registry
	desc string
}

func (w *snowflakeWorker) close(ctx context.Context) error {
	var errs []error
	if err := w.gen.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("release worker ID: %w", err))
	}
	if err := w.reg.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close worker registry: %w", err))
	}
	// Last: while the identity is locked no other process on this data
	// directory can take our claims back as its own.
	if w.inst != nil {
		_ = w.inst.Close()
	}
	return errors.Join(errs...)
}

// startSnowflake claims a worker ID and starts the generator. port is the
// port actually listened on, used for the endpoint when none is configured.
func startSnowflake(ctx context.Context, cfg config.Config, port int, log *slog.Logger) (*snowflakeWorker, error) {
	sc := cfg.Snowflake
	ep, err := snowflakeEndpoint(sc.Endpoint, port)
	if err != nil {
		return nil, err
	}
	rc, err := openRegistry(cfg, ep, log)
	if err != nil {
		return nil, err
	}
	reg, desc := rc.reg, rc.desc
	s := snowflake.DefaultConfig()
	s.Layout = sc.Layout()
	s.Registry, s.RegistryName, s.Endpoint = reg, sc.Registry, ep
	s.Cache, s.ClaimWait = rc.cache, rc.claimWait
	s.MaxBackwards, s.RandomStart, s.Window, s.MaxPeerSkew = sc.MaxBackwards, sc.RandomStart, sc.Window, sc.MaxPeerSkew
	var ttl time.Duration
	if rc.inst != nil { // every registry but the local one leases
		ttl = sc.LeaseTTL
	}
	s.HeartbeatInterval = snowflake.HeartbeatFor(sc.Window, ttl)
	s.Logger = log
	if clockNow != nil {
		s.Now = clockNow
	}
	gen, err := snowflake.New(ctx, s)
	if err != nil {
		_ = reg.Close()
		if rc.inst != nil {
			_ = rc.inst.Close()
		}
		if sc.Registry == config.RegistryOrdinal && errors.Is(err, leaf.ErrWorkerInUse) {
			err = fmt.Errorf("%w. Two servers with one ordinal claim one worker ID: a StatefulSet of the same name in another "+
				"namespace sharing this registry (give each its own snowflake.ordinal.offset range, or on etcd its own "+
				"snowflake.name), or this configuration copied to another host", err)
		}
		return nil, fmt.Errorf("start snowflake worker (%s): %w", desc, err)
	}
	return &snowflakeWorker{gen: gen, reg: reg, inst: rc.inst, desc: desc}, nil
}

// registryChoice is the configured worker registry and what the generator
// needs to know about it.
type registryChoice struct {
	reg   leaf.WorkerRegistry
	cache snowflake.WorkerCache
	// inst is this server's identity towards a registry that leases (all
	// but local), locked until the worker closes.
	inst *local.Instance
	desc string
	// claimWait: how long a first Register may wait for a claim of this
	// endpoint (or ID) held by another process to lapse.
	claimWait time.Duration
}

// openRegistry builds the configured worker registry. Every registry but the
// local one leases its claims: it gets this server's instance identity (so
// that a restart after a crash takes its claim back at once) and a local
// cache file, Leaf's workerID.properties with the lease's end, and connects
// lazily, so that a registry unreachable at start-up falls back on the
// cache inside the cached lease instead of failing. Every registry
// publishes the generator's clock (clockNow) for the peer check.
func openRegistry(cfg config.Config, ep leaf.Endpoint, log *slog.Logger) (registryChoice, error) {
	sc := cfg.Snowflake
	dir := filepath.Join(cfg.DataDir, "snowflake", sc.Name)
	if sc.Registry == config.RegistryLocal || (sc.Registry == config.RegistryOrdinal && sc.Ordinal.Claim == config.ClaimNone) {
		return openUnleased(cfg, ep, dir)
	}
	// The identity and the cache are kept per endpoint port, as Leaf keeps
	// its cache: two servers of one host may share a data directory.
	portDir := filepath.Join(dir, strconv.Itoa(ep.Port))
	inst, err := local.OpenInstance(portDir)
	if err != nil {
		return registryChoice{}, fmt.Errorf("snowflake data directory %s: %w", portDir, err)
	}
	rc, err := openLeased(cfg, ep, dir, inst.ID(), log)
	if err != nil {
		_ = inst.Close()
		return registryChoice{}, err
	}
	rc.inst = inst
	rc.cache = local.NewCache(filepath.Join(portDir, "workerID.properties"))
	rc.desc = describeRegistry(cfg, ep)
	return rc, nil
}

// openUnleased builds the registries whose worker ID is configured: the
// local one, and the ordinal one without a claim. Their high-water mark
// lives in dir, locked against a second process on this data directory.
func openUnleased(cfg config.Config, ep leaf.Endpoint, dir string) (registryChoice, error) {
	sc := cfg.Snowflake
	lc := local.Config{WorkerID: int64(sc.WorkerID), Dir: filepath.Join(dir, "local")}
	if sc.Registry == config.RegistryOrdinal {
		id, err := sc.OrdinalWorkerID(sc.Ordinal.Hostname)
		if err != nil {
			return registryChoice{}, fmt.Errorf("%w: snowflake.registry ordinal: %v", config.ErrInvalid, err)
		}
		lc.WorkerID = id
	} else {
		ids, err := sc.LocalWorkerIDs()
		if err != nil {
			return registryChoice{}, fmt.Errorf("%w: snowflake.worker_ids: %v", config.ErrInvalid, err)
		}
		lc.WorkerIDs = ids
	}
	r, err := local.New(lc)
	if err != nil {
		return registryChoice{}, err
	}
	return registryChoice{reg: r, desc: describeRegistry(cfg, ep)}, nil
}

// openLeased builds the registries that lease their claims, each with the
// lease of snowflake.lease_ttl and the identity holder.
func openLeased(cfg config.Config, ep leaf.Endpoint, dir, holder string, log *slog.Logger) (registryChoice, error) {
	sc := cfg.Snowflake
	zc := zookeeper.Config{Servers: config.Servers(sc.ZooKeeper), Name: sc.Name, Lease: sc.LeaseTTL, Holder: holder, Logger: log, Now: clockNow}
	ec := etcd.Config{Endpoints: config.Servers(sc.Etcd), Name: sc.Name, TTL: sc.LeaseTTL, Holder: holder, Logger: log, Now: clockNow}
	switch sc.Registry {
	case config.RegistryZooKeeper:
		return registryChoice{
			reg:       lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return zookeeper.Open(ctx, zc) }),
			claimWait: zookeeper.LeaseClaimWait(sc.LeaseTTL),
		}, nil
	case config.RegistryZooKeeperRecycle:
		return registryChoice{
			reg:       lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return zookeeper.OpenRecycle(ctx, zc) }),
			claimWait: zookeeper.LeaseClaimWait(sc.LeaseTTL),
		}, nil
	case config.RegistryEtcd:
		return registryChoice{
			reg: lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return etcd.Open(ctx, ec) }),
		}, nil
	case config.RegistryMySQL:
		return registryChoice{
			reg:       lazy(openMySQLWorkers(cfg, holder, log)),
			claimWait: mysql.LeaseClaimWait(sc.LeaseTTL),
		}, nil
	case config.RegistryOrdinal:
		return openOrdinal(cfg, ec, holder, log)
	}
	return registryChoice{}, fmt.Errorf("%w: snowflake.registry %q", config.ErrInvalid, sc.Registry)
}

func openMySQLWorkers(cfg config.Config, holder string, log *slog.Logger) func(context.Context) (leaf.WorkerRegistry, error) {
	wc := mysql.WorkerConfig{DSN: cfg.MySQLRegistryDSN(), LeaseTTL: cfg.Snowflake.LeaseTTL, Holder: holder, Now: clockNow, Logger: log}
	return func(ctx context.Context) (leaf.WorkerRegistry, error) {
		return mysql.OpenWorkerRegistryWithConfig(ctx, wc)
	}
}

// openOrdinal builds the ordinal registry with a claim: the pod's ordinal
// plus the offset (its host name resolved by preflight), claimed in etcd or
// mysql, which refuse a second live holder anywhere.
func openOrdinal(cfg config.Config, ec etcd.Config, holder string, log *slog.Logger) (registryChoice, error) {
	sc := cfg.Snowflake
	id, err := sc.OrdinalWorkerID(sc.Ordinal.Hostname)
	if err != nil {
		return registryChoice{}, fmt.Errorf("%w: snowflake.registry ordinal: %v", config.ErrInvalid, err)
	}
	var claimer *lazyRegistry
	var wait time.Duration
	switch sc.Ordinal.Claim {
	case config.ClaimEtcd:
		claimer = lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return etcd.Open(ctx, ec) })
		wait = etcd.ClaimWait(sc.LeaseTTL)
	case config.ClaimMySQL:
		claimer = lazy(openMySQLWorkers(cfg, holder, log))
		wait = mysql.LeaseClaimWait(sc.LeaseTTL)
	default:
		return registryChoice{}, fmt.Errorf("%w: snowflake.ordinal.claim %q", config.ErrInvalid, sc.Ordinal.Claim)
	}
	r, err := ordinal.New(claimer, id)
	if err != nil {
		return registryChoice{}, err
	}
	return registryChoice{reg: r, claimWait: wait}, nil
}

// describeRegistry names the worker registry for logs and messages: its kind,
// servers and path, with any password hidden.
func describeRegistry(cfg config.Config, ep leaf.Endpoint) string {
	sc := cfg.Snowflake
	switch sc.Registry {
	case config.RegistryLocal:
		return "local " + ep.String()
	case config.RegistryZooKeeper, config.RegistryZooKeeperRecycle:
		return sc.Registry + " " + sc.ZooKeeper + " /snowflake/" + sc.Name
	case config.RegistryEtcd:
		return "etcd " + sc.Etcd + " " + etcd.DefaultPrefix + sc.Name
	case config.RegistryMySQL:
		return "mysql " + config.RedactDSN(cfg.MySQLRegistryDSN())
	case config.RegistryOrdinal:
		o := sc.Ordinal
		who := fmt.Sprintf("ordinal %s", o.Hostname)
		if id, err := sc.OrdinalWorkerID(o.Hostname); err == nil {
			who = fmt.Sprintf("ordinal worker %d (%s + offset %d)", id, o.Hostname, o.Offset)
		}
		switch o.Claim {
		case config.ClaimEtcd:
			return who + ", claimed in etcd " + sc.Etcd + " " + etcd.DefaultPrefix + sc.Name
		case config.ClaimMySQL:
			return who + ", claimed in mysql " + config.RedactDSN(cfg.MySQLRegistryDSN())
		}
		return who + ", no claim (high-water mark in data_dir)"
	}
	return sc.Registry
}

// lazyRegistry connects on first use and, while the connection cannot be
// made, again on every call: the generator retries Register on each
// heartbeat while it runs on its cached ID.
type lazyRegistry struct {
	open func(context.Context) (leaf.WorkerRegistry, error)
	mu   sync.Mutex
	r    leaf.WorkerRegistry
}

func lazy(open func(context.Context) (leaf.WorkerRegistry, error)) *lazyRegistry {
	return &lazyRegistry{open: open}
}

func (l *lazyRegistry) get(ctx context.Context) (leaf.WorkerRegistry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		r, err := l.open(ctx)
		if err != nil {
			return nil, err
		}
		l.r = r
	}
	return l.r, nil
}

func (l *lazyRegistry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	r, err := l.get(ctx)
	if err != nil {
		return leaf.WorkerClaim{}, err
	}
	return r.Register(ctx, ep, maxID)
}

// RegisterID claims a given worker ID where the registry behind can
// (ordinal.Claimer).
func (l *lazyRegistry) RegisterID(ctx context.Context, ep leaf.Endpoint, id int64) (leaf.WorkerClaim, error) {
	r, err := l.get(ctx)
	if err != nil {
		return leaf.WorkerClaim{}, err
	}
	c, ok := r.(ordinal.Claimer)
	if !ok {
		return leaf.WorkerClaim{}, fmt.Errorf("%T cannot claim a given worker ID: %w", r, errors.ErrUnsupported)
	}
	return c.RegisterID(ctx, ep, id)
}

func (l *lazyRegistry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	r, err := l.get(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return r.Heartbeat(ctx, mark)
}

func (l *lazyRegistry) Release(ctx context.Context, mark int64) error {
	r, err := l.get(ctx)
	if err != nil {
		return err
	}
	return r.Release(ctx, mark)
}

// PeerClocks lists the peers where the registry behind can; the generator
// reads errors.ErrUnsupported as "no peer check here".
func (l *lazyRegistry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	r, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	pr, ok := r.(snowflake.PeerClockReader)
	if !ok {
		return nil, fmt.Errorf("%T lists no peers: %w", r, errors.ErrUnsupported)
	}
	return pr.PeerClocks(ctx)
}

func (l *lazyRegistry) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		return nil
	}
	return l.r.Close()
}

// snowflakeEndpoint is the configured endpoint, or the IP Java Leaf's
// Utils.getIp picks on this host (defaultIP; empty when there is none, as
// Java's ":port") with the listen port, or with the configured port when the
// endpoint is ":PORT" (Leaf's leaf.snowflake.port).
func snowflakeEndpoint(configured string, port int) (leaf.Endpoint, error) {
	if p, ok := config.EndpointPort(configured); ok {
		if err := config.ValidateEndpoint(configured); err != nil {
			return leaf.Endpoint{}, fmt.Errorf("%w: snowflake.endpoint: %v", config.ErrInvalid, err)
		}
		port, _ = strconv.Atoi(p)
		configured = ""
	}
	if configured != "" {
		ep, err := leaf.ParseEndpoint(configured)
		if err != nil {
			return ep, fmt.Errorf("%w: snowflake.endpoint: %v", config.ErrInvalid, err)
		}
		return ep, nil
	}
	ep := leaf.Endpoint{IP: defaultIP(), Port: port}
	return ep, ep.Validate()
}

const decodeUsage = `Usage: leaf decode [--json] [--snowflake-layout leaf|js-safe|custom] ID...
       leaf decode --tag TAG [--json] [store flags] [--opaque-key-file FILE] ID...

Takes snowflake IDs apart: time, worker ID, sequence. The layout is the one
'leaf serve' would use (snowflake.layout, or snowflake.epoch and the
snowflake.*_bits keys; Leaf's by default), read from --config, LEAF_*
variables and --snowflake-layout:
  leaf decode --snowflake-layout js-safe 231554233484074

With --tag, maps IDs a segment tag issued back to the sequence its row
issued them as: an opaque tag's through its permutation, with the opaque
key 'leaf serve' would use (segment.opaque_key, LEAF_SEGMENT_OPAQUE_KEY or
--opaque-key-file); a formatted or periodic tag's ID is given formatted.
IDs the tag cannot have issued are refused (exit 2):
  leaf decode --tag orders 2815117263
`

// decode is 'leaf decode ID...'.
func (a *app) decode(ctx context.Context, args []string) error {
	fs := newFlagSet("decode")
	flags := config.BindFlags(fs, append([]string{"snowflake.layout", "segment.opaque_key_file"}, storeKeys...)...)
	asJSON := fs.Bool("json", false, "print one JSON object per ID")
	tag := fs.String("tag", "", "decode IDs of this segment tag (opaque, formatted or periodic) instead of snowflake IDs")
	pos, err := a.parseFlags(fs, decodeUsage, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf("expects at least one ID")
	}
	if isSet(fs, "tag") {
		return a.decodeSegment(ctx, flags, *tag, pos, *asJSON)
	}
	cfg, err := config.Load(flags.Sources(a.env))
	if err != nil {
		return err
	}
	layout := cfg.Snowflake.Layout()
	for _, arg := range pos {
		id, err := strconv.ParseInt(strings.TrimSpace(arg), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %q is not a 64-bit decimal ID", leaf.ErrInvalidArgument, arg)
		}
		p, err := layout.Decode(id)
		if err != nil {
			return err
		}
		t := time.UnixMilli(p.Timestamp).UTC().Format("2006-01-02T15:04:05.000Z")
		if *asJSON {
			fmt.Fprintf(a.stdout, `{"id":%d,"id_str":"%d","timestamp_ms":%d,"time":%q,"worker_id":%d,"sequence":%d}`+"\n",
				p.ID, p.ID, p.Timestamp, t, p.WorkerID, p.Sequence)
			continue
		}
		fmt.Fprintf(a.stdout, "id %d: time %s (%d ms), worker %d, sequence %d\n", p.ID, t, p.Timestamp, p.WorkerID, p.Sequence)
	}
	return nil
}

// decodeSegment is 'leaf decode --tag TAG ID...'.
func (a *app) decodeSegment(ctx context.Context, flags *config.Flags, tag string, ids []string, asJSON bool) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	return a.withStoreConfig(ctx, flags, mustExist, func(s segmentStore, cfg config.Config) error {
		key, err := cfg.OpaqueKey()
		if err != nil {
			return err
		}
		for _, id := range ids {
			d, err := segment.Decode(ctx, s, key, tag, strings.TrimSpace(id))
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.Marshal(newDecodedID(d))
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s\n", b)
				continue
			}
			if d.Period != "" {
				fmt.Fprintf(a.stdout, "tag %s id %s: raw %d in period %s\n", d.Tag, d.ID, d.Raw, d.Period)
				continue
			}
			fmt.Fprintf(a.stdout, "tag %s id %s: raw %d\n", d.Tag, d.ID, d.Raw)
		}
		return nil
	})
}

// decodedID is the JSON of a decoded segment ID, as GET
// /v2/tags/{tag}/decode answers it.
type decodedID struct {
	Tag    string `json:"tag"`
	ID     string `json:"id"`
	Raw    int64  `json:"raw"`
	Period string `json:"period,omitempty"`
}

func newDecodedID(d leaf.DecodedID) decodedID {
	return decodedID{Tag: d.Tag, ID: d.ID, Raw: d.Raw, Period: d.Period}
}
