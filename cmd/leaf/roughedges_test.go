package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestCLIRoughEdges: one row per rough edge of the command line that used to
// answer wrongly (issue #14, item 8).
func TestCLIRoughEdges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name     string
		env      []string
		args     []string
		code     int
		stdout   string // substring expected on stdout
		stderr   string // substring expected on stderr
		noStderr bool
	}{
		// The version, as 'leaf version' prints it.
		{name: "--version", args: []string{"--version"}, code: 0, stdout: "leaf dev\ngo: go", noStderr: true},
		{name: "-v", args: []string{"-v"}, code: 0, stdout: "leaf dev\ngo: go", noStderr: true},
		{name: "-version", args: []string{"-version"}, code: 0, stdout: "leaf dev\ngo: go", noStderr: true},
		// Help about help is the main usage, not "unknown command" with a
		// pointer back to itself.
		{name: "help -h", args: []string{"help", "-h"}, code: 0, stdout: "Usage:\n  leaf serve [flags]", noStderr: true},
		{name: "help --help", args: []string{"help", "--help"}, code: 0, stdout: "Usage:\n  leaf serve [flags]", noStderr: true},
		{name: "help help", args: []string{"help", "help"}, code: 0, stdout: "Usage:\n  leaf serve [flags]", noStderr: true},
		// A negative step is a step, and not a positive one.
		{name: "set-step -5", args: []string{"tags", "set-step", "orders", "-5"}, code: 2,
			stderr: "leaf tags set-step: invalid argument: step -5: the step must be positive"},
		{name: "set-step -5 first", args: []string{"tags", "set-step", "-5", "orders"}, code: 2, stderr: `step "orders" is not a whole number`},
		{name: "create --step -5", args: []string{"tags", "create", "orders", "--step", "-5"}, code: 2,
			stderr: "step -5: the step must be positive"},
		// A file that is not there was named wrongly: a usage error naming it.
		{name: "missing --config", args: []string{"serve", "--config", missing}, code: 2,
			stderr: "leaf serve: invalid configuration: config file " + missing + ": file does not exist\n"},
		{name: "missing LEAF_CONFIG", env: []string{"LEAF_CONFIG=" + missing}, args: []string{"tags", "list"}, code: 2,
			stderr: "config file (from LEAF_CONFIG) " + missing + ": file does not exist"},
		{name: "missing token file", args: []string{"serve", "--listen", "127.0.0.1:0", "--admin-token-file", missing}, code: 2,
			stderr: "admin.token_file " + missing + ": file does not exist"},
		{name: "missing token file env", env: []string{"LEAF_ADMIN_TOKEN_FILE=" + missing}, args: []string{"serve", "--listen", "127.0.0.1:0"}, code: 2,
			stderr: "admin.token_file " + missing + ": file does not exist"},
		{name: "missing leaf.properties", args: []string{"serve", "--leaf-properties", missing}, code: 2,
			stderr: "leaf.properties file " + missing + ": file does not exist"},
		// --cacert: a CA bundle for https:// servers and gRPC over TLS.
		{name: "get --cacert missing", args: []string{"get", "t", "--server", "https://127.0.0.1:1", "--cacert", missing}, code: 2,
			stderr: "--cacert " + missing + ": file does not exist"},
		{name: "get --cacert garbage", args: []string{"get", "t", "--server", "https://127.0.0.1:1", "--cacert", garbage}, code: 2,
			stderr: "--cacert " + garbage + " holds no PEM certificate"},
		{name: "get --cacert plain http", args: []string{"get", "t", "--server", "http://127.0.0.1:1", "--cacert", garbage}, code: 2,
			stderr: "--cacert is for an https:// server; http://127.0.0.1:1 is plain HTTP"},
		{name: "bench --cacert missing", args: []string{"bench", "--grpc", "127.0.0.1:1", "--cacert", missing}, code: 2,
			stderr: "--cacert " + missing + ": file does not exist"},
		{name: "bench --cacert plain http", args: []string{"bench", "--server", "http://127.0.0.1:1", "--cacert", garbage}, code: 2,
			stderr: "is plain HTTP"},
		{name: "get -h shows --cacert", args: []string{"get", "-h"}, code: 0, stdout: "--cacert FILE", noStderr: true},
		{name: "bench -h shows --cacert", args: []string{"bench", "-h"}, code: 0, stdout: "--cacert FILE", noStderr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append(dataEnv(t), tt.env...), tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.stdout) {
				t.Errorf("stdout %q does not contain %q", r.stdout, tt.stdout)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.stderr)
			}
			if tt.noStderr && r.stderr != "" {
				t.Errorf("unexpected stderr %q", r.stderr)
			}
		})
	}
}

// TestCACert: leaf get and leaf bench reach a server whose certificate only
// --cacert vouches for, over HTTPS and (bench) gRPC; without it the
// certificate is refused.
func TestCACert(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	s := serveInProcess(t, dataEnv(t), "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile)
	m := grpcListeningRE.FindStringSubmatch(s.Log.String())
	if m == nil {
		t.Fatalf("no gRPC address logged:\n%s", s.Log.String())
	}
	https := "https://" + s.Addr
	bench := []string{"bench", "--tag", config.SeedTag, "--concurrency", "2", "--duration", "200ms", "--quiet"}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"get", []string{"get", config.SeedTag, "--count", "3", "--server", https, "--cacert", certFile}, 0, "1\n2\n3\n", ""},
		{"get without --cacert", []string{"get", config.SeedTag, "--server", https}, 1, "", "certificate signed by unknown authority"},
		{"bench https", slices.Concat(bench, []string{"--server", https, "--cacert", certFile}), 0, "  requests ", ""},
		{"bench https without --cacert", slices.Concat(bench, []string{"--server", https}), 1, "", "first request to " + https + " failed"},
		{"bench grpc", slices.Concat(bench, []string{"--grpc", m[1], "--cacert", certFile}), 0, "  requests ", ""},
		{"bench grpc without --cacert", slices.Concat(bench, []string{"--grpc", m[1]}), 1, "", "first request to " + m[1] + " failed"},
	}
	for _, tt := range tests {
		// One after the other: get's IDs are the first the tag hands out.
		r := runCLI(t, nil, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.name, r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
		}
	}
}

func TestPickVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stamped, module, want string
	}{
		{"dev", "(devel)", "dev"}, // -buildvcs=false, no stamp
		{"dev", "", "dev"},
		{"", "", "dev"},
		{"v1.2.3", "(devel)", "v1.2.3"}, // -buildvcs=false, stamped by the Makefile
		{"dev", "v1.4.0", "v1.4.0"},     // go install module@v1.4.0
		{"c545110-dirty", "v0.0.0-20260101-c545110+dirty", "c545110-dirty"}, // stamped and VCS-stamped: the stamp
	}
	for _, tt := range tests {
		if got := pickVersion(tt.stamped, tt.module); got != tt.want {
			t.Errorf("pickVersion(%q, %q) = %q, want %q", tt.stamped, tt.module, got, tt.want)
		}
	}
}

// TestMakefileStampsVersion: 'make build' with -buildvcs=false (the go
// command then records no VCS version) still reports the git description.
func TestMakefileStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	want, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("no git description here: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "leaf")
	cmd := exec.Command("make", "-C", "../..", "build", "BIN="+bin)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	r := runBin(t, bin, t.TempDir(), testutil.CleanEnv(), "version")
	if first, _, _ := strings.Cut(r.stdout, "\n"); r.code != 0 || first != "leaf "+strings.TrimSpace(string(want)) {
		t.Errorf("version: exit %d, first line %q; want %q", r.code, first, "leaf "+strings.TrimSpace(string(want)))
	}
}
