package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/tagshape"
)

// runServeUntilListening runs serve in-process and stops it as soon as it
// listens, so that a configuration a test expects refused cannot leave a
// server running if serve accepts it after all.
func runServeUntilListening(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, env: env, onListen: func(net.Addr) { cancel() }}
	code := a.run(ctx, append([]string{"serve"}, args...))
	return result{code, out.String(), errOut.String()}
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeCheck: serve --check accepts what serve would start on, with a
// summary on stdout, and refuses what serve refuses, with exit 2 and exactly
// serve's message. In neither case does it touch anything: the data
// directory is not created, and the stores and registries named are
// addresses nothing listens on, which a check that connected would fail on.
func TestServeCheck(t *testing.T) {
	t.Parallel()
	files := t.TempDir()
	token := writeFile(t, files, "token", "0123456789abcdef0123456789abcdef\n")
	shortToken := writeFile(t, files, "short-token", "abc\n")
	cert, key, _ := selfSigned(t, files)
	notPEM := writeFile(t, files, "not.pem", "not a certificate\n")
	closed := closedAddr(t) // a database, registry or etcd nothing listens on
	mysqlDSN := "leaf:s3cret@tcp(" + closed + ")/leaf"
	yamlZK := writeFile(t, files, "zk.yml", "listen: 0.0.0.0:8080\nsegment:\n  store: postgres\n  dsn: postgres://leaf:s3cret@"+closed+"/leaf\n"+
		"snowflake:\n  registry: zookeeper\n  zk: "+closed+"\n  name: orders\n")
	yamlUnknown := writeFile(t, files, "unknown.yml", "listen: 127.0.0.1:8080\nsegmnet:\n  store: mysql\n")
	opaqueKey := writeFile(t, files, "opaque-key", serveOpaqueKey+"\n")
	shortKey := writeFile(t, files, "short-opaque-key", serveOpaqueKey[:30]+"\n")
	exposed := []string{"LEAF_LISTEN=0.0.0.0:8080", "LEAF_ADMIN_TOKEN_FILE=" + token}
	shared := append(exposed[:2:2], "LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN="+mysqlDSN,
		"LEAF_SNOWFLAKE_REGISTRY=etcd", "LEAF_SNOWFLAKE_ETCD="+closed)

	good := []struct {
		name string
		env  []string
		args []string
		want []string // substrings of stdout
	}{
		{"defaults", nil, nil,
			[]string{"config OK\n", "listen       127.0.0.1:8080 (no TLS, no admin token, no rate limit)", "segment      sqlite ", "local, worker ID 0", "layout leaf: 41/10/12 bits, epoch 2010-11-04T01:42:54.657Z, until 2080-07-10",
				"opaque_key   none (opaque tags are refused)", "ordered      forward, advertise http://127.0.0.1:8080, owner lease 10s\n"}},
		{"ordered tags redirected, advertised URL", []string{"LEAF_SEGMENT_ORDERED=redirect", "LEAF_SEGMENT_OWNER_LEASE=3s"}, []string{"--advertise-url", "http://leaf-0.leaf:8080"},
			[]string{"ordered      redirect, advertise http://leaf-0.leaf:8080, owner lease 3s\n"}},
		{"ordered tags on port 0", nil, []string{"--listen", "127.0.0.1:0"},
			[]string{"ordered      forward, advertise http://127.0.0.1:<listen port>, owner lease 10s\n"}},
		{"opaque key file", nil, []string{"--opaque-key-file", opaqueKey},
			[]string{"opaque_key   key check " + tagshape.KeyCheck(serveOpaqueKeyBytes(t)) + "\n"}},
		{"opaque key from the environment", []string{"LEAF_SEGMENT_OPAQUE_KEY=" + serveOpaqueKey}, nil,
			[]string{"opaque_key   key check " + tagshape.KeyCheck(serveOpaqueKeyBytes(t)) + "\n"}},
		{"mysql and etcd, token file, every interface", shared, nil,
			[]string{"listen       0.0.0.0:8080 (no TLS, admin token, no rate limit)", "segment      mysql leaf:xxxxx@tcp(" + closed + ")/leaf", "snowflake    etcd " + closed + " /leaf/snowflake/leaf"}},
		{"postgres and zookeeper from a YAML file", []string{"LEAF_ADMIN_TOKEN_FILE=" + token}, []string{"--config", yamlZK},
			[]string{"segment      postgres postgres://leaf:xxxxx@" + closed + "/leaf", "snowflake    zookeeper " + closed + " /snowflake/orders"}},
		{"mysql registry on the segment store's database", shared, []string{"--snowflake-registry", "mysql"},
			[]string{"snowflake    mysql leaf:xxxxx@tcp(" + closed + ")/leaf"}},
		{"TLS, gRPC and a rate limit", nil, []string{"--tls-cert", cert, "--tls-key", key, "--grpc-listen", "127.0.0.1:0", "--rate-limit", "500"},
			[]string{"(TLS, no admin token, rate limit 500/s per client)", "grpc_listen  127.0.0.1:0"}},
		{"worker map with this endpoint", []string{`LEAF_SNOWFLAKE_WORKER_IDS={"10.0.0.7:8080":5,"10.0.0.8:8080":6}`}, []string{"--snowflake-endpoint", "10.0.0.7:8080"},
			[]string{"local, worker ID 5 from worker_ids, endpoint 10.0.0.7:8080"}},
		{"the only server, said so", exposed, []string{"--single-node"},
			[]string{"segment      sqlite "}},
		{"segment mode off", []string{"LEAF_SEGMENT_ENABLED=false"}, nil,
			[]string{"segment      off"}},
	}
	for _, tt := range good {
		t.Run("ok/"+tt.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			r := runCLI(t, append([]string{"LEAF_DATA_DIR=" + data}, tt.env...), append([]string{"serve", "--check"}, tt.args...)...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not say %q:\n%s", w, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "s3cret") || strings.Contains(r.stdout, "0123456789abcdef") || showsOpaqueKey(r.stdout+r.stderr) {
				t.Errorf("the summary shows a secret:\n%s", r.stdout)
			}
			checkNotCreated(t, data)
		})
	}

	bad := []struct {
		name string
		env  []string
		args []string
		want []string // substrings of stderr
	}{
		{"bad flag value", nil, []string{"--log-level", "loud"},
			[]string{`invalid value "loud" for flag -log-level: "loud" is not one of debug, info, warn, error`}},
		{"unknown YAML key", nil, []string{"--config", yamlUnknown},
			[]string{"segmnet"}},
		{"advertise URL with a path", nil, []string{"--advertise-url", "http://10.0.0.7:8080/leaf"},
			[]string{`advertise_url (from --advertise-url): "http://10.0.0.7:8080/leaf" has a path`}},
		{"missing config file", nil, []string{"--config", filepath.Join(files, "nope.yml")},
			[]string{"nope.yml", "does not exist"}},
		{"missing token file", nil, []string{"--admin-token-file", filepath.Join(files, "nope")},
			[]string{"admin.token_file " + filepath.Join(files, "nope") + ": file does not exist"}},
		{"short token", nil, []string{"--admin-token-file", shortToken},
			[]string{"admin.token_file " + shortToken + ": token too short (3 bytes), want at least 16"}},
		{"exposed without a token", []string{"LEAF_LISTEN=0.0.0.0:8080"}, []string{"--single-node"},
			[]string{"listen 0.0.0.0:8080 is reachable from other hosts and no admin token is set"}},
		{"node-local state on every interface", exposed, nil,
			[]string{"single_node: listen 0.0.0.0:8080 (every interface) is reachable from other hosts"}},
		{"missing TLS files", nil, []string{"--tls-cert", filepath.Join(files, "c.pem"), "--tls-key", filepath.Join(files, "k.pem")},
			[]string{"load TLS certificate " + filepath.Join(files, "c.pem"), "no such file or directory"}},
		{"TLS files that are not PEM", nil, []string{"--tls-cert", notPEM, "--tls-key", notPEM},
			[]string{"load TLS certificate " + notPEM, "failed to find any PEM data"}},
		{"certificate without a key", nil, []string{"--tls-cert", cert},
			[]string{"tls.cert and tls.key go together"}},
		{"mysql DSN without a database", nil, []string{"--segment-store", "mysql", "--segment-dsn", "leaf:s3cret@tcp(" + closed + ")"},
			[]string{"segment.dsn: mysql: parse DSN: invalid argument: invalid DSN: missing the slash separating the database name"}},
		{"mysql DSN that names no database", nil, []string{"--segment-store", "mysql", "--segment-dsn", "leaf:s3cret@tcp(" + closed + ")/"},
			[]string{"segment.dsn: mysql: parse DSN leaf@" + closed + ": invalid argument: the DSN names no database"}},
		{"malformed postgres DSN", nil, []string{"--segment-store", "postgres", "--segment-dsn", "postgres://leaf:s3cret@" + closed + ":99999/leaf"},
			[]string{"segment.dsn: postgres: parse DSN: invalid argument:"}},
		{"malformed registry DSN", []string{"LEAF_SINGLE_NODE=true"}, []string{"--snowflake-registry", "mysql", "--snowflake-dsn", "leaf@" + closed},
			[]string{"snowflake.dsn (worker registry): mysql: parse DSN: invalid argument: invalid DSN"}},
		{"layout that runs out", []string{"LEAF_SNOWFLAKE_TIME_BITS=30"}, nil,
			[]string{"snowflake.time_bits (from LEAF_SNOWFLAKE_TIME_BITS): layout 30/10/12 bits", "less than 10 years from now"}},
		{"worker map without this endpoint", []string{`LEAF_SNOWFLAKE_WORKER_IDS={"10.0.0.8:8080":6}`}, []string{"--snowflake-endpoint", "10.0.0.7:8080"},
			[]string{"snowflake.worker_ids has no worker ID for this server's endpoint 10.0.0.7:8080", "it has 10.0.0.8:8080"}},
		{"worker map above the layout", []string{`LEAF_SNOWFLAKE_WORKER_IDS={"10.0.0.7:8080":1024}`}, []string{"--snowflake-endpoint", "10.0.0.7:8080"},
			[]string{"snowflake.worker_ids: worker ID 1024 of 10.0.0.7:8080 is outside the layout's 0..1023"}},
		{"worker map giving one ID twice", []string{`LEAF_SNOWFLAKE_WORKER_IDS={"10.0.0.7:8080":1,"10.0.0.8:8080":1}`}, []string{"--snowflake-endpoint", "10.0.0.7:8080"},
			[]string{"snowflake.worker_ids: worker ID 1 given to both 10.0.0.7:8080 and 10.0.0.8:8080"}},
		{"worker map with a key that is no endpoint", []string{`LEAF_SNOWFLAKE_WORKER_IDS={"10.0.0.7:8080":1,"ten:80":2}`}, []string{"--snowflake-endpoint", "10.0.0.7:8080"},
			[]string{`snowflake.worker_ids: invalid argument: endpoint IP "ten" is not an IP address`}},
		{"missing opaque key file", nil, []string{"--opaque-key-file", filepath.Join(files, "nope")},
			[]string{"segment.opaque_key_file " + filepath.Join(files, "nope") + ": file does not exist"}},
		{"short opaque key file", []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + shortKey}, nil,
			[]string{"segment.opaque_key_file " + shortKey + ": invalid opaque key: 30 hexadecimal digits, want 32..128"}},
		{"opaque key not hex", []string{"LEAF_SEGMENT_OPAQUE_KEY=" + serveOpaqueKey[:62] + "zz"}, nil,
			[]string{"segment.opaque_key (from LEAF_SEGMENT_OPAQUE_KEY): invalid opaque key: character 63 is not a hexadecimal digit"}},
		{"negative rate limit", nil, []string{"--rate-limit", "-1"},
			[]string{"rate_limit.per_second (from --rate-limit): -1 is negative"}},
		{"several mistakes at once", []string{"LEAF_SNOWFLAKE_TIME_BITS=30"}, []string{"--tls-cert", notPEM, "--tls-key", notPEM, "--segment-store", "postgres", "--segment-dsn", "postgres://x:99999/"},
			[]string{"snowflake.time_bits", "load TLS certificate", "segment.dsn: postgres"}},
	}
	for _, tt := range bad {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			env := append([]string{"LEAF_DATA_DIR=" + data}, tt.env...)
			r := runCLI(t, env, append([]string{"serve", "--check"}, tt.args...)...)
			if r.code != exitUsage || r.stdout != "" {
				t.Errorf("exit %d, want %d; stdout %q", r.code, exitUsage, r.stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "s3cret") || showsOpaqueKey(r.stderr) {
				t.Errorf("the message shows a secret:\n%s", r.stderr)
			}
			checkNotCreated(t, data)
			s := runServeUntilListening(t, env, tt.args...)
			if s.code != r.code || s.stderr != r.stderr {
				t.Errorf("serve says (exit %d)\n%s\nserve --check says (exit %d)\n%s", s.code, s.stderr, r.code, r.stderr)
			}
			checkNotCreated(t, data)
		})
	}
}

// serveOpaqueKey is an opaque key recognisable in any output: see
// showsOpaqueKey.
const serveOpaqueKey = "0beefed0beefed0beefed0beefed0beefed0beefed0beefed0beefed01234567"

func serveOpaqueKeyBytes(t *testing.T) []byte {
	t.Helper()
	key, err := tagshape.ParseKey(serveOpaqueKey)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// showsOpaqueKey reports whether s holds any 8 hex digits of serveOpaqueKey,
// in either case.
func showsOpaqueKey(s string) bool {
	s = strings.ToLower(s)
	for i := 0; i+8 <= len(serveOpaqueKey); i++ {
		if strings.Contains(s, serveOpaqueKey[i:i+8]) {
			return true
		}
	}
	return false
}

// checkNotCreated fails the test if path exists.
func checkNotCreated(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(path)
		t.Errorf("%s was created (%v): %v", path, err, entries)
	}
}

// TestServeCheckWarnsAsServe: what serve would warn about (an unknown LEAF_
// variable) is on stderr, in serve's words, and does not fail the check.
func TestServeCheckWarnsAsServe(t *testing.T) {
	t.Parallel()
	r := runCLI(t, append(dataEnv(t), "LEAF_LISTN=0.0.0.0:80"), "serve", "--check")
	if r.code != 0 || !strings.Contains(r.stderr, "ignoring unknown environment variable") || !strings.Contains(r.stderr, "LEAF_LISTN") ||
		!strings.HasPrefix(r.stdout, "config OK\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, dataEnv(t), "serve", "--check", "extra"); r.code != exitUsage || !strings.Contains(r.stderr, `takes no arguments, got "extra"`) {
		t.Errorf("with an argument: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestServeCheckFreshDirectory runs the binary as a user would, with no
// configuration in an empty working directory: --check succeeds and leaves
// the directory empty (no ./leaf-data, no SQLite file, no worker lock).
func TestServeCheckFreshDirectory(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--check"},
		{"serve", "--check", "--listen", "127.0.0.1:0", "--worker-id", "3"},
		{"serve", "--check", "--listen", "0.0.0.0:0", "--single-node", "--insecure-admin"},
	} {
		r := runBin(t, bin, dir, testutil.CleanEnv(), args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "config OK\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > 0 {
			t.Errorf("%q left %d entries in the working directory, the first %s", args, len(entries), entries[0].Name())
		}
	}
}
