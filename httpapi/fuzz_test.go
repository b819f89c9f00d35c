package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzServeHTTP sends arbitrary methods, paths, queries and bodies straight
// to the handler: it must never panic, never answer 500 (the fake generators
// have no bugs to report), and never hand a generator an invalid tag.
func FuzzServeHTTP(f *testing.F) {
	seeds := []struct{ method, path, query, body string }{
		{"GET", "/api/segment/get/test", "", ""},
		{"GET", "/api/segment/get/test", "count=3", ""},
		{"HEAD", "/api/segment/get/a b", "count=%zz", ""},
		{"POST", "/v2/tags", "", `{"tag":"x","start":5}`},
		{"PATCH", "/v2/tags/test", "", `{"step":10}`},
		{"DELETE", "/v2/tags/test", "", ""},
		{"GET", "/v2/segment/test/range", "count=10", ""},
		{"GET", "/v2/segment/test/batch", "count=-1", ""},
		{"GET", "/readyz", "strict=1", ""},
		{"BREW", "/cache", "", ""},
		{"GET", "/db", ";;;&&&==", ""},
		{"GET", "//..//./v2/status", "", ""},
		{"GET", "/api/snowflake/get/test", "", ""},
		{"POST", "/api/snowflake/get/test", "count=3", ""},
		{"HEAD", "/api/snowflake/get/", "count=0", ""},
		{"PUT", "/api/snowflake/get/a%2Fb", "", ""},
		{"GET", "/decodeSnowflakeId", "snowflakeId=1263177670456266794", ""},
		{"POST", "/decodeSnowflakeId", "snowflakeId=-5&snowflakeId=abc", ""},
		{"GET", "/decodeSnowflakeId", "snowflakeId=99999999999999999999", ""},
		{"GET", "/v2/snowflake", "", ""},
		{"POST", "/v2/snowflake/batch", "count=10000", ""},
		{"GET", "/v2/snowflake/decode/9223372036854775807", "", ""},
		{"GET", "/v2/snowflake/decode/%2D1", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			method = "GET"
		}
		g := newFakeGen("test")
		g.setDegraded("fuzz")
		sf := newFakeSnowflake()
		sf.setDegraded("snowflake fuzz")
		s := New(Config{Segment: g, Snowflake: sf, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		r := &http.Request{
			Method: method,
			URL:    &url.URL{Path: path, RawQuery: query},
			Header: http.Header{},
			Body:   io.NopCloser(strings.NewReader(body)),
			Host:   "fuzz",
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code >= 500 && w.Code != 503 {
			t.Errorf("%s %q ? %q = %d %q", method, path, query, w.Code, w.Body.String())
		}
		if n := g.invalidCalls(); n != 0 {
			t.Errorf("%s %q ? %q: the generator got %d calls with invalid input", method, path, query, n)
		}
		if _, n := sf.counts(); n != 0 {
			t.Errorf("%s %q ? %q: the snowflake generator got %d calls with invalid input", method, path, query, n)
		}
	})
}
