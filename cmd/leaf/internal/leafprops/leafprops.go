// Package leafprops reads Java Leaf's leaf.properties and says what it
// sets in leaf's own configuration, so that a Java deployment's file can be
// used as it is (serve --leaf-properties). The mapping, from Java Leaf's
// keys to the configuration paths of the YAML file:
//
//	leaf.name                  snowflake.name
//	leaf.segment.enable        segment.enabled
//	leaf.jdbc.url, .username,  segment.store mysql and segment.dsn, the
//	  .password                  go-sql-driver DSN (see mysqlDSNFromJDBC)
//	leaf.snowflake.enable      snowflake.enabled
//	leaf.snowflake.zk.address  snowflake.zk, and snowflake.registry zookeeper
//	leaf.snowflake.port        snowflake.endpoint ":PORT": this port with the
//	                             detected IP, as Leaf registers ip:port
//	leaf.snowflake.mode (fork) snowflake.registry: zk_normal zookeeper,
//	                             mysql mysql, local local; zk_recycle refused
//	leaf.snowflake.local.workIdMap (fork)  snowflake.worker_ids
//
// Values are trimmed, except the user name and password, which Java passes
// on as written; an empty value counts as not set, as in leaf's other
// configuration layers. Booleans are true or false in any case: Java reads
// every other word as false, which is refused here rather than guessed.
// Keys absent from the file set nothing. Rules that go beyond one key follow
// Java Leaf, which fails to start where Read returns an error:
// leaf.segment.enable=true needs leaf.jdbc.url, leaf.snowflake.enable=true
// needs leaf.snowflake.zk.address (zk_normal). One exception keeps Java's
// odd behaviour because a shared ZooKeeper tree depends on it: with
// ZooKeeper and no leaf.name, Java's tree is /snowflake/null, so the name
// is "null".
//
// Other leaf.* keys are ignored with a warning, as Java ignores them; keys
// outside leaf.* are ignored silently. A key given twice takes the last
// value, as in Java, with a warning.
package leafprops

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafgo/leaf/internal/javaprops"
)

// The keys of Java Leaf's leaf.properties that leaf reads. The last two
// are the NotFound9 fork's.
const (
	KeyName           = "leaf.name"
	KeySegmentEnable  = "leaf.segment.enable"
	KeyJDBCURL        = "leaf.jdbc.url"
	KeyJDBCUsername   = "leaf.jdbc.username"
	KeyJDBCPassword   = "leaf.jdbc.password"
	KeySnowflakeOn    = "leaf.snowflake.enable"
	KeyZooKeeper      = "leaf.snowflake.zk.address"
	KeySnowflakePort  = "leaf.snowflake.port"
	KeySnowflakeMode  = "leaf.snowflake.mode"
	KeyLocalWorkIDMap = "leaf.snowflake.local.workIdMap"
)

var keys = []string{KeyName, KeySegmentEnable, KeyJDBCURL, KeyJDBCUsername, KeyJDBCPassword,
	KeySnowflakeOn, KeyZooKeeper, KeySnowflakePort, KeySnowflakeMode, KeyLocalWorkIDMap}

// The store and registry names Read sets, as leaf's configuration spells
// them.
const (
	storeMySQL        = "mysql"
	registryZooKeeper = "zookeeper"
	registryMySQL     = "mysql"
	registryLocal     = "local"
)

// Setting is one configuration key the file sets.
type Setting struct {
	Path  string // the configuration path, as in the YAML file: "snowflake.name"
	Value string // as the YAML file or a LEAF_* variable would give it
	At    string // file:line of the property that set it
	Key   string // that property: "leaf.name"
}

// Warning is a setting of the file that leaf ignores or changes. The file
// still loads.
type Warning struct {
	At      string // file:line
	Key     string // the property
	Message string
}

func (w Warning) String() string { return w.At + ": " + w.Key + ": " + w.Message }

// Read reads the leaf.properties file named file, holding data, and returns
// what it sets, in order (a path may be set twice: the last wins). Every
// error is a mistake in the file, named by file:line, or a
// *javaprops.SyntaxError.
func Read(file string, data []byte) ([]Setting, []Warning, error) {
	props, err := javaprops.Parse(file, data)
	if err != nil {
		return nil, nil, err
	}
	at := func(p javaprops.Property) string { return file + ":" + strconv.Itoa(p.Line) }
	var (
		sets  []Setting
		warns []Warning
	)
	warn := func(p javaprops.Property, format string, args ...any) {
		warns = append(warns, Warning{At: at(p), Key: p.Key, Message: fmt.Sprintf(format, args...)})
	}
	got := map[string]javaprops.Property{}
	for _, p := range props {
		if !strings.HasPrefix(p.Key, "leaf.") {
			continue
		}
		if !slices.Contains(keys, p.Key) {
			warn(p, "unknown key, ignored (as Java Leaf does)")
			continue
		}
		if prev, dup := got[p.Key]; dup {
			warn(prev, "set again on line %d, which wins (as in Java)", p.Line)
		}
		got[p.Key] = p
	}

	fail := func(p javaprops.Property, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", at(p), p.Key, fmt.Sprintf(format, args...))
	}
	// lookup returns a property and its trimmed value; ok is false when it
	// is absent or empty.
	lookup := func(key string) (p javaprops.Property, v string, ok bool) {
		p, ok = got[key]
		v = strings.TrimSpace(p.Value)
		return p, v, ok && v != ""
	}
	set := func(path string, p javaprops.Property, v string) {
		sets = append(sets, Setting{Path: path, Value: v, At: at(p), Key: p.Key})
	}
	// boolean reads a Java boolean into path; ok is false when it is unset.
	boolean := func(key, path string) (p javaprops.Property, value, ok bool, err error) {
		p, v, ok := lookup(key)
		if !ok {
			return p, false, false, nil
		}
		switch strings.ToLower(v) {
		case "true":
			value = true
		case "false":
		default:
			return p, false, false, fail(p, "%q is neither true nor false (Java Leaf would read it as false)", v)
		}
		set(path, p, strconv.FormatBool(value))
		return p, value, true, nil
	}

	if p, v, ok := lookup(KeyName); ok {
		set("snowflake.name", p, v)
	}

	// Segment mode: Java Leaf's store is MySQL.
	segP, segOn, segSet, err := boolean(KeySegmentEnable, "segment.enabled")
	if err != nil {
		return nil, nil, err
	}
	urlP, jdbcURL, haveURL := lookup(KeyJDBCURL)
	var dsn string
	if haveURL {
		user, pass := got[KeyJDBCUsername].Value, got[KeyJDBCPassword].Value
		var dropped []string
		if dsn, dropped, err = mysqlDSNFromJDBC(jdbcURL, user, pass); err != nil {
			return nil, nil, fail(urlP, "%v", err)
		}
		for _, d := range dropped {
			warn(urlP, "%s", d)
		}
		set("segment.store", urlP, storeMySQL)
		set("segment.dsn", urlP, dsn)
	} else {
		if segSet && segOn {
			return nil, nil, fail(segP, "true needs %s (Java Leaf's segment store is MySQL): jdbc:mysql://host:3306/db", KeyJDBCURL)
		}
		for _, k := range []string{KeyJDBCUsername, KeyJDBCPassword} {
			if p, ok := got[k]; ok && p.Value != "" {
				warn(p, "ignored: %s is not set", KeyJDBCURL)
			}
		}
	}

	// Snowflake mode.
	snowP, snowOn, snowSet, err := boolean(KeySnowflakeOn, "snowflake.enabled")
	if err != nil {
		return nil, nil, err
	}
	needed := snowSet && snowOn // Java fails to start without what the mode needs
	zkP, zk, haveZK := lookup(KeyZooKeeper)
	if haveZK {
		if err := checkZooKeeperServers(zk); err != nil {
			return nil, nil, fail(zkP, "%v", err)
		}
		set("snowflake.zk", zkP, zk)
	}
	if p, v, ok := lookup(KeySnowflakePort); ok {
		port, err := strconv.Atoi(v)
		if err != nil || port < 1 || port > 65535 {
			return nil, nil, fail(p, "%q is not a port number (1..65535)", v)
		}
		set("snowflake.endpoint", p, ":"+strconv.Itoa(port))
	}
	modeP, mode, haveMode := lookup(KeySnowflakeMode)
	if !haveMode {
		// Java Leaf's only registry; the address is what selects it.
		mode, modeP = "zk_normal", zkP
	}
	mode = strings.ToLower(mode)
	switch mode {
	case "zk_normal":
		switch {
		case haveZK:
			set("snowflake.registry", modeP, registryZooKeeper)
			if _, _, ok := lookup(KeyName); !ok {
				warn(zkP, "%s is not set: Java Leaf then uses the tree /snowflake/null, and so does this server (snowflake.name null)", KeyName)
				set("snowflake.name", zkP, "null")
			}
		case needed:
			return nil, nil, fail(snowP, "true needs %s, the ZooKeeper servers (host:port,...)", KeyZooKeeper)
		}
	case "mysql":
		if needed && !haveURL {
			return nil, nil, fail(modeP, "mysql needs %s, the database holding leaf_workerid_alloc", KeyJDBCURL)
		}
		set("snowflake.registry", modeP, registryMySQL)
		if haveURL {
			set("snowflake.dsn", urlP, dsn)
		}
	case "local":
		mapP, ids, haveMap := lookup(KeyLocalWorkIDMap)
		if needed && !haveMap {
			return nil, nil, fail(modeP, "local needs %s, the JSON object {\"ip:port\": workerId, ...}", KeyLocalWorkIDMap)
		}
		set("snowflake.registry", modeP, registryLocal)
		if haveMap {
			var m map[string]int64
			if err := json.Unmarshal([]byte(ids), &m); err != nil {
				return nil, nil, fail(mapP, "not a JSON object of \"ip:port\": number: %v", err)
			}
			set("snowflake.worker_ids", mapP, ids)
		}
	case "zk_recycle":
		return nil, nil, fail(modeP, "zk_recycle is not supported: the fork's recycling tree cannot be shared with this server. "+
			"Its own leasing registry is snowflake.registry zookeeper-recycle (a tree of its own: move all servers at once)")
	default:
		return nil, nil, fail(modeP, "%q is not one of zk_normal, zk_recycle, mysql, local", mode)
	}
	if p, ok := got[KeyLocalWorkIDMap]; ok && mode != "local" && strings.TrimSpace(p.Value) != "" {
		warn(p, "ignored: %s is not local", KeySnowflakeMode)
	}
	return sets, warns, nil
}

// checkZooKeeperServers checks a Curator connect string: host:port, ...
// with the ports given (Leaf needs them too) and no chroot, which the
// registry does not support.
func checkZooKeeperServers(list string) error {
	var servers []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return fmt.Errorf("%q names no server", list)
	}
	for _, s := range servers {
		if i := strings.IndexByte(s, '/'); i >= 0 {
			return fmt.Errorf("%q has a chroot path (%s), which is not supported", list, s[i:])
		}
		host, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("server %q is not host:port", s)
		}
	}
	return nil
}

// jdbcDropSilently are Connector/J parameters that only steer Java's side
// of the connection, dropped without a warning:
//   - character sets: Go strings are UTF-8 and the driver talks utf8mb4;
//     the server converts to each column's charset;
//   - serverTimezone and the legacy date-time switches: the store runs its
//     session in UTC and reads update_time as UTC, right whatever the
//     server's zone;
//   - reconnection, statement caching and batching, metadata quirks:
//     database/sql pools and reconnects, and the store's statements are
//     fixed (it also forces clientFoundRows, parseTime, interpolateParams).
var jdbcDropSilently = []string{
	"useunicode", "characterencoding", "charactersetresults", "connectioncollation",
	"servertimezone", "uselegacydatetimecode", "usejdbccomplianttimezoneshift", "usetimezone", "zerodatetimebehavior",
	"autoreconnect", "autoreconnectforpools", "failoverreadonly", "maxreconnects", "initialtimeout",
	"rewritebatchedstatements", "useserverprepstmts", "cacheprepstmts", "prepstmtcachesize", "prepstmtcachesqllimit",
	"uselocalsessionstate", "elidesetautocommits", "useaffectedrows", "allowmultiqueries", "allowpublickeyretrieval",
	"tinyint1isbit", "nullcatalogmeanscurrent", "useinformationschema", "cacheserverconfiguration", "maintaintimestats",
}

// mysqlDSNFromJDBC turns Java Leaf's leaf.jdbc.url (Connector/J syntax,
// jdbc:mysql://host[:port]/db[?params], or jdbc:mariadb://) and the
// credentials into a go-sql-driver DSN, user:pass@tcp(host:port)/db?....
// The port defaults to 3306 and the host to localhost, as in Connector/J.
// Parameters, names matched case-insensitively, values URL-decoded:
//
//	user, password            override the credentials, as in Connector/J
//	connectTimeout (ms)       timeout (0, Java's "none", keeps the default)
//	socketTimeout (ms)        readTimeout
//	sslMode                   DISABLED none, PREFERRED preferred, REQUIRED
//	                          skip-verify, VERIFY_CA and VERIFY_IDENTITY true
//	useSSL, requireSSL,       without sslMode: useSSL=false none; useSSL=true
//	verifyServerCertificate     true, or with verifyServerCertificate=false
//	                          skip-verify (requireSSL=true) or preferred;
//	                          useSSL absent preferred, Connector/J 5.1.38's
//	                          default (TLS when offered, unverified)
//	jdbcDropSilently          dropped
//	anything else             dropped; reported in dropped
//
// Several hosts (fail-over), loadbalance: and replication: URLs are
// refused, as is any other JDBC driver: Java Leaf ships only MySQL's.
func mysqlDSNFromJDBC(jdbcURL, user, password string) (dsn string, dropped []string, err error) {
	lower := strings.ToLower(jdbcURL)
	var rest string
	switch {
	case strings.HasPrefix(lower, "jdbc:mysql://"), strings.HasPrefix(lower, "jdbc:mariadb://"):
		_, rest, _ = strings.Cut(jdbcURL, "://")
	case strings.HasPrefix(lower, "jdbc:mysql:"), strings.HasPrefix(lower, "jdbc:mariadb:"):
		return "", nil, fmt.Errorf("%q: load-balancing, replication and other multi-host URLs are not supported; name one server: jdbc:mysql://host:3306/db", jdbcURL)
	case strings.HasPrefix(lower, "jdbc:"):
		return "", nil, fmt.Errorf("%q is not a MySQL JDBC URL (jdbc:mysql://host:3306/db): Java Leaf ships only the MySQL driver; "+
			"for another database set segment.store and segment.dsn in the YAML file instead", jdbcURL)
	default:
		return "", nil, fmt.Errorf("%q is not a JDBC URL (jdbc:mysql://host:3306/db)", jdbcURL)
	}

	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	switch {
	case strings.Contains(authority, ","):
		return "", nil, fmt.Errorf("%q names several servers; fail-over is not supported, name one", jdbcURL)
	case strings.ContainsAny(authority, "()@"):
		return "", nil, fmt.Errorf("%q: write the server as host:port, and the user and password in %s and %s", jdbcURL, KeyJDBCUsername, KeyJDBCPassword)
	}
	addr, err := hostPortDefault(authority, "localhost", "3306")
	if err != nil {
		return "", nil, fmt.Errorf("%q: %v", jdbcURL, err)
	}
	db, query, _ := strings.Cut(strings.TrimPrefix(pathQuery, "/"), "?")
	if db == "" || strings.HasPrefix(pathQuery, "?") {
		return "", nil, fmt.Errorf("%q names no database: jdbc:mysql://%s/DATABASE", jdbcURL, authority)
	}

	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", addr, db
	var useSSL, requireSSL, verifyCert *bool
	sslMode := ""
	for _, kv := range strings.Split(query, "&") {
		if kv == "" {
			continue
		}
		name, value, _ := strings.Cut(kv, "=")
		if v, err := url.QueryUnescape(value); err == nil {
			value = v
		}
		bad := func(want string) error {
			return fmt.Errorf("parameter %s=%q: want %s", name, value, want)
		}
		switch key := strings.ToLower(name); key {
		case "user":
			cfg.User = value
		case "password":
			cfg.Passwd = value
		case "connecttimeout", "sockettimeout":
			ms, err := strconv.ParseInt(value, 10, 32)
			if err != nil || ms < 0 {
				return "", nil, bad("milliseconds")
			}
			d := time.Duration(ms) * time.Millisecond
			if key == "connecttimeout" {
				cfg.Timeout = d
			} else {
				cfg.ReadTimeout = d
			}
		case "sslmode":
			sslMode = strings.ToUpper(value)
		case "usessl", "requiressl", "verifyservercertificate":
			b, ok := jdbcBool(value)
			if !ok {
				return "", nil, bad("true or false")
			}
			switch key {
			case "usessl":
				useSSL = &b
			case "requiressl":
				requireSSL = &b
			default:
				verifyCert = &b
			}
		default:
			if !slices.Contains(jdbcDropSilently, key) {
				dropped = append(dropped, fmt.Sprintf("URL parameter %s dropped: the Go MySQL driver has no equivalent", name))
			}
		}
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	switch {
	case sslMode != "":
		modes := map[string]string{"DISABLED": "", "PREFERRED": "preferred", "REQUIRED": "skip-verify", "VERIFY_CA": "true", "VERIFY_IDENTITY": "true"}
		tls, ok := modes[sslMode]
		if !ok {
			return "", nil, fmt.Errorf("parameter sslMode=%q: want DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY", sslMode)
		}
		cfg.TLSConfig = tls
	case useSSL == nil:
		cfg.TLSConfig = "preferred"
	case !*useSSL:
	case verifyCert != nil && !*verifyCert && isTrue(requireSSL):
		cfg.TLSConfig = "skip-verify"
	case verifyCert != nil && !*verifyCert:
		cfg.TLSConfig = "preferred"
	default:
		cfg.TLSConfig = "true"
	}

	if cfg.User == "" && cfg.Passwd != "" {
		return "", nil, fmt.Errorf("a password but no user name: set %s", KeyJDBCUsername)
	}
	dsn = cfg.FormatDSN()
	// The DSN syntax cannot hold every user name (one with ':' or '@'):
	// make sure it reads back as meant.
	back, err := mysql.ParseDSN(dsn)
	if err != nil || back.User != cfg.User || back.Passwd != cfg.Passwd || back.Addr != cfg.Addr || back.DBName != cfg.DBName {
		return "", nil, fmt.Errorf("the user name, password or database name cannot be written in a Go MySQL DSN; set segment.dsn in the YAML file instead")
	}
	return dsn, dropped, nil
}

// jdbcBool reads a Connector/J boolean: true/false or yes/no.
func jdbcBool(s string) (value, ok bool) {
	switch strings.ToLower(s) {
	case "true", "yes":
		return true, true
	case "false", "no":
		return false, true
	}
	return false, false
}

// hostPortDefault completes "host", "host:port", "[v6]:port" or "" with the
// defaults and checks the port.
func hostPortDefault(s, defHost, defPort string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port (or a bare IPv6 address, which needs brackets to take one).
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), defPort
		if strings.Count(host, ":") == 1 {
			return "", fmt.Errorf("%q is not host:port", s)
		}
	}
	if host == "" {
		host = defHost
	}
	if port == "" {
		port = defPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q has an invalid port %q, want 1..65535", s, port)
	}
	return net.JoinHostPort(host, port), nil
}
