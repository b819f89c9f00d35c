package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// TestDatabasesMatchSchema: the answers that show a store's databases to
// the admin (/v2/status and its summary) match the document's Status and
// Summary schemas. httpapi's TestDatabasesShown checks who sees them and
// what they hold; this is the shape, on a real generator over the embedded
// store with three databases reported.
func TestDatabasesMatchSchema(t *testing.T) {
	doc, err := parseOpenAPI(httpapi.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st := testutil.Store(t, leaf.Alloc{Tag: "alpha", MaxID: 1, Step: 100})
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, testutil.Logger()
	gen, err := segment.New(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close(ctx) })
	const token = "databases-schema-admin-token"
	databases := func() []httpapi.DatabaseStatus {
		return []httpapi.DatabaseStatus{
			{Index: 0, Name: "leaf:xxxxx@tcp(db-a:3306)/leaf", Healthy: true, Verified: true, Reserves: 12, HighestID: 40_000,
				LastReserve: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)},
			{Index: 1, Name: "leaf:xxxxx@tcp(db-b:3306)/leaf", Healthy: false, Verified: true, Reserves: 3, Failures: 2,
				LastError: "reserve: i/o timeout", RetryAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), HighestID: 21_000},
			{Index: 2, Name: "leaf:xxxxx@tcp(db-c:3306)/leaf"},
		}
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Segment: gen, Tags: st, AdminToken: token,
		Databases: databases, Logger: testutil.Logger()}))
	t.Cleanup(srv.Close)
	testutil.FetchID(t, srv.URL+"/api/segment/get/alpha") // a tag in the status too

	for _, tt := range []struct{ path, schema string }{
		{"/v2/status", "Status"},
		{"/v2/status/summary", "Summary"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %s, %v", tt.path, resp.Status, err)
		}
		seg, _ := v["segment"].(map[string]any)
		if dbs, _ := seg["databases"].([]any); len(dbs) != 3 {
			t.Fatalf("GET %s: %d databases in the answer, want 3: %v", tt.path, len(dbs), v)
		}
		if err := doc.ValidateSchemaJSON(doc.Components.Schemas[tt.schema].Value, v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("GET %s does not match schema %s: %v", tt.path, tt.schema, err)
		}
	}
}
