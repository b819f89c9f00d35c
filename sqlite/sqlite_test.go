package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/sqlite"
)

func opener(path string) leaftest.Opener {
	return func() (leaf.SegmentStore, error) {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

func TestSegmentStore(t *testing.T) {
	leaftest.TestSegmentStore(t, func(t *testing.T) func() (leaf.SegmentStore, error) {
		return opener(testutil.SQLitePath(t))
	}, leaftest.StoreTraits{})
}

// leafDDL is Leaf's scripts/leaf_alloc.sql less what SQLite cannot parse
// (ENGINE, ON UPDATE).
const leafDDL = "CREATE TABLE `leaf_alloc` (\n" +
	"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
	"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
	"  `step` int(11) NOT NULL,\n" +
	"  `description` varchar(256)  DEFAULT NULL,\n" +
	"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	")"

func TestExistingLeafTable(t *testing.T) {
	path := testutil.SQLitePath(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{leafDDL, leaftest.LeafSampleInsert} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	leaftest.TestExistingLeafTable(t, opener(path))
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		path    string
		wantErr error
	}{
		{"CreatesParentDirs", filepath.Join(dir, "a", "b", "leaf.db"), nil},
		{"Relative", filepath.Join("rel", "leaf.db"), nil},
		{"Empty", "", leaf.ErrInvalidArgument},
		{"QuestionMark", filepath.Join(dir, "what?.db"), leaf.ErrInvalidArgument},
	}
	t.Chdir(dir)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), c.path)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("Open(%q) = %v, want %v", c.path, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", c.path, err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if _, err := os.Stat(c.path); err != nil {
				t.Errorf("database file: %v", err)
			}
			var mode string
			if err := s.DB().QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode = %q, %v; want wal", mode, err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	s, err := sqlite.Open(t.Context(), testutil.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTag(t.Context(), leaf.Alloc{Tag: "t", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := []struct {
		name string
		err  error
	}{
		{"Reserve", func() error { _, err := s.Reserve(ctx, "t", 0); return err }()},
		{"GiveBack", func() error { _, err := s.GiveBack(ctx, "t", 1, 11); return err }()},
		{"Tags", func() error { _, err := s.Tags(ctx); return err }()},
		{"Allocs", func() error { _, err := s.Allocs(ctx); return err }()},
		{"Alloc", func() error { _, err := s.Alloc(ctx, "t"); return err }()},
		{"Ping", s.Ping(ctx)},
		{"CreateTag", s.CreateTag(ctx, leaf.Alloc{Tag: "u", MaxID: 1, Step: 1})},
		{"SetStep", s.SetStep(ctx, "t", 5)},
		{"DeleteTag", s.DeleteTag(ctx, "t")},
	}
	for _, c := range calls {
		if !errors.Is(c.err, leaf.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", c.name, c.err)
		}
	}
}

// The child side of TestProcesses: reserve from the file in
// LEAF_SQLITE_CHILD and print each range as "start end".
func TestMain(m *testing.M) {
	if path := os.Getenv("LEAF_SQLITE_CHILD"); path != "" {
		os.Exit(child(path))
	}
	os.Exit(m.Run())
}

const (
	childReserves   = 40
	childGoroutines = 4
)

func child(path string) int {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	var (
		mu  sync.Mutex
		out = bufio.NewWriter(os.Stdout)
		wg  sync.WaitGroup
		bad bool
	)
	for g := range childGoroutines {
		wg.Go(func() {
			for i := range childReserves / childGoroutines {
				r, err := s.Reserve(ctx, "proc", (g+i)%3*4) // stored, 4 or 8
				mu.Lock()
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					bad = true
				} else {
					fmt.Fprintln(out, r.Start(), r.MaxID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := out.Flush(); err != nil || bad {
		return 1
	}
	return 0
}

// TestProcesses runs three processes reserving from one file at once: SQLite's
// file locks, not anything in one process, keep their ranges apart.
func TestProcesses(t *testing.T) {
	path := testutil.SQLitePath(t)
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateTag(t.Context(), leaf.Alloc{Tag: "proc", MaxID: 1, Step: 3}); err != nil {
		t.Fatal(err)
	}
	const procs = 3
	outs := make([]bytes.Buffer, procs)
	var wg sync.WaitGroup
	for i := range procs {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LEAF_SQLITE_CHILD="+path)
		cmd.Stdout = &outs[i]
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		wg.Go(func() {
			if err := cmd.Run(); err != nil {
				t.Errorf("child %d: %v\n%s", i, err, stderr.String())
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	type span struct{ start, end int64 }
	var spans []span
	for i := range outs {
		for line := range strings.Lines(outs[i].String()) {
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("child output %q", line)
			}
			a, err1 := strconv.ParseInt(f[0], 10, 64)
			b, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("child output %q", line)
			}
			spans = append(spans, span{a, b})
		}
	}
	if len(spans) != procs*childReserves {
		t.Fatalf("%d ranges, want %d", len(spans), procs*childReserves)
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.start - b.start) })
	next := int64(1)
	for _, sp := range spans {
		if sp.start != next {
			t.Fatalf("range [%d, %d) does not follow %d: overlap or gap", sp.start, sp.end, next)
		}
		next = sp.end
	}
	a, err := s.Alloc(t.Context(), "proc")
	if err != nil || a.MaxID != next {
		t.Errorf("max_id = %d, %v; want %d", a.MaxID, err, next)
	}
}

// TestConcurrentOpen opens many stores at once on new files: switching a file
// to WAL takes a lock SQLite does not wait for, and Open must absorb that.
func TestConcurrentOpen(t *testing.T) {
	for round := range 20 {
		path := testutil.SQLitePath(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				s, err := sqlite.Open(t.Context(), path)
				if err != nil {
					t.Errorf("round %d, open %d: %v", round, i, err)
					return
				}
				_ = s.Close()
			})
		}
		wg.Wait()
	}
}

func TestTombstoneKeepsHighest(t *testing.T) {
	path := testutil.SQLitePath(t)
	leaftest.TombstoneKeepsHighest(t, opener(path), func(t *testing.T, tag string, maxID int64) {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(t.Context(), "PRAGMA busy_timeout = 5000"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?", maxID, tag); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOrderedStoppedClock: on a clock that stands still (Config.Now),
// every renewal still moves the lease's Version to a value it never had,
// so that a server watching the lease tells a live owner from a dead one;
// and a watcher takes the lease over only once that clock says it ran
// out.
func TestOrderedStoppedClock(t *testing.T) {
	ctx := t.Context()
	var at atomic.Int64
	at.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	s, err := sqlite.OpenWith(ctx, testutil.SQLitePath(t), sqlite.Config{Now: func() time.Time { return time.Unix(0, at.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateTag(ctx, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOrdered(ctx, "seq", true); err != nil {
		t.Fatal(err)
	}
	const owner, other = "http://10.0.0.1:8080#a", "http://10.0.0.2:8080#b"
	l, err := s.AcquireTag(ctx, "seq", owner, time.Minute, leaf.TagLease{})
	if err != nil || l.Owner != owner || l.Left != time.Minute {
		t.Fatalf("AcquireTag = %+v, %v", l, err)
	}
	seen := []leaf.TagLease{l}
	for range 3 {
		if l, err = s.RenewTag(ctx, "seq", owner, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		rs, err := s.RenewTags(ctx, owner, []leaf.TagToken{{Tag: "seq", Token: 1}}, time.Minute)
		if err != nil || rs[0].Err != nil {
			t.Fatal(err, rs)
		}
		seen = append(seen, l, rs[0].Lease)
	}
	for i, a := range seen {
		// Each renewal on the stopped clock ends the lease a microsecond
		// past the one before.
		if !a.Held() || a.Left > time.Minute+time.Duration(i)*time.Microsecond {
			t.Errorf("lease %d = %+v, want held, at most 1m and %dµs left", i, a, i)
		}
		for _, b := range seen[:i] {
			if a.Same(b) {
				t.Fatalf("lease %d = %+v, the same as an earlier one (%+v): a renewal on a stopped clock did not move the Version", i, a, b)
			}
		}
	}
	cur, _, _ := s.TagLease(ctx, "seq")
	if !cur.Same(seen[len(seen)-1]) {
		t.Errorf("TagLease = %+v, want the last renewal's %+v", cur, seen[len(seen)-1])
	}
	if l, _ := s.AcquireTag(ctx, "seq", other, time.Minute, cur); l.Owner != owner {
		t.Errorf("AcquireTag watching a lease the clock says is held = %+v; want it still %s's", l, owner)
	}
	at.Add(int64(2 * time.Minute))
	if l, err := s.AcquireTag(ctx, "seq", other, time.Minute, cur); err != nil || l.Owner != other || l.Token != 2 {
		t.Errorf("AcquireTag watching it, once run out = %+v, %v; want %s with token 2", l, err, other)
	}
}
