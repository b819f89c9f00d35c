package main

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/testutil"
)

// TestVersionEverywhere: the version stamped into the binary (-X
// main.version, as make build and the Dockerfile do) is what 'leaf version'
// prints, what /v2/status reports in "version", and the version label of
// leaf_build_info on /metrics, beside the Go version it was built with.
func TestVersionEverywhere(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testutil.BuildLeaf(t) // stamped e2e-test
	const want = "e2e-test"
	dir := t.TempDir()
	env := testutil.CleanEnv()

	r := runBin(t, bin, dir, env, "version")
	if first, _, _ := strings.Cut(r.stdout, "\n"); r.code != 0 || first != "leaf "+want {
		t.Errorf("leaf version: exit %d, first line %q, want %q", r.code, first, "leaf "+want)
	}
	if r := runBin(t, bin, dir, env, "--version"); r.stdout != runBin(t, bin, dir, env, "version").stdout {
		t.Errorf("leaf --version differs from leaf version: %q", r.stdout)
	}

	srv := testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0")
	defer srv.Stop(t)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v: %s", path, resp.StatusCode, err, b)
		}
		return string(b)
	}
	for _, path := range []string{"/v2/status", "/v2/status?detail=0", "/v2/status/summary"} {
		var st struct {
			Version *string `json:"version"`
		}
		if err := json.Unmarshal([]byte(get(path)), &st); err != nil || st.Version == nil || *st.Version != want {
			t.Errorf("%s: version %v (%v), want %q", path, st.Version, err, want)
		}
	}
	series := `leaf_build_info{goversion="` + runtime.Version() + `",version="` + want + `"} 1`
	if m := get("/metrics"); !strings.Contains(m, series+"\n") {
		t.Errorf("/metrics has no %s:\n%s", series, grepLines(m, "leaf_build_info"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
