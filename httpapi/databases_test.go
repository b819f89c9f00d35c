package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func twoDatabases() []DatabaseStatus {
	return []DatabaseStatus{
		{Index: 0, Name: "leaf:xxxxx@tcp(db-a:3306)/leaf", Healthy: true, Verified: true, Reserves: 12, HighestID: 40_000,
			LastReserve: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)},
		{Index: 1, Name: "leaf:xxxxx@tcp(db-b:3306)/leaf", Healthy: false, Verified: true, Reserves: 3, Failures: 2,
			LastError: "reserve: i/o timeout", RetryAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), HighestID: 21_000},
		{Index: 2, Name: "leaf:xxxxx@tcp(db-c:3306)/leaf"},
	}
}

// TestDatabasesShown: a store over several databases is shown to the admin
// on /v2/status, its summary, /cache and /db, and to no one else; a store
// of one database shows no databases anywhere. That the answers match the
// document's schemas is the e2e module's TestDatabasesMatchSchema.
func TestDatabasesShown(t *testing.T) {
	g := newFakeGen("alpha")
	base, _ := testServerConfig(t, Config{Segment: g, Tags: g, AdminToken: testToken, Databases: twoDatabases})
	plain, _ := testServerConfig(t, Config{Segment: g, Tags: g})
	admin := http.Header{"Authorization": {"Bearer " + testToken}}

	for _, tt := range []struct {
		path      string
		databases func(body []byte) ([]DatabaseStatus, error)
	}{
		{"/v2/status", func(b []byte) ([]DatabaseStatus, error) {
			var v statusResponse
			err := json.Unmarshal(b, &v)
			return v.Segment.Databases, err
		}},
		{"/v2/status/summary", func(b []byte) ([]DatabaseStatus, error) {
			var v struct {
				Segment struct {
					Databases []DatabaseStatus `json:"databases"`
				} `json:"segment"`
			}
			err := json.Unmarshal(b, &v)
			return v.Segment.Databases, err
		}},
	} {
		for _, c := range []struct {
			name   string
			base   string
			header http.Header
			query  string
			want   int
		}{
			{"admin", base, admin, "", 3},
			{"no token", base, nil, "", 0},
			{"detail=0", base, admin, "?detail=0", 0},
			{"one database", plain, nil, "", 0},
		} {
			t.Run(tt.path+"/"+c.name, func(t *testing.T) {
				r := doHeader(t, "GET", c.base, tt.path+c.query, "", c.header)
				if r.status != 200 {
					t.Fatalf("%d %s", r.status, r.body)
				}
				got, err := tt.databases([]byte(r.body))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != c.want {
					t.Fatalf("%d databases, want %d:\n%s", len(got), c.want, r.body)
				}
				if c.want > 0 && !slices.Equal(got, twoDatabases()) {
					t.Errorf("databases = %+v, want %+v", got, twoDatabases())
				}
			})
		}
	}

	// Leaf's table comes first and unchanged; the databases follow it.
	for _, path := range []string{"/cache", "/db"} {
		r := doHeader(t, "GET", base, path, "", admin)
		leafTable := strings.Index(r.body, "<table>")
		section := strings.Index(r.body, "<h2>Databases</h2>")
		if r.status != 200 || leafTable < 0 || section < leafTable {
			t.Fatalf("%s: %d, Leaf's table at %d, the databases at %d:\n%s", path, r.status, leafTable, section, r.body)
		}
		for _, want := range []string{
			`<tr><td>0</td><td class="l">leaf:xxxxx@tcp(db-a:3306)/leaf</td><td class="l">up</td><td>12</td><td>0</td><td>40000</td><td class="l"></td></tr>`,
			`<tr><td>1</td><td class="l">leaf:xxxxx@tcp(db-b:3306)/leaf</td><td class="l">DOWN</td><td>3</td><td>2</td><td>21000</td><td class="l">reserve: i/o timeout</td></tr>`,
			`<tr><td>2</td><td class="l">leaf:xxxxx@tcp(db-c:3306)/leaf</td><td class="l">UNVERIFIED</td>`,
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("%s lacks %q:\n%s", path, want, r.body)
			}
		}
		if r := do(t, "GET", plain, path, ""); strings.Contains(r.body, "Databases") {
			t.Errorf("%s of a store of one database shows databases:\n%s", path, r.body)
		}
	}
}
