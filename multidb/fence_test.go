package multidb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the raw connections of the hammer

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/multidb"
	"github.com/leafgo/leaf/segment"
)

// boundOf is the bound Migrate reported for tag.
func boundOf(t *testing.T, rep multidb.Report, tag string) int64 {
	t.Helper()
	for _, mv := range rep.Tags {
		if mv.Tag == tag {
			return mv.Bound
		}
	}
	t.Fatalf("migration report %+v has no tag %q", rep, tag)
	return 0
}

// TestFencePlainStoreMigrated: a store of one database (and a segment
// generator over it, as a server runs it) stays open while the database is
// migrated to two. Its next reserve is refused, the generator answers not
// ready once its buffered IDs (all below the migration's bound) are
// spent, and never issues an ID of the new layout; a store over the new
// list works.
func TestFencePlainStoreMigrated(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 2)
		single, err := k.single(ctx, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = single.Close() })
		create(t, single.(leaf.SegmentAdmin), "t", 0, 10)
		create(t, single.(leaf.SegmentAdmin), "raw", 0, 10)
		set := segment.DefaultConfig()
		set.Store, set.Logger = single, quiet()
		g, err := segment.New(ctx, set)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		var before []int64
		for range 15 {
			id, err := g.NextID(ctx, "t")
			if err != nil {
				t.Fatalf("NextID before the migration: %v", err)
			}
			before = append(before, id)
		}
		drain(t, single, "raw", 2)

		rep, err := multidb.Migrate(ctx, members(t, k, dsns[:1]), members(t, k, dsns), testConfig())
		if err != nil {
			t.Fatalf("migrate 1 to 2 with the plain store open: %v", err)
		}

		_, err = single.Reserve(ctx, "raw", 0)
		if !errors.Is(err, leaf.ErrStripeLayout) || !strings.Contains(err.Error(), "of 2") || !strings.Contains(err.Error(), "restart the server") {
			t.Errorf("reserve on the plain store after the migration: %v, want ErrStripeLayout naming the new record", err)
		}
		if a, err := single.Alloc(ctx, "raw"); err != nil || a.MaxID > boundOf(t, rep, "raw") {
			t.Errorf("raw after the refused reserve: %+v, %v; want max_id unmoved, at most the bound %d", a, err, boundOf(t, rep, "raw"))
		}

		bound := boundOf(t, rep, "t")
		after := []int64{}
		for i := 0; ; i++ {
			id, err := g.NextID(ctx, "t")
			if err != nil {
				if !errors.Is(err, leaf.ErrNotReady) {
					t.Errorf("generator over the fenced store: %v, want ErrNotReady", err)
				}
				break
			}
			if id >= bound {
				t.Fatalf("generator over the fenced store issued %d, at or above the migration's bound %d: an ID of the new layout", id, bound)
			}
			after = append(after, id)
			if i > 100000 {
				t.Fatal("generator over the fenced store kept issuing")
			}
		}
		testutil.CheckUnique(t, append(append([]int64{}, before...), after...))

		s := open(t, k, dsns, testConfig())
		above(t, "t on the new list", append(before, after...), drain(t, s, "t", 4))
	})
}

// TestFenceMultiStoreMigrated: a store over two databases stays open while
// they are migrated to three. Its next reserve fails on both with
// ErrStripeLayout, both are taken out (not verified) and stay out after
// their probes; a store opened on the new list works.
func TestFenceMultiStoreMigrated(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 3)
		s := open(t, k, dsns[:2], testConfig())
		create(t, s, "t", 0, 5)
		before := drain(t, s, "t", 4)

		if _, err := multidb.Migrate(ctx, members(t, k, dsns[:2]), members(t, k, dsns), testConfig()); err != nil {
			t.Fatalf("migrate 2 to 3 with a store open: %v", err)
		}
		_, err := s.Reserve(ctx, "t", 0)
		if !errors.Is(err, leaf.ErrStripeLayout) || !strings.Contains(err.Error(), "db0") || !strings.Contains(err.Error(), "db1") {
			t.Fatalf("reserve after the migration: %v, want ErrStripeLayout from db0 and db1", err)
		}
		for _, d := range s.Databases() {
			if d.Verified || d.Healthy || !strings.Contains(d.LastError, "of 3") {
				t.Errorf("status after the fenced reserve: %+v, want taken out, naming the new record", d)
			}
		}
		testutil.WaitFor(t, "a probe of each database", func() bool {
			for _, d := range s.Databases() {
				if d.ProbeFailures == 0 {
					return false
				}
			}
			return true
		})
		for _, d := range s.Databases() {
			if d.Verified {
				t.Errorf("%s verified again by a probe: %+v", d.Name, d)
			}
		}
		if _, err := s.Reserve(ctx, "t", 0); err == nil {
			t.Error("reserve with every database taken out succeeded")
		}

		s3 := open(t, k, dsns, testConfig())
		above(t, "t on the new list", before, drain(t, s3, "t", 6))
	})
}

// TestFenceSwappedRecord: a member whose record is replaced behind the
// store's back (another database behind the same address, or a record
// rewritten) is taken out at its next reserve; the other keeps serving.
func TestFenceSwappedRecord(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 2)
		// db0 alone serves once db1 is taken out: a reserve over the 1s
		// default member timeout (a busy machine: a clean clone's CI beside
		// two CPU burners) would have nowhere else to go, and fail the test
		// with no fence involved.
		opts := testConfig()
		opts.MemberTimeout = 10 * time.Second
		s := open(t, k, dsns, opts)
		create(t, s, "t", 0, 5)
		m := members(t, k, dsns[1:])[0].Store
		had, _, err := m.ReadStripe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other := had
		other.Cluster = "another"
		if ok, err := m.ReplaceStripe(ctx, had, other); !ok || err != nil {
			t.Fatalf("replace the record: %v, %v", ok, err)
		}
		var all []int64
		for range 6 {
			all = append(all, drain(t, s, "t", 1)...)
		}
		st := s.Databases()
		if !st[0].Verified || st[0].Reserves != 6 || st[1].Verified || st[1].Reserves != 0 {
			t.Errorf("status %+v, want db0 serving all 6 reserves and db1 taken out", st)
		}
		testutil.CheckUnique(t, all)
	})
}

// rawDB opens dsn with the kind's driver, for statements no store offers.
func rawDB(t testing.TB, k kind, dsn string) *sql.DB {
	t.Helper()
	driver := map[string]string{"mysql": "mysql", "postgres": "pgx"}[k.name]
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestFenceHammer: eight goroutines reserve from fenced stores (a store
// over two databases, whose records exist, and a store of one database,
// which has none) while other transactions keep reading the records under
// a shared lock and rewriting them unchanged: no reserve fails (no
// deadlock the retries cannot absorb), and no ID is issued twice.
func TestFenceHammer(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		ctx := t.Context()
		dsns := newDBs(t, k, 3)
		multi := open(t, k, dsns[:2], testConfig())
		create(t, multi, "h", 0, 7)
		single, err := k.single(ctx, dsns[2])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = single.Close() })
		create(t, single.(leaf.SegmentAdmin), "h", 0, 7)
		share := " FOR SHARE"
		if k.name == "mysql" {
			share = " LOCK IN SHARE MODE"
		}
		raws := []*sql.DB{rawDB(t, k, dsns[0]), rawDB(t, k, dsns[1]), rawDB(t, k, dsns[2])}
		recMembers := members(t, k, dsns[:2])

		stop := make(chan struct{})
		var lockers sync.WaitGroup
		lockers.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				raw := raws[n%len(raws)]
				tx, err := raw.BeginTx(ctx, nil)
				if err != nil {
					t.Errorf("begin: %v", err)
					return
				}
				var one int
				err = tx.QueryRowContext(ctx, "SELECT 1 FROM leaf_stripe WHERE id = 1"+share).Scan(&one)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					t.Errorf("shared read of the record: %v", err)
				}
				// Held across a reserve or two of the others.
				_ = tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM leaf_alloc").Scan(&one)
				if err := tx.Commit(); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
				if n%len(raws) < len(recMembers) {
					m := recMembers[n%len(raws)].Store
					rec, _, err := m.ReadStripe(ctx)
					if err == nil {
						_, err = m.ReplaceStripe(ctx, rec, rec)
					}
					if err != nil {
						t.Errorf("rewrite the record unchanged: %v", err)
					}
				}
			}
		})

		var (
			mu  sync.Mutex
			all = map[string][]int64{}
			wg  sync.WaitGroup
		)
		for g := range 8 {
			st, key := leaf.SegmentStore(multi), "multi"
			if g%2 == 1 {
				st, key = single, "single"
			}
			wg.Go(func() {
				var mine []int64
				for range 20 {
					r, err := st.Reserve(ctx, "h", 0)
					if err != nil {
						t.Errorf("%s reserve: %v", key, err)
						return
					}
					mine = append(mine, ids(t, r)...)
				}
				mu.Lock()
				all[key] = append(all[key], mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		close(stop)
		lockers.Wait()
		for key, got := range all {
			if len(got) != 4*20*7 {
				t.Errorf("%s: %d IDs, want %d", key, len(got), 4*20*7)
			}
			testutil.CheckUnique(t, got)
		}
		for _, d := range multi.Databases() {
			if !d.Verified || d.Failures != 0 {
				t.Errorf("status after the hammer: %+v, want verified without failures", d)
			}
		}
	})
}

// failRaise is a real member whose raises fail: a migration interrupted
// after its fences.
type failRaise struct{ multidb.Migratable }

func (failRaise) RaiseMaxID(context.Context, leaf.Alloc) error {
	return errors.New("injected: the database went away")
}

// TestMigrateInterruptedAfterFence: a migration that stops after fencing
// the old databases leaves every server of the old layout refused and no
// server able to start, and a second run with the same lists finishes it,
// also when it changes the block of several databases (the bounds need the
// old block, which the fences keep).
func TestMigrateInterruptedAfterFence(t *testing.T) {
	cases := []struct {
		name  string
		from  int
		block int64
	}{
		{"one to two", 1, 0},
		{"two to three, new block", 2, 20},
	}
	eachKind(t, func(t *testing.T, k kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := t.Context()
				dsns := newDBs(t, k, c.from+1)
				var (
					running leaf.SegmentStore
					reopen  func() error
				)
				if c.from == 1 {
					single, err := k.single(ctx, dsns[0])
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = single.Close() })
					create(t, single.(leaf.SegmentAdmin), "t", 0, 10)
					running = single
					reopen = func() error {
						st, err := k.single(ctx, dsns[0])
						if err == nil {
							st.Close()
						}
						return err
					}
				} else {
					s := open(t, k, dsns[:c.from], testConfig())
					create(t, s, "t", 0, 10)
					running = s
					reopen = func() error {
						_, err := multidb.Open(ctx, members(t, k, dsns[:c.from]), testConfig())
						return err
					}
				}
				before := drain(t, running, "t", 5)
				opts := testConfig()
				opts.Block = c.block

				to := members(t, k, dsns)
				to[c.from].Store = failRaise{to[c.from].Store.(multidb.Migratable)}
				if _, err := multidb.Migrate(ctx, members(t, k, dsns[:c.from]), to, opts); err == nil || !strings.Contains(err.Error(), "injected") {
					t.Fatalf("migrate with a failing raise: %v", err)
				}
				if _, err := running.Reserve(ctx, "t", 0); !errors.Is(err, leaf.ErrStripeLayout) {
					t.Errorf("reserve on the running store after the fence: %v, want ErrStripeLayout", err)
				}
				if err := reopen(); !errors.Is(err, leaf.ErrStripeLayout) {
					t.Errorf("open with the old list after the fence: %v, want ErrStripeLayout", err)
				}
				if _, err := multidb.Open(ctx, members(t, k, dsns), testConfig()); !errors.Is(err, leaf.ErrStripeLayout) || !strings.Contains(err.Error(), "under way") {
					t.Errorf("open with the new list after the fence: %v, want refused as a migration under way", err)
				}

				rep, err := multidb.Migrate(ctx, members(t, k, dsns[:c.from]), members(t, k, dsns), opts)
				if err != nil {
					t.Fatalf("migrate again: %v", err)
				}
				if want := max(c.block, 10); c.from > 1 && rep.Block != want {
					t.Errorf("report %+v, want blocks of %d", rep, want)
				}
				s := open(t, k, dsns, testConfig())
				after := drain(t, s, "t", 8)
				above(t, "after the resumed migration", before, after)
				testutil.CheckUnique(t, after)
			})
		}
	})
}

// TestMigrateWhileReserving runs a migration while servers of the old
// layout keep reserving (against the instructions): each reserve either
// commits before the migration reads its bounds, or is refused; no ID
// issued before is issued again under the new layout.
func TestMigrateWhileReserving(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		for _, from := range []int{1, 2} {
			t.Run(fmt.Sprintf("from %d", from), func(t *testing.T) {
				ctx := t.Context()
				dsns := newDBs(t, k, from+1)
				var st leaf.SegmentStore
				if from == 1 {
					single, err := k.single(ctx, dsns[0])
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = single.Close() })
					create(t, single.(leaf.SegmentAdmin), "t", 0, 3)
					st = single
				} else {
					s := open(t, k, dsns[:from], testConfig())
					create(t, s, "t", 0, 3)
					st = s
				}
				var (
					mu      sync.Mutex
					issued  []int64
					started sync.WaitGroup
					wg      sync.WaitGroup
				)
				for range 4 {
					started.Add(1)
					wg.Go(func() {
						var mine []int64
						defer func() {
							mu.Lock()
							issued = append(issued, mine...)
							mu.Unlock()
						}()
						for n := range 400 {
							r, err := st.Reserve(ctx, "t", 0)
							if n == 0 {
								started.Done()
							}
							if err != nil {
								if !errors.Is(err, leaf.ErrStripeLayout) && !strings.Contains(err.Error(), "no database verified") {
									t.Errorf("reserve during the migration: %v, want ErrStripeLayout", err)
								}
								return
							}
							mine = append(mine, ids(t, r)...)
						}
					})
				}
				started.Wait()
				if _, err := multidb.Migrate(ctx, members(t, k, dsns[:from]), members(t, k, dsns), testConfig()); err != nil {
					t.Fatalf("migrate while reserving: %v", err)
				}
				wg.Wait()
				testutil.CheckUnique(t, issued)
				s := open(t, k, dsns, testConfig())
				after := drain(t, s, "t", 10)
				above(t, "after a migration under load", issued, after)
				t.Logf("%d IDs issued by the old layout, then the new one from %d", len(issued), after[0])
			})
		}
	})
}
