package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/multidb"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/postgres"
)

// errShapedMulti refuses what a store spread over several databases cannot
// keep: tag shapes and periods live beside leaf_alloc in one database, and
// an ordered tag's lease needs one place to be held.
var errShapedMulti = fmt.Errorf("%w: periodic, formatted, opaque and ordered tags need a segment store of one database; segment.dsn lists several", leaf.ErrInvalidArgument)

// multiStore is a segment store spread over several databases (package
// multidb) as the CLI and the HTTP routes take a store: plain tags only.
// The generator gets the multidb.Store itself, which is no leaf.TagShaper
// nor leaf.PeriodStore, so that it never tries a shaped tag.
type multiStore struct {
	*multidb.Store
}

// TagShape is the plain shape: every tag of the store has it.
func (multiStore) TagShape(context.Context, string) (leaf.TagShape, error) {
	return leaf.TagShape{}, nil
}

// CreateShapedTag creates a plain tag and refuses any other shape.
func (m multiStore) CreateShapedTag(ctx context.Context, a leaf.Alloc, s leaf.TagShape) error {
	if !s.Canonical().IsPlain() {
		return fmt.Errorf("create tag %s with shape %s: %w", a.Tag, s, errShapedMulti)
	}
	return m.CreateTag(ctx, a)
}

// TagShapes has no shaped tag to report.
func (multiStore) TagShapes(context.Context, []string) (map[string]leaf.TagShape, error) {
	return map[string]leaf.TagShape{}, nil
}

func (multiStore) ReservePeriod(context.Context, string, string, int) (leaf.Reservation, error) {
	return leaf.Reservation{}, errShapedMulti
}

func (multiStore) GiveBackPeriod(context.Context, string, string, int64, int64) (bool, error) {
	return false, errShapedMulti
}

// Periods and CountPeriods answer for a tag that has none: no tag of the
// store is periodic.
func (multiStore) Periods(context.Context, string, string, int) ([]leaf.PeriodAlloc, error) {
	return nil, nil
}

func (multiStore) CountPeriods(context.Context, string) (int, error) { return 0, nil }

func (multiStore) PrunePeriods(context.Context, string, string) ([]leaf.PeriodAlloc, error) {
	return nil, errShapedMulti
}

// generatorStore is the store the segment generator runs on: for a store
// spread over several databases the multidb.Store itself, whose type says
// which tags it can serve.
func generatorStore(s segmentStore) leaf.SegmentStore {
	if m, ok := s.(multiStore); ok {
		return m.Store
	}
	return s
}

// memberTimeout bounds one reserve on one database of several: a third of
// the wait budget, so that a database that hangs costs one try and the next
// still answers within the wait, and at most multidb's default. It is at
// least 200ms: below that, a database merely slow (a commit that lands
// after the timeout wastes its range) would be taken out again and again.
func memberTimeout(wait time.Duration) time.Duration {
	return min(multidb.DefaultMemberTimeout, max(wait/3, 200*time.Millisecond))
}

// openMulti opens the store over every database of segment.dsn. A
// database that is down does not keep it from opening: multidb connects
// to it in the background, and it serves once its record is checked.
func openMulti(ctx context.Context, cfg config.Config, log *slog.Logger) (segmentStore, error) {
	dbs, err := memberDatabases(cfg.Segment.Store, cfg.Segment.DSNs())
	if err != nil {
		return nil, err
	}
	st, err := multidb.Open(ctx, dbs, multidb.Config{MemberTimeout: memberTimeout(cfg.Segment.WaitTimeout), Logger: log})
	if err != nil {
		return nil, err
	}
	return multiStore{st}, nil
}

// memberDatabases names each DSN by its redacted self and connects to it
// as a database of a multi-database store when multidb asks. The DSNs are
// parsed here, so that a malformed one fails the list at once rather than
// look like a database that is down.
func memberDatabases(store string, dsns []string) ([]multidb.Database, error) {
	if err := checkDSNList(store, dsns); err != nil {
		return nil, err
	}
	dbs := make([]multidb.Database, len(dsns))
	for i, dsn := range dsns {
		dbs[i] = multidb.Database{Name: config.RedactDSN(dsn), Connect: func(ctx context.Context) (multidb.Member, error) {
			if store == config.StorePostgres {
				s, err := postgres.OpenMember(ctx, dsn)
				if err != nil {
					return nil, err
				}
				return s, nil
			}
			s, err := mysql.OpenMember(ctx, dsn)
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
	}
	return dbs, nil
}

// httpDatabases and metricDatabases present the store's databases to the
// HTTP routes and the metrics; nil for a store of one database.
func httpDatabases(s segmentStore) func() []httpapi.DatabaseStatus {
	m, ok := s.(multiStore)
	if !ok {
		return nil
	}
	return func() []httpapi.DatabaseStatus {
		dbs := m.Databases()
		out := make([]httpapi.DatabaseStatus, len(dbs))
		for i, d := range dbs {
			out[i] = httpapi.DatabaseStatus{Index: d.Index, Name: d.Name, Healthy: d.Healthy, RetryAt: d.RetryAt, Verified: d.Verified,
				LastError: d.LastError, LastReserve: d.LastReserve, Reserves: d.Reserves, Failures: d.Failures, HighestID: d.MaxID}
		}
		return out
	}
}

func metricDatabases(s segmentStore) func() []metrics.Database {
	m, ok := s.(multiStore)
	if !ok {
		return nil
	}
	return func() []metrics.Database {
		dbs := m.Databases()
		out := make([]metrics.Database, len(dbs))
		for i, d := range dbs {
			out[i] = metrics.Database{Index: d.Index, Up: d.Healthy && d.Verified, Reserves: d.Reserves, Failures: d.Failures, HighestID: d.MaxID}
		}
		return out
	}
}

// logDatabases logs each database of a store spread over several, once at
// start, and what such a store cannot serve.
func logDatabases(log *slog.Logger, s segmentStore) {
	m, ok := s.(multiStore)
	if !ok {
		return
	}
	dbs := m.Databases()
	for _, d := range dbs {
		log.Info("segment database", "index", d.Index, "of", len(dbs), "name", d.Name, "healthy", d.Healthy, "verified", d.Verified)
	}
	log.Info("segment store spread over several databases: plain tags only (periodic, formatted, opaque and ordered tags need one database)",
		"databases", len(dbs), "block", m.Block())
}

// checkDSNList checks a segment.dsn that lists several databases without
// connecting: each DSN parses, and no two name one database (the same
// address and database, however spelled), which would hand out one
// stripe's IDs as two.
func checkDSNList(store string, dsns []string) error {
	var errs []error
	seen := map[string]int{}
	for i, dsn := range dsns {
		id, err := databaseIdentity(store, dsn)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: segment.dsn: database %d (%s): %w", config.ErrInvalid, i, config.RedactDSN(dsn), err))
			continue
		}
		if j, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("%w: segment.dsn: databases %d and %d are one database (%s)", config.ErrInvalid, j, i, id))
			continue
		}
		seen[id] = i
	}
	return errors.Join(errs...)
}

// databaseIdentity is where a DSN leads: the server's address and the
// database (for PostgreSQL also the schema its search_path names, as one
// database may hold several stores).
func databaseIdentity(store, dsn string) (string, error) {
	switch store {
	case config.StoreMySQL:
		if err := mysql.CheckDSN(dsn); err != nil {
			return "", err
		}
		c, err := gomysql.ParseDSN(dsn)
		if err != nil {
			return "", err
		}
		return c.Net + "(" + c.Addr + ")/" + c.DBName, nil
	case config.StorePostgres:
		if err := postgres.CheckDSN(dsn); err != nil {
			return "", err
		}
		c, err := pgx.ParseConfig(dsn)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s:%d/%s?search_path=%s", c.Host, c.Port, c.Database, c.RuntimeParams["search_path"]), nil
	}
	return "", fmt.Errorf("segment.store %s cannot span several databases", store)
}
