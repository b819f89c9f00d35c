package mysql_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/segment"
)

// The generator on MariaDB: three instances with their own pools on one
// database (like three servers), restarts, and an outage through a proxy.

func dbOpener(dsn string) leaftest.Opener {
	return func() (leaf.SegmentStore, error) { return mysql.Open(context.Background(), dsn) }
}

// serveHTTP serves g through httpapi, with no admin token, reading the
// tag routes' rows from st, as leaf serve does.
func serveHTTP(t *testing.T, g *segment.Generator, st leaf.SegmentStore) string {
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Segment: g, Tags: st.(*mysql.Store), Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestGeneratorHammer(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	leaftest.HammerSegment(t, dbOpener(testutil.MySQL(t)),
		leaftest.Hammer{Instances: 3, Goroutines: 32, Total: total, Step: 100, Batch: 10})
}

func TestGeneratorRestart(t *testing.T) {
	leaftest.RestartSegment(t, dbOpener(testutil.MySQL(t)))
}

func TestGeneratorOutage(t *testing.T) {
	cfg, err := gomysql.ParseDSN(testutil.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr()
	leaftest.OutageSegment(t, dbOpener(cfg.FormatDSN()), p)
}

func TestGeneratorTombstone(t *testing.T) {
	leaftest.TombstoneSegment(t, dbOpener(testutil.MySQL(t)))
}

func TestGeneratorIdleHammer(t *testing.T) {
	leaftest.HammerIdle(t, dbOpener(testutil.MySQL(t)), leaftest.IdleHammer{GiveBack: true})
}

// TestScaleRefresh measures the refresh at LEAF_SCALE_ROWS rows; it skips
// unless that is set (scripts/scale.sh sets it).
func TestScaleRefresh(t *testing.T) {
	if os.Getenv(leaftest.EnvScaleRows) == "" {
		t.Skipf("set %s to measure", leaftest.EnvScaleRows)
	}
	dsn := testutil.MySQL(t)
	leaftest.RefreshCost(t, dbOpener(dsn), func(t *testing.T, n int) {
		// MariaDB's Sequence engine: seq_1_to_N is a table in every database.
		q := fmt.Sprintf("INSERT INTO leaf_alloc (biz_tag, max_id, step) SELECT CONCAT('scale-', LPAD(seq, 7, '0')), 1, 1000 FROM seq_1_to_%d", n)
		if _, err := rawDB(t, dsn).ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGeneratorPeriodic(t *testing.T) {
	leaftest.PeriodicSegment(t, dbOpener(testutil.MySQL(t)))
}

// An opaque tag under three servers sharing one key: unique IDs, all
// decoding back to distinct raw IDs of the row.
func TestGeneratorOpaqueHammer(t *testing.T) {
	leaftest.HammerSegment(t, dbOpener(testutil.MySQL(t)),
		leaftest.Hammer{Instances: 3, Goroutines: 16, Total: 100_000, Step: 100, Batch: 10,
			OpaqueBits: 40, OpaqueKey: []byte("0123456789abcdef0123456789abcdef")})
}

// The opaque key is in no row of any leaf_ table and in no HTTP answer
// about the opaque tags: only its check is stored.
func TestGeneratorOpaqueKeyNotStored(t *testing.T) {
	dsn := testutil.MySQL(t)
	leaftest.OpaqueKeyNotStored(t, dbOpener(dsn),
		leaftest.RawTables{DB: rawDB(t, dsn), List: "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"},
		serveHTTP)
}
