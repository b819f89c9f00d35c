package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/deadline"
	"github.com/leafgo/leaf/internal/history"
	"github.com/leafgo/leaf/internal/ratelimit"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/ordered"
	"github.com/leafgo/leaf/ordered/forward"
	"github.com/leafgo/leaf/postgres"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

const serveUsage = `Usage: leaf serve [flags]

Runs the ID server until SIGINT or SIGTERM, then shuts down gracefully: stops
accepting, drains requests, gives unused IDs back to the store, closes it.
The address actually bound is logged ("listening" addr=...), so --listen with
port 0 is usable.

With no configuration it listens on 127.0.0.1:8080, keeps segments in
./leaf-data/leaf.db, seeded with the tag leaf-segment-test (step 2000), and
issues snowflake IDs as local worker 0:
  curl 127.0.0.1:8080/api/segment/get/leaf-segment-test
  curl 127.0.0.1:8080/api/snowflake/get/any
Worker IDs from ZooKeeper (Java Leaf's tree), etcd or MySQL:
  leaf serve --snowflake-registry zookeeper --zk 10.0.0.5:2181 --name my-service

Those defaults keep IDs on this node alone (the SQLite file, worker 0): on an
address other hosts can reach (--listen 0.0.0.0:8080) serve refuses them
unless told --single-node, since two such servers would issue the same IDs.
Several servers share a store (--segment-store mysql|postgres) and a registry
(--snowflake-registry zookeeper|etcd|mysql, ordinal for a StatefulSet's pods,
or a distinct --worker-id each).

Every key can also be set in the YAML file or a LEAF_* variable: see
etc/leaf.yml. Flags win over both.
--leaf-properties FILE reads Java Leaf's leaf.properties as is, below --config.

--check runs every check serve makes before it starts, prints a summary and
exits: 0 when serve would go on, 2 with serve's own message when it would
refuse. It opens no store, binds no port, claims no worker ID and writes
nothing; whether the store and the registry answer is left to serve.
  leaf serve --check --config /etc/leaf/leaf.yml
`

func (a *app) serve(ctx context.Context, args []string) error {
	fs := newFlagSet("serve")
	flags := config.BindFlags(fs, "listen", "advertise_url", "data_dir", "single_node", "segment.store", "segment.dsn", "log.level", "log.format",
		"grpc_listen", "admin.token_file", "admin.insecure", "segment.opaque_key_file", "tls.cert", "tls.key", "rate_limit.per_second", "snowflake.registry", "snowflake.name", "snowflake.endpoint", "snowflake.worker_id", "snowflake.zk", "snowflake.etcd", "snowflake.dsn", "snowflake.layout",
		"snowflake.ordinal.offset", "snowflake.ordinal.claim", "snowflake.ordinal.hostname")
	flags.BindLeafProperties()
	check := fs.Bool("check", false, "check everything serve checks before it starts (every setting, the config, token and opaque key files, the TLS pair, the DSNs' syntax, the snowflake layout and worker map), print a summary and exit 0, or exit 2 with serve's message; it connects to nothing, binds no port and writes nothing")
	pos, err := a.parseFlags(fs, serveUsage, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("takes no arguments, got %q", pos[0])
	}
	p, err := preflight(ctx, flags.Sources(a.env), a.hostname)
	if err != nil {
		return err
	}
	log := newLogger(p.cfg.Log, a.stderr)
	if a.onLogger != nil && !*check {
		a.onLogger(log)
	}
	for _, name := range config.UnknownEnv(a.env, knownEnv()...) {
		log.Warn("ignoring unknown environment variable", "name", name)
	}
	for _, w := range p.warnings {
		log.Warn("leaf.properties: "+w.Message, "key", w.Key, "at", w.At)
	}
	if cfg := p.cfg; cfg.Admin.Insecure && p.token == "" && !config.IsLoopbackListen(cfg.Listen) {
		log.Warn("tag administration is open to anyone who reaches the port (--insecure-admin)", "listen", cfg.Listen)
	}
	if *check {
		p.summarize(a.stdout)
		return nil
	}
	return a.runServer(ctx, p, log)
}

// servePlan is a configuration serve has checked, with what the checks
// built: nothing in it has been opened, bound or written, so --check can
// stop here.
type servePlan struct {
	cfg      config.Config
	warnings []config.Warning
	token    string
	// opaqueKey is the key of opaque tags' permutations; nil: none set.
	opaqueKey []byte
	tls       *tls.Config        // nil: plain HTTP and gRPC
	limiter   *ratelimit.Limiter // nil: no rate limit
	// endpoint is the snowflake endpoint as far as it is known before the
	// listener is bound: its port is 0 when neither snowflake.endpoint nor
	// listen names one.
	endpoint leaf.Endpoint
}

// preflight loads the configuration and checks everything serve can check
// without touching anything: no store is opened or created, no port bound,
// no worker ID claimed, no file written. The checks after the token's are
// all run and reported together, so that an operator fixes them in one go.
// The layout's lifetime is the generator's own rule, checked here too so
// that a layout it would refuse is refused before a store is created.
func preflight(ctx context.Context, src config.Sources, hostname func() (string, error)) (*servePlan, error) {
	cfg, origins, warnings, err := config.LoadWithOrigins(src)
	if err != nil {
		return nil, err
	}
	if cfg.Snowflake.Enabled && cfg.Snowflake.Registry == config.RegistryOrdinal {
		if cfg.Snowflake.Ordinal.Hostname, err = ordinalHost(cfg.Snowflake, hostname); err != nil {
			return nil, err
		}
	}
	token, err := cfg.AdminToken()
	if err != nil {
		return nil, err
	}
	p := &servePlan{cfg: cfg, warnings: warnings, token: token}
	var lifetimeErr error
	if cfg.Snowflake.Enabled {
		now := time.Now
		if clockNow != nil {
			now = clockNow // the generator's clock (chaos build)
		}
		lifetimeErr = cfg.CheckSnowflakeLifetime(now(), origins)
	}
	rctx, cancel := context.WithTimeout(ctx, listenLookupTimeout)
	errs := []error{cfg.CheckAdminExposure(token), cfg.CheckSingleNode(rctx, origins, config.SystemResolver), lifetimeErr}
	cancel()
	// Certificates are read here, not at the first client's handshake.
	var tlsErr, limitErr, epErr error
	p.tls, tlsErr = loadTLS(cfg.TLS)
	p.limiter, limitErr = newLimiter(cfg.RateLimit)
	var keyErr error
	p.opaqueKey, keyErr = cfg.OpaqueKey()
	errs = append(errs, tlsErr, limitErr, keyErr, checkDSNs(cfg))
	if cfg.Snowflake.Enabled {
		if p.endpoint, epErr = plannedEndpoint(cfg.Snowflake.Endpoint, cfg.Listen); epErr == nil {
			epErr = checkLocalWorkers(cfg.Snowflake, p.endpoint)
		}
		errs = append(errs, epErr)
	}
	if err := errors.Join(errs...); err != nil {
		if p.limiter != nil {
			p.limiter.Close()
		}
		return nil, err
	}
	return p, nil
}

// ordinalHost is the name whose ordinal the ordinal registry takes:
// snowflake.ordinal.hostname (checked by config.Load), else this host's
// name, checked here. A name without an ordinal, or one whose worker ID the
// layout has no room for, is a configuration error.
func ordinalHost(sc config.Snowflake, hostname func() (string, error)) (string, error) {
	if sc.Ordinal.Hostname != "" {
		return sc.Ordinal.Hostname, nil
	}
	if hostname == nil {
		hostname = os.Hostname
	}
	const fix = "run it as a StatefulSet pod, or set snowflake.ordinal.hostname (LEAF_SNOWFLAKE_ORDINAL_HOSTNAME or --ordinal-hostname) " +
		"to the pod's name, e.g. from the downward API's metadata.name"
	name, err := hostname()
	if err != nil {
		return "", fmt.Errorf("%w: snowflake.registry ordinal: cannot read this host's name (%v); %s", config.ErrInvalid, err, fix)
	}
	if _, err := sc.OrdinalWorkerID(name); err != nil {
		return "", fmt.Errorf("%w: snowflake.registry ordinal: this host's name: %v; %s", config.ErrInvalid, err, fix)
	}
	return name, nil
}

// checkDSNs parses the DSNs of the server stores serve would open, as their
// Open does, without connecting: a malformed DSN is a setting to fix.
func checkDSNs(cfg config.Config) error {
	var errs []error
	if seg := cfg.Segment; seg.Enabled {
		if seg.MultiDatabase() {
			errs = append(errs, checkDSNList(seg.Store, seg.DSNs()))
		} else {
			var err error
			switch seg.Store {
			case config.StoreMySQL:
				err = mysql.CheckDSN(seg.DSN)
			case config.StorePostgres:
				err = postgres.CheckDSN(seg.DSN)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: segment.dsn: %w", config.ErrInvalid, err))
			}
		}
	}
	if sc := cfg.Snowflake; sc.Enabled && sc.ClaimRegistry() == config.RegistryMySQL {
		key := "snowflake.dsn"
		if sc.DSN == "" {
			key = "segment.dsn" // the registry shares the segment store's database
		}
		// Reported once when both are the same malformed segment.dsn.
		if err := mysql.CheckDSN(cfg.MySQLRegistryDSN()); err != nil && (key != "segment.dsn" || len(errs) == 0) {
			errs = append(errs, fmt.Errorf("%w: %s (worker registry): %w", config.ErrInvalid, key, err))
		}
	}
	return errors.Join(errs...)
}

// plannedEndpoint is the snowflake endpoint serve will register, as far as
// it is known before binding (see servePlan.endpoint).
func plannedEndpoint(configured, listen string) (leaf.Endpoint, error) {
	_, p, _ := net.SplitHostPort(listen) // validated by config
	port, _ := strconv.Atoi(p)
	if configured == "" && port == 0 {
		return leaf.Endpoint{IP: defaultIP()}, nil
	}
	return snowflakeEndpoint(configured, port)
}

// checkLocalWorkers checks the local registry's worker map as local.New and
// its Register would, before anything is created: entries that are not
// ip:port, IDs outside the layout or given twice, and no entry for this
// server's endpoint.
func checkLocalWorkers(sc config.Snowflake, ep leaf.Endpoint) error {
	if sc.Registry != config.RegistryLocal {
		return nil
	}
	ids, err := sc.LocalWorkerIDs()
	if err != nil {
		return fmt.Errorf("%w: snowflake.worker_ids: %v", config.ErrInvalid, err)
	}
	if len(ids) == 0 {
		return nil
	}
	// local.New checks the same, in map order; sorted, the message is the
	// same on every run, and the same from serve and serve --check.
	maxID := sc.Layout().MaxWorkerID()
	holder := make(map[int64]string, len(ids))
	for _, e := range slices.Sorted(maps.Keys(ids)) {
		id := ids[e]
		if _, err := leaf.ParseEndpoint(e); err != nil {
			return fmt.Errorf("%w: snowflake.worker_ids: %w", config.ErrInvalid, err)
		}
		switch other, dup := holder[id]; {
		case id < 0 || id > maxID:
			return fmt.Errorf("%w: snowflake.worker_ids: worker ID %d of %s is outside the layout's 0..%d", config.ErrInvalid, id, e, maxID)
		case dup:
			return fmt.Errorf("%w: snowflake.worker_ids: worker ID %d given to both %s and %s", config.ErrInvalid, id, other, e)
		}
		holder[id] = e
	}
	if ep.Port == 0 {
		return nil // the port is known once bound; Register checks it then
	}
	if _, ok := ids[ep.String()]; !ok {
		return fmt.Errorf("%w: snowflake.worker_ids has no worker ID for this server's endpoint %s (set snowflake.endpoint to one of its keys, or add it): it has %s",
			config.ErrInvalid, ep, strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
	}
	return nil
}

// summarize writes what --check found: the server serve would start.
func (p *servePlan) summarize(w io.Writer) {
	cfg := p.cfg
	onOff := func(b bool, on string) string {
		if b {
			return on
		}
		return "no " + on
	}
	listen := cfg.Listen + " (" + strings.Join([]string{
		onOff(p.tls != nil, "TLS"), onOff(p.token != "", "admin token"), rateDesc(cfg.RateLimit)}, ", ") + ")"
	grpcListen := "off"
	if cfg.GRPCListen != "" {
		grpcListen = cfg.GRPCListen
	}
	segment := "off"
	if cfg.Segment.Enabled {
		segment = describeStore(cfg)
		if cfg.Segment.MultiDatabase() {
			segment += fmt.Sprintf("; each database gets %v of the %v wait, plain tags only", memberTimeout(cfg.Segment.WaitTimeout), cfg.Segment.WaitTimeout)
		}
	}
	snow := "off"
	if cfg.Snowflake.Enabled {
		sc := cfg.Snowflake
		ep := p.endpoint.String()
		if p.endpoint.Port == 0 {
			ep = p.endpoint.IP + ":<listen port>"
		}
		l := sc.Layout()
		reg := describeRegistry(cfg, p.endpoint)
		if sc.Registry == config.RegistryLocal {
			reg = fmt.Sprintf("local, worker ID %d", sc.WorkerID)
			if ids, _ := sc.LocalWorkerIDs(); len(ids) > 0 {
				reg = fmt.Sprintf("local, worker_ids map of %d", len(ids))
				if id, ok := ids[p.endpoint.String()]; ok {
					reg = fmt.Sprintf("local, worker ID %d from worker_ids", id)
				}
			}
		}
		snow = fmt.Sprintf("%s, endpoint %s, layout %s: %s, until %s", reg, ep, l.Name(), l,
			time.UnixMilli(l.End()).UTC().Format(time.DateOnly))
	}
	// The key check, never the key: it lets an operator see that every
	// server holds the same key.
	opaqueKey := "none (opaque tags are refused)"
	if p.opaqueKey != nil {
		opaqueKey = "key check " + tagshape.KeyCheck(p.opaqueKey)
	}
	fmt.Fprintf(w, "config OK\n")
	for _, row := range [][2]string{
		{"listen", listen},
		{"grpc_listen", grpcListen},
		{"data_dir", cfg.DataDir},
		{"segment", segment},
		{"opaque_key", opaqueKey},
		{"ordered", orderedDesc(cfg)},
		{"snowflake", snow},
		{"shutdown", cfg.ShutdownTimeout.String() + " (shutdown_timeout: drain, give unused IDs back, release the worker ID)"},
	} {
		fmt.Fprintf(w, "  %-12s %s\n", row[0], row[1])
	}
	fmt.Fprintf(w, "Not checked: that the store and the registry are reachable, and that the ports are free.\n")
}

// orderedDesc says how ordered tags are served: the mode, the URL the
// other servers reach this one at (its port once bound, when listen says
// 0), the owner's lease.
func orderedDesc(cfg config.Config) string {
	if !cfg.Segment.Enabled {
		return "off"
	}
	_, p, _ := net.SplitHostPort(cfg.Listen)
	port, _ := strconv.Atoi(p)
	adv := cfg.AdvertisedURL(port, defaultIP)
	if cfg.AdvertiseURL == "" && port == 0 {
		adv = strings.TrimSuffix(adv, ":0") + ":<listen port>"
	}
	return fmt.Sprintf("%s, advertise %s, owner lease %s", cfg.Segment.Ordered, adv, cfg.Segment.OwnerLease)
}

// processNonce is a random nonce of this process, for its owner identity.
func processNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func rateDesc(r config.RateLimit) string {
	if r.PerSecond == 0 {
		return "no rate limit"
	}
	return fmt.Sprintf("rate limit %d/s per client", r.PerSecond)
}

// listenLookupTimeout bounds resolving a listen address's host name for
// CheckSingleNode.
const listenLookupTimeout = 5 * time.Second

// deadlineTick is how late an HTTP connection's read, idle or write timeout
// may take effect: a tenth of a second on timeouts of 10s and more.
const deadlineTick = 100 * time.Millisecond

// loadTLS reads the certificate and key of cfg; nil when TLS is off.
func loadTLS(cfg config.TLS) (*tls.Config, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
	if err != nil {
		err = fmt.Errorf("load TLS certificate %s and key %s: %w", cfg.Cert, cfg.Key, err)
		// A missing file or one that is not a PEM pair is a setting to fix
		// (exit 2), as a missing token file is; one that cannot be read
		// (permissions, a directory) is not.
		var pathErr *fs.PathError
		if errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pathErr) {
			err = fmt.Errorf("%w: %w", config.ErrInvalid, err)
		}
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// httpTLS is the HTTP listener's TLS configuration: HTTP/1.1 only, the one
// protocol fasthttp speaks, announced so that ALPN clients do not try h2.
func httpTLS(base *tls.Config) *tls.Config {
	c := base.Clone()
	c.NextProtos = []string{"http/1.1"}
	return c
}

// newLimiter builds the per-client limiter of the ID routes; nil when
// rate_limit.per_second is 0.
func newLimiter(cfg config.RateLimit) (*ratelimit.Limiter, error) {
	if cfg.PerSecond == 0 {
		return nil, nil
	}
	burst := cfg.Burst
	if burst == 0 {
		burst = cfg.PerSecond
	}
	l, err := ratelimit.New(ratelimit.Config{Rate: float64(cfg.PerSecond), Burst: burst})
	if err != nil {
		return nil, fmt.Errorf("%w: rate_limit: %w", config.ErrInvalid, err)
	}
	return l, nil
}

// newLogger builds the process logger on w (stderr) from log.level and
// log.format, both already validated.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runServer wires store → generator → handler → http.Server, serves until
// ctx is done, then shuts down in the reverse order, all within one
// shutdown_timeout budget.
func (a *app) runServer(ctx context.Context, p *servePlan, log *slog.Logger) error {
	cfg, adminToken, tlsCfg, limiter := p.cfg, p.token, p.tls, p.limiter
	if limiter != nil {
		defer limiter.Close()
	}
	var (
		store     segmentStore
		storeDesc = "none (segment mode disabled)"
		gen       *segment.Generator
		ord       *ordered.Tags // nil on a store without ordered tags
		// fwd forwards the requests for ordered tags this server does not
		// own: gRPC's always, HTTP's but in redirect mode (httpFwd).
		fwd       *forward.Forwarder
		httpFwd   httpapi.Forwarder
		advertise string
		// The handler takes interfaces: they must stay nil, not hold a nil
		// pointer, when a mode is off.
		segGen  httpapi.SegmentGenerator
		snowGen httpapi.SnowflakeGenerator
		worker  *snowflakeWorker
		ln, gln net.Listener // HTTP, gRPC (nil when off)
		// stopHistory stops the monitor's sampler and waits for it; nil
		// until it runs.
		stopHistory func()
	)
	// release closes, newest first, what has been opened so far. The
	// generator's Close gives unused IDs back, so it needs the store open.
	release := func(ctx context.Context) error {
		var errs []error
		if stopHistory != nil {
			stopHistory() // it reads the generators closed below
		}
		if worker != nil {
			if err := worker.close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if ln != nil {
			_ = ln.Close() // already closed by a server that served
		}
		if gln != nil {
			_ = gln.Close()
		}
		if fwd != nil {
			fwd.Close()
		}
		if gen != nil {
			if err := gen.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("give back unused IDs: %w", err))
			}
		}
		if store != nil {
			if err := store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close segment store: %w", err))
			}
		}
		return errors.Join(errs...)
	}
	newShutdownCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	}
	abort := func(err error) error {
		sctx, cancel := newShutdownCtx()
		defer cancel()
		return errors.Join(err, release(sctx))
	}

	// Everything that can fail on a setting was checked by preflight, so
	// that a refused start leaves no trace: no new SQLite file, no seeded
	// tag, no worker ID taken. A port in use is the commonest failure of all. Listening also gives
	// snowflake its endpoint's port; connections wait in the backlog until
	// Serve.
	var lc net.ListenConfig
	var err error
	if ln, err = lc.Listen(ctx, "tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.GRPCListen != "" {
		if gln, err = lc.Listen(ctx, "tcp", cfg.GRPCListen); err != nil {
			return abort(fmt.Errorf("listen for gRPC: %w", err))
		}
	}
	port := ln.Addr().(*net.TCPAddr).Port
	advertise = cfg.AdvertisedURL(port, defaultIP)
	if cfg.Snowflake.Enabled {
		if _, err := snowflakeEndpoint(cfg.Snowflake.Endpoint, port); err != nil {
			return abort(err)
		}
	}

	if cfg.Segment.Enabled {
		if store, storeDesc, err = openStore(ctx, cfg, mayCreate, log); err != nil {
			return abort(err)
		}
		logDatabases(log, store)
		if err := watchFailover(ctx, store, cfg.Segment.Failover, log); err != nil {
			return abort(err)
		}
		if err := seedStore(ctx, store, cfg.Segment, log); err != nil {
			return abort(err)
		}
		settings := segment.DefaultConfig()
		settings.Store, settings.Logger = generatorStore(store), log
		settings.RefreshInterval = cfg.Segment.RefreshInterval
		settings.MaxStep = cfg.Segment.MaxStep
		settings.WaitTimeout = cfg.Segment.WaitTimeout
		settings.GiveBack = cfg.Segment.GiveBack
		settings.LowBuffer = cfg.Segment.LowBuffer
		settings.IdleTimeout = cfg.Segment.IdleTimeout
		settings.LookupRate = float64(cfg.Segment.LookupRate)
		settings.OpaqueKey = p.opaqueKey
		// The owner identity of ordered tags: where the others reach this
		// server, and a nonce of this process, so that a restarted server
		// is a new owner whose predecessor's lease must run out.
		oc := ordered.DefaultConfig()
		oc.Owner = advertise + "#" + processNonce()
		oc.OwnerLease = cfg.Segment.OwnerLease
		if ostore, ok := settings.Store.(leaf.OrderedStore); ok {
			oc.Store = ostore
			if ord, err = ordered.New(oc); err != nil {
				return abort(fmt.Errorf("start ordered tags: %w", err))
			}
			settings.Kinds = ord
		}
		gen, err = segment.New(ctx, settings)
		if err != nil {
			return abort(fmt.Errorf("start segment generator: %w", err))
		}
		fc := forward.Config{Local: gen, Self: oc.Owner, Token: adminToken, Wait: cfg.Segment.WaitTimeout, Logger: log}
		if ord != nil {
			fc.Watcher = ord
		}
		fwd, err = forward.New(fc)
		if err != nil {
			return abort(fmt.Errorf("start forwarder: %w", err))
		}
		// In redirect mode the HTTP routes answer a tag this server does
		// not own with a redirect to its owner; gRPC always forwards.
		segGen = gen
		if cfg.Segment.Ordered != config.OrderedRedirect {
			httpFwd = fwd
		}
	}

	workerDesc := "none (snowflake mode disabled)"
	if cfg.Snowflake.Enabled {
		if worker, err = startSnowflake(ctx, cfg, port, log); err != nil {
			return abort(err)
		}
		snowGen, workerDesc = worker.gen, worker.desc
	}

	// The metrics and the history take the generators as the handler does:
	// nil interfaces for the modes that are off.
	var segSrc metrics.SegmentSource
	var snowSrc metrics.WorkerSource
	var histSeg history.SegmentSource
	if segGen != nil {
		segSrc, histSeg = gen, gen
	}
	if worker != nil {
		snowSrc = worker.gen
	}
	var forwarded func() metrics.Forwarded
	if fwd != nil {
		forwarded = func() metrics.Forwarded {
			st := fwd.Stats()
			return metrics.Forwarded{Calls: st.Calls, Requests: st.Forwarded, Failures: st.Failures}
		}
	}
	m := metrics.New(metrics.Config{Segment: segSrc, Snowflake: snowSrc, Version: buildVersion(),
		TopTags: cfg.Metrics.TopTags, DegradedTags: cfg.Metrics.DegradedTags, Tags: cfg.Metrics.TagList(), LowBuffer: cfg.Segment.LowBuffer,
		Databases: metricDatabases(store), Store: metricStore(store), Forwarded: forwarded})
	// The monitor page's charts: the last ten minutes, sampled once a
	// second from what the generators and the latency histogram already
	// keep, so that they cost the requests nothing.
	hist := history.New(history.Config{Segment: histSeg, Snowflake: snowSrc,
		Latency:       func(dst []uint64) []uint64 { return m.RequestLatency(httpapi.IsIDRoute, dst) },
		LatencyBounds: metrics.RequestBuckets()})
	histCtx, histCancel := context.WithCancel(ctx)
	histDone := make(chan struct{})
	go func() {
		defer close(histDone)
		hist.Run(histCtx)
	}()
	stopHistory = func() {
		histCancel()
		<-histDone
	}
	hcfg := httpapi.Config{Segment: segGen, Forward: httpFwd, Snowflake: snowGen, Logger: log, Version: buildVersion(),
		Metrics: m.Handler(), Observer: m, AdminToken: adminToken, History: hist, Databases: httpDatabases(store)}
	if segGen != nil {
		// Tags change through the generator; their rows are read from the
		// store, where they are.
		hcfg.Tags = store
		if ord != nil {
			hcfg.Ordered = ord
		}
	}
	if limiter != nil {
		hcfg.Limiter = limiter
	}
	handler := httpapi.New(hcfg)
	// fasthttp serves the Leaf ID routes itself and every other route
	// through the handler; its limits' defaults bound slow clients (see
	// httpapi.Limits).
	srv := httpapi.NewFastServer(handler, httpapi.Limits{})
	served := make(chan error, 1)
	// fasthttp sets three deadlines per request; deadline makes each an
	// atomic store, enforced to within deadlineTick (see the package doc).
	dl := deadline.Wrap(ln, deadlineTick)
	var httpLn net.Listener = dl
	if tlsCfg != nil {
		httpLn = tls.NewListener(httpLn, httpTLS(tlsCfg))
	}
	go func() { served <- srv.Serve(httpLn) }()
	var gsrv *grpc.Server
	gserved := make(chan error, 1)
	if gln != nil {
		gcfg := grpcapi.Config{Logger: log}
		if limiter != nil {
			gcfg.Limiter = limiter
		}
		if segGen != nil {
			gcfg.Segment, gcfg.Forward = gen, fwd
		}
		if worker != nil {
			gcfg.Snowflake = worker.gen
		}
		var opts []grpc.ServerOption
		if tlsCfg != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg.Clone())))
		}
		gsrv = grpcapi.NewServer(gcfg, opts...)
		go func() { gserved <- gsrv.Serve(gln) }()
		log.Info("grpc listening", "addr", gln.Addr().String())
	}

	log.Info("listening", "addr", ln.Addr().String(), "advertise", advertise, "tls", tlsCfg != nil, "admin_token", adminToken != "",
		"rate_limit", cfg.RateLimit.PerSecond, "store", storeDesc, "snowflake", workerDesc, "version", buildVersion())
	if a.onListen != nil {
		a.onListen(ln.Addr())
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx).Error(), "timeout", cfg.ShutdownTimeout.String())
	case err := <-served:
		// Serve only returns early when the listener fails.
		runErr = fmt.Errorf("http server: %w", err)
		log.Error("http server failed; shutting down", "err", err)
	case err := <-gserved:
		runErr = fmt.Errorf("grpc server: %w", err)
		log.Error("grpc server failed; shutting down", "err", err)
	}

	// Drain HTTP and gRPC first so no request is cut off, then give IDs back
	// and close the store. The drain has half the shutdown budget and the
	// release the other half, its own: a drain that ran out of time must not
	// leave the release an expired context, or the worker ID, the ordered
	// tags' leases and the unused IDs would stay held until they lapse.
	sctx, cancel := newShutdownCtx()
	defer cancel()
	dctx, dcancel := context.WithTimeout(sctx, cfg.ShutdownTimeout/2)
	defer dcancel()
	grpcStopped := make(chan struct{})
	if gsrv != nil {
		go func() { gsrv.GracefulStop(); close(grpcStopped) }()
	} else {
		close(grpcStopped)
	}
	if err := srv.ShutdownWithContext(dctx); err != nil {
		// fasthttp closes idle connections as it drains, but a client's
		// connection can outlast the drain (one it dialled and never
		// used counts as idle only after 5s; a request still being
		// read). Their requests, if any, get no answer: no ID is lost.
		n := dl.CloseAll()
		log.Warn("HTTP connections still open when the drain ran out of time were closed", "connections", n, "after", (cfg.ShutdownTimeout / 2).String())
	}
	select {
	case <-grpcStopped:
	case <-dctx.Done():
		// Both cases may be ready: without gRPC, grpcStopped is closed
		// from the start.
		if gsrv == nil {
			break
		}
		gsrv.Stop() // cuts the calls still running; GracefulStop then returns
		<-grpcStopped
		log.Warn("gRPC calls still running when the drain ran out of time were cut", "after", (cfg.ShutdownTimeout / 2).String())
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout/2)
	defer rcancel()
	if err := release(rctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if runErr == nil {
		log.Info("stopped")
	}
	return runErr
}
