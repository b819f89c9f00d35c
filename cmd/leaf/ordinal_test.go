package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/testutil"
)

// removeEtcdTree deletes the keys under prefix, a test's namespace.
func removeEtcdTree(t *testing.T, addr, prefix string) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		t.Errorf("cleanup: delete %s: %v", prefix, err)
	}
}

// runServeAs runs serve in-process on a host named host (nil: the host's
// name cannot be read) and stops it as soon as it listens.
func runServeAs(t *testing.T, host func() (string, error), env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, env: env, hostname: host, onListen: func(net.Addr) { cancel() }}
	code := a.run(ctx, append([]string{"serve"}, args...))
	return result{code, out.String(), errOut.String()}
}

func named(name string) func() (string, error) {
	return func() (string, error) { return name, nil }
}

// TestOrdinalCheck: the ordinal registry's worker ID comes from the host
// name, or from snowflake.ordinal.hostname (LEAF_SNOWFLAKE_ORDINAL_HOSTNAME,
// --ordinal-hostname) over it. serve --check reports the worker ID it would
// claim, or refuses with exit 2 a name without an ordinal and an ID outside
// the layout, and serve refuses alike, with the same message and before it
// creates anything. The ordinal keys' flags win over the environment.
func TestOrdinalCheck(t *testing.T) {
	t.Parallel()
	base := []string{"LEAF_SNOWFLAKE_REGISTRY=ordinal", "LEAF_SNOWFLAKE_ORDINAL_CLAIM=none", "LEAF_SEGMENT_ENABLED=false"}
	for _, tt := range []struct {
		name string
		host func() (string, error) // this host's name
		env  []string
		args []string // serve's flags
		want string   // in serve --check's summary, or in the refusal
		ok   bool
	}{
		{"leaf-0", named("leaf-0"), nil, nil, "ordinal worker 0 (leaf-0 + offset 0), no claim", true},
		{"leaf-12", named("leaf-12"), nil, nil, "ordinal worker 12 (leaf-12 + offset 0)", true},
		{"my-app-3", named("my-app-3"), nil, nil, "ordinal worker 3 (my-app-3 + offset 0)", true},
		{"fully qualified", named("leaf-7.leaf-pods.default.svc.cluster.local"), nil, nil, "ordinal worker 7 (", true},
		{"offset", named("leaf-12"), []string{"LEAF_SNOWFLAKE_ORDINAL_OFFSET=100"}, nil, "ordinal worker 112 (leaf-12 + offset 100)", true},
		{"last ID of the layout", named("leaf-1000"), []string{"LEAF_SNOWFLAKE_ORDINAL_OFFSET=23"}, nil, "ordinal worker 1023", true},
		{"override wins over the host name", named("laptop"), []string{"LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-5"}, nil, "ordinal worker 5 (leaf-5 + offset 0)", true},
		{"claimed in etcd", named("leaf-2"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=etcd", "LEAF_SNOWFLAKE_ETCD=127.0.0.1:1"}, nil,
			"ordinal worker 2 (leaf-2 + offset 0), claimed in etcd 127.0.0.1:1 /leaf/snowflake/leaf", true},
		{"claimed in mysql", named("leaf-2"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=mysql", "LEAF_SNOWFLAKE_DSN=leaf:s3cret@tcp(127.0.0.1:1)/leaf"}, nil,
			"ordinal worker 2 (leaf-2 + offset 0), claimed in mysql leaf:xxxxx@tcp(127.0.0.1:1)/leaf", true},
		{"offset flag", named("leaf-12"), nil, []string{"--ordinal-offset", "100"}, "ordinal worker 112 (leaf-12 + offset 100)", true},
		{"offset flag over the environment", named("leaf-12"), []string{"LEAF_SNOWFLAKE_ORDINAL_OFFSET=5"}, []string{"--ordinal-offset=100"}, "ordinal worker 112 (leaf-12 + offset 100)", true},
		{"pod name flag over the environment and the host name", named("laptop"), []string{"LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-5"}, []string{"--ordinal-hostname", "leaf-9"},
			"ordinal worker 9 (leaf-9 + offset 0)", true},
		{"claim flag over the environment", named("leaf-2"), []string{"LEAF_SNOWFLAKE_ETCD=127.0.0.1:1"}, []string{"--ordinal-claim", "ETCD"},
			"ordinal worker 2 (leaf-2 + offset 0), claimed in etcd 127.0.0.1:1 /leaf/snowflake/leaf", true},
		{"every ordinal key a flag", named("laptop"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=", "LEAF_SNOWFLAKE_REGISTRY="},
			[]string{"--snowflake-registry", "ordinal", "--ordinal-claim", "mysql", "--snowflake-dsn", "leaf:s3cret@tcp(127.0.0.1:1)/leaf", "--ordinal-hostname", "leaf-2", "--ordinal-offset", "10"},
			"ordinal worker 12 (leaf-2 + offset 10), claimed in mysql leaf:xxxxx@tcp(127.0.0.1:1)/leaf", true},

		{"leaf", named("leaf"), nil, nil, `snowflake.registry ordinal: this host's name: invalid argument: host name "leaf" is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): it has no "-ORDINAL" at the end; run it as a StatefulSet pod, or set snowflake.ordinal.hostname (LEAF_SNOWFLAKE_ORDINAL_HOSTNAME or --ordinal-hostname) to the pod's name`, false},
		{"leaf-", named("leaf-"), nil, nil, `host name "leaf-" is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): nothing follows its last "-"`, false},
		{"leaf-x", named("leaf-x"), nil, nil, `"x" after its last "-" is not a decimal number`, false},
		{"leaf-03", named("leaf-03"), nil, nil, `the ordinal "03" has a leading zero`, false},
		{"very large", named("leaf-99999999999999999999"), nil, nil, "longer than any Kubernetes ordinal", false},
		{"above the layout", named("leaf-1024"), nil, nil, "ordinal 1024 + offset 0 = worker ID 1024, above the layout's maximum 1023", false},
		{"offset past the layout", named("leaf-1000"), []string{"LEAF_SNOWFLAKE_ORDINAL_OFFSET=24"}, nil, "ordinal 1000 + offset 24 = worker ID 1024, above the layout's maximum 1023", false},
		{"fewer worker bits", named("leaf-4"), []string{"LEAF_SNOWFLAKE_WORKER_BITS=2", "LEAF_SNOWFLAKE_SEQUENCE_BITS=20"}, nil, "above the layout's maximum 3", false},
		{"offset alone past the layout", named("leaf-0"), []string{"LEAF_SNOWFLAKE_ORDINAL_OFFSET=1024"}, nil, "snowflake.ordinal.offset (from LEAF_SNOWFLAKE_ORDINAL_OFFSET): 1024 is outside the layout's worker IDs 0..1023", false},
		{"bad override", named("leaf-1"), []string{"LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf"}, nil, `snowflake.ordinal.hostname (from LEAF_SNOWFLAKE_ORDINAL_HOSTNAME): invalid argument: host name "leaf" is not a StatefulSet pod name`, false},
		{"host name unreadable", func() (string, error) { return "", errors.New("uname failed") }, nil, nil,
			"snowflake.registry ordinal: cannot read this host's name (uname failed)", false},
		{"no claim chosen", named("leaf-1"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM="}, nil, "snowflake.ordinal.claim: required with registry ordinal: etcd or mysql", false},
		{"claim in etcd without endpoints", named("leaf-1"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=etcd"}, nil, "snowflake.etcd: required when snowflake.ordinal.claim is etcd", false},
		{"claim in mysql with a bad DSN", named("leaf-1"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=mysql", "LEAF_SNOWFLAKE_DSN=leaf@127.0.0.1"}, nil,
			"snowflake.dsn (worker registry): mysql: parse DSN", false},
		{"offset flag not a number", named("leaf-1"), nil, []string{"--ordinal-offset", "x"},
			`invalid value "x" for flag -ordinal-offset: "x" is not a whole number`, false},
		{"negative offset flag", named("leaf-1"), nil, []string{"--ordinal-offset", "-1"},
			"snowflake.ordinal.offset (from --ordinal-offset): -1 is outside the layout's worker IDs 0..1023", false},
		{"offset flag alone past the layout", named("leaf-0"), []string{"LEAF_SNOWFLAKE_ORDINAL_OFFSET=0"}, []string{"--ordinal-offset", "1024"},
			"snowflake.ordinal.offset (from --ordinal-offset): 1024 is outside the layout's worker IDs 0..1023", false},
		{"offset flag taking the ordinal past the layout", named("leaf-1000"), nil, []string{"--ordinal-offset", "24"},
			"ordinal 1000 + offset 24 = worker ID 1024, above the layout's maximum 1023", false},
		{"claim flag not a claim", named("leaf-1"), nil, []string{"--ordinal-claim", "zookeeper"},
			`invalid value "zookeeper" for flag -ordinal-claim: "zookeeper" is not one of none, etcd, mysql`, false},
		{"empty claim flag", named("leaf-1"), nil, []string{"--ordinal-claim="},
			`invalid value "" for flag -ordinal-claim: "" is not one of none, etcd, mysql`, false},
		{"claim flag etcd without endpoints", named("leaf-1"), nil, []string{"--ordinal-claim", "etcd"},
			"snowflake.etcd: required when snowflake.ordinal.claim is etcd (set --etcd host:port)", false},
		{"no claim, told which flag sets it", named("leaf-1"), []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM="}, []string{"--snowflake-registry", "ordinal"},
			"(a copied configuration issues the same IDs); set LEAF_SNOWFLAKE_ORDINAL_CLAIM or --ordinal-claim", false},
		{"pod name flag without an ordinal", named("leaf-1"), nil, []string{"--ordinal-hostname", "leaf-x"},
			`snowflake.ordinal.hostname (from --ordinal-hostname): invalid argument: host name "leaf-x" is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): "x" after its last "-" is not a decimal number`, false},
		{"pod name flag over a good environment", named("leaf-1"), []string{"LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-2"}, []string{"--ordinal-hostname", "leaf-03"},
			`snowflake.ordinal.hostname (from --ordinal-hostname): invalid argument: host name "leaf-03" is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): the ordinal "03" has a leading zero`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			env := append(append([]string{"LEAF_DATA_DIR=" + data}, base...), tt.env...)
			var out, errOut bytes.Buffer
			a := &app{stdout: &out, stderr: &errOut, env: env, hostname: tt.host}
			r := result{a.run(context.Background(), append([]string{"serve", "--check"}, tt.args...)), out.String(), errOut.String()}
			if tt.ok {
				if r.code != 0 || !strings.Contains(r.stdout, tt.want) {
					t.Fatalf("serve --check: exit %d, want 0 and %q in\n%s%s", r.code, tt.want, r.stdout, r.stderr)
				}
				checkNotCreated(t, data)
				return
			}
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("serve --check: exit %d, want %d and %q in\n%s", r.code, exitUsage, tt.want, r.stderr)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("the message shows a password:\n%s", r.stderr)
			}
			s := runServeAs(t, tt.host, env, tt.args...)
			if s.code != r.code || s.stderr != r.stderr {
				t.Errorf("serve says (exit %d)\n%s\nserve --check says (exit %d)\n%s", s.code, s.stderr, r.code, r.stderr)
			}
			checkNotCreated(t, data)
		})
	}
}

// TestOrdinalServe: the real binary, with the pod's name given as the
// downward API would (LEAF_SNOWFLAKE_ORDINAL_HOSTNAME) and no claim, issues
// under the pod's ordinal plus the offset; a second process on the same
// data directory is refused. A host name without an ordinal exits 2.
func TestOrdinalServe(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	dir := t.TempDir()
	env := append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false", "LEAF_SNOWFLAKE_REGISTRY=ordinal", "LEAF_SNOWFLAKE_ORDINAL_CLAIM=none",
		"LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-12", "LEAF_SNOWFLAKE_ORDINAL_OFFSET=100")
	a := testutil.StartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0")
	ids := drawSnowflake(t, 300*time.Millisecond, a)
	if w := onlyWorker(t, "leaf-12", ids[0]); w != 112 {
		t.Fatalf("leaf-12 with offset 100 issues as worker %d, want 112", w)
	}
	b, refused := testutil.TryStartLeaf(t, bin, dir, env, "--listen", "127.0.0.1:0")
	if !refused || b.ExitCode() != exitFailure || !strings.Contains(b.Log.String(), "in use by another process") {
		t.Fatalf("a second process on the data directory: refused %v, exit %d:\n%s", refused, b.ExitCode(), b.Log.String())
	}

	r := runBin(t, bin, t.TempDir(), append(testutil.CleanEnv(), "LEAF_SNOWFLAKE_REGISTRY=ordinal", "LEAF_SNOWFLAKE_ORDINAL_CLAIM=none", "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-x"), "serve")
	if r.code != exitUsage || !strings.Contains(r.stderr, `host name "leaf-x" is not a StatefulSet pod name`) {
		t.Fatalf("serve as leaf-x: exit %d, want %d:\n%s", r.code, exitUsage, r.stderr)
	}
}

// TestOrdinalClaimSameOrdinal: two real servers with the same pod name (two
// StatefulSets of one name in two namespaces sharing the registry, or a
// configuration copied to another host: distinct endpoints, one ordinal)
// never issue under one worker ID: the second waits out the claim and is
// refused with leaf.ErrWorkerInUse's message, exit 1. A kill -9 of the first
// and an immediate restart waits for its old claim to lapse and serves as
// the same worker again. No ID is issued twice.
func TestOrdinalClaimSameOrdinal(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	for _, tc := range []struct {
		claim string
		env   func(t *testing.T) []string
	}{
		{"etcd", func(t *testing.T) []string {
			addr, name := testutil.Etcd(t), testutil.UniqueName()
			t.Cleanup(func() { removeEtcdTree(t, addr, etcd.DefaultPrefix+name+"/") })
			return []string{"LEAF_SNOWFLAKE_ETCD=" + addr, "LEAF_SNOWFLAKE_NAME=" + name}
		}},
		{"mysql", func(t *testing.T) []string { return []string{"LEAF_SNOWFLAKE_DSN=" + testutil.MySQL(t)} }},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			t.Parallel()
			env := append(append(testutil.CleanEnv(), "LEAF_SEGMENT_ENABLED=false", "LEAF_SNOWFLAKE_LEASE_TTL=3s",
				"LEAF_SNOWFLAKE_REGISTRY=ordinal", "LEAF_SNOWFLAKE_ORDINAL_CLAIM="+tc.claim,
				"LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-3"), tc.env(t)...)
			argsA := []string{"--listen", "127.0.0.1:0", "--snowflake-endpoint", "10.7.7.7:8080"}
			argsB := []string{"--listen", "127.0.0.1:0", "--snowflake-endpoint", "10.8.8.8:8080"}
			dirA, dirB := t.TempDir(), t.TempDir()

			a, refused := testutil.TryStartLeaf(t, bin, dirA, env, argsA...)
			if refused {
				t.Fatalf("first server refused (exit %d):\n%s", a.ExitCode(), a.Log.String())
			}
			b, refused := testutil.TryStartLeaf(t, bin, dirB, env, argsB...)
			if !refused {
				t.Fatalf("a second server with the pod name leaf-3 started:\n%s", b.Log.String())
			}
			msg := b.Log.String()
			for _, want := range []string{leaf.ErrWorkerInUse.Error(), "worker 3", "10.7.7.7:8080", "another namespace"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, msg)
				}
			}
			if code := b.ExitCode(); code != exitFailure {
				t.Errorf("second server: exit %d, want %d", code, exitFailure)
			}
			t.Logf("second server refused: %s", lastLine(msg))
			all := drawSnowflake(t, time.Second, a)
			if w := onlyWorker(t, "leaf-3", all[0]); w != 3 {
				t.Fatalf("leaf-3 issues as worker %d", w)
			}

			if err := a.Cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-a.Exited
			a2, refused := testutil.TryStartLeaf(t, bin, dirA, env, argsA...)
			if refused {
				t.Fatalf("restart after kill -9 refused (exit %d):\n%s", a2.ExitCode(), a2.Log.String())
			}
			again := drawSnowflake(t, time.Second, a2)
			if w := onlyWorker(t, "restarted leaf-3", again[0]); w != 3 {
				t.Fatalf("restarted leaf-3 issues as worker %d", w)
			}
			seen := map[int64]bool{}
			for _, id := range append(all[0], again[0]...) {
				if seen[id] {
					t.Fatalf("ID %d issued twice", id)
				}
				seen[id] = true
			}
			// A graceful stop releases the claim: the next start is at once,
			// without a warning about a held claim.
			if code := a2.Stop(t); code != 0 {
				t.Fatalf("graceful stop: exit %d:\n%s", code, a2.Log.String())
			}
			a3, refused := testutil.TryStartLeaf(t, bin, dirB, env, argsB...)
			if refused || strings.Contains(a3.Log.String(), "held by another") {
				t.Fatalf("start after a graceful stop: refused %v:\n%s", refused, a3.Log.String())
			}
			resp, err := http.Get(a3.URL("/api/snowflake/get/x"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, id := range testutil.ParseIDs(t, string(body)) {
				if seen[id] {
					t.Fatalf("ID %d issued twice", id)
				}
			}
		})
	}
}
