package testutil

import (
	"context"
	"database/sql"
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestMariaDB walks a private instance through its life: a row survives a
// kill -9 and a restart, a stopped server answers nothing until continued,
// and the cleanup leaves no process behind.
func TestMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a mariadbd")
	}
	var pid int
	t.Run("life", func(t *testing.T) {
		m := NewMariaDB(t)
		dsn := m.CreateDatabase(t, "leaf")
		query := func(ctx context.Context, q string) (int, error) {
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				return 0, err
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, q); err != nil {
				return 0, err
			}
			var n int
			err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n)
			return n, err
		}
		ctx := t.Context()
		if _, err := query(ctx, "CREATE TABLE t (x INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
			t.Fatal(err)
		}
		if n, err := query(ctx, "INSERT INTO t VALUES (1)"); err != nil || n != 1 {
			t.Fatalf("insert: %d rows, %v", n, err)
		}

		m.Kill9()
		if m.PID() != 0 {
			t.Fatal("PID after Kill9 should be 0")
		}
		if _, err := query(ctx, "DO 0"); err == nil {
			t.Fatal("a killed server answered")
		}
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := query(ctx, "INSERT INTO t VALUES (2)"); err != nil || n != 2 {
			t.Fatalf("after restart: %d rows, %v; want the committed row kept", n, err)
		}

		m.Stop()
		sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := query(sctx, "DO 0")
		cancel()
		if err == nil {
			t.Fatal("a stopped server answered")
		}
		m.Cont()
		if n, err := query(ctx, "INSERT INTO t VALUES (3)"); err != nil || n != 3 {
			t.Fatalf("after SIGCONT: %d rows, %v", n, err)
		}
		m.Stop() // the cleanup must end a stopped server too
		pid = m.PID()
	})
	if pid == 0 {
		t.Fatal("no PID recorded")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("mariadbd %d still exists after the test's cleanup (%v)", pid, err)
	}
}
