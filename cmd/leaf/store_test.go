package main

import (
	"strings"
	"testing"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestServerStores runs the tags commands and serve against MariaDB/MySQL and
// PostgreSQL (the servers named by LEAF_TEST_MYSQL_DSN and
// LEAF_TEST_POSTGRES_DSN; skipped without them unless LEAF_TEST_STRICT=1).
// It also pins the seeding rule: a server database is not seeded unless
// segment.seed is explicitly true.
func TestServerStores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store string
		dsn   func(testing.TB) string
	}{
		{config.StoreMySQL, testutil.MySQL},
		{config.StorePostgres, testutil.Postgres},
	} {
		t.Run(tc.store, func(t *testing.T) {
			t.Parallel()
			dsn := tc.dsn(t)
			// A generous wait: the databases are shared with every other
			// package's tests, and a slow first load would answer 503.
			env := append(dataEnv(t), "LEAF_SEGMENT_STORE="+tc.store, "LEAF_SEGMENT_DSN="+dsn, "LEAF_SEGMENT_WAIT_TIMEOUT=10s")

			for _, s := range []struct {
				args   []string
				code   int
				stdout string
			}{
				{[]string{"tags", "create", "orders", "--step", "10", "--start", "500"}, 0, "created tag orders"},
				{[]string{"tags", "set-step", "orders", "30"}, 0, "tag orders: step 30"},
				{[]string{"tags", "list", "--json"}, 0, `"max_id": 500,
    "step": 30,`},
				{[]string{"tags", "create", "orders"}, 1, ""},
			} {
				if r := runCLI(t, env, s.args...); r.code != s.code || !strings.Contains(r.stdout, s.stdout) {
					t.Fatalf("%q: %+v, want exit %d and %q", s.args, r, s.code, s.stdout)
				}
			}

			// Default: no seeding into a server database.
			srv := serveInProcess(t, env, "--listen", "127.0.0.1:0")
			if !strings.Contains(srv.Log.String(), "store=\""+tc.store+" ") {
				t.Errorf("listening line does not name the store:\n%s", srv.Log.String())
			}
			if id := testutil.FetchID(t, srv.URL("/api/segment/get/orders")); id != 500 {
				t.Errorf("first ID of orders = %d, want 500", id)
			}
			if code := srv.Stop(t); code != 0 {
				t.Fatalf("serve exited %d:\n%s", code, srv.Log.String())
			}

			if r := runCLI(t, env, "tags", "list"); r.code != 0 || strings.Contains(r.stdout, config.SeedTag) {
				t.Errorf("a %s store was seeded without segment.seed: %+v", tc.store, r)
			}

			// Given back on shutdown: the next ID follows on.
			srv = serveInProcess(t, append(env, "LEAF_SEGMENT_SEED=true"), "--listen", "127.0.0.1:0")
			if id := testutil.FetchID(t, srv.URL("/api/segment/get/orders")); id != 501 {
				t.Errorf("first ID of orders after restart = %d, want 501", id)
			}
			if id := testutil.FetchID(t, srv.URL("/api/segment/get/"+config.SeedTag)); id != 1 {
				t.Errorf("explicitly seeded %s: first ID %d, want 1", config.SeedTag, id)
			}
			if code := srv.Stop(t); code != 0 {
				t.Fatalf("serve exited %d:\n%s", code, srv.Log.String())
			}
			if r := runCLI(t, env, "tags", "delete", "orders"); r.code != 0 {
				t.Fatalf("delete: %+v", r)
			}
		})
	}
}
