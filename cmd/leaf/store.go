package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/sqlstore"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/postgres"
	"github.com/leafgo/leaf/sqlite"
)

// segmentStore is what the CLI needs from a store: the generator's
// interface, tag administration, shapes and periods, and the paged
// listings, which tags list and the HTTP routes read the rows with. All
// three stores provide them.
type segmentStore interface {
	leaf.SegmentStore
	leaf.SegmentAdmin
	leaf.TagShaper
	leaf.PeriodStore
	leaf.AllocPager
	leaf.ShapeLister
}

// storeOpenTimeout bounds connecting to the store and creating the table, so
// that a database behind a black-holing firewall fails the command instead
// of hanging it.
const storeOpenTimeout = 30 * time.Second

// storeCreate says whether openStore may create an embedded SQLite store
// that does not exist yet.
type storeCreate bool

const (
	// mayCreate: serve, and 'leaf tags create', whose purpose is to set up.
	mayCreate storeCreate = true
	// mustExist: commands that read or change what is there. A missing file
	// is a mistyped --data-dir or the wrong working directory; creating it
	// would only hide that behind an empty answer.
	mustExist storeCreate = false
)

// openStore opens the segment store named by the configuration. It also
// returns a description fit for logs and messages: the DSN with any password
// hidden. Server stores (MySQL, PostgreSQL) get their tables created either
// way: the database is the operator's, and reaching it proves the address.
// A segment.dsn that lists several databases opens a multiStore, whose
// health changes go to log.
func openStore(ctx context.Context, cfg config.Config, create storeCreate, log *slog.Logger) (segmentStore, string, error) {
	ctx, cancel := context.WithTimeout(ctx, storeOpenTimeout)
	defer cancel()
	var (
		s    segmentStore
		desc = describeStore(cfg)
		err  error
	)
	switch cfg.Segment.Store {
	case config.StoreSQLite:
		path := cfg.SQLitePath()
		if create == mustExist && !fileExists(path) {
			return nil, desc, fmt.Errorf("no segment store at %s: check --data-dir (data_dir) or --segment-dsn; 'leaf serve' or 'leaf tags create' makes one", path)
		}
		s, err = openSQLite(ctx, path)
	case config.StoreMySQL, config.StorePostgres:
		if cfg.Segment.MultiDatabase() {
			s, err = openMulti(ctx, cfg, log)
			break
		}
		if cfg.Segment.Store == config.StoreMySQL {
			s, err = openMySQL(ctx, cfg.Segment.DSN)
		} else {
			s, err = openPostgres(ctx, cfg.Segment.DSN)
		}
	default:
		// config.Validate rejects other names; reaching here is a bug.
		return nil, "", fmt.Errorf("unknown segment store %q", cfg.Segment.Store)
	}
	if err != nil {
		return nil, desc, fmt.Errorf("open segment store (%s): %w", desc, err)
	}
	return s, desc, nil
}

// describeStore names the segment store for logs and messages: its kind and
// its file or DSN, with any password hidden.
func describeStore(cfg config.Config) string {
	if cfg.Segment.Store == config.StoreSQLite {
		return "sqlite " + cfg.SQLitePath()
	}
	dsns := cfg.Segment.DSNs()
	if len(dsns) < 2 {
		return cfg.Segment.Store + " " + config.RedactDSN(cfg.Segment.DSN)
	}
	names := make([]string, len(dsns))
	for i, d := range dsns {
		names[i] = config.RedactDSN(d)
	}
	return fmt.Sprintf("%s over %d databases: %s", cfg.Segment.Store, len(dsns), strings.Join(names, ", "))
}

// fileExists reports whether path names something; an error other than "does
// not exist" counts as existing, for the open that follows to report.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// The open functions return the interface only when the store is non-nil:
// a nil *Store in a non-nil interface would pass an err == nil check.
func openSQLite(ctx context.Context, path string) (segmentStore, error) {
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openMySQL(ctx context.Context, dsn string) (segmentStore, error) {
	s, err := mysql.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openPostgres(ctx context.Context, dsn string) (segmentStore, error) {
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// seedStore inserts the test tag as segment.seed says (see
// config.Segment.SeedMode): by default only into an empty embedded store.
func seedStore(ctx context.Context, s segmentStore, seg config.Segment, log *slog.Logger) error {
	switch seg.SeedMode() {
	case config.SeedNever:
		return nil
	case config.SeedIfEmpty:
		tags, err := s.Tags(ctx)
		if err != nil {
			return fmt.Errorf("seed: list tags: %w", err)
		}
		if len(tags) > 0 {
			return nil
		}
	case config.SeedIfMissing:
		_, err := s.Alloc(ctx, config.SeedTag)
		if err == nil {
			return nil
		}
		if !errors.Is(err, leaf.ErrTagNotFound) {
			return fmt.Errorf("seed: read tag %s: %w", config.SeedTag, err)
		}
	}
	seed := config.SeedAlloc()
	err := s.CreateTag(ctx, seed)
	if errors.Is(err, leaf.ErrTagExists) {
		return nil // another server seeded it between our read and our insert
	}
	if err != nil {
		return fmt.Errorf("seed tag %s: %w", config.SeedTag, err)
	}
	log.Info("seeded tag", "tag", seed.Tag, "step", seed.Step, "first_id", seed.MaxID)
	return nil
}

// fencedStore is a store whose failover fence and retries can be
// reported: the stores on sqlstore (the fence is off on SQLite, whose file
// has no replica).
type fencedStore interface {
	FailoverStatus() (sqlstore.FailoverStatus, bool)
	Retries() int64
}

// metricStore reports the fence and the retries of a store for /metrics;
// nil for a store over several databases.
func metricStore(s segmentStore) func() metrics.StoreStats {
	f, ok := s.(fencedStore)
	if !ok {
		return nil
	}
	return func() metrics.StoreStats {
		st, _ := f.FailoverStatus()
		return metrics.StoreStats{Fencing: st.State == "fencing", Fences: st.Fences, Gap: st.Gap, Retries: f.Retries()}
	}
}

// watchFailover turns the failover fence on for a store of one server
// database (mysql, postgres), as segment.failover says. SQLite's file has
// no replica; a store over several databases is not fenced (each
// database's own failover is not detected).
func watchFailover(ctx context.Context, s segmentStore, fc config.Failover, log *slog.Logger) error {
	if !fc.Fence {
		return nil
	}
	watch := failoverOf(s)
	if watch == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeOpenTimeout)
	defer cancel()
	set := sqlstore.FailoverConfig{Window: fc.Window, Lag: fc.Lag, MarginSteps: int64(fc.MarginSteps), Logger: log}
	if err := watch(ctx, set); err != nil {
		return fmt.Errorf("segment store: failover fence: %w", err)
	}
	if st, ok := s.(fencedStore).FailoverStatus(); ok {
		log.Info("segment store failover fence on", "database", st.Live, "epoch", st.Epoch, "state", st.State,
			"window", fc.Window, "lag", fc.Lag, "margin_steps", fc.MarginSteps)
	}
	return nil
}

// failoverOf is the store's WatchFailover, which names its database's
// identity: mysql's and postgres' stores of one database; nil for others.
func failoverOf(s segmentStore) func(context.Context, sqlstore.FailoverConfig) error {
	switch st := s.(type) {
	case *mysql.Store:
		return st.WatchFailover
	case *postgres.Store:
		return st.WatchFailover
	}
	return nil
}
