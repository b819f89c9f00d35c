package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leafgo/leaf"
)

func TestRebind(t *testing.T) {
	cases := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"WHERE biz_tag = ?", "WHERE biz_tag = $1"},
		{"SET max_id = ? WHERE biz_tag = ? AND max_id = ?", "SET max_id = $1 WHERE biz_tag = $2 AND max_id = $3"},
		{"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"},
	}
	for _, c := range cases {
		if got := Rebind(c.in); got != c.want {
			t.Errorf("Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDBTimeScan(t *testing.T) {
	want := time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)
	cases := []struct {
		name string
		in   any
		want time.Time
	}{
		{"Time", want, want},
		{"Nil", nil, time.Time{}},
		{"SQLiteText", "2024-03-05 07:08:09", want},
		{"Bytes", []byte("2024-03-05 07:08:09"), want},
		{"Fraction", "2024-03-05 07:08:09.250", want.Add(250 * time.Millisecond)},
		{"RFC3339", "2024-03-05T09:08:09+02:00", want},
		{"Unix", want.Unix(), want},
	}
	for _, c := range cases {
		var d dbTime
		if err := d.Scan(c.in); err != nil {
			t.Errorf("%s: Scan(%v): %v", c.name, c.in, err)
			continue
		}
		if !d.t.Equal(c.want) {
			t.Errorf("%s: Scan(%v) = %v, want %v", c.name, c.in, d.t, c.want)
		}
	}
	for _, bad := range []any{"yesterday", 1.5} {
		var d dbTime
		if err := d.Scan(bad); err == nil {
			t.Errorf("Scan(%v) = %v, want an error", bad, d.t)
		}
	}
}

// busyDB opens a SQLite file that fails at once with SQLITE_BUSY when another
// connection holds the write lock, so the store's own retry is what waits.
func busyDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestReserveRetriesBusy(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "busy.db")
	holder := busyDB(t, path)
	for _, q := range []string{
		"CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) NOT NULL PRIMARY KEY, max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, description VARCHAR(256), update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
		"INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)",
	} {
		if _, err := holder.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var busy atomic.Int32
	d := Dialect{
		Name:      "sqlite",
		Returning: true,
		IsRetryable: func(err error) bool {
			var e *sqlite.Error
			if errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY {
				busy.Add(1)
				return true
			}
			return false
		},
	}

	cases := []struct {
		name     string
		attempts int
		wantErr  bool
	}{
		{"GivesUp", 1, true},
		{"Retries", 50, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			busy.Store(0)
			s := New(busyDB(t, path), d, Config{MaxAttempts: c.attempts, RetryBackoff: 5 * time.Millisecond})
			tx, err := holder.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
			if err != nil {
				t.Fatal(err)
			}
			before := s.alloc(t, ctx)
			release := time.AfterFunc(50*time.Millisecond, func() { _ = tx.Rollback() })
			defer release.Stop()
			r, err := s.Reserve(ctx, "t", 0)
			if c.wantErr {
				_ = tx.Rollback()
				var e *sqlite.Error
				if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_BUSY {
					t.Fatalf("Reserve with one attempt under a held lock = %+v, %v; want SQLITE_BUSY", r, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			if busy.Load() == 0 {
				t.Errorf("Reserve never met SQLITE_BUSY; the test did not test the retry")
			}
			if r.Start() != before || r.Step != 10 {
				t.Errorf("Reserve = [%d, %d), want [%d, %d)", r.Start(), r.MaxID, before, before+10)
			}
		})
	}
}

func (s *Store) alloc(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	a, err := s.Alloc(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	return a.MaxID
}

func TestRetryStopsOnContext(t *testing.T) {
	errTransient := errors.New("transient")
	s := &Store{d: Dialect{IsRetryable: func(err error) bool { return errors.Is(err, errTransient) }}, attempts: 1000, backoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	calls := 0
	err := s.retry(ctx, func() error { calls++; return errTransient })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errTransient) {
		t.Errorf("retry past the deadline = %v, want DeadlineExceeded and the last error", err)
	}
	if calls < 2 || calls >= 1000 {
		t.Errorf("%d attempts before the deadline", calls)
	}

	calls = 0
	err = s.retry(t.Context(), func() error { calls++; return leaf.ErrTagNotFound })
	if !errors.Is(err, leaf.ErrTagNotFound) || calls != 1 {
		t.Errorf("a permanent error was retried: %d calls, %v", calls, err)
	}
}
