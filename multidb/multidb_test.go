package multidb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/multidb"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/postgres"
	"github.com/leafgo/leaf/stripe"
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
	// driver is the database/sql driver name, for statements the stores
	// do not offer (a hand edit).
	driver string
}

var kinds = []kind{
	{
		name:   "mysql",
		driver: "mysql",
		newDB:  testutil.MySQL,
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
		driver: "pgx",
		newDB:  testutil.Postgres,
		member: func(ctx context.Context, dsn string) (multidb.Migratable, error) {
			return postgres.OpenMember(ctx, dsn)
		},
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

// testConfig are fast backoffs, small blocks (so that ranges cross
// blocks) and a quiet log.
func testConfig() multidb.Config {
	// MemberTimeout: a test asks what the store answers, not how soon a
	// slow database is skipped (TestMemberDown sets its own 300ms). With
	// the default second, on a busy machine, a reserve that every
	// database answered late (its connection or its update queued behind
	// other packages' CREATE and DROP DATABASE) was refused, as it should
	// be, and failed tests that need every reserve to succeed.
	return multidb.Config{Block: 10, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		MemberTimeout: time.Minute, Logger: quiet()}
}

// open opens a store over dsns (each opened anew, like a server would),
// setting them up first (multidb.Init, the operator's step) when none has
// a record yet.
func open(t testing.TB, k kind, dsns []string, opts multidb.Config) *multidb.Store {
	t.Helper()
	dbs := members(t, k, dsns)
	fresh := true
	for _, d := range dbs {
		if _, ok, err := d.Store.ReadStripe(t.Context()); err != nil || ok {
			fresh = false
		}
	}
	if fresh {
		if _, err := multidb.Init(t.Context(), dbs, opts); err != nil {
			t.Fatalf("init: %v", err)
		}
	}
	s, err := multidb.Open(t.Context(), dbs, opts)
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
	stripe.Reserved(r, func(start, end int64) bool {
		for id := start; id < end; id++ {
			if !stripe.Owns(r.Stripe, id) {
				t.Errorf("ID %d of %+v is not of its stripe", id, r)
			}
			if x := stripe.Number(r.Stripe, id); x < r.Start() || x >= r.MaxID {
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
		s := open(t, k, newDBs(t, k, 3), testConfig())
		create(t, s, "orders", 0, 7)
		seen := map[int]int{}
		var all []int64
		for range 30 {
			r, err := s.Reserve(ctx, "orders", 0)
			if err != nil {
				t.Fatalf("reserve: %v", err)
			}
			if r.Stripe.Databases != 3 || r.Stripe.Block != 10 || r.Step != 7 || r.Tag != "orders" {
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
		testutil.CheckUnique(t, all)
		st := s.Databases()
		for i, d := range st {
			if d.Index != i || d.Name != fmt.Sprintf("db%d", i) || !d.Healthy || !d.Verified || d.Reserves != 10 || d.Failures != 0 {
				t.Errorf("status %d = %+v, want healthy with 10 reserves", i, d)
			}
			// 10 ranges of 7 from number 1: numbers [1, 71), the last ID
			// is number 70's.
			if want := stripe.ID(d.Stripe, 70) + 1; d.MaxID != want {
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
			stores[i] = open(t, k, dsns, testConfig())
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
		testutil.CheckUnique(t, all)
		t.Logf("%d unique IDs from 3 stores x 6 goroutines over 3 databases", len(all))
	})
}

// records reads the stripe records of dsns.
func records(t testing.TB, k kind, dsns []string) []leaf.StripeRecord {
	t.Helper()
	out := make([]leaf.StripeRecord, len(dsns))
	for i, d := range members(t, k, dsns) {
		rec, ok, err := d.Store.ReadStripe(t.Context())
		if err != nil || !ok {
			t.Fatalf("read record of %d: %v, %v", i, ok, err)
		}
		out[i] = rec
	}
	return out
}

func TestSetUp(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		dsns := newDBs(t, k, 3)
		opts := testConfig()
		opts.Block = 0 // the default
		s := open(t, k, dsns, opts)
		recs := records(t, k, dsns)
		for i, r := range recs {
			want := leaf.Stripe{Index: i, Databases: 3, Block: multidb.DefaultBlock}
			if r.Stripe != want || r.Cluster != s.Cluster() || len(r.Cluster) != 32 || r.CreatedAt.IsZero() {
				t.Errorf("record %d = %+v, want %+v of cluster %s", i, r, want, s.Cluster())
			}
		}
		// Opening again keeps them; the recorded block rules over Config.
		again := open(t, k, dsns, testConfig())
		if again.Cluster() != s.Cluster() || again.Block() != multidb.DefaultBlock {
			t.Errorf("reopened: cluster %s block %d, want %s %d", again.Cluster(), again.Block(), s.Cluster(), multidb.DefaultBlock)
		}
	})
}

// TestInitConcurrent: Open never sets databases up, and of several Inits
// run at once on the same fresh databases, or on lists that share the
// first one, exactly one succeeds and the records are all its own: two
// lists sharing a database cannot both be set up (the hole a server-side
// set-up that adopts another's cluster would leave).
func TestInitConcurrent(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		dsns := newDBs(t, k, 4)
		if _, err := multidb.Open(t.Context(), members(t, k, dsns[:3]), testConfig()); !errors.Is(err, leaf.ErrStripeLayout) ||
			!strings.Contains(err.Error(), "leaf db init") {
			t.Fatalf("open of fresh databases: %v, want ErrStripeLayout naming leaf db init", err)
		}
		// Half the inits get [db0 db1 db2], half [db0 db3 db2].
		const inits = 6
		lists := make([][]multidb.Database, inits)
		for i := range lists {
			list := []string{dsns[0], dsns[1], dsns[2]}
			if i%2 == 1 {
				list[1] = dsns[3]
			}
			lists[i] = members(t, k, list)
		}
		clusters := make([]string, inits)
		errs := make([]error, inits)
		var wg sync.WaitGroup
		for i := range inits {
			wg.Go(func() { clusters[i], errs[i] = multidb.Init(t.Context(), lists[i], testConfig()) })
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("inits %d and %d both succeeded", won, i)
			case err == nil:
				won = i
			case !errors.Is(err, leaf.ErrStripeLayout):
				t.Errorf("init %d: %v, want ErrStripeLayout", i, err)
			}
		}
		if won < 0 {
			t.Fatalf("no init succeeded: %v", errs)
		}
		winner := []string{dsns[0], dsns[1], dsns[2]}
		if won%2 == 1 {
			winner[1] = dsns[3]
		}
		s := open(t, k, winner, testConfig())
		if s.Cluster() != clusters[won] {
			t.Fatalf("cluster %s, the winning init's %s", s.Cluster(), clusters[won])
		}
		loser := []string{dsns[0], dsns[3], dsns[2]}
		if won%2 == 1 {
			loser[1] = dsns[1]
		}
		if _, err := multidb.Open(t.Context(), members(t, k, loser), testConfig()); !errors.Is(err, leaf.ErrStripeLayout) {
			t.Fatalf("open of the losing list: %v, want ErrStripeLayout", err)
		}
	})
}

// TestLayoutRefused opens lists that disagree with the records.
func TestLayoutRefused(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 4)
		abc := dsns[:3]
		s := open(t, k, abc, testConfig())
		create(t, s, "t", 0, 10)
		if _, err := s.Reserve(ctx, "t", 0); err != nil {
			t.Fatal(err)
		}
		// A database with rows and no record: a store of one database.
		single, err := k.single(ctx, k.newDB(t))
		if err != nil {
			t.Fatal(err)
		}
		create(t, single.(leaf.SegmentAdmin), "t", 0, 10)
		single.Close()
		used := k.newDB(t)
		if st, err := k.single(ctx, used); err != nil {
			t.Fatal(err)
		} else {
			create(t, st.(leaf.SegmentAdmin), "x", 0, 10)
			st.Close()
		}
		otherDSNs := newDBs(t, k, 3)
		open(t, k, otherDSNs, testConfig()) // another cluster's
		cases := []struct {
			name string
			list []string
			want string
		}{
			{"misordered", []string{abc[1], abc[0], abc[2]}, "records that it is database 1 of 3"},
			{"rotated", []string{abc[1], abc[2], abc[0]}, "records that it is database 1 of 3"},
			{"fewer", abc[:2], "the list makes it database 0 of 2"},
			{"more", append(append([]string{}, abc...), dsns[3]), "record a stripe and [db3] do not"},
			{"duplicate", []string{abc[0], abc[0], abc[2]}, "list position 1"},
			// Same index and count as position 1 wants: only the cluster differs.
			{"another cluster's", []string{abc[0], otherDSNs[1], abc[2]}, "(list position 1) records that it is database 1 of 3"},
			{"used without record", []string{used, dsns[3]}, "leaf db migrate"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := multidb.Open(ctx, members(t, k, c.list), testConfig())
				if !errors.Is(err, leaf.ErrStripeLayout) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("open: %v; want ErrStripeLayout saying %q", err, c.want)
				}
			})
		}
		// Init refuses a database in use, or one already set up.
		for _, list := range [][]string{{used, dsns[3]}, {dsns[3], abc[2]}} {
			if _, err := multidb.Init(ctx, members(t, k, list), testConfig()); !errors.Is(err, leaf.ErrStripeLayout) {
				t.Errorf("init of %v: %v, want ErrStripeLayout", list, err)
			}
		}
		// dsns[3] was not set up by any of the refusals.
		m := members(t, k, dsns[3:])[0]
		if _, ok, err := m.Store.ReadStripe(ctx); ok || err != nil {
			t.Errorf("a refused open wrote a record: %v %v", ok, err)
		}
	})
}

// TestSingleStoreRefusesStriped opens one database of several as a store
// of one: refused. A database recording a store of one is accepted.
func TestSingleStoreRefusesStriped(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 2)
		open(t, k, dsns, testConfig())
		for _, dsn := range dsns {
			st, err := k.single(ctx, dsn)
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, leaf.ErrStripeLayout) || !strings.Contains(err.Error(), "of 2") {
				t.Errorf("single open of a striped database: %v, want ErrStripeLayout", err)
			}
		}
		one := k.newDB(t)
		open(t, k, []string{one}, testConfig())
		st, err := k.single(ctx, one)
		if err != nil {
			t.Fatalf("single open of a database recording 1 of 1: %v", err)
		}
		st.Close()
	})
}

// TestMemberDown cuts one database off (connections refused, then hanging):
// reserves keep succeeding from the others, the database is marked
// unhealthy and skipped, and it serves again once it is back.
func TestMemberDown(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 3)
		open(t, k, dsns, testConfig()) // set up while all are reachable
		proxy := testutil.NewProxy(t, k.server(t, dsns[1]))
		viaProxy := []string{dsns[0], k.via(t, dsns[1], proxy.Addr()), dsns[2]}
		opts := testConfig()
		opts.MemberTimeout = 300 * time.Millisecond
		s := open(t, k, viaProxy, opts)
		create(t, s, "t", 0, 5)

		var all []int64
		reserve := func(n int) map[int]int {
			by := map[int]int{}
			for range n {
				r, err := s.Reserve(ctx, "t", 0)
				if err != nil {
					t.Fatalf("reserve with db1 %v: %v", s.Databases()[1], err)
				}
				by[r.Stripe.Index]++
				all = append(all, ids(t, r)...)
			}
			return by
		}
		reserve(6)
		for _, fault := range []struct {
			name  string
			apply func()
		}{{"down", proxy.Down}, {"stalled", proxy.Stall}} {
			failures := s.Databases()[1].Failures
			fault.apply()
			by := reserve(30)
			st := s.Databases()[1]
			// Exactly one reserve reached it (and failed over to another
			// database); it was skipped from then on.
			if st.Healthy || st.LastError == "" || st.Failures != failures+1 {
				t.Errorf("%s: db1 status %+v, want unhealthy with its error after one failed reserve (%d before)", fault.name, st, failures)
			}
			if by[1] != 0 || by[0]+by[2] != 30 {
				t.Errorf("%s: reserves by database %v, want all 30 from db0 and db2", fault.name, by)
			}
			if err := s.Ping(ctx); err != nil {
				t.Errorf("%s: ping with two databases alive: %v", fault.name, err)
			}
			if _, err := s.Tags(ctx); err != nil {
				t.Errorf("%s: tags with two databases alive: %v", fault.name, err)
			}
			if _, err := s.TagsVersion(ctx); err == nil {
				t.Errorf("%s: TagsVersion with a database down succeeded", fault.name)
			}
			var pe *multidb.PartialError
			if err := s.SetStep(ctx, "t", 6); !errors.As(err, &pe) || len(pe.NotDone) != 1 || pe.NotDone[0] != "db1" {
				t.Errorf("%s: set step with db1 down: %v, want a PartialError naming db1", fault.name, err)
			}
			proxy.Up()
			testutil.WaitFor(t, "db1 healthy again", func() bool { return s.Databases()[1].Healthy })
			// Back in the rotation: with no reserve failing anywhere, 3
			// of the next 9 each. On a busy machine a reserve on any
			// database may still fail (over the store's 300ms) and go to
			// another, which is then skipped until its health check
			// passes again; db1 must still come back, within 90 reserves.
			failed := func() (n uint64) {
				for _, d := range s.Databases() {
					n += d.Failures
				}
				return n
			}
			failures, allFailures := s.Databases()[1].Failures, failed()
			by = reserve(9)
			if failed() == allFailures {
				if by[0] != 3 || by[1] != 3 || by[2] != 3 {
					t.Errorf("%s: after recovery reserves by database %v, want 3 each", fault.name, by)
				}
			} else {
				for n := 0; by[1] < 3 && n < 90; n++ {
					by[1] += reserve(1)[1]
				}
				if by[1] < 3 {
					t.Errorf("%s: db1 served %d of 99 reserves after recovery (%d failures), want it back in the rotation",
						fault.name, by[1], s.Databases()[1].Failures-failures)
				}
			}
			if err := s.SetStep(ctx, "t", 5); err != nil {
				t.Errorf("%s: set step again after recovery: %v", fault.name, err)
			}
		}
		testutil.CheckUnique(t, all)
	})
}

// TestMemberUnreachableAtOpen starts with one database down: the store
// opens, serves from the others, and takes the database in once it
// answers with the right record.
func TestMemberUnreachableAtOpen(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 2)
		s0 := open(t, k, dsns, testConfig())
		create(t, s0, "t", 0, 5)
		proxy := testutil.NewProxy(t, k.server(t, dsns[1]))
		proxy.Down()
		// db1 is given by Connect, as a server's configuration does: it
		// cannot be opened before it answers.
		list := members(t, k, dsns[:1])
		viaProxy := k.via(t, dsns[1], proxy.Addr())
		list = append(list, multidb.Database{Name: "db1", Connect: func(ctx context.Context) (multidb.Member, error) {
			return k.member(ctx, viaProxy)
		}})
		s, err := multidb.Open(ctx, list, testConfig())
		if err != nil {
			t.Fatalf("open with db1 down: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if st := s.Databases()[1]; st.Healthy || st.Verified {
			t.Fatalf("db1 unreachable at open: %+v", st)
		}
		for range 4 {
			if r, err := s.Reserve(ctx, "t", 0); err != nil || r.Stripe.Index != 0 {
				t.Fatalf("reserve = %+v, %v; want db0's", r, err)
			}
		}
		// A tag db0 lacks (a create that reached db1 only) may be db1's:
		// not found from db0 alone is not the store's answer.
		only1, err := k.member(ctx, dsns[1])
		if err != nil {
			t.Fatal(err)
		}
		create(t, only1, "on1", 0, 5)
		only1.Close()
		if _, err := s.Reserve(ctx, "on1", 0); errors.Is(err, leaf.ErrTagNotFound) || !errors.Is(err, leaf.ErrNotReady) {
			t.Fatalf("reserve of a tag only the unverified db1 holds: %v, want not ready, not not found", err)
		}
		proxy.Up()
		testutil.WaitFor(t, "db1 verified", func() bool { st := s.Databases()[1]; return st.Healthy && st.Verified })

		// A database of another cluster in db1's place, down at open:
		// once it answers, its record keeps it out.
		others := newDBs(t, k, 2)
		open(t, k, others, testConfig())
		proxy2 := testutil.NewProxy(t, k.server(t, others[1]))
		proxy2.Down()
		wrong := k.via(t, others[1], proxy2.Addr())
		list = append(members(t, k, dsns[:1]), multidb.Database{Name: "stranger", Connect: func(ctx context.Context) (multidb.Member, error) {
			return k.member(ctx, wrong)
		}})
		w, err := multidb.Open(ctx, list, testConfig())
		if err != nil {
			t.Fatalf("open with the stranger down: %v", err)
		}
		t.Cleanup(func() { _ = w.Close() })
		before := w.Databases()[1].ProbeFailures
		proxy2.Up()
		testutil.WaitFor(t, "two probes of the stranger", func() bool { return w.Databases()[1].ProbeFailures >= before+2 })
		st := w.Databases()[1]
		if st.Healthy || st.Verified || !strings.Contains(st.LastError, "records that it is database 1 of 2") {
			t.Errorf("stranger status %+v, want kept out for its record", st)
		}
		for range 4 {
			if r, err := w.Reserve(ctx, "t", 0); err != nil || r.Stripe.Index != 0 {
				t.Fatalf("reserve = %+v, %v; want db0's", r, err)
			}
		}
	})
}

// TestAdmin covers tag administration over every database: a start in
// IDs, delete and create again above the tombstone, ErrTagExists and
// ErrTagNotFound, and a create that failed part-way run again.
func TestAdmin(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 3)
		s := open(t, k, dsns, testConfig())
		create(t, s, "t", 1234, 5)
		var low int64 = 1 << 62
		for range 3 {
			r, err := s.Reserve(ctx, "t", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids(t, r) {
				low = min(low, id)
			}
		}
		// 1234 is in round 41 (30 IDs a round), database 0's block
		// [1230, 1240): database 0 starts at 1234, 1 at 1240, 2 at 1250.
		if low != 1234 {
			t.Errorf("lowest ID of the three first ranges = %d, want 1234", low)
		}
		if err := s.CreateTag(ctx, leaf.Alloc{Tag: "t", Step: 5}); !errors.Is(err, leaf.ErrTagExists) {
			t.Errorf("create again: %v, want ErrTagExists", err)
		}
		a, err := s.Alloc(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTag(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTag(ctx, "t"); !errors.Is(err, leaf.ErrTagNotFound) {
			t.Errorf("delete again: %v, want ErrTagNotFound", err)
		}
		if err := s.SetStep(ctx, "t", 3); !errors.Is(err, leaf.ErrTagNotFound) {
			t.Errorf("set step of a deleted tag: %v, want ErrTagNotFound", err)
		}
		var te *leaf.TombstoneError
		if err := s.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: 1234, Step: 5}); !errors.As(err, &te) || te.MinStart > a.MaxID || te.MinStart < 1234 {
			t.Errorf("create below the tombstone: %v, want a TombstoneError with a start in IDs near %d", err, a.MaxID)
		} else if err := s.CreateTag(ctx, leaf.Alloc{Tag: "t", MaxID: te.MinStart, Step: 5}); err != nil {
			t.Errorf("create at the start the TombstoneError named (%d): %v", te.MinStart, err)
		}
		for range 6 {
			r, err := s.Reserve(ctx, "t", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids(t, r) {
				if id < a.MaxID {
					t.Errorf("ID %d after delete and create, below the old bound %d", id, a.MaxID)
				}
			}
		}

		// One database down: the create fails part-way, and succeeds when
		// run again after it is back.
		proxy := testutil.NewProxy(t, k.server(t, dsns[2]))
		p := open(t, k, []string{dsns[0], dsns[1], k.via(t, dsns[2], proxy.Addr())}, testConfig())
		proxy.Down()
		var pe *multidb.PartialError
		if err := p.CreateTag(ctx, leaf.Alloc{Tag: "u", Step: 5}); !errors.As(err, &pe) ||
			strings.Join(pe.Done, ",") != "db0,db1" || strings.Join(pe.NotDone, ",") != "db2" {
			t.Fatalf("create with db2 down: %v, want a PartialError done on db0, db1", err)
		}
		proxy.Up()
		if err := p.CreateTag(ctx, leaf.Alloc{Tag: "u", Step: 5}); err != nil {
			t.Fatalf("create run again: %v", err)
		}
		tags, err := s.Tags(ctx)
		if err != nil || strings.Join(tags, ",") != "t,u" {
			t.Errorf("Tags = %v, %v", tags, err)
		}
		page, err := s.AllocsPage(ctx, "", "", 1)
		if err != nil || len(page) != 1 || page[0].Tag != "t" {
			t.Errorf("AllocsPage(limit 1) = %+v, %v", page, err)
		}
		page, err = s.AllocsPage(ctx, "", "t", 10)
		if err != nil || len(page) != 1 || page[0].Tag != "u" || page[0].MaxID != 1 {
			t.Errorf("AllocsPage(after t) = %+v, %v; want u at 1", page, err)
		}
		all, err := s.Allocs(ctx)
		if err != nil || len(all) != 2 || all[0].MaxID < a.MaxID {
			t.Errorf("Allocs = %+v, %v", all, err)
		}
	})
}

// drain reserves n ranges of tag and returns their IDs.
func drain(t *testing.T, s leaf.SegmentStore, tag string, n int) []int64 {
	t.Helper()
	var out []int64
	for range n {
		r, err := s.Reserve(t.Context(), tag, 0)
		if err != nil {
			t.Fatalf("reserve %s: %v", tag, err)
		}
		out = append(out, ids(t, r)...)
	}
	return out
}

// above fails the test unless every ID of after is above every ID of
// before.
func above(t *testing.T, what string, before, after []int64) {
	t.Helper()
	top := int64(0)
	for _, id := range before {
		top = max(top, id)
	}
	for _, id := range after {
		if id <= top {
			t.Errorf("%s: ID %d issued after the migration, not above %d issued before", what, id, top)
			return
		}
	}
}

// TestMigrate spreads one database over two, then two over three, with
// live tags, a deleted tag and an explicit start: every ID issued after
// each migration is above every ID issued before it, per tag.
func TestMigrate(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 3)
		opts := testConfig()

		// One database, a store of one as servers run it today.
		single, err := k.single(ctx, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		adm := single.(leaf.SegmentAdmin)
		create(t, adm, "a", 0, 10)
		create(t, adm, "b", 1000, 7)
		create(t, adm, "gone", 0, 9)
		issued := map[string][]int64{
			"a":    drain(t, single, "a", 4),
			"b":    drain(t, single, "b", 3),
			"gone": drain(t, single, "gone", 5),
		}
		if err := adm.DeleteTag(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		single.Close()

		// An interrupted earlier run had written database 1's record.
		pre := members(t, k, dsns[1:2])[0].Store
		interrupted := leaf.StripeRecord{Stripe: leaf.Stripe{Index: 1, Databases: 2, Block: 10}, Cluster: "c1"}
		if ok, err := pre.WriteStripe(ctx, interrupted); !ok || err != nil {
			t.Fatal(ok, err)
		}

		rep, err := multidb.Migrate(ctx, members(t, k, dsns[:1]), members(t, k, dsns[:2]), opts)
		if err != nil {
			t.Fatalf("migrate 1 to 2: %v", err)
		}
		if rep.Cluster != "c1" || rep.Block != 10 || rep.Databases != 2 || len(rep.Tags) != 3 {
			t.Errorf("report %+v, want cluster c1, blocks of 10, 2 databases, 3 tags", rep)
		}
		for _, mv := range rep.Tags {
			if mv.Tag == "gone" && (mv.Live || !mv.Tombstone || mv.Bound != 46) {
				t.Errorf("gone moved as %+v, want a tombstone at 46", mv)
			}
		}
		again, err := multidb.Migrate(ctx, members(t, k, dsns[:1]), members(t, k, dsns[:2]), opts)
		if err != nil || !again.Already || again.Cluster != "c1" {
			t.Errorf("migrate run again: %+v, %v; want already done", again, err)
		}
		if st, err := k.single(ctx, dsns[0]); err == nil || !errors.Is(err, leaf.ErrStripeLayout) {
			t.Errorf("single open after migration: %v", err)
			if st != nil {
				st.Close()
			}
		}

		s2, err := multidb.Open(ctx, members(t, k, dsns[:2]), opts)
		if err != nil {
			t.Fatalf("open after 1 to 2: %v", err)
		}
		create(t, s2, "gone", 0, 9)
		create(t, s2, "fresh", 0, 5)
		before := map[string][]int64{}
		for tag, old := range issued {
			now := drain(t, s2, tag, 6)
			above(t, "1 to 2: "+tag, old, now)
			before[tag] = append(old, now...)
		}
		before["fresh"] = drain(t, s2, "fresh", 4)
		if err := s2.DeleteTag(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		s2.Close()

		rep, err = multidb.Migrate(ctx, members(t, k, dsns[:2]), members(t, k, dsns), opts)
		if err != nil {
			t.Fatalf("migrate 2 to 3: %v", err)
		}
		if rep.Cluster == "c1" || rep.Databases != 3 {
			t.Errorf("report %+v, want a new cluster and 3 databases", rep)
		}
		if _, err := multidb.Open(ctx, members(t, k, dsns[:2]), opts); !errors.Is(err, leaf.ErrStripeLayout) {
			t.Errorf("open with the old list after 2 to 3: %v, want ErrStripeLayout", err)
		}
		s3 := open(t, k, dsns, opts)
		create(t, s3, "b", 0, 7)
		for tag, old := range before {
			above(t, "2 to 3: "+tag, old, drain(t, s3, tag, 9))
		}
	})
}

// TestMigrateRefused: shaped tags, and lists that do not add databases.
func TestMigrateRefused(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 2)
		single, err := k.single(ctx, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		shaper := single.(leaf.TagShaper)
		if err := shaper.CreateShapedTag(ctx, leaf.Alloc{Tag: "fmt", Step: 5}, leaf.TagShape{Format: leaf.IDFormat{Prefix: "X-"}}); err != nil {
			t.Fatal(err)
		}
		single.Close()
		_, err = multidb.Migrate(ctx, members(t, k, dsns[:1]), members(t, k, dsns), testConfig())
		if !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), `"fmt"`) {
			t.Errorf("migrate a shaped tag: %v, want refused naming it", err)
		}
		for _, d := range members(t, k, dsns) {
			if _, ok, _ := d.Store.ReadStripe(ctx); ok {
				t.Errorf("%s has a record after a refused migration", d.Name)
			}
		}
		if _, err := multidb.Migrate(ctx, members(t, k, dsns), members(t, k, dsns[:1]), testConfig()); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("migrate 2 to 1: %v, want refused", err)
		}
		// A database added with rows of its own (a backup of another, a
		// leftover): its rows would stay below the bounds collected from
		// the old list.
		old, added := k.newDB(t), k.newDB(t)
		for i, dsn := range []string{old, added} {
			st, err := k.single(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			create(t, st.(leaf.SegmentAdmin), fmt.Sprintf("t%d", i), 0, 10)
			st.Close()
		}
		if _, err := multidb.Migrate(ctx, members(t, k, []string{old}), members(t, k, []string{old, added}), testConfig()); !errors.Is(err, leaf.ErrStripeLayout) ||
			!strings.Contains(err.Error(), "must be empty") {
			t.Errorf("migrate onto a database in use: %v, want refused", err)
		}
		if _, err := multidb.Migrate(ctx, members(t, k, []string{old}), members(t, k, []string{old, k.newDB(t)}), multidb.Config{Block: -1}); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("migrate with block -1: %v, want refused", err)
		}
		if _, err := multidb.Init(ctx, members(t, k, []string{k.newDB(t), k.newDB(t)}), multidb.Config{Block: -1}); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("init with block -1: %v, want refused", err)
		}
	})
}

// TestMigrateRefusesOrdered: a database holding ordered tags is refused
// with an *OrderedTagsError naming the first few and counting them all
// (rows left by hand without their tag too, over more than one page of
// the listing), before a database only in the new list is even opened;
// once the tags are plain, they move.
func TestMigrateRefusesOrdered(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 2)
		single, err := k.single(ctx, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		admin, ordered := single.(leaf.SegmentAdmin), single.(leaf.OrderedStore)
		for _, tag := range []string{"ord.a", "ord.b", "plain"} {
			create(t, admin, tag, 0, 10)
		}
		for _, tag := range []string{"ord.a", "ord.b"} {
			if err := ordered.SetOrdered(ctx, tag, true); err != nil {
				t.Fatal(err)
			}
		}
		single.Close()
		// Rows of ordered tags whose tags are gone, made by hand: more
		// than one page of the listing.
		const leftovers = 1200
		db, err := sql.Open(k.driver, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		values := make([]string, leftovers)
		for i := range values {
			values[i] = fmt.Sprintf("('zz.%04d')", i)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO leaf_tag_owner (tag) VALUES "+strings.Join(values, ", ")); err != nil {
			t.Fatal(err)
		}

		connected := false
		migrate := func() (multidb.Report, error) {
			t.Helper()
			to := append(members(t, k, dsns[:1]), multidb.Database{Name: "db1", Connect: func(ctx context.Context) (multidb.Member, error) {
				connected = true
				m, err := k.member(ctx, dsns[1])
				if err != nil {
					return nil, err
				}
				return m, nil
			}})
			return multidb.Migrate(ctx, members(t, k, dsns[:1]), to, testConfig())
		}
		_, err = migrate()
		var refusal *multidb.OrderedTagsError
		if !errors.As(err, &refusal) {
			t.Fatalf("migrate ordered tags: %v, want an *OrderedTagsError", err)
		}
		want := []string{"ord.a", "ord.b"}
		for i := range multidb.MaxListedOrdered - 2 {
			want = append(want, fmt.Sprintf("zz.%04d", i))
		}
		if refusal.Count != leftovers+2 || !slices.Equal(refusal.Tags, want) || !slices.Equal(refusal.Databases, []string{"db0"}) {
			t.Errorf("refusal %+v, want count %d, tags %q on db0", refusal, leftovers+2, want)
		}
		if !errors.Is(err, leaf.ErrInvalidArgument) || !errors.Is(err, leaf.ErrOrderedTag) {
			t.Errorf("%v does not match ErrInvalidArgument and ErrOrderedTag", err)
		}
		msg := err.Error()
		for _, s := range []string{"1202 ordered tags on db0", `"ord.a", "ord.b", "zz.0000"`, fmt.Sprintf("and %d more", leftovers+2-multidb.MaxListedOrdered), "one database"} {
			if !strings.Contains(msg, s) {
				t.Errorf("%q does not say %q", msg, s)
			}
		}
		if strings.Contains(msg, `"plain"`) {
			t.Errorf("%q names the plain tag", msg)
		}
		if connected {
			t.Error("the refused migration opened the database only in the new list")
		}
		if _, ok, err := members(t, k, dsns[:1])[0].Store.ReadStripe(ctx); err != nil || ok {
			t.Errorf("the old database has a record after the refusal (%v)", err)
		}

		// Plain again: the leftovers by hand, the tags as an operator would.
		if _, err := db.ExecContext(ctx, "DELETE FROM leaf_tag_owner WHERE tag LIKE 'zz.%'"); err != nil {
			t.Fatal(err)
		}
		if single, err = k.single(ctx, dsns[0]); err != nil {
			t.Fatal(err)
		}
		for _, tag := range []string{"ord.a", "ord.b"} {
			if err := single.(leaf.OrderedStore).SetOrdered(ctx, tag, false); err != nil {
				t.Fatal(err)
			}
		}
		single.Close()
		rep, err := migrate()
		if err != nil {
			t.Fatalf("migrate once the tags are plain: %v", err)
		}
		var moved []string
		for _, m := range rep.Tags {
			moved = append(moved, m.Tag)
		}
		if !slices.Equal(moved, []string{"ord.a", "ord.b", "plain"}) {
			t.Errorf("moved %q, want ord.a, ord.b and plain", moved)
		}
	})
}

// TestHandEditedRecord: records edited by hand into something no stripe
// can be (a block of 0) are refused at open, with the database named,
// instead of reaching the stripes' arithmetic.
func TestHandEditedRecord(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		dsns := newDBs(t, k, 2)
		open(t, k, dsns, testConfig())
		for _, dsn := range dsns {
			db, err := sql.Open(k.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(t.Context(), "UPDATE leaf_stripe SET block = 0"); err != nil {
				t.Fatal(err)
			}
			db.Close()
		}
		_, err := multidb.Open(t.Context(), members(t, k, dsns), testConfig())
		if !errors.Is(err, leaf.ErrStripeLayout) || !strings.Contains(err.Error(), "invalid") {
			t.Fatalf("open with blocks of 0: %v, want ErrStripeLayout saying the record is invalid", err)
		}
	})
}

// TestMemberMethods checks what the stores offer multidb: the stripe
// record's write-if-absent and compare-and-set, Used, Tombstones and the
// raises, which never lower.
func TestMemberMethods(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsn := k.newDB(t)
		m, err := k.member(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		if _, ok, err := m.ReadStripe(ctx); ok || err != nil {
			t.Fatalf("ReadStripe of a new database: %v, %v", ok, err)
		}
		r1 := leaf.StripeRecord{Stripe: leaf.Stripe{Index: 1, Databases: 3, Block: 100}, Cluster: "one"}
		r2 := leaf.StripeRecord{Stripe: leaf.Stripe{Index: 2, Databases: 4, Block: 100}, Cluster: "two"}
		if ok, err := m.WriteStripe(ctx, r1); !ok || err != nil {
			t.Fatalf("WriteStripe: %v, %v", ok, err)
		}
		if ok, err := m.WriteStripe(ctx, r2); ok || err != nil {
			t.Fatalf("WriteStripe over a record: %v, %v; want false", ok, err)
		}
		if ok, err := m.ReplaceStripe(ctx, r2, r1); ok || err != nil {
			t.Fatalf("ReplaceStripe from a record it does not have: %v, %v; want false", ok, err)
		}
		if ok, err := m.ReplaceStripe(ctx, r1, r2); !ok || err != nil {
			t.Fatalf("ReplaceStripe: %v, %v", ok, err)
		}
		if got, ok, err := m.ReadStripe(ctx); !ok || err != nil || !got.Same(r2) {
			t.Fatalf("ReadStripe = %+v, %v, %v; want %+v", got, ok, err, r2)
		}
		if _, err := m.WriteStripe(ctx, leaf.StripeRecord{Stripe: leaf.Stripe{Index: 3, Databases: 3, Block: 1}, Cluster: "x"}); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("WriteStripe of an invalid stripe: %v", err)
		}

		if used, err := m.Used(ctx); used || err != nil {
			t.Fatalf("Used of an empty database: %v, %v", used, err)
		}
		if err := m.RaiseMaxID(ctx, leaf.Alloc{Tag: "t", MaxID: 50, Step: 3, Description: "d"}); err != nil {
			t.Fatal(err)
		}
		if used, err := m.Used(ctx); !used || err != nil {
			t.Fatalf("Used with a row: %v, %v", used, err)
		}
		if err := m.RaiseMaxID(ctx, leaf.Alloc{Tag: "t", MaxID: 20, Step: 9}); err != nil {
			t.Fatal(err)
		}
		if a, err := m.Alloc(ctx, "t"); err != nil || a.MaxID != 50 || a.Step != 3 || a.Description != "d" {
			t.Errorf("after raising to 50 and to 20: %+v, %v; want max_id 50, step 3", a, err)
		}
		if err := m.RaiseMaxID(ctx, leaf.Alloc{Tag: "t", MaxID: 70, Step: 9}); err != nil {
			t.Fatal(err)
		}
		if a, _ := m.Alloc(ctx, "t"); a.MaxID != 70 || a.Step != 3 {
			t.Errorf("after raising to 70: %+v", a)
		}
		if err := m.DeleteTag(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		for _, x := range []int64{60, 90, 80} {
			if err := m.RaiseTombstone(ctx, "t", x); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.RaiseTombstone(ctx, "u", 5); err != nil {
			t.Fatal(err)
		}
		tombs, err := m.Tombstones(ctx)
		if err != nil || len(tombs) != 2 || tombs["t"] != 90 || tombs["u"] != 5 {
			t.Errorf("Tombstones = %v, %v; want t 90, u 5", tombs, err)
		}
	})
}

func TestMain(m *testing.M) {
	// The driver logs every connection the outage tests cut.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	os.Exit(m.Run())
}

// TestSegmentStore runs the conformance suite every segment store passes
// over two databases of each kind. Each opener call opens the members anew,
// as another server would, and the store closes them.
func TestSegmentStore(t *testing.T) {
	if testing.Short() {
		// About 200 databases per kind: five minutes under -race, which
		// runs the short suite. The tests stage runs it in full.
		t.Skip("makes about 200 databases per kind")
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			leaftest.TestSegmentStore(t, func(t *testing.T) func() (leaf.SegmentStore, error) {
				dsns := newDBs(t, k, 2)
				opts := testConfig()
				dbs := make([]multidb.Database, len(dsns))
				for i, dsn := range dsns {
					dbs[i] = multidb.Database{Name: fmt.Sprintf("db%d", i), Connect: func(ctx context.Context) (multidb.Member, error) { return k.member(ctx, dsn) }}
				}
				if _, err := multidb.Init(t.Context(), dbs, opts); err != nil {
					t.Fatalf("init: %v", err)
				}
				return func() (leaf.SegmentStore, error) {
					ctx := context.Background()
					opened := make([]multidb.Database, len(dsns))
					for i, dsn := range dsns {
						m, err := k.member(ctx, dsn)
						if err != nil {
							for _, o := range opened[:i] {
								_ = o.Store.Close()
							}
							return nil, err
						}
						opened[i] = multidb.Database{Name: fmt.Sprintf("db%d", i), Store: m}
					}
					s, err := multidb.Open(ctx, opened, opts)
					if err != nil {
						for _, o := range opened {
							_ = o.Store.Close()
						}
						return nil, err
					}
					return s, nil
				}
			}, leaftest.StoreTraits{Striped: true})
		})
	}
}
