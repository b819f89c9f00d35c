package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
	"github.com/leafgo/leaf/internal/testutil"
)

// recorder wraps the real driver's connector and records every statement
// sent through it, text and arguments apart, so that a test can see what
// SQL a tag produced.
type recorder struct {
	driver.Connector
	mu    sync.Mutex
	stmts []recorded
}

type recorded struct {
	query string
	args  []driver.NamedValue
}

func (r *recorder) add(q string, args []driver.NamedValue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, recorded{q, args})
}

func (r *recorder) since(n int) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.stmts[n:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stmts)
}

func (r *recorder) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := r.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recConn{c, r}, nil
}

// recConn passes everything to the driver's connection, recording the
// statements on the way.
type recConn struct {
	driver.Conn
	r *recorder
}

func (c *recConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.r.add(q, args)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *recConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.r.add(q, args)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *recConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.r.add(q, nil)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c *recConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *recConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *recConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

// recordedStore is a store on a fresh MariaDB database whose statements rec
// records; db is its pool.
func recordedStore(t *testing.T) (*sqlstore.Store, *recorder, *sql.DB) {
	t.Helper()
	cfg, err := config(testutil.MySQL(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Connector: conn}
	db := sql.OpenDB(rec)
	t.Cleanup(func() { db.Close() })
	for _, q := range schema {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return sqlstore.New(db, dialect, sqlstore.Config{}), rec, db
}

// TestTagsNeverReachSQLText runs every store operation on a real MariaDB
// through a recording connector. A hostile tag is refused before any
// statement is sent; a valid one travels only as an argument, never in a
// statement's text.
func TestTagsNeverReachSQLText(t *testing.T) {
	ctx := t.Context()
	s, rec, _ := recordedStore(t)
	const victim, owner = "victim", "http://10.0.0.1:8080#p1"
	if err := s.CreateTag(ctx, leaf.Alloc{Tag: victim, MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}

	ops := []struct {
		name string
		run  func(tag string) error
	}{
		{"CreateTag", func(tag string) error { return s.CreateTag(ctx, leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}) }},
		{"Reserve", func(tag string) error { _, err := s.Reserve(ctx, tag, 10); return err }},
		{"Alloc", func(tag string) error { _, err := s.Alloc(ctx, tag); return err }},
		{"SetStep", func(tag string) error { return s.SetStep(ctx, tag, 20) }},
		{"GiveBack", func(tag string) error { _, err := s.GiveBack(ctx, tag, 15, 21); return err }},
		{"SetOrdered(true)", func(tag string) error { return s.SetOrdered(ctx, tag, true) }},
		{"TagLease", func(tag string) error { _, _, err := s.TagLease(ctx, tag); return err }},
		{"AcquireTag", func(tag string) error {
			_, err := s.AcquireTag(ctx, tag, owner, time.Minute, leaf.TagLease{})
			return err
		}},
		{"ReserveOwned", func(tag string) error { _, err := s.ReserveOwned(ctx, tag, owner, 1, 10); return err }},
		{"RenewTag", func(tag string) error { _, err := s.RenewTag(ctx, tag, owner, 1, time.Minute); return err }},
		{"RenewTags", func(tag string) error {
			rs, err := s.RenewTags(ctx, owner, []leaf.TagToken{{Tag: tag, Token: 1}}, time.Minute)
			if err == nil {
				err = rs[0].Err
			}
			return err
		}},
		{"ReleaseTag", func(tag string) error {
			ok, err := s.ReleaseTag(ctx, tag, owner, 1)
			if err == nil && !ok {
				err = errors.New("not released")
			}
			return err
		}},
		{"SetOrdered(false)", func(tag string) error { return s.SetOrdered(ctx, tag, false) }},
		{"DeleteTag", func(tag string) error { return s.DeleteTag(ctx, tag) }},
	}
	hostile := []string{
		"", "x' OR '1'='1", "victim'; DROP TABLE leaf_alloc; --", "victim' -- ", "`victim`", `victim"`, `victim\`,
		"victim%", "vic tim", "victim\x00", "victim\n", "vïctim", "victim/1", "victim;", strings.Repeat("v", leaf.MaxTagLen+1),
	}
	for _, op := range ops {
		for _, tag := range hostile {
			before := rec.count()
			err := op.run(tag)
			if !errors.Is(err, leaf.ErrInvalidTag) {
				t.Errorf("%s(%q) = %v, want ErrInvalidTag", op.name, tag, err)
			}
			if got := rec.since(before); len(got) > 0 {
				t.Errorf("%s(%q) sent SQL before refusing the tag: %q", op.name, tag, got[0].query)
			}
		}
	}

	// A valid tag using every kind of byte allowed.
	const tag = "Param.Check_tag:09-z"
	for _, op := range ops {
		before := rec.count()
		if err := op.run(tag); err != nil {
			t.Fatalf("%s(%q): %v", op.name, tag, err)
		}
		sent := rec.since(before)
		carried := false
		for _, st := range sent {
			if strings.Contains(st.query, tag) {
				t.Errorf("%s: the tag is in the statement's text: %q", op.name, st.query)
			}
			for _, a := range st.args {
				carried = carried || a.Value == tag
			}
		}
		if !carried {
			t.Errorf("%s sent %d statements, none with the tag as an argument: %+v", op.name, len(sent), sent)
		}
	}
	// The table and the other row survived all of it.
	a, err := s.Alloc(ctx, victim)
	if err != nil || a.MaxID != 1 || a.Step != 10 {
		t.Errorf("victim row = %+v, %v; want it untouched", a, err)
	}
}

// TestRenewTagsBatched: RenewTags renews a batch of leases with one
// locking read and one UPDATE, in one transaction per leaf.MaxRenewBatch
// leases, not a transaction per lease. A tag spelled in another case than
// its row is renewed, as RenewTag's WHERE tag = ? finds the row under the
// column's collation.
func TestRenewTagsBatched(t *testing.T) {
	ctx := t.Context()
	s, rec, db := recordedStore(t)
	const owner = "http://10.0.0.1:8080#b1"
	n := 2*leaf.MaxRenewBatch + 1
	leases := make([]leaf.TagToken, n)
	var values []string
	for i := range leases {
		leases[i] = leaf.TagToken{Tag: fmt.Sprintf("b%04d", i), Token: 1}
		values = append(values, fmt.Sprintf("('b%04d', '%s', 1, %s + 60000000)", i, owner, dialect.ClockMicros))
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO leaf_tag_owner (tag, owner, token, lease_until) VALUES "+strings.Join(values, ", ")); err != nil {
		t.Fatal(err)
	}
	leases[0].Tag = "b9999"   // no row
	leases[n-1].Tag = "B0000" // the row b0000, which no other lease names
	before := rec.count()
	got, err := s.RenewTags(ctx, owner, leases, 2*time.Minute)
	if err != nil || len(got) != n {
		t.Fatalf("RenewTags = %d results, %v", len(got), err)
	}
	var locks, updates int
	for _, st := range rec.since(before) {
		switch {
		case strings.HasPrefix(st.query, "SELECT") && strings.HasSuffix(st.query, "FOR UPDATE"):
			locks++
		case strings.HasPrefix(st.query, "UPDATE leaf_tag_owner"):
			updates++
		default:
			t.Errorf("RenewTags sent %q", st.query)
		}
	}
	if locks != 3 || updates != 3 {
		t.Errorf("RenewTags of %d leases: %d locking reads, %d updates; want 3 of each", n, locks, updates)
	}
	for i, r := range got {
		if i == 0 {
			if !errors.Is(r.Err, leaf.ErrLeaseLost) {
				t.Errorf("RenewTags[0] (%s, no row) = %+v, %v; want ErrLeaseLost", leases[0].Tag, r.Lease, r.Err)
			}
			continue
		}
		if r.Err != nil || r.Lease.Tag != leases[i].Tag || r.Lease.Left <= time.Minute {
			t.Fatalf("RenewTags[%d] (%s) = %+v, %v; want renewed", i, leases[i].Tag, r.Lease, r.Err)
		}
	}
}
