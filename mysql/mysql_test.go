package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/mysql"
)

func opener(dsn string) leaftest.Opener {
	return func() (leaf.SegmentStore, error) {
		s, err := mysql.Open(context.Background(), dsn)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

func TestSegmentStore(t *testing.T) {
	leaftest.TestSegmentStore(t, func(t *testing.T) func() (leaf.SegmentStore, error) {
		return opener(testutil.MySQL(t))
	}, leaftest.StoreTraits{})
}

// leafDDL is Leaf's scripts/leaf_alloc.sql, byte for byte.
const leafDDL = "CREATE TABLE `leaf_alloc` (\n" +
	"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
	"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
	"  `step` int(11) NOT NULL,\n" +
	"  `description` varchar(256)  DEFAULT NULL,\n" +
	"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`biz_tag`)\n" +
	") ENGINE=InnoDB"

// rawDB connects without the store, as Leaf's own scripts would.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestExistingLeafTable(t *testing.T) {
	dsn := testutil.MySQL(t)
	db := rawDB(t, dsn)
	for _, q := range []string{"DROP TABLE IF EXISTS `leaf_alloc`", leafDDL, leaftest.LeafSampleInsert} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var before string
	if err := db.QueryRowContext(t.Context(), "SHOW CREATE TABLE leaf_alloc").Scan(new(string), &before); err != nil {
		t.Fatal(err)
	}
	leaftest.TestExistingLeafTable(t, opener(dsn))
	var after string
	if err := db.QueryRowContext(t.Context(), "SHOW CREATE TABLE leaf_alloc").Scan(new(string), &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the store altered Leaf's table:\nbefore %s\nafter  %s", before, after)
	}
}

// TestSchemaIsLeafs checks that a table the store creates is the one Leaf's
// script creates, so Java Leaf can use a database set up by us.
func TestSchemaIsLeafs(t *testing.T) {
	ours, leafs := testutil.MySQL(t), testutil.MySQL(t)
	s, err := mysql.Open(t.Context(), ours)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := rawDB(t, leafs).ExecContext(t.Context(), leafDDL); err != nil {
		t.Fatal(err)
	}
	show := func(dsn string) string {
		var ddl string
		if err := rawDB(t, dsn).QueryRowContext(t.Context(), "SHOW CREATE TABLE leaf_alloc").Scan(new(string), &ddl); err != nil {
			t.Fatal(err)
		}
		return ddl
	}
	if a, b := show(ours), show(leafs); a != b {
		t.Errorf("schema differs from Leaf's:\nours  %s\nLeaf's %s", a, b)
	}
}

func TestOpenDSN(t *testing.T) {
	base := testutil.MySQL(t)
	cfg, err := gomysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	noDB := cfg.Clone()
	noDB.DBName = ""
	cases := []struct {
		name string
		dsn  string
		want error
	}{
		{"NoDatabase", noDB.FormatDSN(), leaf.ErrInvalidArgument},
		{"Malformed", "root@tcp(127.0.0.1:3306", leaf.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := mysql.Open(t.Context(), c.dsn)
			if !errors.Is(err, c.want) {
				if s != nil {
					_ = s.Close()
				}
				t.Fatalf("Open(%q) = %v, want %v", c.dsn, err, c.want)
			}
		})
	}
}

func TestTombstoneKeepsHighest(t *testing.T) {
	dsn := testutil.MySQL(t)
	leaftest.TombstoneKeepsHighest(t, opener(dsn), func(t *testing.T, tag string, maxID int64) {
		if _, err := rawDB(t, dsn).ExecContext(t.Context(), "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?", maxID, tag); err != nil {
			t.Fatal(err)
		}
	})
}

// The failover fence on MariaDB: see leaftest.TestFailoverFence.
func TestFailoverFence(t *testing.T) {
	leaftest.TestFailoverFence(t, func(t *testing.T) leaftest.FencedStore {
		s, err := mysql.Open(t.Context(), testutil.MySQL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, func(q string) string { return q })
}
