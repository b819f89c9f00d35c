package multidb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testdb"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/multidb"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/postgres"
)

// kind is one database product the members can be.
type kind struct {
	name string
	// newDB makes an empty database and returns its DSN.
	newDB func(t testing.TB) string
	// member opens a database as a member, single as a store of one.
	member func(ctx context.Context, dsn string) (multidb.Migratable, error)
	single func(ctx context.Context, dsn string) (leaf.SegmentStore, error)
	// via points dsn at addr (host:port) instead of its server, and
	// server is the server's host:port.
	via    func(t testing.TB, dsn, addr string) string
	server func(t testing.TB, dsn string) string
}

var kinds = []kind{
	{
		name:   "mysql",
		newDB:  testdb.MySQL,
		member: func(ctx context.Context, dsn string) (multidb.Migratable, error) { return mysql.OpenMember(ctx, dsn) },
		single: func(ctx context.Context, dsn string) (leaf.SegmentStore, error) { return mysql.Open(ctx, dsn) },
		via: func(t testing.TB, dsn, addr string) string {
			cfg, err := gomysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Addr = addr
			return cfg.FormatDSN()
		},
		server: func(t testing.TB, dsn string) string {
			cfg, err := gomysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			return cfg.Addr
		},
	},
	{
		name:   "postgres",
		newDB:  testdb.Postgres,
		member: func(ctx context.Context, dsn string) (multidb.Migratable, error) { return postgres.OpenMember(ctx, dsn) },
		single: func(ctx context.Context, dsn string) (leaf.SegmentStore, error) { return postgres.Open(ctx, dsn) },
		via: func(t testing.TB, dsn, addr string) string {
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			u.Host = addr
			return u.String()
		},
		server: func(t testing.TB, dsn string) string {
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			return u.Host
		},
	},
}

// eachKind runs f once per database product, in parallel.
func eachKind(t *testing.T, f func(t *testing.T, k kind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f(t, k)
		})
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newDBs makes n empty databases.
func newDBs(t testing.TB, k kind, n int) []string {
	dsns := make([]string, n)
	for i := range dsns {
		dsns[i] = k.newDB(t)
	}
	return dsns
}

// members opens each DSN as a member, named db0, db1, … after its place in
// dsns, closed at cleanup.
func members(t testing.TB, k kind, dsns []string) []multidb.Database {
	t.Helper()
	out := make([]multidb.Database, len(dsns))
	for i, dsn := range dsns {
		m, err := k.member(context.Background(), dsn)
		if err != nil {
			t.Fatalf("open member %d: %v", i, err)
		}
		t.Cleanup(func() { _ = m.Close() })
		out[i] = multidb.Database{Name: fmt.Sprintf("db%d", i), Store: m}
	}
	return out
}

// testOptions are fast backoffs, small blocks (so that ranges cross
// blocks) and a quiet log.
func testOptions() multidb.Options {
	return multidb.Options{Block: 10, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: quiet()}
}

// open opens a store over dsns (each opened anew, like a server would).
func open(t testing.TB, k kind, dsns []string, opts multidb.Options) *multidb.Store {
	t.Helper()
	s, err := multidb.Open(t.Context(), members(t, k, dsns), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func create(t testing.TB, s leaf.SegmentAdmin, tag string, start int64, step int) {
	t.Helper()
	if err := s.CreateTag(t.Context(), leaf.Alloc{Tag: tag, MaxID: start, Step: step}); err != nil {
		t.Fatalf("create %s: %v", tag, err)
	}
}

// ids expands a reservation into its IDs, checking that each belongs to
// the reservation's stripe and maps back into its range.
func ids(t testing.TB, r leaf.Reservation) []int64 {
	t.Helper()
	var out []int64
	r.Ranges(func(start, end int64) bool {
		for id := start; id < end; id++ {
			if !r.Stripe.Owns(id) {
				t.Errorf("ID %d of %+v is not of its stripe", id, r)
			}
			if x := r.Stripe.Number(id); x < r.Start() || x >= r.MaxID {
				t.Errorf("ID %d of %+v is number %d, outside [%d, %d)", id, r, x, r.Start(), r.MaxID)
			}
			out = append(out, id)
		}
		return true
	})
	if len(out) != r.Step {
		t.Errorf("%+v expands to %d IDs, want %d", r, len(out), r.Step)
	}
	return out
}

func TestReserveMapping(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		s := open(t, k, newDBs(t, k, 3), testOptions())
		create(t, s, "orders", 0, 7)
		seen := map[int]int{}
		var all []int64
		for range 30 {
			r, err := s.Reserve(ctx, "orders", 0)
			if err != nil {
				t.Fatalf("reserve: %v", err)
			}
			if r.Stripe.Of != 3 || r.Stripe.Block != 10 || r.Step != 7 || r.Tag != "orders" {
				t.Fatalf("reservation %+v, want step 7 of a stripe of 3 with blocks of 10", r)
			}
			seen[r.Stripe.Index]++
			all = append(all, ids(t, r)...)
		}
		for i := range 3 {
			if seen[i] != 10 {
				t.Errorf("database %d served %d of 30 reserves, want 10 (round-robin): %v", i, seen[i], seen)
			}
		}
		leaftest.CheckUnique(t, all)
		st := s.Databases()
		for i, d := range st {
			if d.Index != i || d.Name != fmt.Sprintf("db%d", i) || !d.Healthy || !d.Verified || d.Reserves != 10 || d.Failures != 0 {
				t.Errorf("status %d = %+v, want healthy with 10 reserves", i, d)
			}
			// 10 ranges of 7 from number 1: numbers [1, 71), the last ID
			// is number 70's.
			if want := d.Stripe.ID(70) + 1; d.MaxID != want {
				t.Errorf("status %d MaxID = %d, want %d", i, d.MaxID, want)
			}
		}
		a, err := s.Alloc(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		// The highest bound: database 2's number 70 (block 7, round 7).
		if want := st[2].MaxID; a.MaxID != want || a.Step != 7 {
			t.Errorf("Alloc = %+v, want MaxID %d step 7", a, want)
		}
		if _, err := s.Reserve(ctx, "nope", 0); !errors.Is(err, leaf.ErrTagNotFound) {
			t.Errorf("reserve of an unknown tag: %v, want ErrTagNotFound", err)
		}
		if ok, err := s.GiveBack(ctx, "orders", 1, 8); ok || err != nil {
			t.Errorf("GiveBack = %v, %v; want false, nil", ok, err)
		}
	})
}

// TestHammer runs three stores over the same three databases, like three
// servers, with many goroutines reserving at once: no ID twice.
func TestHammer(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		dsns := newDBs(t, k, 3)
		stores := make([]*multidb.Store, 3)
		for i := range stores {
			stores[i] = open(t, k, dsns, testOptions())
		}
		create(t, stores[0], "hammer", 0, 13)
		var (
			mu  sync.Mutex
			all []int64
			wg  sync.WaitGroup
		)
		for _, s := range stores {
			for g := range 6 {
				wg.Go(func() {
					var mine []int64
					for n := range 25 {
						step := 0
						if n%3 == 0 {
							step = 5 + g // an explicit step, as the adaptive step asks
						}
						r, err := s.Reserve(context.Background(), "hammer", step)
						if err != nil {
							t.Errorf("reserve: %v", err)
							return
						}
						mine = append(mine, ids(t, r)...)
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		leaftest.CheckUnique(t, all)
		t.Logf("%d unique IDs from 3 stores x 6 goroutines over 3 databases", len(all))
	})
}
