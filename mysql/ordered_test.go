package mysql_test

import (
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/mysql"
)

// withParam returns dsn with a session variable set on every connection.
func withParam(t *testing.T, dsn, name, value string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[name] = value
	return cfg.FormatDSN()
}

func openOrdered(t *testing.T, dsn string) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestOrderedLeaseClock: leases are counted by the clock the database
// gives the session, not by the Go process's, and the session's time zone
// does not shift them. MariaDB's timestamp variable moves NOW and
// UTC_TIMESTAMP for one session, which stands in here for a store that
// reads another clock than its neighbours: a lease it writes with it ended
// long ago by the real one, and a server that watched it takes it over. A
// store that counted by Go's clock would see no difference.
func TestOrderedLeaseClock(t *testing.T) {
	ctx := t.Context()
	dsn := testutil.MySQL(t)
	utc := openOrdered(t, dsn)
	tokyo := openOrdered(t, withParam(t, dsn, "time_zone", "'+09:00'"))
	past := openOrdered(t, withParam(t, dsn, "timestamp", "1000000000")) // 2001
	for _, tag := range []string{"zone", "skew"} {
		if err := utc.CreateTag(ctx, leaf.Alloc{Tag: tag, Step: 10}); err != nil {
			t.Fatal(err)
		}
		if err := utc.SetOrdered(ctx, tag, true); err != nil {
			t.Fatal(err)
		}
	}
	const owner, other = "http://10.0.0.1:8080#a", "http://10.0.0.2:8080#b"

	if l, err := utc.AcquireTag(ctx, "zone", owner, time.Hour, leaf.TagLease{}); err != nil || l.Owner != owner {
		t.Fatalf("AcquireTag(zone) = %+v, %v", l, err)
	}
	l, ok, err := tokyo.TagLease(ctx, "zone")
	if err != nil || !ok || !l.Held() || l.Left > time.Hour {
		t.Errorf("TagLease(zone) in +09:00 = %+v, %v, %v; want held, at most 1h left", l, ok, err)
	}
	if l, err := tokyo.AcquireTag(ctx, "zone", other, time.Hour, l); err != nil || l.Owner != owner {
		t.Errorf("AcquireTag(zone) in +09:00 = %+v, %v; want it still %s's", l, err, owner)
	}

	if l, err := past.AcquireTag(ctx, "skew", owner, time.Hour, leaf.TagLease{}); err != nil || l.Owner != owner || l.Left != time.Hour {
		t.Fatalf("AcquireTag(skew) in 2001 = %+v, %v", l, err)
	}
	l, ok, err = utc.TagLease(ctx, "skew")
	if err != nil || !ok || l.Held() || l.Left > -20*365*24*time.Hour {
		t.Errorf("TagLease(skew) now = %+v, %v, %v; want a lease that ran out in 2001", l, ok, err)
	}
	if l, err := utc.AcquireTag(ctx, "skew", other, time.Hour, l); err != nil || l.Owner != other || l.Token != 2 {
		t.Errorf("AcquireTag(skew) now, watching it = %+v, %v; want it taken over with token 2", l, err)
	}
}
