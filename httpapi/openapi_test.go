package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The document itself is checked in the e2e module's openapi package,
// which holds the OpenAPI library: that it is valid, that it describes
// exactly Routes(), and that the real binary answers as it says.

// TestOpenAPIServed: /openapi.json answers the document, and a known
// path's other methods 405, as every route's do.
func TestOpenAPIServed(t *testing.T) {
	srv := httptest.NewServer(New(Config{}))
	t.Cleanup(srv.Close)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+"/openapi.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := openAPIDoc
		if method == http.MethodHead {
			want = nil
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
			resp.ContentLength != int64(len(openAPIDoc)) || !bytes.Equal(body, want) {
			t.Errorf("%s /openapi.json: %s, %q, length %d, %d bytes of body; want 200, the document",
				method, resp.Status, resp.Header.Get("Content-Type"), resp.ContentLength, len(body))
		}
	}
	resp, err := http.Post(srv.URL+"/openapi.json", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /openapi.json: %s, Allow %q; want 405, GET, HEAD", resp.Status, resp.Header.Get("Allow"))
	}
}
