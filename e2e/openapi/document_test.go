package openapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/history"
)

// The OpenAPI document is held to the server from both sides: here
// (document_test.go), that it is a valid OpenAPI 3.1 document and that its
// paths and methods are exactly the server's route table; in
// TestOpenAPIConformance, that the real server's answers, successes and
// errors, match it.

// loadOpenAPI parses and checks the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := parseOpenAPI(httpapi.OpenAPIDocument())
	if err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document:\n%v", err)
	}
	return doc
}

// parseOpenAPI parses an OpenAPI 3.1 document and validates it: its
// structure and, for 3.1, every schema as JSON Schema 2020-12, the
// examples of its parameters and media types, and, which Validate leaves
// out, the examples of its schemas.
func parseOpenAPI(data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, err
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		return nil, fmt.Errorf("OpenAPI %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableMultiError()); err != nil {
		return nil, err
	}
	var errs []error
	for name, s := range doc.Components.Schemas {
		for i, ex := range s.Value.Examples {
			if err := doc.ValidateSchemaJSON(s.Value, ex, openapi3.EnableJSONSchema2020()); err != nil {
				errs = append(errs, fmt.Errorf("schema %s, example %d: %w", name, i, err))
			}
		}
	}
	return doc, errors.Join(errs...)
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	loadOpenAPI(t)

	// The checks above must be able to fail: the same document with a
	// reference to nothing, an example its schema refuses, or a path whose
	// parameter is not described, is refused.
	for _, tt := range []struct{ name, old, new string }{
		{"dangling reference", `"#/components/responses/HeadOK"`, `"#/components/responses/HeadOk"`},
		{"example off its schema", `"code": "tag_not_found", "request_id"`, `"code": "no_such_code", "request_id"`},
		{"undescribed path parameter", `"/v2/tags/{tag}": {`, `"/v2/tags/{name}": {`},
	} {
		doc := httpapi.OpenAPIDocument()
		broken := bytes.Replace(doc, []byte(tt.old), []byte(tt.new), 1)
		if bytes.Equal(broken, doc) {
			t.Fatalf("%s: %q not found in openapi.json", tt.name, tt.old)
		}
		if _, err := parseOpenAPI(broken); err == nil {
			t.Errorf("%s: the broken document passes", tt.name)
		}
	}
}

// TestOpenAPIDescribesEveryRoute compares the document's paths and
// methods with the route table the server is built from, both ways: a
// route added without its description, or a description left behind by a
// route removed, fails here.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	// Every route is registered whatever the configuration but /metrics
	// and /v2/status/history, which need their sources.
	s := httpapi.New(httpapi.Config{Metrics: http.NotFoundHandler(), History: history.New(history.Config{})})

	documented := map[string]string{} // mux pattern -> Allow
	for path, item := range doc.Paths.Map() {
		var methods []string
		for m := range item.Operations() {
			methods = append(methods, m)
		}
		slices.Sort(methods)
		documented[muxPattern(path)] = strings.Join(methods, ", ")
	}
	served := map[string]string{}
	for _, r := range s.Routes() {
		if _, dup := served[r.Pattern]; dup {
			t.Errorf("route %s is in the route table twice", r.Pattern)
		}
		served[r.Pattern] = r.Allow
	}
	for pattern, allow := range served {
		switch got, ok := documented[pattern]; {
		case !ok:
			t.Errorf("route %s (%s) is not in openapi.json", pattern, allow)
		case got != allow:
			t.Errorf("route %s: openapi.json has the methods %s, the server %s", pattern, got, allow)
		}
	}
	for pattern := range documented {
		if _, ok := served[pattern]; !ok {
			t.Errorf("openapi.json describes %s, which the server does not serve", pattern)
		}
	}
	if len(served) < 20 {
		t.Errorf("the route table has %d routes; is it filled?", len(served))
	}
}

// muxPattern is the ServeMux pattern of a document path: the document's
// "/" is the mux's exact-match "/{$}" (the mux's "/" matches everything).
func muxPattern(path string) string {
	if path == "/" {
		return "/{$}"
	}
	return path
}

// TestErrorCodesDocumented: the document's lists of error codes are the
// error table's (internal/apierr), each once: every code in the Error
// schema, and exactly the 503 rows in the Unavailable response's.
func TestErrorCodesDocumented(t *testing.T) {
	doc := loadOpenAPI(t)
	codes := func(s *openapi3.SchemaRef) []string {
		var out []string
		for _, v := range s.Value.Properties["code"].Value.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	all := codes(doc.Components.Schemas["Error"])
	unavailable := codes(doc.Components.Responses["Unavailable"].Value.Content["application/json"].Schema)
	var wantAll, want503 []string
	for _, k := range apierr.Kinds() {
		wantAll = append(wantAll, k.Code)
		if k.HTTP == http.StatusServiceUnavailable {
			want503 = append(want503, k.Code)
		}
	}
	for _, c := range []struct {
		name      string
		got, want []string
	}{{"Error.code", all, wantAll}, {"Unavailable's code", unavailable, want503}} {
		got, want := slices.Sorted(slices.Values(c.got)), slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("openapi.json's %s lists %v; the error table has %v", c.name, got, want)
		}
	}
}
