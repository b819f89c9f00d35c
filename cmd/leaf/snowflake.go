package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/config"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/mysql"
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
	maxBackwards := sc.MaxBackwards
	if maxBackwards == 0 {
		maxBackwards = -1 // configured 0: never wait (Settings reads 0 as its default)
	}
	maxPeerSkew := sc.MaxPeerSkew
	if maxPeerSkew == 0 {
		maxPeerSkew = -1 // configured 0: no check
	}
	interval := min(time.Second, sc.Window/3)
	if leases(sc.Registry) {
		interval = min(interval, sc.LeaseTTL/4)
	}
	gen, err := snowflake.New(ctx, snowflake.Settings{
		Layout:            sc.Layout(),
		Registry:          reg,
		RegistryName:      sc.Registry,
		Endpoint:          ep,
		Cache:             rc.cache,
		ClaimWait:         rc.claimWait,
		MaxBackwards:      maxBackwards,
		NoRandomStart:     !sc.RandomStart,
		Window:            sc.Window,
		MaxPeerSkew:       maxPeerSkew,
		HeartbeatInterval: interval,
		Logger:            log,
		Now:               clockNow,
	})
	if err != nil {
		_ = reg.Close()
		return nil, fmt.Errorf("start snowflake worker (%s): %w", desc, err)
	}
	return &snowflakeWorker{gen: gen, reg: reg, desc: desc}, nil
}

// leases: the registry's claims lapse unless renewed well within lease_ttl
// (the mysql registry's live-claim lease included).
func leases(registry string) bool {
	return registry == config.RegistryZooKeeperRecycle || registry == config.RegistryEtcd || registry == config.RegistryMySQL
}

// registryChoice is the configured worker registry and what the generator
// needs to know about it.
type registryChoice struct {
	reg   leaf.WorkerRegistry
	cache snowflake.WorkerCache // nil for leasing registries
	desc  string
	// claimWait: how long a first Register may wait for a live claim of this
	// endpoint left by a killed previous run to lapse.
	claimWait time.Duration
}

// openRegistry builds the configured worker registry. Registries that keep
// an ID per endpoint (zookeeper, mysql) get a local cache file, Leaf's
// workerID.properties, and connect lazily, so that an unreachable registry at
// start-up falls back on the cache instead of failing. Leasing registries get
// no cache: a cached leased ID may belong to another server by now. Every
// registry publishes the generator's clock (clockNow) for the peer check.
func openRegistry(cfg config.Config, ep leaf.Endpoint, log *slog.Logger) (registryChoice, error) {
	sc := cfg.Snowflake
	dir := filepath.Join(cfg.DataDir, "snowflake", sc.Name)
	cache := local.NewCache(filepath.Join(dir, strconv.Itoa(ep.Port), "workerID.properties"))
	switch sc.Registry {
	case config.RegistryLocal:
		ids, err := sc.LocalWorkerIDs()
		if err != nil {
			return registryChoice{}, fmt.Errorf("%w: snowflake.worker_ids: %v", config.ErrInvalid, err)
		}
		r, err := local.New(local.Config{WorkerID: int64(sc.WorkerID), WorkerIDs: ids, Dir: filepath.Join(dir, "local")})
		if err != nil {
			return registryChoice{}, err
		}
		return registryChoice{reg: r, desc: "local " + ep.String()}, nil
	case config.RegistryZooKeeper:
		zc := zookeeper.Config{Servers: config.Servers(sc.ZooKeeper), Name: sc.Name, Logger: log, Now: clockNow}
		return registryChoice{
			reg:       lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return zookeeper.Open(ctx, zc) }),
			cache:     cache,
			desc:      "zookeeper " + sc.ZooKeeper + " /snowflake/" + sc.Name,
			claimWait: zookeeper.ClaimWait(zookeeper.DefaultSessionTimeout),
		}, nil
	case config.RegistryZooKeeperRecycle:
		zc := zookeeper.Config{Servers: config.Servers(sc.ZooKeeper), Name: sc.Name, SessionTimeout: sc.LeaseTTL, Logger: log, Now: clockNow}
		return registryChoice{
			reg:  lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return zookeeper.OpenRecycle(ctx, zc) }),
			desc: "zookeeper-recycle " + sc.ZooKeeper + " /snowflake/" + sc.Name,
		}, nil
	case config.RegistryEtcd:
		ec := etcd.Config{Endpoints: config.Servers(sc.Etcd), Name: sc.Name, TTL: sc.LeaseTTL, Logger: log, Now: clockNow}
		return registryChoice{
			reg:  lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) { return etcd.Open(ctx, ec) }),
			desc: "etcd " + sc.Etcd + " " + etcd.DefaultPrefix + sc.Name,
		}, nil
	case config.RegistryMySQL:
		dsn := cfg.MySQLRegistryDSN()
		wc := mysql.WorkerConfig{DSN: dsn, LeaseTTL: sc.LeaseTTL, Now: clockNow, Logger: log}
		return registryChoice{
			reg: lazy(func(ctx context.Context) (leaf.WorkerRegistry, error) {
				return mysql.OpenWorkerRegistryWithConfig(ctx, wc)
			}),
			cache:     cache,
			desc:      "mysql " + config.RedactDSN(dsn),
			claimWait: mysql.LeaseClaimWait(sc.LeaseTTL),
		}, nil
	}
	return registryChoice{}, fmt.Errorf("%w: snowflake.registry %q", config.ErrInvalid, sc.Registry)
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

const decodeUsage = `Usage: leaf decode [--json] ID...

Takes snowflake IDs apart: time, worker ID, sequence. The layout comes from
the configuration (snowflake.epoch, snowflake.*_bits; Leaf's by default), read
from --config, LEAF_* variables and defaults like 'leaf serve'.
`

// decode is 'leaf decode ID...'.
func (a *app) decode(_ context.Context, args []string) error {
	fs := newFlagSet("decode")
	flags := config.BindFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per ID")
	pos, err := a.parseFlags(fs, decodeUsage, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf("expects at least one ID")
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
