package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeProps writes a leaf.properties file and returns its path.
func writeProps(t *testing.T, content string) string {
	t.Helper()
	return writeNamed(t, "leaf.properties", content)
}

// TestLeafPropertiesEquivalentYAML: Java Leaf's sample file, filled in, and
// the YAML file written for it give the very same configuration.
func TestLeafPropertiesEquivalentYAML(t *testing.T) {
	fromProps, warnings, err := LoadWithWarnings(Sources{LeafProperties: "testdata/leaf.properties"})
	if err != nil {
		t.Fatalf("load testdata/leaf.properties: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings for Leaf's own sample: %v", warnings)
	}
	fromYAML, err := Load(Sources{File: "testdata/leaf-equivalent.yml"})
	if err != nil {
		t.Fatalf("load testdata/leaf-equivalent.yml: %v", err)
	}
	if !reflect.DeepEqual(fromProps, fromYAML) {
		t.Errorf("leaf.properties and its YAML differ:\nproperties %+v\nyaml       %+v", fromProps, fromYAML)
	}
	// And the YAML really says something: spot-check against the defaults.
	if fromYAML.Segment.Store != StoreMySQL || fromYAML.Snowflake.Registry != RegistryZooKeeper ||
		fromYAML.Snowflake.Endpoint != ":2181" || fromYAML.Snowflake.Name != "com.sankuai.leaf.opensource.test" {
		t.Errorf("unexpected configuration %+v", fromYAML)
	}
}

// TestLeafPropertiesMapping loads small files and compares the whole
// configuration with the defaults changed as expected.
func TestLeafPropertiesMapping(t *testing.T) {
	tests := []struct {
		name     string
		props    string
		want     func(c *Config)
		warnings []string // substrings, one per warning, in order
	}{
		{"empty", "", func(*Config) {}, nil},
		{"non-leaf keys ignored silently", "server.port=9090\njdbc.url=x\n", func(*Config) {}, nil},
		{"disabled modes", "leaf.segment.enable=false\nleaf.snowflake.enable=FALSE\n", func(c *Config) {
			c.Segment.Enabled, c.Snowflake.Enabled = false, false
		}, nil},
		{"unknown and duplicate keys warn", "leaf.name=a\nleaf.snowflake.hostname.eanble=true\nleaf.name=b\n", func(c *Config) {
			c.Snowflake.Name = "b"
		}, []string{"leaf.snowflake.hostname.eanble: unknown key, ignored", ":1: leaf.name: set again on line 3, which wins"}},
		{"jdbc parameters", "leaf.jdbc.url=jdbc:mysql://db.example:3307/leaf?connectTimeout=2500&socketTimeout=30000&useSSL=true&serverTimezone=Asia/Shanghai&autoReconnect=true&foo=bar\n" +
			"leaf.jdbc.username=leaf\nleaf.jdbc.password=p@ss:w/rd\n", func(c *Config) {
			c.Segment.Store = StoreMySQL
			c.Segment.DSN = "leaf:p@ss:w/rd@tcp(db.example:3307)/leaf?readTimeout=30s&timeout=2.5s&tls=true"
		}, []string{"URL parameter foo dropped"}},
		{"default port, no params: TLS when offered", "leaf.jdbc.url=jdbc:mysql://db/leaf\n", func(c *Config) {
			c.Segment.Store, c.Segment.DSN = StoreMySQL, "tcp(db:3306)/leaf?tls=preferred"
		}, nil},
		{"mariadb URL, credentials in the URL win", "leaf.jdbc.url=jdbc:mariadb://[::1]/leaf?user=u&password=a%26b&sslMode=REQUIRED\nleaf.jdbc.username=x\nleaf.jdbc.password=y\n", func(c *Config) {
			c.Segment.Store, c.Segment.DSN = StoreMySQL, "u:a&b@tcp([::1]:3306)/leaf?tls=skip-verify"
		}, nil},
		{"credentials kept as written", "leaf.jdbc.url=jdbc:mysql://h/leaf?useSSL=false  \nleaf.jdbc.username=root\nleaf.jdbc.password= pw \n", func(c *Config) {
			c.Segment.Store, c.Segment.DSN = StoreMySQL, "root:pw @tcp(h:3306)/leaf"
		}, nil},
		{"credentials without a URL", "leaf.jdbc.username=root\n", func(*Config) {}, []string{"leaf.jdbc.username: ignored: leaf.jdbc.url is not set"}},
		{"zookeeper", "leaf.name=svc\nleaf.snowflake.zk.address=zk1:2181, zk2:2181\nleaf.snowflake.port=8089\n", func(c *Config) {
			c.Snowflake.Name, c.Snowflake.Registry, c.Snowflake.ZooKeeper, c.Snowflake.Endpoint = "svc", RegistryZooKeeper, "zk1:2181, zk2:2181", ":8089"
		}, nil},
		{"zookeeper without leaf.name: Java's /snowflake/null", "leaf.snowflake.zk.address=zk:2181\n", func(c *Config) {
			c.Snowflake.Name, c.Snowflake.Registry, c.Snowflake.ZooKeeper = "null", RegistryZooKeeper, "zk:2181"
		}, []string{"leaf.name is not set"}},
		{"port only", "leaf.snowflake.port=+08080\n", func(c *Config) { c.Snowflake.Endpoint = ":8080" }, nil},
		{"empty port: not set", "leaf.snowflake.port=\n", func(*Config) {}, nil},
		{"fork: mysql mode", "leaf.snowflake.mode=mysql\nleaf.jdbc.url=jdbc:mysql://h:3306/leaf?useSSL=false\nleaf.segment.enable=false\n", func(c *Config) {
			c.Segment.Enabled, c.Segment.Store, c.Segment.DSN = false, StoreMySQL, "tcp(h:3306)/leaf"
			c.Snowflake.Registry, c.Snowflake.DSN = RegistryMySQL, "tcp(h:3306)/leaf"
		}, nil},
		{"fork: local mode", "leaf.snowflake.enable=true\nleaf.snowflake.mode=local\nleaf.snowflake.local.workIdMap={\"10.0.0.1:8080\":1,\"10.0.0.2:8080\":2}\nleaf.snowflake.port=8080\n", func(c *Config) {
			c.Snowflake.Registry, c.Snowflake.WorkerIDs, c.Snowflake.Endpoint = RegistryLocal, `{"10.0.0.1:8080":1,"10.0.0.2:8080":2}`, ":8080"
		}, nil},
		{"fork: workIdMap outside local mode", "leaf.snowflake.local.workIdMap={}\n", func(*Config) {}, []string{"leaf.snowflake.local.workIdMap: ignored"}},
		{"fork: zk_normal named", "leaf.snowflake.mode=ZK_NORMAL\nleaf.snowflake.zk.address=zk:2181\nleaf.name=n\n", func(c *Config) {
			c.Snowflake.Name, c.Snowflake.Registry, c.Snowflake.ZooKeeper = "n", RegistryZooKeeper, "zk:2181"
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := LoadWithWarnings(Sources{LeafProperties: writeProps(t, tt.props)})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := Default()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if len(warnings) != len(tt.warnings) {
				t.Fatalf("warnings %v, want %d: %q", warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range warnings {
				if !strings.Contains(w.String(), tt.warnings[i]) || !strings.Contains(w.At, "leaf.properties:") {
					t.Errorf("warning %d = %q, want it to contain %q and a file:line", i, w, tt.warnings[i])
				}
			}
		})
	}
}

func TestLeafPropertiesErrors(t *testing.T) {
	tests := []struct {
		name, props string
		want        string // after "<file>"
	}{
		{"bad boolean", "leaf.name=x\nleaf.segment.enable=yes\n", `:2: leaf.segment.enable: "yes" is neither true nor false`},
		{"bad snowflake boolean", "leaf.snowflake.enable=1\n", `:1: leaf.snowflake.enable: "1" is neither true nor false`},
		{"bad port", "\n\nleaf.snowflake.port=80a\n", `:3: leaf.snowflake.port: "80a" is not a port number`},
		{"port out of range", "leaf.snowflake.port=65536\n", `:1: leaf.snowflake.port: "65536" is not a port number`},
		{"postgres URL", "leaf.jdbc.url=jdbc:postgresql://h/leaf\n", `:1: leaf.jdbc.url: "jdbc:postgresql://h/leaf" is not a MySQL JDBC URL`},
		{"not JDBC", "leaf.jdbc.url=root@tcp(h)/leaf\n", `:1: leaf.jdbc.url: "root@tcp(h)/leaf" is not a JDBC URL`},
		{"no database", "leaf.jdbc.url=jdbc:mysql://h:3306/?useSSL=false\n", ":1: leaf.jdbc.url: \"jdbc:mysql://h:3306/?useSSL=false\" names no database"},
		{"no database, no slash", "leaf.jdbc.url=jdbc:mysql://h:3306?x=1\n", "names no database"},
		{"fail-over hosts", "leaf.jdbc.url=jdbc:mysql://a,b/leaf\n", "names several servers"},
		{"load balancing", "leaf.jdbc.url=jdbc:mysql:loadbalance://a,b/leaf\n", "load-balancing"},
		{"bad port in URL", "leaf.jdbc.url=jdbc:mysql://h:99999/leaf\n", `invalid port "99999"`},
		{"bad timeout", "leaf.jdbc.url=jdbc:mysql://h/leaf?connectTimeout=5s\n", `parameter connectTimeout="5s": want milliseconds`},
		{"bad sslMode", "leaf.jdbc.url=jdbc:mysql://h/leaf?sslMode=maybe\n", `sslMode="MAYBE"`},
		{"bad useSSL", "leaf.jdbc.url=jdbc:mysql://h/leaf?useSSL=perhaps\n", `useSSL="perhaps": want true or false`},
		{"segment on without URL", "leaf.segment.enable=true\n", ":1: leaf.segment.enable: true needs leaf.jdbc.url"},
		{"snowflake on without ZooKeeper", "leaf.snowflake.enable=true\n", ":1: leaf.snowflake.enable: true needs leaf.snowflake.zk.address"},
		{"ZooKeeper chroot", "leaf.snowflake.zk.address=zk:2181/leaf\n", "chroot path (/leaf)"},
		{"ZooKeeper without port", "leaf.snowflake.zk.address=zk1:2181,zk2\n", `server "zk2" is not host:port`},
		{"zk_recycle", "leaf.snowflake.mode=zk_recycle\n", ":1: leaf.snowflake.mode: zk_recycle is not supported"},
		{"unknown mode", "leaf.snowflake.mode=zk\n", `"zk" is not one of zk_normal`},
		{"local without map", "leaf.snowflake.enable=true\nleaf.snowflake.mode=local\n", ":2: leaf.snowflake.mode: local needs leaf.snowflake.local.workIdMap"},
		{"workIdMap not numbers", "leaf.snowflake.mode=local\nleaf.snowflake.local.workIdMap={\"10.0.0.1:80\":\"1\"}\n", ":2: leaf.snowflake.local.workIdMap: not a JSON object"},
		{"mysql mode without URL", "leaf.snowflake.enable=true\nleaf.snowflake.mode=mysql\n", "mysql needs leaf.jdbc.url"},
		{"malformed escape", "leaf.name=a\\u00\n", `:1: malformed \uxxxx escape`},
		// Found by the final validation, which names the file and line.
		{"bad name", "leaf.name=a/b\n", "snowflake.name (from "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeProps(t, tt.props)
			loadFails(t, Sources{LeafProperties: path}, tt.want, path)
		})
	}
	// A file that is not there was named wrongly: a usage error.
	if _, err := Load(Sources{LeafProperties: filepath.Join(t.TempDir(), "none.properties")}); err == nil ||
		!errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want a not-exist error that is ErrInvalid", err)
	}
}

// TestLeafPropertiesPrecedence: leaf.properties sits right above the
// defaults, below the YAML file, the environment and flags.
func TestLeafPropertiesPrecedence(t *testing.T) {
	props := writeProps(t, "leaf.name=from-props\nleaf.snowflake.port=1001\nleaf.segment.enable=false\nleaf.snowflake.zk.address=zk:2181\n")
	yml := writeFile(t, "snowflake:\n  name: from-yaml\n  endpoint: \":1002\"\n")
	c, err := Load(Sources{LeafProperties: props, File: yml,
		Env:   []string{"LEAF_SNOWFLAKE_ENDPOINT=:1003"},
		Flags: map[string]string{"snowflake.zk": "flag:2181"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Segment.Enabled || c.Snowflake.Registry != RegistryZooKeeper {
		t.Errorf("properties not applied: %+v", c)
	}
	if c.Snowflake.Name != "from-yaml" || c.Snowflake.Endpoint != ":1003" || c.Snowflake.ZooKeeper != "flag:2181" {
		t.Errorf("name %q endpoint %q zk %q: want the YAML's, the env's and the flag's", c.Snowflake.Name, c.Snowflake.Endpoint, c.Snowflake.ZooKeeper)
	}
	// A value the properties set is reported with its file and line.
	_, err = Load(Sources{LeafProperties: props, Env: []string{"LEAF_SNOWFLAKE_LEASE_TTL=1s"}, Flags: map[string]string{"snowflake.name": "a/b"}})
	if err == nil || !strings.Contains(err.Error(), "snowflake.name (from --name)") {
		t.Errorf("flag over properties: %v", err)
	}
	_, err = Load(Sources{LeafProperties: writeProps(t, "\nleaf.name=..\n")})
	if err == nil || !strings.Contains(err.Error(), "leaf.properties:2, leaf.name)") {
		t.Errorf("origin of a properties value: %v", err)
	}
}

func TestBindLeafProperties(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := BindFlags(fs, "listen")
	b.BindLeafProperties()
	if err := fs.Parse([]string{"--leaf-properties", "/etc/leaf.properties", "--config", "/etc/leaf.yml"}); err != nil {
		t.Fatal(err)
	}
	src := b.Sources(nil)
	if src.LeafProperties != "/etc/leaf.properties" || src.File != "/etc/leaf.yml" {
		t.Errorf("Sources = %+v", src)
	}
	// Without BindLeafProperties there is no such flag.
	fs2 := flag.NewFlagSet("tags", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	BindFlags(fs2)
	if fs2.Lookup("leaf-properties") != nil {
		t.Error("BindFlags registered --leaf-properties")
	}
}

func TestValidateEndpoint(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"", true}, {":8080", true}, {":1", true}, {":65535", true}, {"10.0.0.1:8080", true}, {"::1:8080", true}, {"[::1]:8080", true},
		{":0", false}, {":65536", false}, {":", false}, {":http", false}, {"10.0.0.1", false}, {"host:8080", false},
	} {
		err := ValidateEndpoint(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateEndpoint(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
	c := Default()
	c.Snowflake.Endpoint = ":99999"
	if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "snowflake.endpoint") {
		t.Errorf("Validate with endpoint :99999 = %v", err)
	}
}
