package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// writeFile writes a YAML configuration file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	return writeNamed(t, "leaf.yml", content)
}

// writeNamed writes a file called name in a fresh directory.
func writeNamed(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ptr[T any](v T) *T { return &v }

// loadFails checks that Load(src) fails with an ErrInvalid whose message
// holds every one of want.
func loadFails(t *testing.T, src Sources, want ...string) {
	t.Helper()
	_, err := Load(src)
	if err == nil {
		t.Fatalf("Load succeeded, want an error containing %q", want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error %v does not wrap ErrInvalid", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

func TestDefaultIsValid(t *testing.T) {
	cfg, err := Load(Sources{})
	if err != nil {
		t.Fatalf("Load with no sources: %v", err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("Load() = %+v, want Default() %+v", cfg, Default())
	}
	if got, want := cfg.SQLitePath(), filepath.Join("leaf-data", "leaf.db"); got != want {
		t.Errorf("SQLitePath = %q, want %q", got, want)
	}
	if cfg.Segment.SeedMode() != SeedIfEmpty {
		t.Errorf("default SeedMode = %v, want SeedIfEmpty", cfg.Segment.SeedMode())
	}
}

// TestPrecedence sets each layer over the one below and checks who wins.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
listen: 127.0.0.1:1001
data_dir: /from/file
log:
  level: debug
segment:
  refresh_interval: 2m
  max_step: 500
`)
	tests := []struct {
		name  string
		src   Sources
		check func(t *testing.T, c Config)
	}{
		{
			name: "file over defaults",
			src:  Sources{File: file},
			check: func(t *testing.T, c Config) {
				want := Default()
				want.Listen, want.DataDir, want.Log.Level = "127.0.0.1:1001", "/from/file", "debug"
				want.Segment.RefreshInterval, want.Segment.MaxStep = 2*time.Minute, 500
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got %+v\nwant %+v", c, want)
				}
			},
		},
		{
			name: "env over file",
			src: Sources{File: file, Env: []string{
				"LEAF_LISTEN=127.0.0.1:2002", "LEAF_SEGMENT_MAX_STEP=700", "UNRELATED=x",
				"LEAF_LOG_LEVEL=", // empty: not set, the file's debug stays
			}},
			check: func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:2002" || c.Segment.MaxStep != 700 {
					t.Errorf("listen=%q max_step=%d, want env values", c.Listen, c.Segment.MaxStep)
				}
				if c.DataDir != "/from/file" || c.Log.Level != "debug" {
					t.Errorf("data_dir=%q log.level=%q, want file values", c.DataDir, c.Log.Level)
				}
			},
		},
		{
			name: "flags over env",
			src: Sources{File: file, Env: []string{"LEAF_LISTEN=127.0.0.1:2002", "LEAF_DATA_DIR=/from/env"},
				Flags: map[string]string{"listen": "127.0.0.1:3003"}},
			check: func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:3003" {
					t.Errorf("listen = %q, want the flag's", c.Listen)
				}
				if c.DataDir != "/from/env" {
					t.Errorf("data_dir = %q, want the env's (no flag given)", c.DataDir)
				}
			},
		},
		{
			name: "LEAF_CONFIG names the file",
			src:  Sources{Env: []string{"LEAF_CONFIG=" + file}},
			check: func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:1001" {
					t.Errorf("listen = %q, want the file's", c.Listen)
				}
			},
		},
		{
			name: "last duplicate env wins",
			src:  Sources{Env: []string{"LEAF_LISTEN=127.0.0.1:1", "LEAF_LISTEN=127.0.0.1:2"}},
			check: func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:2" {
					t.Errorf("listen = %q, want the last one", c.Listen)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.src)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

// TestFlagsOnlyWhenSet checks that a flag's default never masks the
// environment: only flags on the command line reach Load.
func TestFlagsOnlyWhenSet(t *testing.T) {
	tests := []struct {
		args       []string
		wantListen string
		wantLevel  string
	}{
		{nil, "127.0.0.1:2002", "warn"},
		{[]string{"--listen", ":9"}, ":9", "warn"},
		{[]string{"--log-level=ERROR"}, "127.0.0.1:2002", "error"},
	}
	env := []string{"LEAF_LISTEN=127.0.0.1:2002", "LEAF_LOG_LEVEL=warn"}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			b := BindFlags(fs, "listen", "data_dir", "log.level", "segment.enabled")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			c, err := Load(b.Sources(env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Listen != tt.wantListen || c.Log.Level != tt.wantLevel {
				t.Errorf("listen=%q level=%q, want %q %q", c.Listen, c.Log.Level, tt.wantListen, tt.wantLevel)
			}
		})
	}
}

func TestBindFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindFlags(fs, KeyPaths()...)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	want := []string{"admin-token-file", "advertise-url", "config", "data-dir", "etcd", "grpc-listen", "insecure-admin", "listen", "log-format", "log-level",
		"name", "opaque-key-file", "ordinal-claim", "ordinal-hostname", "ordinal-offset", "rate-limit", "segment-dsn", "segment-store", "single-node", "snowflake-dsn", "snowflake-endpoint", "snowflake-layout", "snowflake-registry", "tls-cert", "tls-key",
		"worker-id", "zk"}
	if !slices.Equal(names, want) {
		t.Errorf("flags = %v, want %v", names, want)
	}
	// A bad value fails at parse time, with the same message as other sources.
	err := fs.Parse([]string{"--log-level", "loud"})
	if err == nil || !strings.Contains(err.Error(), `"loud" is not one of debug, info, warn, error`) {
		t.Errorf("Parse bad level: %v", err)
	}
	if err := fs.Parse([]string{"--config", "/x.yml"}); err != nil {
		t.Fatal(err)
	}
}

func TestEnvParsing(t *testing.T) {
	tests := []struct {
		env   string
		check func(c Config) bool
	}{
		{"LEAF_SEGMENT_ENABLED=false", func(c Config) bool { return !c.Segment.Enabled }},
		{"LEAF_SEGMENT_ENABLED=0", func(c Config) bool { return !c.Segment.Enabled }},
		{"LEAF_SEGMENT_GIVE_BACK=FALSE", func(c Config) bool { return !c.Segment.GiveBack }},
		{"LEAF_SEGMENT_SEED=true", func(c Config) bool { return c.Segment.Seed != nil && *c.Segment.Seed }},
		{"LEAF_SEGMENT_SEED=false", func(c Config) bool { return c.Segment.SeedMode() == SeedNever }},
		{"LEAF_SEGMENT_REFRESH_INTERVAL=1m30s", func(c Config) bool { return c.Segment.RefreshInterval == 90*time.Second }},
		{"LEAF_SEGMENT_WAIT_TIMEOUT=250ms", func(c Config) bool { return c.Segment.WaitTimeout == 250*time.Millisecond }},
		{"LEAF_SHUTDOWN_TIMEOUT= 3s ", func(c Config) bool { return c.ShutdownTimeout == 3*time.Second }},
		{"LEAF_SEGMENT_MAX_STEP=1000000", func(c Config) bool { return c.Segment.MaxStep == 1000000 }},
		{"LEAF_LOG_FORMAT=JSON", func(c Config) bool { return c.Log.Format == "json" }},
		{"LEAF_SEGMENT_STORE=postgres", nil}, // needs a DSN: tested in TestValidation
		{"LEAF_SEGMENT_DSN=/tmp/x.db", func(c Config) bool { return c.SQLitePath() == "/tmp/x.db" }},
	}
	for _, tt := range tests {
		if tt.check == nil {
			continue
		}
		t.Run(tt.env, func(t *testing.T) {
			c, err := Load(Sources{Env: []string{tt.env}})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !tt.check(c) {
				t.Errorf("%s not applied: %+v", tt.env, c)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		src  Sources
		want string // substring of the error
	}{
		{"bad duration env", Sources{Env: []string{"LEAF_SEGMENT_REFRESH_INTERVAL=soon"}},
			`LEAF_SEGMENT_REFRESH_INTERVAL: "soon" is not a duration`},
		{"duration without unit", Sources{Env: []string{"LEAF_SHUTDOWN_TIMEOUT=10"}},
			`LEAF_SHUTDOWN_TIMEOUT: "10" is not a duration: add a unit, e.g. 10s`},
		{"negative duration", Sources{Env: []string{"LEAF_SEGMENT_WAIT_TIMEOUT=-1s"}}, `"-1s" is negative`},
		{"zero wait", Sources{Env: []string{"LEAF_SEGMENT_WAIT_TIMEOUT=0s"}},
			"segment.wait_timeout (from LEAF_SEGMENT_WAIT_TIMEOUT): 0s must be positive"},
		{"refresh too short", Sources{Flags: nil, Env: []string{"LEAF_SEGMENT_REFRESH_INTERVAL=10ms"}},
			"segment.refresh_interval (from LEAF_SEGMENT_REFRESH_INTERVAL): 10ms is too short"},
		{"zero shutdown", Sources{Env: []string{"LEAF_SHUTDOWN_TIMEOUT=0s"}}, "shutdown_timeout"},
		{"owner lease too short", Sources{Env: []string{"LEAF_SEGMENT_OWNER_LEASE=500ms"}},
			"segment.owner_lease (from LEAF_SEGMENT_OWNER_LEASE): 500ms is out of range, want 1s..10m"},
		{"owner lease too long", Sources{Env: []string{"LEAF_SEGMENT_OWNER_LEASE=1h"}}, "segment.owner_lease (from LEAF_SEGMENT_OWNER_LEASE): 1h0m0s is out of range"},
		{"ordered mode", Sources{Env: []string{"LEAF_SEGMENT_ORDERED=proxy"}}, `LEAF_SEGMENT_ORDERED: "proxy" is not one of forward, redirect`},
		{"advertise path", Sources{Env: []string{"LEAF_ADVERTISE_URL=http://10.0.0.7:8080/leaf"}},
			`advertise_url (from LEAF_ADVERTISE_URL): "http://10.0.0.7:8080/leaf" has a path`},
		{"advertise scheme", Sources{Env: []string{"LEAF_ADVERTISE_URL=10.0.0.7:8080"}}, `has no http:// or https:// scheme`},
		{"bad bool", Sources{Env: []string{"LEAF_SEGMENT_ENABLED=yes please"}},
			`LEAF_SEGMENT_ENABLED: "yes please" is not a boolean`},
		{"bad int", Sources{Env: []string{"LEAF_SEGMENT_MAX_STEP=1e6"}}, `LEAF_SEGMENT_MAX_STEP: "1e6" is not a whole number`},
		{"max step range", Sources{Env: []string{"LEAF_SEGMENT_MAX_STEP=1000001"}},
			"segment.max_step (from LEAF_SEGMENT_MAX_STEP): 1000001 is out of range, want 1..1000000"},
		{"max step zero", Sources{Env: []string{"LEAF_SEGMENT_MAX_STEP=0"}}, "segment.max_step"},
		{"bad level flag", Sources{Flags: map[string]string{"log.level": "verbose"}},
			`--log-level: "verbose" is not one of debug, info, warn, error`},
		{"bad format env", Sources{Env: []string{"LEAF_LOG_FORMAT=xml"}}, `"xml" is not one of text, json`},
		{"bad store", Sources{Flags: map[string]string{"segment.store": "oracle"}},
			`--segment-store: "oracle" is not one of sqlite, mysql, postgres`},
		{"mysql without dsn", Sources{Flags: map[string]string{"segment.store": "mysql"}},
			"segment.dsn: required when segment.store is mysql"},
		{"postgres without dsn", Sources{Env: []string{"LEAF_SEGMENT_STORE=postgres"}},
			"segment.dsn: required when segment.store is postgres"},
		{"listen no port", Sources{Flags: map[string]string{"listen": "localhost"}},
			`listen (from --listen): "localhost" is not host:port`},
		{"listen bad port", Sources{Env: []string{"LEAF_LISTEN=127.0.0.1:http"}}, `invalid port "http"`},
		{"listen port too big", Sources{Env: []string{"LEAF_LISTEN=:65536"}}, `invalid port "65536"`},
		{"grpc listen no port", Sources{Flags: map[string]string{"grpc_listen": "localhost"}},
			`grpc_listen (from --grpc-listen): "localhost" is not host:port`},
		{"empty data dir flag", Sources{Flags: map[string]string{"data_dir": ""}}, "data_dir (from --data-dir): must not be empty"},
		{"negative top tags", Sources{Env: []string{"LEAF_METRICS_TOP_TAGS=-1"}}, "metrics.top_tags (from LEAF_METRICS_TOP_TAGS): -1 is negative"},
		{"negative degraded tags", Sources{Env: []string{"LEAF_METRICS_DEGRADED_TAGS=-1"}}, "metrics.degraded_tags (from LEAF_METRICS_DEGRADED_TAGS): -1 is negative"},
		{"bad metrics tag", Sources{Env: []string{"LEAF_METRICS_TAGS=orders, bad tag"}}, "metrics.tags (from LEAF_METRICS_TAGS)"},
		{"unknown flag key", Sources{Flags: map[string]string{"nope": "1"}}, `flag for unknown key "nope"`},
		{"bad ordinal claim", Sources{Env: []string{"LEAF_SNOWFLAKE_ORDINAL_CLAIM=zookeeper"}},
			`LEAF_SNOWFLAKE_ORDINAL_CLAIM: "zookeeper" is not one of none, etcd, mysql`},
		{"pod name without an ordinal", Sources{Env: []string{"LEAF_SNOWFLAKE_REGISTRY=ordinal", "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME=leaf-x"}},
			`snowflake.ordinal.hostname (from LEAF_SNOWFLAKE_ORDINAL_HOSTNAME): invalid argument: host name "leaf-x" is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): "x" after its last "-" is not a decimal number`},
		{"bad ordinal claim flag", Sources{Flags: map[string]string{"snowflake.ordinal.claim": "zookeeper"}},
			`--ordinal-claim: "zookeeper" is not one of none, etcd, mysql`},
		{"ordinal offset flag not a number", Sources{Flags: map[string]string{"snowflake.ordinal.offset": "3rd"}},
			`--ordinal-offset: "3rd" is not a whole number`},
		{"ordinal offset flag past the layout", Sources{Flags: map[string]string{"snowflake.ordinal.offset": "1024"}},
			"snowflake.ordinal.offset (from --ordinal-offset): 1024 is outside the layout's worker IDs 0..1023"},
		{"pod name flag without an ordinal", Sources{Flags: map[string]string{"snowflake.registry": "ordinal", "snowflake.ordinal.claim": "none", "snowflake.ordinal.hostname": "leaf"}},
			`snowflake.ordinal.hostname (from --ordinal-hostname): invalid argument: host name "leaf" is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): it has no "-ORDINAL" at the end`},
		{"ordinal registry flag without a claim", Sources{Flags: map[string]string{"snowflake.registry": "ordinal"}},
			"snowflake.ordinal.claim: required with registry ordinal: etcd or mysql, where a second live server with the same ordinal is refused, or none, where nothing checks across hosts (a copied configuration issues the same IDs); set LEAF_SNOWFLAKE_ORDINAL_CLAIM or --ordinal-claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loadFails(t, tt.src, tt.want)
		})
	}
}

func TestValidationReportsAll(t *testing.T) {
	_, err := Load(Sources{Env: []string{"LEAF_SEGMENT_MAX_STEP=0", "LEAF_SHUTDOWN_TIMEOUT=0s"}})
	if err == nil || !strings.Contains(err.Error(), "max_step") || !strings.Contains(err.Error(), "shutdown_timeout") {
		t.Errorf("want both problems reported, got %v", err)
	}
}

func TestYAMLErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown top key", "listen: :1\nlisen: :2\n", `:2: unknown key "lisen"; known keys in the top level: listen, data_dir, grpc_listen, advertise_url, single_node, admin, tls, rate_limit, log, segment, snowflake, metrics, shutdown_timeout`},
		{"unknown nested key", "segment:\n  stor: mysql\n", `:2: unknown key "segment.stor"; known keys in segment: enabled, store, dsn`},
		{"bad duration", "segment:\n  refresh_interval: 60\n", `:2: segment.refresh_interval: "60" is not a duration: add a unit`},
		{"bad enum", "log:\n  level: loud\n", `:2: log.level: "loud" is not one of`},
		{"mapping for scalar", "listen:\n  host: x\n", ":2: listen wants a single value, got a mapping"},
		{"list for scalar", "data_dir: [a, b]\n", ":1: data_dir wants a single value, got a list"},
		{"scalar for section", "segment: sqlite\n", `:1: segment must be a mapping of keys, got the value "sqlite"`},
		{"not a mapping", "- a\n- b\n", "the top level must be a mapping"},
		{"duplicate", "listen: :1\nlisten: :2\n", ":2: listen is set twice (first at line 1)"},
		{"syntax", "listen: [\n", "yaml:"},
		{"two documents", "listen: :1\n---\nlisten: :2\n", "more than one YAML document"},
		{"missing dsn from file", "segment:\n  store: mysql\n", "segment.dsn: required when segment.store is mysql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loadFails(t, Sources{File: writeFile(t, tt.yaml)}, tt.want)
		})
	}
}

func TestYAMLValues(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       func() Config
	}{
		{"empty file", "", Default},
		{"only comments", "# nothing\n", Default},
		{"null keeps default", "listen:\nsegment:\n  dsn: ~\n", Default},
		{"null section", "segment:\n", Default},
		{"quoted values", "segment:\n  give_back: \"false\"\n  max_step: '10'\n", func() Config {
			c := Default()
			c.Segment.GiveBack, c.Segment.MaxStep = false, 10
			return c
		}},
		{"anchors", "log:\n  level: &l warn\nsegment:\n  store: sqlite\n  dsn: *l\n", func() Config {
			c := Default()
			c.Log.Level, c.Segment.DSN = "warn", "warn"
			return c
		}},
		{"seed explicit false", "segment:\n  seed: false\n", func() Config {
			c := Default()
			c.Segment.Seed = ptr(false)
			return c
		}},
		{"mysql with dsn", "segment:\n  store: MySQL\n  dsn: u:p@tcp(db:3306)/leaf\n", func() Config {
			c := Default()
			c.Segment.Store, c.Segment.DSN = StoreMySQL, "u:p@tcp(db:3306)/leaf"
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(Sources{File: writeFile(t, tt.yaml)})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if want := tt.want(); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestMissingFiles: a file named in the configuration that does not exist
// is ErrInvalid (a usage error) naming it; one that exists but cannot be
// read is not.
func TestMissingFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		src     Sources
		want    string
		invalid bool
	}{
		{"--config", Sources{File: missing}, "config file " + missing + ": file does not exist", true},
		{"LEAF_CONFIG", Sources{Env: []string{"LEAF_CONFIG=" + missing}}, "config file (from LEAF_CONFIG) " + missing + ": file does not exist", true},
		{"leaf.properties", Sources{LeafProperties: missing}, "leaf.properties file " + missing + ": file does not exist", true},
		{"config is a directory", Sources{File: dir}, "config file: read " + dir, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrInvalid) != tt.invalid {
				t.Fatalf("Load = %v; want an error containing %q, ErrInvalid %v", err, tt.want, tt.invalid)
			}
			if tt.invalid && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Load = %v; want it to wrap os.ErrNotExist", err)
			}
		})
	}
}

func TestSeedMode(t *testing.T) {
	tests := []struct {
		store string
		seed  *bool
		want  SeedMode
	}{
		{StoreSQLite, nil, SeedIfEmpty},
		{StoreMySQL, nil, SeedNever},
		{StorePostgres, nil, SeedNever},
		{StoreSQLite, ptr(false), SeedNever},
		{StoreMySQL, ptr(true), SeedIfMissing},
		{StoreSQLite, ptr(true), SeedIfMissing},
	}
	for _, tt := range tests {
		if got := (Segment{Store: tt.store, Seed: tt.seed}).SeedMode(); got != tt.want {
			t.Errorf("store %s seed %v: SeedMode = %v, want %v", tt.store, tt.seed, got, tt.want)
		}
	}
}

func TestKeys(t *testing.T) {
	keys := Keys()
	byPath := map[string]Key{}
	for _, k := range keys {
		byPath[k.Path] = k
		if k.Help == "" {
			t.Errorf("key %s has no help text", k.Path)
		}
	}
	want := []string{"listen", "data_dir", "grpc_listen", "advertise_url", "single_node", "admin.token", "admin.token_file", "admin.insecure",
		"tls.cert", "tls.key", "rate_limit.per_second", "rate_limit.burst", "log.level", "log.format", "segment.enabled", "segment.store", "segment.dsn",
		"segment.refresh_interval", "segment.max_step", "segment.wait_timeout", "segment.give_back", "segment.low_buffer", "segment.idle_timeout", "segment.lookup_rate", "segment.seed",
		"segment.opaque_key", "segment.opaque_key_file", "segment.ordered", "segment.owner_lease",
		"segment.failover.fence", "segment.failover.window", "segment.failover.lag", "segment.failover.margin_steps",
		"snowflake.enabled", "snowflake.registry", "snowflake.name", "snowflake.endpoint", "snowflake.worker_id", "snowflake.worker_ids",
		"snowflake.zk", "snowflake.etcd", "snowflake.dsn", "snowflake.lease_ttl", "snowflake.layout", "snowflake.epoch", "snowflake.time_bits",
		"snowflake.worker_bits", "snowflake.sequence_bits", "snowflake.max_backwards", "snowflake.random_start", "snowflake.window", "snowflake.max_peer_skew",
		"snowflake.ordinal.offset", "snowflake.ordinal.claim", "snowflake.ordinal.hostname",
		"metrics.top_tags", "metrics.degraded_tags", "metrics.tags", "shutdown_timeout"}
	if got := KeyPaths(); !slices.Equal(got, want) {
		t.Errorf("KeyPaths = %v\nwant %v", got, want)
	}
	checks := []Key{
		{Path: "segment.refresh_interval", Env: "LEAF_SEGMENT_REFRESH_INTERVAL", Type: "duration", Default: "60s"},
		{Path: "data_dir", Env: "LEAF_DATA_DIR", Flag: "data-dir", Type: "string", Default: "./leaf-data"},
		{Path: "segment.seed", Env: "LEAF_SEGMENT_SEED", Type: "bool (optional)", Default: ""},
		{Path: "segment.enabled", Env: "LEAF_SEGMENT_ENABLED", Type: "bool", Default: "true"},
		{Path: "segment.max_step", Env: "LEAF_SEGMENT_MAX_STEP", Type: "int", Default: "1000000"},
		{Path: "single_node", Env: "LEAF_SINGLE_NODE", Flag: "single-node", Type: "bool", Default: "false"},
		{Path: "segment.opaque_key", Env: "LEAF_SEGMENT_OPAQUE_KEY", Type: "string"},
		{Path: "segment.opaque_key_file", Env: "LEAF_SEGMENT_OPAQUE_KEY_FILE", Flag: "opaque-key-file", Type: "string"},
		{Path: "snowflake.ordinal.offset", Env: "LEAF_SNOWFLAKE_ORDINAL_OFFSET", Flag: "ordinal-offset", Type: "int", Default: "0"},
		{Path: "snowflake.ordinal.claim", Env: "LEAF_SNOWFLAKE_ORDINAL_CLAIM", Flag: "ordinal-claim", Type: "string"},
		{Path: "snowflake.ordinal.hostname", Env: "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME", Flag: "ordinal-hostname", Type: "string"},
	}
	for _, c := range checks {
		k := byPath[c.Path]
		if k.Env != c.Env || k.Flag != c.Flag || k.Type != c.Type || k.Default != c.Default {
			t.Errorf("Keys()[%s] = %+v, want %+v", c.Path, k, c)
		}
	}
}

// TestSampleFile keeps etc/leaf.yml honest: it loads, it sets every key to
// the real default, and it mentions every key and its environment variable.
func TestSampleFile(t *testing.T) {
	const sample = "../../../../etc/leaf.yml"
	got, err := LoadFile(sample)
	if err != nil {
		t.Fatalf("load %s: %v", sample, err)
	}
	if !reflect.DeepEqual(got, Default()) {
		t.Errorf("%s does not match the defaults:\n got %+v\nwant %+v", sample, got, Default())
	}
	data, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		if n.Kind == yaml.DocumentNode {
			walk(n.Content[0], prefix)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			path := prefix + n.Content[i].Value
			present[path] = true
			if n.Content[i+1].Kind == yaml.MappingNode {
				walk(n.Content[i+1], path+".")
			}
		}
	}
	walk(&root, "")
	for _, k := range Keys() {
		if !present[k.Path] {
			t.Errorf("%s does not set key %s", sample, k.Path)
		}
		if !strings.Contains(string(data), k.Env) {
			t.Errorf("%s does not mention %s", sample, k.Env)
		}
		if k.Flag != "" && !strings.Contains(string(data), "--"+k.Flag) {
			t.Errorf("%s does not mention --%s", sample, k.Flag)
		}
	}
}

func TestUnknownEnv(t *testing.T) {
	env := []string{"LEAF_LISTEN=x", "LEAF_LISTN=x", "LEAF_TEST_MYSQL_DSN=x", "LEAF_SERVER=x", "LEAF_CONFIG=x", "PATH=/bin"}
	if got, want := UnknownEnv(env, "LEAF_SERVER"), []string{"LEAF_LISTN"}; !slices.Equal(got, want) {
		t.Errorf("UnknownEnv = %v, want %v", got, want)
	}
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"root:s3cret@tcp(127.0.0.1:3306)/leaf?parseTime=true", "root:xxxxx@tcp(127.0.0.1:3306)/leaf?parseTime=true"},
		{"root:p@ss@tcp(db)/leaf", "root:xxxxx@tcp(db)/leaf"},
		{"root@tcp(db)/leaf", "root@tcp(db)/leaf"},
		{"/leaf", "/leaf"},
		{"postgres://leaf:s3cret@db:5432/leaf?sslmode=disable", "postgres://leaf:xxxxx@db:5432/leaf?sslmode=disable"},
		{"postgresql://leaf@db/leaf?password=s3cret&sslmode=disable", "postgresql://leaf@db/leaf?password=xxxxx&sslmode=disable"},
		{"host=db user=leaf password=s3cret dbname=leaf", "host=db user=leaf password=xxxxx dbname=leaf"},
		{"host=db password='s3 cret' dbname=leaf", "host=db password=xxxxx dbname=leaf"},
		{"host=db password=p@ss dbname=leaf", "host=db password=xxxxx dbname=leaf"},
		{"./leaf-data/leaf.db", "./leaf-data/leaf.db"},
	}
	for _, tt := range tests {
		if got := RedactDSN(tt.in); got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// ordinalOn selects the ordinal registry with claim on the pod name.
func ordinalOn(c *Config, claim, name string) {
	c.Snowflake.Registry, c.Snowflake.Ordinal.Claim, c.Snowflake.Ordinal.Hostname = RegistryOrdinal, claim, name
}

func TestValidateSnowflake(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		key  string // the key the error must name; "" means valid
	}{
		{"default", func(*Config) {}, ""},
		{"zookeeper with servers", func(c *Config) { c.Snowflake.Registry = RegistryZooKeeper; c.Snowflake.ZooKeeper = "127.0.0.1:2181" }, ""},
		{"zookeeper without servers", func(c *Config) { c.Snowflake.Registry = RegistryZooKeeper }, "snowflake.zk"},
		{"recycle without servers", func(c *Config) { c.Snowflake.Registry = RegistryZooKeeperRecycle; c.Snowflake.ZooKeeper = " , " }, "snowflake.zk"},
		{"etcd without endpoints", func(c *Config) { c.Snowflake.Registry = RegistryEtcd }, "snowflake.etcd"},
		{"mysql without DSN", func(c *Config) { c.Snowflake.Registry = RegistryMySQL }, "snowflake.dsn"},
		{"mysql with the segment DSN", func(c *Config) {
			c.Snowflake.Registry = RegistryMySQL
			c.Segment.Store, c.Segment.DSN = StoreMySQL, "root@tcp(127.0.0.1:3306)/leaf"
		}, ""},
		{"name with a slash", func(c *Config) { c.Snowflake.Name = "a/b" }, "snowflake.name"},
		{"empty name", func(c *Config) { c.Snowflake.Name = "" }, "snowflake.name"},
		{"name ..", func(c *Config) { c.Snowflake.Name = ".." }, "snowflake.name"},
		{"bad endpoint", func(c *Config) { c.Snowflake.Endpoint = "10.0.0.1" }, "snowflake.endpoint"},
		{"worker ID above the layout", func(c *Config) { c.Snowflake.WorkerID = 1024 }, "snowflake.worker_id"},
		{"worker ID with fewer bits", func(c *Config) { c.Snowflake.WorkerBits, c.Snowflake.WorkerID = 2, 4 }, "snowflake.worker_id"},
		{"64-bit layout", func(c *Config) { c.Snowflake.TimeBits = 42 }, "snowflake.time_bits"},
		{"worker map not JSON", func(c *Config) { c.Snowflake.WorkerIDs = "10.0.0.1:80=1" }, "snowflake.worker_ids"},
		{"worker map", func(c *Config) { c.Snowflake.WorkerIDs = `{"10.0.0.1:80": 1}` }, ""},
		{"short lease", func(c *Config) { c.Snowflake.LeaseTTL = time.Second }, "snowflake.lease_ttl"},
		{"negative max_backwards", func(c *Config) { c.Snowflake.MaxBackwards = -1 }, "snowflake.max_backwards"},
		{"short window", func(c *Config) { c.Snowflake.Window = 100 * time.Millisecond }, "snowflake.window"},
		{"negative peer skew", func(c *Config) { c.Snowflake.MaxPeerSkew = -time.Second }, "snowflake.max_peer_skew"},
		{"ordinal without a claim chosen", func(c *Config) { c.Snowflake.Registry = RegistryOrdinal }, "snowflake.ordinal.claim: required with registry ordinal"},
		{"ordinal, claim none, host name read at start", func(c *Config) { ordinalOn(c, ClaimNone, "") }, ""},
		{"ordinal with a pod name", func(c *Config) { ordinalOn(c, ClaimNone, "leaf-12") }, ""},
		{"ordinal claimed in etcd", func(c *Config) { ordinalOn(c, ClaimEtcd, "leaf-0"); c.Snowflake.Etcd = "etcd:2379" }, ""},
		{"ordinal claimed in etcd without endpoints", func(c *Config) { ordinalOn(c, ClaimEtcd, "leaf-0") }, "snowflake.etcd: required when snowflake.ordinal.claim is etcd"},
		{"ordinal claimed in mysql without DSN", func(c *Config) { ordinalOn(c, ClaimMySQL, "leaf-0") }, "snowflake.ordinal.claim: mysql needs snowflake.dsn"},
		{"ordinal claimed in mysql", func(c *Config) { ordinalOn(c, ClaimMySQL, "leaf-0"); c.Snowflake.DSN = "root@tcp(db:3306)/leaf" }, ""},
		{"ordinal host name without an ordinal", func(c *Config) { ordinalOn(c, ClaimNone, "leaf") }, `snowflake.ordinal.hostname: invalid argument: host name "leaf" is not a StatefulSet pod name`},
		{"ordinal host name with a leading zero", func(c *Config) { ordinalOn(c, ClaimNone, "leaf-03") }, "leading zero"},
		{"ordinal above the layout", func(c *Config) { ordinalOn(c, ClaimNone, "leaf-1024") }, "ordinal 1024 + offset 0 = worker ID 1024, above the layout's maximum 1023"},
		{"ordinal pushed above the layout by the offset", func(c *Config) {
			ordinalOn(c, ClaimNone, "leaf-3")
			c.Snowflake.Ordinal.Offset = 1021
		}, "ordinal 3 + offset 1021 = worker ID 1024"},
		{"ordinal above fewer worker bits", func(c *Config) { ordinalOn(c, ClaimNone, "leaf-4"); c.Snowflake.WorkerBits = 2 }, "above the layout's maximum 3"},
		{"offset above the layout", func(c *Config) { c.Snowflake.Ordinal.Offset = 1024 }, "snowflake.ordinal.offset: 1024 is outside the layout's worker IDs 0..1023"},
		{"negative offset", func(c *Config) { c.Snowflake.Ordinal.Offset = -1 }, "snowflake.ordinal.offset"},
		{"host name of another registry is not read", func(c *Config) { c.Snowflake.Ordinal.Hostname = "leaf" }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			c.mod(&cfg)
			err := cfg.Validate()
			if c.key == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("Validate = %v, want an ErrInvalid naming %s", err, c.key)
			}
		})
	}
}
