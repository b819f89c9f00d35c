package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leafgo/leaf"
)

const renewOwner = "http://10.0.0.1:8080#r1"

// ownerDB is a SQLite leaf_tag_owner (schema: OwnerSchema or a variant)
// whose tags are held by renewOwner with token 1 for a minute, and a Store
// on it with Go's clock.
func ownerDB(t *testing.T, schema string, tags []string) (*Store, *sql.DB) {
	t.Helper()
	ctx := t.Context()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "owner.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, schema); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Minute).UnixMicro()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if _, err := tx.ExecContext(ctx, "INSERT INTO leaf_tag_owner (tag, owner, token, lease_until) VALUES (?, ?, 1, ?)", tag, renewOwner, until); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return New(db, Dialect{Name: "sqlite"}, Config{}), db
}

// TestRenewTagsBatchFails: a batch whose transaction fails answers its
// failure for each of its leases, not a lost lease, and renews none of
// them; the batches before and after it are renewed.
func TestRenewTagsBatchFails(t *testing.T) {
	ctx := t.Context()
	n := 2*leaf.MaxRenewBatch + 10
	leases := make([]leaf.TagToken, n)
	tags := make([]string, n)
	for i := range leases {
		tags[i] = fmt.Sprintf("t%04d", i)
		leases[i] = leaf.TagToken{Tag: tags[i], Token: 1}
	}
	s, db := ownerDB(t, OwnerSchema, tags)
	const failing = "t0700" // in the second batch
	trigger := "CREATE TRIGGER fail_one BEFORE UPDATE ON leaf_tag_owner WHEN NEW.tag = '" + failing + "' BEGIN SELECT RAISE(ABORT, 'boom'); END"
	if _, err := db.ExecContext(ctx, trigger); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(time.Minute).UnixMicro()
	got, err := s.RenewTags(ctx, renewOwner, leases, 2*time.Minute)
	if err != nil || len(got) != n {
		t.Fatalf("RenewTags = %d results, %v", len(got), err)
	}
	for i, r := range got {
		inFailed := i >= leaf.MaxRenewBatch && i < 2*leaf.MaxRenewBatch
		switch {
		case inFailed && (r.Err == nil || errors.Is(r.Err, leaf.ErrLeaseLost) || !strings.Contains(r.Err.Error(), "boom") || !strings.Contains(r.Err.Error(), tags[i])):
			t.Fatalf("RenewTags[%d] in the failed batch = %+v, %v; want the batch's failure, naming the tag", i, r.Lease, r.Err)
		case !inFailed && (r.Err != nil || r.Lease.Tag != tags[i] || r.Lease.Left <= time.Minute):
			t.Fatalf("RenewTags[%d] = %+v, %v; want renewed", i, r.Lease, r.Err)
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT tag, lease_until FROM leaf_tag_owner ORDER BY tag")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		var tag string
		var until int64
		if err := rows.Scan(&tag, &until); err != nil {
			t.Fatal(err)
		}
		inFailed := i >= leaf.MaxRenewBatch && i < 2*leaf.MaxRenewBatch
		if renewed := until > before; renewed == inFailed {
			t.Fatalf("%s: lease_until %d, renewed %v; want renewed %v", tag, until, renewed, !inFailed)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRenewTagsCollation: a row the database matched by its collation
// (NOCASE here, MySQL's default collation ignores case too) answers the
// tags as given, as RenewTag's WHERE tag = ? would, unless a tag of the
// batch spells it exactly; where the collation compares bytes, a tag
// differing in case has no row.
func TestRenewTagsCollation(t *testing.T) {
	ctx := t.Context()
	nocase := strings.Replace(OwnerSchema, "tag         VARCHAR(128) NOT NULL", "tag         VARCHAR(128) COLLATE NOCASE NOT NULL", 1)
	if nocase == OwnerSchema {
		t.Fatal("OwnerSchema changed; fix the test's NOCASE variant")
	}
	cases := []struct {
		name   string
		schema string
		leases []string
		want   []bool // renewed
	}{
		{"NoCase", nocase, []string{"MIXED"}, []bool{true}},
		{"NoCaseTwoSpellings", nocase, []string{"MIXED", "miXed", "mixed-not"}, []bool{true, true, false}},
		// The row spelled as asked answers that spelling only: whether the
		// database also matched MIXED to it is unknown.
		{"NoCaseExactToo", nocase, []string{"MIXED", "Mixed"}, []bool{false, true}},
		{"Binary", OwnerSchema, []string{"MIXED", "Mixed"}, []bool{false, true}},
		{"BinaryOnly", OwnerSchema, []string{"MIXED"}, []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := ownerDB(t, c.schema, []string{"Mixed"})
			leases := make([]leaf.TagToken, len(c.leases))
			for i, tag := range c.leases {
				leases[i] = leaf.TagToken{Tag: tag, Token: 1}
			}
			got, err := s.RenewTags(ctx, renewOwner, leases, 2*time.Minute)
			if err != nil || len(got) != len(leases) {
				t.Fatalf("RenewTags = %d results, %v", len(got), err)
			}
			for i, r := range got {
				if renewed := r.Err == nil; renewed != c.want[i] || renewed && (r.Lease.Tag != c.leases[i] || r.Lease.Left <= time.Minute) {
					t.Errorf("RenewTags[%d] (%s) = %+v, %v; want renewed %v", i, c.leases[i], r.Lease, r.Err, c.want[i])
				}
				if r.Err != nil && !errors.Is(r.Err, leaf.ErrLeaseLost) {
					t.Errorf("RenewTags[%d] (%s): %v, want ErrLeaseLost", i, c.leases[i], r.Err)
				}
			}
		})
	}
}

// TestNewUntil: a lease's new end is now + ttl, unless that would not pass
// an old end less than a lease beyond it (a clock standing still or gone
// back a little): then just past it, so that the Version never returns to
// a value it had. A clock gone back by more than a lease is not stretched.
func TestNewUntil(t *testing.T) {
	const ttl = 10 * time.Second
	const lease = int64(ttl / time.Microsecond)
	const now = int64(1_000_000_000)
	for _, c := range []struct {
		name string
		old  []int64
		want int64
	}{
		{"clock moved on", []int64{now + lease - 5}, now + lease},
		{"no lease before", nil, now + lease},
		{"clock stands still", []int64{now + lease}, now + lease + 1},
		{"still, renewed again", []int64{now + lease + 1}, now + lease + 2},
		{"clock back a little", []int64{now + lease + 3*lease/4}, now + lease + 3*lease/4 + 1},
		{"clock back by more than a lease", []int64{now + 2*lease + 1}, now + lease},
		{"a batch", []int64{now + lease - 5, now + lease + 7, now + lease + 2}, now + lease + 8},
		{"a batch with a row far ahead", []int64{now + lease, now + 2*lease + 1}, now + lease + 1},
		{"a far row on the value", []int64{now + lease, now + lease + 1 + lease + 1}, now + lease + 1},
	} {
		got := newUntil(now, ttl, c.old...)
		if got != c.want {
			t.Errorf("%s: newUntil(old %v) = now + %d, want now + %d", c.name, c.old, got-now, c.want-now)
		}
		if slices.Contains(c.old, got) {
			t.Errorf("%s: newUntil(old %v) = %d, a value a row had", c.name, c.old, got)
		}
	}
}
