package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/config"
	"github.com/leafgo/leaf/internal/deadline"
	"github.com/leafgo/leaf/internal/ratelimit"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/segment"
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
(--snowflake-registry zookeeper|etcd|mysql, or a distinct --worker-id each).

Every key can also be set in the YAML file or a LEAF_* variable: see
etc/leaf.yml. Flags win over both.
--leaf-properties FILE reads Java Leaf's leaf.properties as is, below --config.
`

func (a *app) serve(ctx context.Context, args []string) error {
	fs := newFlagSet("serve")
	flags := config.BindFlags(fs, "listen", "data_dir", "single_node", "segment.store", "segment.dsn", "log.level", "log.format",
		"grpc_listen", "admin.token_file", "admin.insecure", "tls.cert", "tls.key", "rate_limit.per_second", "snowflake.registry", "snowflake.name", "snowflake.endpoint", "snowflake.worker_id", "snowflake.zk", "snowflake.etcd", "snowflake.dsn")
	flags.BindLeafProperties()
	pos, err := a.parseFlags(fs, serveUsage, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("takes no arguments, got %q", pos[0])
	}
	cfg, origins, warnings, err := config.LoadWithOrigins(flags.Sources(a.env))
	if err != nil {
		return err
	}
	token, err := cfg.AdminToken()
	if err != nil {
		return err
	}
	// These checks run before anything is opened or bound, and all are
	// reported, so that an operator fixes them in one go. The layout's
	// lifetime is the generator's own rule, checked here too so that a
	// layout it would refuse is refused before a store is created.
	var lifetimeErr error
	if cfg.Snowflake.Enabled {
		now := time.Now
		if clockNow != nil {
			now = clockNow // the generator's clock (chaos build)
		}
		lifetimeErr = cfg.CheckSnowflakeLifetime(now(), origins)
	}
	rctx, cancel := context.WithTimeout(ctx, listenLookupTimeout)
	err = errors.Join(cfg.CheckAdminExposure(token), cfg.CheckSingleNode(rctx, origins, config.SystemResolver), lifetimeErr)
	cancel()
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, a.stderr)
	if a.onLogger != nil {
		a.onLogger(log)
	}
	for _, name := range config.UnknownEnv(a.env, knownEnv()...) {
		log.Warn("ignoring unknown environment variable", "name", name)
	}
	for _, w := range warnings {
		log.Warn("leaf.properties: "+w.Message, "key", w.Key, "at", w.At)
	}
	if cfg.Admin.Insecure && token == "" && !config.IsLoopbackListen(cfg.Listen) {
		log.Warn("tag administration is open to anyone who reaches the port (--insecure-admin)", "listen", cfg.Listen)
	}
	return a.runServer(ctx, cfg, token, log)
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
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", cfg.Cert, cfg.Key, err)
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
func (a *app) runServer(ctx context.Context, cfg config.Config, adminToken string, log *slog.Logger) error {
	var (
		store     segmentStore
		storeDesc = "none (segment mode disabled)"
		gen       *segment.Generator
		// The handler takes interfaces: they must stay nil, not hold a nil
		// pointer, when a mode is off.
		segGen  httpapi.SegmentGenerator
		snowGen httpapi.SnowflakeGenerator
		worker  *snowflakeWorker
		ln, gln net.Listener // HTTP, gRPC (nil when off)
	)
	// release closes, newest first, what has been opened so far. The
	// generator's Close gives unused IDs back, so it needs the store open.
	release := func(ctx context.Context) error {
		var errs []error
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

	// Everything that can fail on a setting is checked before anything is
	// created, so that a refused start leaves no trace: no new SQLite file,
	// no seeded tag, no worker ID taken. Certificates are read here, not at
	// the first client's handshake.
	tlsCfg, err := loadTLS(cfg.TLS)
	if err != nil {
		return err
	}
	limiter, err := newLimiter(cfg.RateLimit)
	if err != nil {
		return err
	}
	if limiter != nil {
		defer limiter.Close()
	}
	// A port in use is the commonest failure of all. Listening also gives
	// snowflake its endpoint's port; connections wait in the backlog until
	// Serve.
	var lc net.ListenConfig
	if ln, err = lc.Listen(ctx, "tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.GRPCListen != "" {
		if gln, err = lc.Listen(ctx, "tcp", cfg.GRPCListen); err != nil {
			return abort(fmt.Errorf("listen for gRPC: %w", err))
		}
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if cfg.Snowflake.Enabled {
		if _, err := snowflakeEndpoint(cfg.Snowflake.Endpoint, port); err != nil {
			return abort(err)
		}
	}

	if cfg.Segment.Enabled {
		if store, storeDesc, err = openStore(ctx, cfg, mayCreate); err != nil {
			return abort(err)
		}
		if err := seedStore(ctx, store, cfg.Segment, log); err != nil {
			return abort(err)
		}
		gen, err = segment.New(ctx, segment.Settings{
			Store:           store,
			Logger:          log,
			RefreshInterval: cfg.Segment.RefreshInterval,
			MaxStep:         cfg.Segment.MaxStep,
			WaitTimeout:     cfg.Segment.WaitTimeout,
			NoGiveBack:      !cfg.Segment.GiveBack,
			LowBuffer:       cfg.Segment.LowBuffer,
			IdleTimeout:     cfg.Segment.IdleTimeout,
			LookupRate:      float64(cfg.Segment.LookupRate),
		})
		if err != nil {
			return abort(fmt.Errorf("start segment generator: %w", err))
		}
		segGen = gen
	}

	workerDesc := "none (snowflake mode disabled)"
	if cfg.Snowflake.Enabled {
		if worker, err = startSnowflake(ctx, cfg, port, log); err != nil {
			return abort(err)
		}
		snowGen, workerDesc = worker.gen, worker.desc
	}

	// The metrics take the generators as the handler does: nil interfaces
	// for the modes that are off.
	var segSrc metrics.SegmentSource
	var snowSrc metrics.WorkerSource
	if segGen != nil {
		segSrc = gen
	}
	if worker != nil {
		snowSrc = worker.gen
	}
	m := metrics.New(metrics.Config{Segment: segSrc, Snowflake: snowSrc, Version: buildVersion(),
		TopTags: cfg.Metrics.TopTags, DegradedTags: cfg.Metrics.DegradedTags, Tags: cfg.Metrics.TagList(), LowBuffer: cfg.Segment.LowBuffer})
	hcfg := httpapi.Config{Segment: segGen, Snowflake: snowGen, Logger: log, Version: buildVersion(),
		Metrics: m.Handler(), Observer: m, AdminToken: adminToken}
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
	var httpLn net.Listener = deadline.Wrap(ln, deadlineTick)
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
			gcfg.Segment = gen
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

	log.Info("listening", "addr", ln.Addr().String(), "tls", tlsCfg != nil, "admin_token", adminToken != "",
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
	// and close the store.
	sctx, cancel := newShutdownCtx()
	defer cancel()
	grpcStopped := make(chan struct{})
	if gsrv != nil {
		go func() { gsrv.GracefulStop(); close(grpcStopped) }()
	} else {
		close(grpcStopped)
	}
	if err := srv.ShutdownWithContext(sctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("drain HTTP connections: %w", err))
	}
	select {
	case <-grpcStopped:
	case <-sctx.Done():
		gsrv.Stop() // cuts the calls still running; GracefulStop then returns
		<-grpcStopped
		runErr = errors.Join(runErr, fmt.Errorf("drain gRPC calls: %w", sctx.Err()))
	}
	if err := release(sctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if runErr == nil {
		log.Info("stopped")
	}
	return runErr
}
