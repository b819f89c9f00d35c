package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/javaprops"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/snowflake"
)

// javaLeafAlloc is Java Leaf's scripts/leaf_alloc.sql and its README's
// sample row: the database a Java deployment already has.
var javaLeafAlloc = []string{
	"CREATE TABLE `leaf_alloc` (\n" +
		"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
		"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
		"  `step` int(11) NOT NULL,\n" +
		"  `description` varchar(256)  DEFAULT NULL,\n" +
		"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
		"  PRIMARY KEY (`biz_tag`)\n" +
		") ENGINE=InnoDB",
	"insert into leaf_alloc(biz_tag, max_id, step, description) values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')",
}

// javaLeafDatabase creates a fresh MySQL database laid out as Java Leaf's
// and returns the leaf.jdbc.* lines of a leaf.properties pointing at it.
func javaLeafDatabase(t *testing.T) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	for _, stmt := range javaLeafAlloc {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	lines := fmt.Sprintf("leaf.jdbc.url=jdbc:mysql://%s/%s?useUnicode=true&characterEncoding=utf8&characterSetResults=utf8&useSSL=false&autoReconnect=true\n"+
		"leaf.jdbc.username=%s\n", cfg.Addr, cfg.DBName, cfg.User)
	if cfg.Passwd != "" {
		lines += "leaf.jdbc.password=" + javaprops.EscapeValue(cfg.Passwd) + "\n"
	}
	return lines
}

func writeLeafProperties(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leaf.properties")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeLeafPropertiesSegment: serve with nothing but a Java Leaf
// leaf.properties (and the listen address, which that file never held)
// serves the segments of a database set up as Java Leaf's.
func TestServeLeafPropertiesSegment(t *testing.T) {
	t.Parallel()
	props := writeLeafProperties(t, "# Java Leaf, segment mode only\n"+
		"leaf.name=com.sankuai.leaf.opensource.test\n"+
		"leaf.segment.enable=true\n"+
		javaLeafDatabase(t)+
		"leaf.snowflake.enable=false\n"+
		"#leaf.snowflake.zk.address=\n"+
		"#leaf.snowflake.port=\n")
	s := serveInProcess(t, dataEnv(t), "--leaf-properties", props, "--listen", "127.0.0.1:0")
	for want := int64(1); want <= 3; want++ {
		if id := testutil.FetchID(t, s.URL("/api/segment/get/leaf-segment-test")); id != want {
			t.Fatalf("segment ID %d, want %d (Leaf's sample row starts at 1)", id, want)
		}
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
	log := s.Log.String()
	if !strings.Contains(log, "store=\"mysql ") || strings.Contains(log, "level=WARN") {
		t.Errorf("want a mysql store and no warning in the log:\n%s", log)
	}
}

// TestServeLeafPropertiesZooKeeper is the whole Java Leaf path: segments
// from MySQL and worker IDs from ZooKeeper, where the server registers as
// <its IP>:<leaf.snowflake.port> and takes the worker ID of the node a Java
// server with that ip:port created before it.
func TestServeLeafPropertiesZooKeeper(t *testing.T) {
	t.Parallel()
	zkAddr := testutil.ZooKeeper(t)
	jdbc := javaLeafDatabase(t)
	name := testutil.UniqueName()
	t.Cleanup(func() { removeZKTree(t, zkAddr, name) })
	const leafPort = 18089 // not the listen port: Leaf's identity port
	ep, err := snowflakeEndpoint("", leafPort)
	if err != nil {
		t.Fatal(err)
	}

	// The tree as two Java servers left it: another endpoint's node (worker
	// 0) and ours (worker 1), their timestamps in the past.
	conn, _, err := zk.Connect([]string{zkAddr}, 5*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dir := "/snowflake/" + name + "/forever"
	for _, p := range []string{"/snowflake", "/snowflake/" + name, dir} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	past := time.Now().Add(-time.Minute).UnixMilli()
	for _, e := range []struct {
		ip   string
		port int
	}{{"10.255.0.1", 8080}, {ep.IP, leafPort}} {
		data := fmt.Sprintf(`{"ip":"%s","port":"%d","timestamp":%d}`, e.ip, e.port, past)
		if _, err := conn.Create(fmt.Sprintf("%s/%s:%d-", dir, e.ip, e.port), []byte(data), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	ourNode := fmt.Sprintf("%s:%d-0000000001", ep.IP, leafPort)

	props := writeLeafProperties(t, "leaf.name="+name+"\n"+
		"leaf.segment.enable=true\n"+jdbc+
		"leaf.snowflake.enable=true\n"+
		"leaf.snowflake.zk.address="+zkAddr+"\n"+
		"leaf.snowflake.port="+fmt.Sprint(leafPort)+"\n"+
		"leaf.snowflake.hostname.eanble=false\n") // PR #150's key: ignored, with a warning
	env := dataEnv(t)
	var lastSegment int64
	for run := 1; run <= 2; run++ { // the second run: a restart keeps the worker ID
		s := serveInProcess(t, env, "--leaf-properties", props, "--listen", "127.0.0.1:0")
		id := testutil.FetchID(t, s.URL("/api/segment/get/leaf-segment-test"))
		if (run == 1 && id != 1) || id <= lastSegment {
			t.Errorf("run %d: first segment ID %d, after %d", run, id, lastSegment)
		}
		lastSegment = id
		for _, id := range getSnowflake(t, s, 100) {
			if p, err := snowflake.LeafLayout.Decode(id); err != nil || p.WorkerID != 1 {
				t.Fatalf("run %d: snowflake ID %d decodes to %+v, %v; want worker 1, the sequence of node %s", run, id, p, err, ourNode)
			}
		}
		if !strings.Contains(s.Log.String(), "snowflake=\"zookeeper "+zkAddr+" /snowflake/"+name+"\"") {
			t.Errorf("run %d: listening line does not name the ZooKeeper registry:\n%s", run, s.Log.String())
		}
		if !strings.Contains(s.Log.String(), `level=WARN msg="leaf.properties: unknown key, ignored (as Java Leaf does)" key=leaf.snowflake.hostname.eanble`) {
			t.Errorf("run %d: no warning about the unknown key:\n%s", run, s.Log.String())
		}
		if code := s.Stop(t); code != 0 {
			t.Fatalf("run %d: serve exited %d: %s", run, code, s.Log.String())
		}
	}

	// No node was added, and ours holds Java's JSON with the Leaf port and a
	// fresh timestamp.
	kids, _, err := conn.Children(dir)
	if err != nil || len(kids) != 2 {
		t.Fatalf("children of %s: %v, %v; want the two Java nodes only", dir, kids, err)
	}
	data, _, err := conn.Get(dir + "/" + ourNode)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		IP        string `json:"ip"`
		Port      string `json:"port"`
		Timestamp int64  `json:"timestamp"`
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.IP != ep.IP || rec.Port != fmt.Sprint(leafPort) || rec.Timestamp <= past {
		t.Errorf("node data %s (%v), want ip %s, port \"%d\" and a timestamp after %d", data, err, ep.IP, leafPort, past)
	}
}

// TestServeLeafPropertiesErrors: a bad value is a usage error (exit 2)
// naming the file, line and key; so is a missing file.
func TestServeLeafPropertiesErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ props, want string }{
		{"leaf.name=x\nleaf.jdbc.url=jdbc:oracle:thin:@h:1521:leaf\n", ":2: leaf.jdbc.url: \"jdbc:oracle:thin:@h:1521:leaf\" is not a MySQL JDBC URL"},
		{"leaf.segment.enable=ture\n", `:1: leaf.segment.enable: "ture" is neither true nor false`},
		{"\nleaf.snowflake.port=http\n", `:2: leaf.snowflake.port: "http" is not a port number`},
	} {
		path := writeLeafProperties(t, tt.props)
		r := runCLI(t, dataEnv(t), "serve", "--listen", "127.0.0.1:0", "--leaf-properties", path)
		if r.code != 2 || !strings.Contains(r.stderr, path+tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.props, r.code, r.stderr, path+tt.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	r := runCLI(t, dataEnv(t), "serve", "--listen", "127.0.0.1:0", "--leaf-properties", missing)
	if r.code != 2 || !strings.Contains(r.stderr, "leaf.properties file "+missing+": file does not exist") {
		t.Errorf("missing file: exit %d, stderr %q; want 2 naming the file", r.code, r.stderr)
	}
}

// The endpoint ":PORT" (leaf.snowflake.port) is the detected address with
// that port, whatever the listen port.
func TestSnowflakeEndpointPortOnly(t *testing.T) {
	def, err := snowflakeEndpoint("", 18080)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := snowflakeEndpoint(":9000", 18080)
	if err != nil || ep.IP != def.IP || ep.Port != 9000 {
		t.Fatalf("endpoint :9000 = %+v, %v; want %s:9000", ep, err, def.IP)
	}
	for _, bad := range []string{":0", ":65536", ":x", ":"} {
		if _, err := snowflakeEndpoint(bad, 18080); !errors.Is(err, config.ErrInvalid) {
			t.Errorf("endpoint %q: %v, want config.ErrInvalid", bad, err)
		}
	}
	if ep, err := snowflakeEndpoint("::1:9000", 18080); err != nil || ep.IP != "::1" || ep.Port != 9000 {
		t.Errorf("endpoint ::1:9000 = %+v, %v; want IPv6 ::1 port 9000", ep, err)
	}
}
