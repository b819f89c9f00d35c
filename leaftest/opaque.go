package leaftest

import (
	"cmp"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

// RawTables reads a SQL store's database around the store, as anyone
// with read access to it can.
type RawTables struct {
	DB *sql.DB
	// List is a query answering the names of the tables the store's DSN
	// points at (one database on MariaDB, one schema on PostgreSQL); the
	// check reads those whose name begins with leaf_, so that a table
	// added later is read without being named here.
	List string
}

// Serve serves a generator and its store over HTTP, as leaf serve does
// (httpapi, with no admin token), and returns the base URL. The caller
// builds the server: httpapi's own tests import leaftest, so leaftest
// cannot import httpapi.
type Serve func(t *testing.T, g *segment.Generator, st leaf.SegmentStore) string

// OpaqueKeyNotStored checks that a server's opaque key is in no table of
// its store and in no answer of the HTTP routes of its opaque tags: only
// its KeyCheck may be. Opaque tags (one plain, one periodic and formatted,
// one deleted after use, which leaves a tombstone and its shape row) are
// created and issued through HTTP; then every row of every leaf_ table is
// read as text and searched for the key's bytes, its hex (the form
// segment.opaque_key takes) and its base64.
func OpaqueKeyNotStored(t *testing.T, open Opener, raw RawTables, serve Serve) {
	t.Helper()
	// Not ASCII, so that its bytes, hex and base64 are three different
	// strings.
	sum := sha256.Sum256([]byte("leaftest opaque key"))
	key := sum[:]
	g, st := startGenerator(t, open, segmentSettings(func(s *segment.Config) { s.OpaqueKey = key }))
	base := serve(t, g, st)

	suffix := time.Now().UnixNano()
	plain, daily, gone := fmt.Sprintf("opq-%d", suffix), fmt.Sprintf("opq-day-%d", suffix), fmt.Sprintf("opq-gone-%d", suffix)
	var answers []string
	call := func(method, path, body string, want int) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		answers = append(answers, fmt.Sprintf("%s %s: %s %s", method, path, resp.Header, b))
		return string(b)
	}

	// Small steps, so that the batches reserve several ranges.
	call("POST", "/v2/tags", fmt.Sprintf(`{"tag":%q,"opaque_bits":40,"step":10}`, plain), http.StatusCreated)
	call("POST", "/v2/tags", fmt.Sprintf(`{"tag":%q,"opaque_bits":24,"step":10,"period":"day","format":"D{period}-{seq:8}"}`, daily), http.StatusCreated)
	call("POST", "/v2/tags", fmt.Sprintf(`{"tag":%q,"opaque_bits":32,"step":10}`, gone), http.StatusCreated)
	for _, tag := range []string{plain, daily, gone} {
		var a struct {
			IDStr     string `json:"id_str"`
			Formatted string `json:"formatted"`
		}
		if err := json.Unmarshal([]byte(call("GET", "/v2/segment/"+tag, "", http.StatusOK)), &a); err != nil {
			t.Fatal(err)
		}
		call("POST", "/v2/segment/"+tag+"/batch?count=35", "", http.StatusOK)
		call("GET", "/v2/segment/"+tag+"/range?count=5", "", http.StatusConflict)
		call("GET", "/v2/tags/"+tag, "", http.StatusOK)
		call("GET", "/v2/tags/"+tag+"/decode?id="+url.QueryEscape(cmp.Or(a.Formatted, a.IDStr)), "", http.StatusOK)
		call("GET", "/api/segment/get/"+tag, "", http.StatusOK)
	}
	call("GET", "/v2/tags/"+daily+"/periods", "", http.StatusOK)
	call("DELETE", "/v2/tags/"+gone, "", http.StatusNoContent)
	for _, path := range []string{"/v2/tags", "/v2/status?detail=1", "/v2/status/summary", "/db", "/cache", "/readyz"} {
		call("GET", path, "", http.StatusOK)
	}

	tables, dump := readLeafTables(t, raw)
	for _, want := range []string{"leaf_alloc", "leaf_alloc_tombstone", "leaf_tag_shape"} {
		if !slices.Contains(tables, want) {
			t.Fatalf("tables %v, no %s", tables, want)
		}
	}
	forms := []struct{ name, text string }{
		{"bytes", string(key)},
		{"hex", hex.EncodeToString(key)},
		{"base64", base64.StdEncoding.EncodeToString(key)},
		{"unpadded base64", base64.RawStdEncoding.EncodeToString(key)},
		{"URL base64", base64.RawURLEncoding.EncodeToString(key)},
	}
	for _, f := range forms {
		in := func(s string) bool {
			if f.name == "hex" { // in either case
				s = strings.ToLower(s)
			}
			return strings.Contains(s, f.text)
		}
		if in(dump) {
			t.Errorf("the key's %s are in the tables:\n%s", f.name, dump)
		}
		for _, a := range answers {
			if in(a) {
				t.Errorf("the key's %s are in an answer: %s", f.name, a)
			}
		}
	}
	// The reading reached the rows the tags wrote, so that finding no key
	// in it means something.
	for _, want := range []string{plain, daily + "#", gone, tagshape.KeyCheck(key)} {
		if !strings.Contains(dump, want) {
			t.Fatalf("%q in no row of %v:\n%s", want, tables, dump)
		}
	}
	t.Logf("read %d leaf_ tables (%s), %d bytes, and %d answers", len(tables), strings.Join(tables, ", "), len(dump), len(answers))
}

// readLeafTables reads every row of every table of raw.List whose name
// begins with leaf_, as text, one line per row: "table: column=value ...".
func readLeafTables(t *testing.T, raw RawTables) ([]string, string) {
	t.Helper()
	var tables []string
	each(t, raw.DB, raw.List, func(_ []string, vals []any) {
		if name := text(vals[0]); strings.HasPrefix(name, "leaf_") {
			tables = append(tables, name)
		}
	})
	slices.Sort(tables)
	var dump strings.Builder
	for _, table := range tables {
		each(t, raw.DB, "SELECT * FROM "+table, func(cols []string, vals []any) {
			dump.WriteString(table + ":")
			for i, v := range vals {
				fmt.Fprintf(&dump, " %s=%s", cols[i], text(v))
			}
			dump.WriteString("\n")
		})
	}
	return tables, dump.String()
}

// each calls row with the columns and values of every row query answers.
func each(t *testing.T, db *sql.DB, query string, row func(cols []string, vals []any)) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		row(cols, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// text is a column's value as text. Bytes stay as they are, not as fmt
// prints a []byte: a key stored in a binary column is then found as its
// bytes.
func text(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}
