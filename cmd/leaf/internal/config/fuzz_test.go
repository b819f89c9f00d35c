package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf/internal/javaprops"
	"github.com/leafgo/leaf/snowflake"
)

// errLine is one line of a Load error: errors.Join puts each problem on a
// line of its own, and every one wraps ErrInvalid.
var errLine = regexp.MustCompile(`^invalid configuration: (\S+?)(?: \(from ([^)]*)\))?: .`)

// checkLoadError checks a Load error: it wraps ErrInvalid, and every line
// says where the problem is: a file:line, the variable or flag, or the key,
// with where the key was set when a source set it. located are the places
// a line may name besides the keys (the file, the variables given).
func checkLoadError(t *testing.T, err error, located func(where string) bool) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load error %q does not wrap ErrInvalid", err)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		m := errLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("Load error line %q: want \"invalid configuration: WHERE: what\"", line)
		}
		where, from := m[1], m[2]
		switch {
		case located(where):
		case isKeyOrSection(where):
			if from != "" && !located(from) {
				t.Fatalf("Load error line %q: %s is set from %q, which is none of the sources", line, where, from)
			}
		default:
			t.Fatalf("Load error line %q names neither a source nor a key", line)
		}
	}
}

// isKeyOrSection reports whether p is a key path or a section of keys
// ("tls" in a rule between tls.cert and tls.key).
func isKeyOrSection(p string) bool {
	for _, k := range KeyPaths() {
		if k == p || strings.HasPrefix(k, p+".") {
			return true
		}
	}
	return false
}

// checkNoSecretInErrors checks that no message about the key at path
// (admin.token, segment.opaque_key) quotes its value, which is a secret. A
// short value may be in a message by chance ("1" in "(1 bytes)"); one of 8
// bytes or more is not.
func checkNoSecretInErrors(t *testing.T, err error, path, secret string) {
	t.Helper()
	if len(secret) < 8 {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		m := errLine.FindStringSubmatchIndex(line)
		if m == nil || line[m[2]:m[3]] != path {
			continue
		}
		if msg := line[m[1]-1:]; strings.Contains(msg, secret) {
			t.Fatalf("Load error line %q quotes %s", line, path)
		}
	}
}

// envOf writes cfg as LEAF_* variables, one per key (an unset optional key
// is left out), for the round trip: the same parser reads every source, so
// the variables must load the very same configuration.
func envOf(cfg Config) []string {
	var env []string
	for _, f := range fields() {
		v := reflect.ValueOf(&cfg).Elem().FieldByIndex(f.index)
		if v.Kind() == reflect.Pointer && v.IsNil() {
			continue
		}
		env = append(env, f.env()+"="+formatValue(cfg.value(f)))
	}
	return env
}

// checkLoaded checks a configuration Load returned: it passes its own
// Validate, and written out as LEAF_* variables it loads back the same.
func checkLoaded(t *testing.T, cfg Config, what string) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: Load succeeded, but the configuration fails Validate: %v", what, err)
	}
	env := envOf(cfg)
	again, err := Load(Sources{Env: env})
	if err != nil {
		t.Fatalf("%s: the loaded configuration, as variables %q, fails to load: %v", what, env, err)
	}
	if !reflect.DeepEqual(again, cfg) {
		t.Fatalf("%s: the loaded configuration, as variables %q, loads as\n%+v\nnot\n%+v", what, env, again, cfg)
	}
}

// FuzzLoadYAML loads arbitrary bytes as the YAML file.
//
// Properties: no panic; an error wraps ErrInvalid and every line of it says
// where (file:line, or the key), never quoting the admin token; a
// configuration loaded is valid by its own Validate, equals what LoadFile
// reads, and round-trips through LEAF_* variables unchanged.
func FuzzLoadYAML(f *testing.F) {
	for _, file := range []string{"../../../../etc/leaf.yml", "testdata/leaf-equivalent.yml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "# nothing\n", "listen:\nsegment:\n  dsn: ~\n", "segment:\n", "listen: :1\nlisen: :2\n",
		"segment:\n  stor: mysql\n", "segment:\n  refresh_interval: 60\n", "log:\n  level: loud\n", "listen:\n  host: x\n",
		"data_dir: [a, b]\n", "segment: sqlite\n", "- a\n- b\n", "listen: :1\nlisten: :2\n", "listen: [\n",
		"listen: :1\n---\nlisten: :2\n", "segment:\n  store: mysql\n", "segment:\n  give_back: \"false\"\n  max_step: '10'\n",
		"a: &x 1\nlisten: *x\n", "snowflake: &s\n  name: n\nsegment: *s\n", "segment:\n  seed: true\n",
		"snowflake:\n  epoch: 9223372036854775807\n", "snowflake:\n  time_bits: 42\n", "snowflake:\n  layout: js-safe\n",
		"snowflake:\n  layout: js-safe\n  time_bits: 41\n", "snowflake:\n  layout: custom\n  worker_bits: 5\n", "snowflake:\n  worker_ids: '{\"10.0.0.1:80\": 1}'\n",
		"admin:\n  token: 0123456789abcdef0123\n", "admin:\n  token: short-secret\n", "tls:\n  cert: c.pem\n",
		"segment:\n  opaque_key: 00112233445566778899aabbccddeeff\n", "segment:\n  opaque_key: 00112233445566778899aabbccddeef\n",
		"rate_limit:\n  per_second: -1\n", "shutdown_timeout: 1h\nsegment:\n  wait_timeout: 1ns\n", "? [a]\n: b\n",
		"listen: \"\\u0000:1\"\n", "listen: !!binary aGVsbG8=\n",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "leaf.yml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(Sources{File: path})
		if err != nil {
			checkLoadError(t, err, func(where string) bool { return strings.HasPrefix(where, path) })
			if raw, rerr := LoadFile(path); rerr == nil {
				checkNoSecretInErrors(t, err, "admin.token", raw.Admin.Token)
				checkNoSecretInErrors(t, err, "segment.opaque_key", raw.Segment.OpaqueKey)
			}
			return
		}
		checkLoaded(t, cfg, "YAML "+strconv.Quote(string(data)))
		if raw, err := LoadFile(path); err != nil || !reflect.DeepEqual(raw, cfg) {
			t.Fatalf("YAML %q: LoadFile = %+v, %v; Load = %+v", data, raw, err, cfg)
		}
	})
}

// FuzzEnv loads two arbitrary LEAF_* variables.
//
// Properties: no panic; an error wraps ErrInvalid, every line names the
// variable or the key (and, for a key a variable set, that variable), never
// quoting the admin token; in a configuration loaded, a key whose variable
// is set (the last one wins, empty means unset) holds the value parsed
// from it and every other key its default (but for the layout keys, which
// snowflake.layout fills and numbers name); it is valid and round-trips;
// names that are no key are reported by UnknownEnv.
func FuzzEnv(f *testing.F) {
	for _, kv := range [][4]string{
		{"LISTEN", "127.0.0.1:2002", "SEGMENT_MAX_STEP", "700"},
		{"LOG_LEVEL", "", "LOG_LEVEL", "debug"},
		{"LISTEN", "127.0.0.1:1", "LISTEN", "127.0.0.1:2"},
		{"SEGMENT_REFRESH_INTERVAL", "soon", "SHUTDOWN_TIMEOUT", "10"},
		{"SEGMENT_WAIT_TIMEOUT", "-1s", "SEGMENT_ENABLED", "yes please"},
		{"SEGMENT_MAX_STEP", "1e6", "LOG_FORMAT", "XML"},
		{"SEGMENT_STORE", "MySQL", "SEGMENT_DSN", "root@tcp(h)/leaf"},
		{"SEGMENT_STORE", "postgres", "SNOWFLAKE_REGISTRY", "etcd"},
		{"SEGMENT_SEED", "false", "SNOWFLAKE_WORKER_ID", "1024"},
		{"SNOWFLAKE_WORKER_IDS", `{"10.0.0.1:8080": 3}`, "SNOWFLAKE_ENDPOINT", ":2181"},
		{"SNOWFLAKE_EPOCH", "9223372036854775807", "SNOWFLAKE_TIME_BITS", "30"},
		{"SNOWFLAKE_NAME", "a/b", "SNOWFLAKE_LEASE_TTL", "1s"},
		{"SNOWFLAKE_LAYOUT", "JS-Safe", "SNOWFLAKE_TIME_BITS", "41"},
		{"SNOWFLAKE_LAYOUT", "js-safe", "SNOWFLAKE_WORKER_BITS", "5"},
		{"SNOWFLAKE_LAYOUT", "js", "SNOWFLAKE_SEQUENCE_BITS", "8"},
		{"SNOWFLAKE_LAYOUT", "custom", "SNOWFLAKE_EPOCH", "1767225600000"},
		{"ADMIN_TOKEN", "s3cr3t", "ADMIN_TOKEN", "0123456789abcdef é"},
		{"SEGMENT_OPAQUE_KEY", "00112233445566778899AABBCCDDEEFF", "SEGMENT_OPAQUE_KEY", "0x00112233445566778899aabbccddeeff"},
		{"RATE_LIMIT_PER_SECOND", "-5", "TLS_KEY", "k.pem"},
		{"TEST_X", "1", "NOPE", "1"},
		{"LISTEN=x", "y", "", "z"},
	} {
		f.Add(kv[0], kv[1], kv[2], kv[3])
	}
	f.Fuzz(func(t *testing.T, name1, value1, name2, value2 string) {
		env := []string{EnvPrefix + name1 + "=" + value1, EnvPrefix + name2 + "=" + value2}
		// The last value of a name wins, as in exec.Cmd; an empty one
		// means unset.
		set := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if k == EnvConfigFile {
				// A file name: the fuzzer would read /dev/stdin or
				// /dev/zero. FuzzLoadYAML covers the file.
				return
			}
			set[k] = v
		}
		cfg, err := Load(Sources{Env: env})
		if err != nil {
			checkLoadError(t, err, func(where string) bool { _, ok := set[where]; return ok })
			checkNoSecretInErrors(t, err, "admin.token", strings.TrimSpace(set[EnvPrefix+"ADMIN_TOKEN"]))
			checkNoSecretInErrors(t, err, "segment.opaque_key", strings.TrimSpace(set[EnvPrefix+"SEGMENT_OPAQUE_KEY"]))
			return
		}
		def := Default()
		layoutSet, numbersSet := false, false
		for _, fl := range fields() {
			if v := set[fl.env()]; v != "" {
				if err := def.set(fl, v); err != nil {
					t.Fatalf("%s=%q does not parse (%v), yet Load succeeded", fl.env(), v, err)
				}
				layoutSet = layoutSet || fl.path == "snowflake.layout"
				numbersSet = numbersSet || slices.Contains(layoutKeys, fl.path)
			}
		}
		// Except that a preset sets the numbers, and numbers without a
		// layout name it.
		if p, err := snowflake.Preset(def.Snowflake.LayoutName); layoutSet && err == nil {
			def.Snowflake.setLayout(p)
		} else if !layoutSet && numbersSet {
			def.Snowflake.LayoutName = def.Snowflake.Layout().Name()
		}
		for _, fl := range fields() {
			got := cfg.value(fl).Interface()
			want := def.value(fl).Interface()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: %s = %#v, want %#v", env, fl.path, got, want)
			}
		}
		checkLoaded(t, cfg, strconv.Quote(strings.Join(env, " ")))
		unknown := UnknownEnv(env)
		for k := range set {
			_, known := fieldByEnv(k)
			reported := slices.Contains(unknown, k)
			if want := !known && !strings.HasPrefix(k, EnvPrefix+"TEST_"); reported != want {
				t.Fatalf("UnknownEnv(%q) = %q: %s reported %v, want %v", env, unknown, k, reported, want)
			}
		}
	})
}

func fieldByEnv(name string) (field, bool) {
	for _, f := range fields() {
		if f.env() == name {
			return f, true
		}
	}
	return field{}, false
}

// FuzzLeafProperties loads arbitrary bytes as Java Leaf's leaf.properties.
//
// Properties: no panic; Load fails when parsing fails (javaprops.Parse,
// fuzzed on its own), with that error wrapped in ErrInvalid, or with an
// error that wraps ErrInvalid and names file:line on every line (a key's line says which
// line of the file set it); a configuration loaded is valid and
// round-trips, uses only the stores and registries the mapping produces,
// with a MySQL DSN the driver parses, and every warning names a line of the
// file.
func FuzzLeafProperties(f *testing.F) {
	data, err := os.ReadFile("testdata/leaf.properties")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	for _, s := range []string{
		"", "server.port=9090\njdbc.url=x\n", "leaf.name=x\nleaf.segment.enable=yes\n", "leaf.snowflake.enable=1\n",
		"\n\nleaf.snowflake.port=80a\n", "leaf.jdbc.url=jdbc:postgresql://h/leaf\n", "leaf.jdbc.url=jdbc:mysql://h:3306/?useSSL=false\n",
		"leaf.jdbc.url=jdbc:mysql://a,b/leaf\n", "leaf.jdbc.url=jdbc:mysql:loadbalance://a,b/leaf\n",
		"leaf.jdbc.url=jdbc:mysql://[::1]:3306/leaf?connectTimeout=5000&socketTimeout=0&sslMode=VERIFY_CA&user=u&password=p%40ss\n",
		"leaf.jdbc.url=jdbc:mariadb://h/leaf?useSSL=true&requireSSL=true&verifyServerCertificate=no\nleaf.jdbc.username=a:b\nleaf.jdbc.password=@\n",
		"leaf.snowflake.zk.address=zk:2181/leaf\n", "leaf.snowflake.zk.address=zk1:2181,zk2\n", "leaf.snowflake.mode=zk_recycle\n",
		"leaf.snowflake.enable=true\nleaf.snowflake.mode=local\n",
		"leaf.snowflake.mode=local\nleaf.snowflake.local.workIdMap={\"10.0.0.1:80\":1}\n",
		"leaf.snowflake.enable=true\nleaf.snowflake.mode=mysql\n", "leaf.snowflake.mode=mysql\nleaf.jdbc.url=jdbc:mysql://h/leaf\n",
		"leaf.name=a\\u00\n", "leaf.name=a/b\n", "leaf.name=x\nleaf.name=y\nleaf.other=1\n",
		"k = one, \\\n      two, \\\n\tthree\nnext=x\n", "a=1\r\nb=2\rc=3", "e=\\uD83D\\uDE00\nk=caf\xe9\n", "# c \\\nk=v\\",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "leaf.properties")
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := countLines(data)
		_, perr := javaprops.Parse(path, data)

		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, warnings, err := LoadWithWarnings(Sources{LeafProperties: path})
		var se *javaprops.SyntaxError
		if perr != nil && (!errors.Is(err, ErrInvalid) || !errors.As(err, &se) || se.Error() != perr.Error()) {
			t.Fatalf("%q: javaprops.Parse fails with %v, Load with %v", data, perr, err)
		}
		atLine := func(where string) bool {
			n, err := strconv.Atoi(strings.TrimPrefix(where, path+":"))
			return strings.HasPrefix(where, path+":") && err == nil && n >= 1 && n <= lines
		}
		if err != nil {
			checkLoadError(t, err, func(where string) bool {
				// A key's origin is "file:line, property".
				where, _, _ = strings.Cut(where, ", ")
				return atLine(where)
			})
			if !strings.Contains(err.Error(), path+":") {
				t.Fatalf("%q: Load error %q names no line of the file", data, err)
			}
			return
		}
		checkLoaded(t, cfg, "properties "+strconv.Quote(string(data)))
		for _, w := range warnings {
			if !atLine(w.At) || w.Key == "" || w.Message == "" {
				t.Fatalf("%q: warning %+v does not name a line of the file, a key and what is wrong", data, w)
			}
		}
		switch cfg.Segment.Store {
		case StoreSQLite:
		case StoreMySQL:
			if _, err := mysql.ParseDSN(cfg.Segment.DSN); err != nil {
				t.Fatalf("%q: segment.dsn %q does not parse: %v", data, cfg.Segment.DSN, err)
			}
		default:
			t.Fatalf("%q: segment.store %q, which leaf.properties cannot name", data, cfg.Segment.Store)
		}
		if r := cfg.Snowflake.Registry; r != RegistryLocal && r != RegistryZooKeeper && r != RegistryMySQL {
			t.Fatalf("%q: snowflake.registry %q, which leaf.properties cannot name", data, r)
		}
	})
}

// countLines counts the lines of data as a properties file has them: ended
// by \n, \r or \r\n, the last one unended.
func countLines(data []byte) int {
	n := 0
	for i := 0; i < len(data); i++ {
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		if data[i] == '\n' || data[i] == '\r' || i == len(data)-1 {
			n++
		}
	}
	return n
}
