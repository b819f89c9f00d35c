package segment_test

import (
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testdb"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/segment"
)

// The ordered hammer on MariaDB: three servers, each with its own pool on
// one database, the lease kept in the database and judged by its clock.
func TestOrderedHammerMariaDB(t *testing.T) {
	dsn := testdb.MySQL(t)
	var gens []*segment.Generator
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
		gens = append(gens, newGen(t, settings(st, func(s *segment.Settings) {
			s.Owner = ownerOf(i)
			s.OwnerLease = 2 * time.Second
		})))
	}
	hammerOrdered(t, gens, 8, 300)
}
