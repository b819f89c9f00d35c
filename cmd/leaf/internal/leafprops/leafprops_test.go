package leafprops

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/javaprops"
)

// TestRead checks what Read says a file sets, and where each setting comes
// from; the resulting configuration is internal/config's to test.
func TestRead(t *testing.T) {
	type set = [3]string // path, value, "line key"
	tests := []struct {
		name     string
		props    string
		want     []set
		warnings []string // Warning.String(), whole
	}{
		{"empty", "", nil, nil},
		{"non-leaf keys ignored silently", "server.port=9090\n", nil, nil},
		{"zookeeper without leaf.name: Java's /snowflake/null", "\nleaf.snowflake.zk.address = zk:2181 \nleaf.snowflake.port=8089\n", []set{
			{"snowflake.zk", "zk:2181", "2 leaf.snowflake.zk.address"},
			{"snowflake.endpoint", ":8089", "3 leaf.snowflake.port"},
			{"snowflake.registry", "zookeeper", "2 leaf.snowflake.zk.address"},
			{"snowflake.name", "null", "2 leaf.snowflake.zk.address"},
		}, []string{"f:2: leaf.snowflake.zk.address: leaf.name is not set: Java Leaf then uses the tree /snowflake/null, and so does this server (snowflake.name null)"}},
		{"segment and mysql mode share the URL", "leaf.segment.enable=TRUE\nleaf.jdbc.url=jdbc:mysql://h/leaf?useSSL=false&x=1\nleaf.snowflake.mode=mysql\n", []set{
			{"segment.enabled", "true", "1 leaf.segment.enable"},
			{"segment.store", "mysql", "2 leaf.jdbc.url"},
			{"segment.dsn", "tcp(h:3306)/leaf", "2 leaf.jdbc.url"},
			{"snowflake.registry", "mysql", "3 leaf.snowflake.mode"},
			{"snowflake.dsn", "tcp(h:3306)/leaf", "2 leaf.jdbc.url"},
		}, []string{"f:2: leaf.jdbc.url: URL parameter x dropped: the Go MySQL driver has no equivalent"}},
		{"local mode, duplicate and unknown keys", "leaf.snowflake.mode=local\nleaf.snowflake.local.workIdMap={}\nleaf.snowflake.local.workIdMap={\"10.0.0.1:80\":1}\nleaf.other=1\n", []set{
			{"snowflake.registry", "local", "1 leaf.snowflake.mode"},
			{"snowflake.worker_ids", `{"10.0.0.1:80":1}`, "3 leaf.snowflake.local.workIdMap"},
		}, []string{"f:2: leaf.snowflake.local.workIdMap: set again on line 3, which wins (as in Java)", "f:4: leaf.other: unknown key, ignored (as Java Leaf does)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sets, warnings, err := Read("f", []byte(tt.props))
			if err != nil {
				t.Fatal(err)
			}
			var got []set
			for _, s := range sets {
				got = append(got, set{s.Path, s.Value, strings.TrimPrefix(s.At, "f:") + " " + s.Key})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("settings\n got  %q\n want %q", got, tt.want)
			}
			var gotW []string
			for _, w := range warnings {
				gotW = append(gotW, w.String())
			}
			if !reflect.DeepEqual(gotW, tt.warnings) {
				t.Errorf("warnings\n got  %q\n want %q", gotW, tt.warnings)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	for _, tt := range []struct{ props, want string }{
		{"leaf.name=x\nleaf.segment.enable=yes\n", `f:2: leaf.segment.enable: "yes" is neither true nor false (Java Leaf would read it as false)`},
		{"leaf.snowflake.enable=true\n", "f:1: leaf.snowflake.enable: true needs leaf.snowflake.zk.address, the ZooKeeper servers (host:port,...)"},
		{"leaf.snowflake.mode=zk_recycle\n", "f:1: leaf.snowflake.mode: zk_recycle is not supported"},
	} {
		_, _, err := Read("f", []byte(tt.props))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Read(%q) = %v, want %q", tt.props, err, tt.want)
		}
	}
	// The format's own error comes through as it is.
	_, _, err := Read("f", []byte("leaf.name=\\u00\n"))
	var se *javaprops.SyntaxError
	if !errors.As(err, &se) || se.Line != 1 {
		t.Errorf("malformed escape: %v, want a javaprops.SyntaxError on line 1", err)
	}
}

func TestMySQLDSNFromJDBCRoundTrip(t *testing.T) {
	// A user name the DSN syntax cannot hold is refused rather than mangled.
	if _, _, err := mysqlDSNFromJDBC("jdbc:mysql://h/leaf", "a:b", "x"); err == nil {
		t.Error("user name with ':' accepted")
	}
	if _, _, err := mysqlDSNFromJDBC("jdbc:mysql://h/leaf", "", "x"); err == nil || !strings.Contains(err.Error(), "a password but no user name") {
		t.Errorf("password without a user: %v", err)
	}
	dsn, dropped, err := mysqlDSNFromJDBC("jdbc:MySQL://H:3306/leaf?useSSL=false&verifyServerCertificate=false&requireSSL=true&socketTimeout=0", "u", "")
	if err != nil || dsn != "u@tcp(H:3306)/leaf" || len(dropped) != 0 {
		t.Errorf("= %q %v %v", dsn, dropped, err)
	}
	for _, tt := range []struct{ params, tls string }{
		{"useSSL=true&verifyServerCertificate=false", "preferred"},
		{"useSSL=yes&verifyServerCertificate=no&requireSSL=true", "skip-verify"},
		{"useSSL=true&requireSSL=true", "true"},
		{"sslMode=VERIFY_CA", "true"},
		{"sslMode=preferred", "preferred"},
		{"sslMode=DISABLED&useSSL=true", ""},
	} {
		dsn, _, err := mysqlDSNFromJDBC("jdbc:mysql://h/leaf?"+tt.params, "", "")
		want := "tcp(h:3306)/leaf"
		if tt.tls != "" {
			want += "?tls=" + tt.tls
		}
		if err != nil || dsn != want {
			t.Errorf("%s: %q, %v; want %q", tt.params, dsn, err, want)
		}
	}
}
