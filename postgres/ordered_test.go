package postgres_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/postgres"
)

// withTimeZone returns dsn with the session's time zone set.
func withTimeZone(t *testing.T, dsn, zone string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("timezone", zone)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " timezone=" + zone
}

func openStore(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestOrderedLeaseTimeZone: a lease written by a session in one time zone
// reads the same from a session in another; the clock is the server's
// clock_timestamp() as epoch microseconds, which no zone shifts.
func TestOrderedLeaseTimeZone(t *testing.T) {
	ctx := t.Context()
	dsn := testutil.Postgres(t)
	utc := openStore(t, dsn)
	tokyo := openStore(t, withTimeZone(t, dsn, "Asia/Tokyo"))
	honolulu := openStore(t, withTimeZone(t, dsn, "Pacific/Honolulu"))
	if err := utc.CreateTag(ctx, leaf.Alloc{Tag: "zone", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := utc.SetOrdered(ctx, "zone", true); err != nil {
		t.Fatal(err)
	}
	const owner, other = "http://10.0.0.1:8080#a", "http://10.0.0.2:8080#b"
	if l, err := tokyo.AcquireTag(ctx, "zone", owner, time.Hour, leaf.TagLease{}); err != nil || l.Owner != owner {
		t.Fatalf("AcquireTag in Tokyo = %+v, %v", l, err)
	}
	for name, s := range map[string]*postgres.Store{"UTC": utc, "Honolulu": honolulu} {
		l, ok, err := s.TagLease(ctx, "zone")
		if err != nil || !ok || !l.Held() || l.Left > time.Hour {
			t.Errorf("TagLease in %s = %+v, %v, %v; want held, at most 1h left", name, l, ok, err)
		}
		if l, err := s.AcquireTag(ctx, "zone", other, time.Hour, l); err != nil || l.Owner != owner {
			t.Errorf("AcquireTag in %s = %+v, %v; want it still %s's", name, l, err, owner)
		}
	}
}
