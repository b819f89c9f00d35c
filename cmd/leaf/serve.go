package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/config"
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

Every key can also be set in the YAML file or a LEAF_* variable: see
etc/leaf.yml. Flags win over both.
--leaf-properties FILE reads Java Leaf's leaf.properties as is, below --config.
`

func (a *app) serve(ctx context.Context, args []string) error {
	fs := newFlagSet("serve")
	flags := config.BindFlags(fs, "listen", "data_dir", "segment.store", "segment.dsn", "log.level", "log.format",
		"grpc_listen", "snowflake.registry", "snowflake.name", "snowflake.endpoint", "snowflake.worker_id", "snowflake.zk", "snowflake.etcd", "snowflake.dsn")
	flags.BindLeafProperties()
	pos, err := a.parseFlags(fs, serveUsage, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("takes no arguments, got %q", pos[0])
	}
	cfg, warnings, err := config.LoadWithWarnings(flags.Sources(a.env))
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, a.stderr)
	if a.onLogger != nil {
		a.onLogger(log)
	}
	for _, name := range config.UnknownEnv(a.env, envServer) {
		log.Warn("ignoring unknown environment variable", "name", name)
	}
	for _, w := range warnings {
		log.Warn("leaf.properties: "+w.Message, "key", w.Key, "at", w.At)
	}
	return a.runServer(ctx, cfg, log)
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
func (a *app) runServer(ctx context.Context, cfg config.Config, log *slog.Logger) error {
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

	if cfg.Segment.Enabled {
		var err error
		if store, storeDesc, err = openStore(ctx, cfg); err != nil {
			return err
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
		})
		if err != nil {
			return abort(fmt.Errorf("start segment generator: %w", err))
		}
		segGen = gen
	}

	// Listen before starting snowflake: its endpoint names the port actually
	// bound. Connections wait in the backlog until Serve.
	var lc net.ListenConfig
	var err error
	if ln, err = lc.Listen(ctx, "tcp", cfg.Listen); err != nil {
		return abort(fmt.Errorf("listen: %w", err))
	}
	if cfg.GRPCListen != "" {
		if gln, err = lc.Listen(ctx, "tcp", cfg.GRPCListen); err != nil {
			return abort(fmt.Errorf("listen for gRPC: %w", err))
		}
	}
	workerDesc := "none (snowflake mode disabled)"
	if cfg.Snowflake.Enabled {
		if worker, err = startSnowflake(ctx, cfg, ln.Addr().(*net.TCPAddr).Port, log); err != nil {
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
	m := metrics.New(metrics.Config{Segment: segSrc, Snowflake: snowSrc, Version: buildVersion()})
	handler := httpapi.New(httpapi.Config{Segment: segGen, Snowflake: snowGen, Logger: log, Version: buildVersion(),
		Metrics: m.Handler(), Observer: m})
	// fasthttp serves the Leaf ID routes itself and every other route
	// through the handler; its limits' defaults bound slow clients (see
	// httpapi.Limits).
	srv := httpapi.NewFastServer(handler, httpapi.Limits{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var gsrv *grpc.Server
	gserved := make(chan error, 1)
	if gln != nil {
		gcfg := grpcapi.Config{Logger: log}
		if segGen != nil {
			gcfg.Segment = gen
		}
		if worker != nil {
			gcfg.Snowflake = worker.gen
		}
		gsrv = grpcapi.NewServer(gcfg)
		go func() { gserved <- gsrv.Serve(gln) }()
		log.Info("grpc listening", "addr", gln.Addr().String())
	}

	log.Info("listening", "addr", ln.Addr().String(), "store", storeDesc, "snowflake", workerDesc, "version", buildVersion())
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
