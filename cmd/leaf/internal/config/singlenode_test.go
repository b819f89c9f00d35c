package config

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// fakeResolver answers from a table; a name missing from it does not resolve.
func fakeResolver(table map[string][]string) Resolver {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		addrs, ok := table[host]
		if !ok {
			return nil, fmt.Errorf("lookup %s: no such host", host)
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

var testResolver = fakeResolver(map[string][]string{
	"loopback.test": {"127.0.0.1", "::1"},
	"mapped.test":   {"::ffff:127.0.0.2"},
	"mixed.test":    {"127.0.0.1", "10.0.0.7"},
	"lan.test":      {"192.0.2.10"},
	"empty.test":    {},
})

// checkSingleNode loads src as serve does and applies the guard.
func checkSingleNode(t *testing.T, src Sources) error {
	t.Helper()
	cfg, origins, _, err := LoadWithOrigins(src)
	if err != nil {
		t.Fatalf("load %+v: %v", src, err)
	}
	return cfg.CheckSingleNode(context.Background(), origins, testResolver)
}

// checkRefusal checks the error of a refused configuration: a usage error
// that says why and how out.
func checkRefusal(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNodeLocal) {
		t.Errorf("%s: %v should wrap ErrInvalid and ErrNodeLocal", what, err)
	}
	for _, s := range []string{"single_node: true", "LEAF_SINGLE_NODE=true", "--single-node", "would each issue the same IDs"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

// TestSingleNodeListen: the defaults (SQLite, local worker 0) on each kind of
// listen address, HTTP and gRPC.
func TestSingleNodeListen(t *testing.T) {
	tests := []struct {
		listen, grpc string
		reachable    bool
		why          string // in the message
	}{
		{"127.0.0.1:8080", "", false, ""},
		{"127.9.9.9:0", "", false, ""},
		{"[::1]:8080", "", false, ""},
		{"[::ffff:127.0.0.1]:8080", "", false, ""},
		{"localhost:8080", "", false, ""},
		{"LocalHost:8080", "", false, ""},
		{"loopback.test:8080", "", false, ""},
		{"mapped.test:8080", "", false, ""},
		{"0.0.0.0:8080", "", true, "listen 0.0.0.0:8080 (every interface)"},
		{":8080", "", true, "listen :8080 (every interface)"},
		{"[::]:8080", "", true, "every interface"},
		{"[::ffff:0.0.0.0]:8080", "", true, "every interface"},
		{"10.1.2.3:8080", "", true, "not a loopback address"},
		{"[fe80::1%eth0]:8080", "", true, "not a loopback address"},
		{"[2001:db8::1]:8080", "", true, "not a loopback address"},
		{"lan.test:8080", "", true, "lan.test resolves to 192.0.2.10"},
		{"mixed.test:8080", "", true, "mixed.test resolves to 10.0.0.7"},
		{"empty.test:8080", "", true, "resolves to no address"},
		{"nowhere.test:8080", "", true, "nowhere.test does not resolve"},
		{"127.0.0.1:8080", "127.0.0.1:9090", false, ""},
		{"127.0.0.1:8080", "localhost:9090", false, ""},
		{"127.0.0.1:8080", ":9090", true, "grpc_listen :9090 (every interface)"},
		{"0.0.0.0:8080", "10.0.0.1:9090", true, "listen 0.0.0.0:8080 (every interface) and grpc_listen 10.0.0.1:9090 (not a loopback address) are"},
	}
	for _, tt := range tests {
		what := fmt.Sprintf("listen %q grpc_listen %q", tt.listen, tt.grpc)
		err := checkSingleNode(t, Sources{Env: []string{"LEAF_LISTEN=" + tt.listen, "LEAF_GRPC_LISTEN=" + tt.grpc}})
		if got := err != nil; got != tt.reachable {
			t.Errorf("%s: err = %v, want refused %t", what, err, tt.reachable)
			continue
		}
		if err != nil {
			checkRefusal(t, what, err)
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("%s: %q does not say %q", what, err, tt.why)
			}
		}
	}
}

// TestSingleNodeDecision: store × registry × explicit worker ×
// acknowledgement, on an address other hosts reach and on loopback.
func TestSingleNodeDecision(t *testing.T) {
	const (
		mysql     = "LEAF_SEGMENT_STORE=mysql LEAF_SEGMENT_DSN=u:p@tcp(db:3306)/leaf"
		postgres  = "LEAF_SEGMENT_STORE=postgres LEAF_SEGMENT_DSN=postgres://db/leaf"
		noSeg     = "LEAF_SEGMENT_ENABLED=false"
		zk        = "LEAF_SNOWFLAKE_REGISTRY=zookeeper LEAF_SNOWFLAKE_ZK=zk:2181"
		etcd      = "LEAF_SNOWFLAKE_REGISTRY=etcd LEAF_SNOWFLAKE_ETCD=etcd:2379"
		mysqlReg  = "LEAF_SNOWFLAKE_REGISTRY=mysql"
		noSnow    = "LEAF_SNOWFLAKE_ENABLED=false"
		worker0   = "LEAF_SNOWFLAKE_WORKER_ID=0"
		worker7   = "LEAF_SNOWFLAKE_WORKER_ID=7"
		workerIDs = `LEAF_SNOWFLAKE_WORKER_IDS={"10.0.0.1:8080":3}`
		ack       = "LEAF_SINGLE_NODE=true"
		noAck     = "LEAF_SINGLE_NODE=false"
	)
	tests := []struct {
		name    string
		env     string // space-separated, on listen 0.0.0.0:8080
		refused bool
		says    []string // what the message names
	}{
		{"defaults", "", true, []string{"SQLite", "worker ID 0", "segment.store: mysql|postgres", "snowflake.registry: zookeeper|etcd|mysql"}},
		{"defaults, acknowledged", ack, false, nil},
		{"defaults, acknowledged false", noAck, true, nil},
		{"sqlite, explicit worker 0", worker0, true, []string{"SQLite", "segment.store: mysql|postgres"}},
		{"sqlite, worker 7", worker7, true, []string{"SQLite"}},
		{"sqlite, worker map", workerIDs, true, []string{"SQLite"}},
		{"sqlite, zookeeper", zk, true, []string{"SQLite"}},
		{"sqlite, snowflake off", noSnow, true, []string{"SQLite"}},
		{"sqlite, zookeeper, acknowledged", zk + " " + ack, false, nil},
		{"mysql, default worker", mysql, true, []string{"worker ID 0", "snowflake.registry: zookeeper|etcd|mysql", "--worker-id"}},
		{"postgres, default worker", postgres, true, []string{"worker ID 0"}},
		{"segment off, default worker", noSeg, true, []string{"worker ID 0"}},
		{"mysql, default worker, acknowledged", mysql + " " + ack, false, nil},
		{"mysql, explicit worker 0", mysql + " " + worker0, false, nil},
		{"mysql, worker 7", mysql + " " + worker7, false, nil},
		{"postgres, worker map", postgres + " " + workerIDs, false, nil},
		{"mysql, zookeeper", mysql + " " + zk, false, nil},
		{"postgres, etcd", postgres + " " + etcd, false, nil},
		{"mysql, mysql registry", mysql + " " + mysqlReg, false, nil},
		{"mysql, snowflake off", mysql + " " + noSnow, false, nil},
		{"segment off, zookeeper", noSeg + " " + zk, false, nil},
		{"both off", noSeg + " " + noSnow, false, nil},
	}
	for _, tt := range tests {
		for _, listen := range []string{"0.0.0.0:8080", "127.0.0.1:8080"} {
			env := append(strings.Fields(tt.env), "LEAF_LISTEN="+listen)
			err := checkSingleNode(t, Sources{Env: env})
			want := tt.refused && listen == "0.0.0.0:8080"
			if got := err != nil; got != want {
				t.Errorf("%s on %s: err = %v, want refused %t", tt.name, listen, err, want)
				continue
			}
			if err == nil {
				continue
			}
			checkRefusal(t, tt.name, err)
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %q does not name %q", tt.name, err, s)
				}
			}
		}
	}
}

// TestSingleNodeSources: single_node and an explicit worker ID count from
// every source: YAML, environment, flags, leaf.properties' workIdMap; a
// worker ID left at its default by every source does not.
func TestSingleNodeSources(t *testing.T) {
	mysql := []string{"LEAF_LISTEN=0.0.0.0:8080", "LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=u:p@tcp(db:3306)/leaf"}
	tests := []struct {
		name    string
		src     Sources
		refused bool
	}{
		{"nothing", Sources{Env: mysql}, true},
		{"worker_id in YAML", Sources{Env: mysql, File: writeFile(t, "snowflake:\n  worker_id: 0\n")}, false},
		{"worker_id null in YAML", Sources{Env: mysql, File: writeFile(t, "snowflake:\n  worker_id:\n")}, true},
		{"worker_id ~ in YAML", Sources{Env: mysql, File: writeFile(t, "snowflake:\n  worker_id: ~\n")}, true},
		{"worker_id null, spelled out, in YAML", Sources{Env: mysql, File: writeFile(t, "snowflake:\n  worker_id: null\n")}, true},
		{"worker_ids null in YAML", Sources{Env: mysql, File: writeFile(t, "snowflake:\n  worker_ids:\n")}, true},
		{"worker_id empty in env", Sources{Env: append(mysql, "LEAF_SNOWFLAKE_WORKER_ID=")}, true},
		{"--worker-id", Sources{Env: mysql, Flags: map[string]string{"snowflake.worker_id": "0"}}, false},
		{"workIdMap in leaf.properties", Sources{Env: mysql, LeafProperties: writeProps(t,
			"leaf.snowflake.enable=true\nleaf.snowflake.mode=local\nleaf.snowflake.local.workIdMap={\"10.0.0.1:8080\":1}\n")}, false},
		{"single_node in YAML", Sources{Env: mysql, File: writeFile(t, "single_node: true\n")}, false},
		{"--single-node", Sources{Env: mysql, Flags: map[string]string{"single_node": "true"}}, false},
		{"--single-node=false over the env", Sources{Env: append(mysql, "LEAF_SINGLE_NODE=true"), Flags: map[string]string{"single_node": "false"}}, true},
	}
	for _, tt := range tests {
		err := checkSingleNode(t, tt.src)
		if got := err != nil; got != tt.refused {
			t.Errorf("%s: err = %v, want refused %t", tt.name, err, tt.refused)
		}
	}
}

// TestSingleNodeSample: the sample configuration, copied to two hosts and
// opened to the network, is the case the guard exists for. It documents
// worker_id without setting it, so it chooses no worker ID for the
// operator: on every interface, with segment mode off (so that only the
// worker ID is in question), it is refused. A worker ID the operator adds
// to it is a choice, as in any file.
func TestSingleNodeSample(t *testing.T) {
	const sample = "../../../../etc/leaf.yml"
	exposed := []string{"LEAF_LISTEN=0.0.0.0:8080", "LEAF_SEGMENT_ENABLED=false"}
	cfg, origins, _, err := LoadWithOrigins(Sources{File: sample, Env: exposed})
	if err != nil {
		t.Fatalf("load %s: %v", sample, err)
	}
	for _, k := range []string{"snowflake.worker_id", "snowflake.worker_ids"} {
		if origins.Set(k) {
			t.Errorf("%s sets %s (%s): a sample must leave the worker ID to the operator", sample, k, origins[k])
		}
	}
	err = cfg.CheckSingleNode(context.Background(), origins, testResolver)
	if err == nil {
		t.Fatalf("%s on 0.0.0.0:8080 with segment mode off: accepted, want refused as local worker 0", sample)
	}
	checkRefusal(t, sample, err)
	for _, s := range []string{"single_node", "worker ID 0", "listen 0.0.0.0:8080"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not name %q", sample, err, s)
		}
	}
	if err := checkSingleNode(t, Sources{File: sample, Env: append(exposed, "LEAF_SNOWFLAKE_WORKER_ID=0")}); err != nil {
		t.Errorf("%s with LEAF_SNOWFLAKE_WORKER_ID=0: %v, want accepted", sample, err)
	}
}
