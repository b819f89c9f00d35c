package ordered_test

import (
	"fmt"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/mysql"
)

// The ordered hammer on MariaDB: three servers, each with its own pool on
// one database, the lease kept in the database and judged by its clock.
func TestOrderedHammerMariaDB(t *testing.T) {
	dsn := testutil.MySQL(t)
	var gens []*gen
	for i := range 3 {
		st, err := mysql.Open(bg, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		var ost leaf.OrderedStore = st
		if i == 0 {
			if err := st.CreateTag(bg, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 100}); err != nil {
				t.Fatal(err)
			}
			if err := ost.SetOrdered(bg, "seq", true); err != nil {
				t.Fatal(err)
			}
		}
		gens = append(gens, newGen(t, settings(st, func(s *conf) {
			s.Owner = ownerOf(i)
			s.OwnerLease = 2 * time.Second
		})))
	}
	hammerOrdered(t, gens, 8, 300)
}

// openMariaDBPair opens two pools on one new MariaDB database holding the
// ordered tag "seq" (step 10): now, whose sessions read the server's
// clock, and ahead, whose sessions read a clock an hour ahead of it
// (MariaDB's timestamp variable, which also stops it there): the
// database's clock as it reads after being stepped forward.
func openMariaDBPair(t *testing.T) (now, ahead *mysql.Store) {
	t.Helper()
	dsn := testutil.MySQL(t)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["timestamp"] = fmt.Sprint(time.Now().Add(time.Hour).Unix())
	for _, d := range []struct {
		dsn string
		st  **mysql.Store
	}{{dsn, &now}, {cfg.FormatDSN(), &ahead}} {
		st, err := mysql.Open(bg, d.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*d.st = st
	}
	if err := now.CreateTag(bg, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := now.SetOrdered(bg, "seq", true); err != nil {
		t.Fatal(err)
	}
	return now, ahead
}

// TestOrderedClockJumpMariaDB: B reads the database's clock an hour ahead,
// by which A's lease ran out long ago, while A renews it: B never takes it
// over. The lease is 2s of real time: B watches for 2s, A renews every
// 667ms.
func TestOrderedClockJumpMariaDB(t *testing.T) {
	now, ahead := openMariaDBPair(t)
	orderedClockJump(t, now, ahead, 2*time.Second, func() {})
}

// TestOrderedStaleOwnerMariaDB: another owner is put on the row through a
// pool whose clock says A's lease ran out, while A still issues: A's next
// reserve fails.
func TestOrderedStaleOwnerMariaDB(t *testing.T) {
	now, ahead := openMariaDBPair(t)
	orderedStaleOwner(t, &countedStore{orderedSegmentStore: now}, ahead, func() { forceOwner(t, ahead, ownerOf(1)) })
}
