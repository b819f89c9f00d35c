// Package config is the configuration of the leaf binary: one struct, its
// zero-configuration defaults, and the layering
//
//	defaults < leaf.properties (--leaf-properties) < YAML file (--config or
//	LEAF_CONFIG) < LEAF_* environment < flags
//
// leaf.properties is Java Leaf's own file, read as is so that a Leaf
// deployment can switch servers without rewriting its configuration; its
// keys map onto ours as package leafprops says.
//
// Every key is a field of Config. Its YAML path comes from the yaml tags, its
// environment variable is derived mechanically from the path (upper case, "."
// becomes "_", prefix LEAF_), and a flag exists when the field has a flag tag.
// The layering walks the struct by reflection, so a new field gets YAML, env
// and documentation support (Keys) without further code; only cross-key rules
// need a line in Validate.
//
// A null YAML value ("key:" with nothing after it) and an empty environment
// variable both mean "not set here", so a lower layer's value stays. That keeps
// etc/leaf.yml loadable as is and lets a user blank out an env var to reset it.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/sqlstore"
	"github.com/leafgo/leaf/metrics"
	"github.com/leafgo/leaf/ordered"
	"github.com/leafgo/leaf/ordinal"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/snowflake"
	"github.com/leafgo/leaf/tagshape"
)

// ErrInvalid is wrapped by every error about a configuration value: a bad
// value, an unknown key, a missing required key. The CLI maps it to exit
// status 2 (usage error); I/O errors (an unreadable file) are not wrapped.
var ErrInvalid = errors.New("invalid configuration")

// Store names accepted by segment.store.
const (
	StoreSQLite   = "sqlite"
	StoreMySQL    = "mysql"
	StorePostgres = "postgres"
)

// SeedTag is the tag seeded into a fresh store, as in Leaf's sample schema.
const SeedTag = "leaf-segment-test"

// SeedAlloc is the row inserted for SeedTag: Leaf's sample row (step 2000,
// first ID 1).
func SeedAlloc() leaf.Alloc {
	return leaf.Alloc{Tag: SeedTag, MaxID: 1, Step: 2000, Description: "Test leaf Segment Mode Get Id"}
}

// Config is the whole configuration of leaf. The struct tags drive loading:
// yaml is the key name, help documents it (Keys), flag names its command-line
// flag if it has one, arg names the flag's argument in usage text, enum lists
// the accepted values (matched case-insensitively, stored in lower case).
type Config struct {
	Listen     string `yaml:"listen" flag:"listen" arg:"addr" help:"HTTP listen address, host:port (port 0 picks a free port)"`
	DataDir    string `yaml:"data_dir" flag:"data-dir" arg:"dir" help:"directory for local state; the embedded SQLite store lives here"`
	GRPCListen string `yaml:"grpc_listen" flag:"grpc-listen" arg:"addr" help:"gRPC listen address, host:port (service leaf.v1.Leaf, health, reflection); empty: no gRPC"`
	// AdvertiseURL is where the other servers reach this one: the owner of
	// an ordered tag is found by it (see AdvertisedURL for the default).
	AdvertiseURL string `yaml:"advertise_url" flag:"advertise-url" arg:"url" help:"the base URL other servers (and, with segment.ordered redirect, clients) reach this server's HTTP listener at, e.g. http://10.0.0.7:8080; empty: the listen address's host, or when it listens on every interface the IP Java Leaf's Utils.getIp picks on this host, and the port bound"`
	// SingleNode is the operator's word that no other server issues from
	// this configuration: see CheckSingleNode.
	SingleNode      bool          `yaml:"single_node" flag:"single-node" help:"this is the only server: let IDs from state on this node alone (the embedded SQLite store, the local registry's default worker ID) be served on an address other hosts can reach"`
	Admin           Admin         `yaml:"admin"`
	TLS             TLS           `yaml:"tls"`
	RateLimit       RateLimit     `yaml:"rate_limit"`
	Log             Log           `yaml:"log"`
	Segment         Segment       `yaml:"segment"`
	Snowflake       Snowflake     `yaml:"snowflake"`
	Metrics         Metrics       `yaml:"metrics"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"how long a graceful shutdown (drain HTTP, give back IDs, close the store) may take"`
}

// Admin guards tag administration and the detail pages. The token is never
// logged, and has no flag because command lines are visible to every user of
// the machine (ps); it comes from the file, the environment or token_file.
type Admin struct {
	Token     string `yaml:"token" help:"bearer token that /v2/tags, /cache, /db and the detail of /v2/status require; empty: no token (see insecure)"`
	TokenFile string `yaml:"token_file" flag:"admin-token-file" arg:"file" help:"file whose first line is the admin token; wins over admin.token"`
	Insecure  bool   `yaml:"insecure" flag:"insecure-admin" help:"serve without an admin token on a listen address that is not loopback, letting anyone who reaches the port create, change and delete tags"`
}

// minAdminTokenLen is the shortest admin token accepted: a token is compared
// in constant time, but a short one can still be guessed.
const minAdminTokenLen = 16

// TLS configures TLS for both the HTTP and the gRPC listener.
type TLS struct {
	Cert string `yaml:"cert" flag:"tls-cert" arg:"file" help:"PEM certificate chain; with tls.key, HTTP and gRPC are served over TLS (1.2 and later)"`
	Key  string `yaml:"key" flag:"tls-key" arg:"file" help:"PEM private key of tls.cert"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.Cert != "" }

// RateLimit bounds how fast one client address may take IDs.
type RateLimit struct {
	PerSecond int `yaml:"per_second" flag:"rate-limit" arg:"n" help:"ID requests per second allowed per client IP address (IPv6: per /64) on the ID routes and gRPC ID methods; over it: 429 with Retry-After (gRPC: ResourceExhausted); 0: no limit"`
	Burst     int `yaml:"burst" help:"requests a client may send at once above its rate; 0: per_second"`
}

// Log configures the process logger.
type Log struct {
	Level  string `yaml:"level" flag:"log-level" enum:"debug,info,warn,error" help:"minimum level logged"`
	Format string `yaml:"format" flag:"log-format" enum:"text,json" help:"log line format on stderr"`
}

// Segment configures segment mode: the store and the generator.
type Segment struct {
	Enabled bool   `yaml:"enabled" help:"serve segment IDs (/api/segment/get/TAG)"`
	Store   string `yaml:"store" flag:"segment-store" enum:"sqlite,mysql,postgres" help:"where leaf_alloc lives"`
	// DSN is a file path for sqlite (empty: <data_dir>/leaf.db) and a driver
	// DSN for mysql and postgres, where it is required. For mysql and
	// postgres it may list several databases, one per line (see DSNs): a
	// store spread over them, database i of N issuing its share of the IDs.
	// The newline is the separator because no DSN of either driver has one,
	// while commas, semicolons and spaces all occur in real ones.
	DSN             string        `yaml:"dsn" list:"true" flag:"segment-dsn" arg:"dsn" help:"sqlite: database file (empty: <data_dir>/leaf.db); mysql: user:pass@tcp(host:3306)/db; postgres: postgres://user:pass@host/db (required for mysql and postgres); mysql and postgres take a list of 2..64 databases for one store spread over them: a YAML sequence, the flag repeated, or one DSN per line in the variable, in the same order on every server"`
	RefreshInterval time.Duration `yaml:"refresh_interval" help:"how often the tag list is re-read from the store"`
	MaxStep         int           `yaml:"max_step" help:"cap of the adaptive step (1..1000000)"`
	WaitTimeout     time.Duration `yaml:"wait_timeout" help:"the longest a request waits for a segment load when both buffers are empty, whatever its own deadline"`
	GiveBack        bool          `yaml:"give_back" help:"on graceful shutdown, return the unused tail of each tag's latest range to the store"`
	LowBuffer       time.Duration `yaml:"low_buffer" help:"/readyz reports a tag whose buffered IDs last less than this at its current rate; 0 turns the check off"`
	IdleTimeout     time.Duration `yaml:"idle_timeout" help:"a tag without a request for this long loses its buffers and counters (the unused range is given back); its next request reserves afresh"`
	LookupRate      int           `yaml:"lookup_rate" help:"store lookups per second, shared by all names, for tag names this server does not know; requests for others are answered 404 at once (tags created elsewhere serve after the next refresh)"`
	// Seed is a pointer because "not set" has its own meaning: see SeedMode.
	Seed *bool `yaml:"seed" help:"insert the tag leaf-segment-test (step 2000, first ID 1); unset: only into an empty embedded SQLite store; true: into any store that lacks the tag; false: never"`
	// OpaqueKey is secret, kept like admin.token: never logged, no flag.
	OpaqueKey     string `yaml:"opaque_key" help:"key of the permutation opaque tags pass their IDs through: 32..128 hex digits (16..64 random bytes: openssl rand -hex 32), the same on every server and never changed; empty: no opaque tags"`
	OpaqueKeyFile string `yaml:"opaque_key_file" flag:"opaque-key-file" arg:"file" help:"file whose first line is the opaque key; wins over segment.opaque_key"`
	// Ordered and OwnerLease concern ordered tags, whose IDs one server at
	// a time issues (see leaf.OrderedStore).
	Ordered    string        `yaml:"ordered" enum:"forward,redirect" help:"how a server that does not own an ordered tag answers a request for it: forward (ask the owner, batching concurrent requests into one call) or redirect (HTTP 307 to the owner's advertise_url; gRPC always forwards)"`
	OwnerLease time.Duration `yaml:"owner_lease" help:"the lease an ordered tag's owner holds in the store: it renews it while it runs, and another server takes the tag over when a dead owner's lease has run out (the tag's requests fail for up to this long); 1s..10m, the same on every server"`
	// Failover is the fence of a replicated database (mysql, postgres; see
	// sqlstore.WatchFailover).
	Failover Failover `yaml:"failover"`
}

// Failover configures the fence that keeps a database failover from handing
// out a range twice (mysql and postgres stores).
type Failover struct {
	Fence       bool          `yaml:"fence" help:"detect a failover of the database (its identity changed, or a range handed out again) and fence the new primary before any range is reserved from it: a gap, never a repeat; false: trust the database"`
	Window      time.Duration `yaml:"window" help:"how long a fence waits for the live servers to report their ranges before it raises every tag; 1s..1m, the same on every server"`
	Lag         time.Duration `yaml:"lag" help:"how long a server remembers its reserves to report them: the longest replication lag a fence covers; 10s..1h"`
	MarginSteps int           `yaml:"margin_steps" help:"how many of its steps every tag is raised by beyond what the live servers report, for the ranges of servers that died in the failover; 0 on a database that loses nothing in a failover (semi-synchronous, Galera, a synchronous standby)"`
}

// Values of segment.ordered.
const (
	OrderedForward  = "forward"
	OrderedRedirect = "redirect"
)

// Metrics bounds /metrics: the segment series over all tags are always
// exported, per-tag series only for the union of these three sets.
type Metrics struct {
	TopTags      int    `yaml:"top_tags" help:"how many of the busiest tags (by IDs per second) get per-tag series on /metrics; 0: none"`
	DegradedTags int    `yaml:"degraded_tags" help:"at most this many degraded tags (last load failed, or buffers below segment.low_buffer) get per-tag series on /metrics, the most urgent first; 0: none"`
	Tags         string `yaml:"tags" arg:"tag,..." help:"comma-separated tags that always get per-tag series on /metrics"`
}

// TagList splits metrics.tags, dropping blanks.
func (m Metrics) TagList() []string { return Servers(m.Tags) }

// Registry names accepted by snowflake.registry.
const (
	RegistryLocal            = "local"
	RegistryZooKeeper        = "zookeeper"
	RegistryZooKeeperRecycle = "zookeeper-recycle"
	RegistryEtcd             = "etcd"
	RegistryMySQL            = "mysql"
	// RegistryOrdinal: the worker ID is the StatefulSet pod's ordinal plus
	// snowflake.ordinal.offset, claimed where snowflake.ordinal.claim says.
	RegistryOrdinal = "ordinal"
)

// Values of snowflake.ordinal.claim: where the ordinal registry claims its
// worker ID.
const (
	ClaimNone  = "none"
	ClaimEtcd  = "etcd"
	ClaimMySQL = "mysql"
)

// Snowflake configures snowflake mode: the worker-ID registry, the layout and
// the clock policy.
type Snowflake struct {
	Enabled  bool   `yaml:"enabled" help:"serve snowflake IDs (/api/snowflake/get/KEY)"`
	Registry string `yaml:"registry" flag:"snowflake-registry" enum:"local,zookeeper,zookeeper-recycle,etcd,mysql,ordinal" help:"where the worker ID comes from"`
	Name     string `yaml:"name" flag:"name" arg:"name" help:"cluster name, Leaf's leaf.name: the ZooKeeper path /snowflake/NAME, the etcd key prefix, the cache directory"`
	// Endpoint ":PORT" is Java Leaf's leaf.snowflake.port: the detected
	// address with a port of its own, which need not be the listen port.
	Endpoint string `yaml:"endpoint" flag:"snowflake-endpoint" arg:"[ip]:port" help:"ip:port this server registers as; :port: the IP Java Leaf's Utils.getIp picks on this host (none if it finds none) and that port (Leaf's leaf.snowflake.port); empty: that IP and the listen port"`
	WorkerID int    `yaml:"worker_id" flag:"worker-id" arg:"n" help:"local registry: this server's worker ID"`
	// WorkerIDs is a string holding JSON, not a map, because it is also set
	// from an environment variable and copied from Leaf's workIdMap property.
	WorkerIDs  string        `yaml:"worker_ids" arg:"json" help:"local registry: JSON object {\"ip:port\": id, ...} (Leaf's workIdMap); when set, it replaces worker_id"`
	ZooKeeper  string        `yaml:"zk" flag:"zk" arg:"host:port,..." help:"ZooKeeper servers, for the zookeeper and zookeeper-recycle registries"`
	Etcd       string        `yaml:"etcd" flag:"etcd" arg:"host:port,..." help:"etcd endpoints, for the etcd registry"`
	DSN        string        `yaml:"dsn" flag:"snowflake-dsn" arg:"dsn" help:"mysql registry: the database holding leaf_workerid_alloc; empty: segment.dsn when segment.store is mysql"`
	LeaseTTL   time.Duration `yaml:"lease_ttl" help:"the lease every registry but local holds a worker ID under: the registry may be down this long without IDs stopping, and a dead server's claim is free after it"`
	LayoutName string        `yaml:"layout" flag:"snowflake-layout" enum:"leaf,js-safe,custom" help:"the ID layout: leaf (Java Leaf's, 41/10/12 bits), js-safe (every ID below 2^53, for JavaScript: 40/5/8 bits from 2026-01-01, until 2060-11-03) or custom (epoch and the *_bits keys); setting those keys without a layout means custom"`
	Epoch      int           `yaml:"epoch" help:"layout: the zero of the time part, Unix milliseconds"`
	TimeBits   int           `yaml:"time_bits" help:"layout: bits of milliseconds"`
	WorkerBits int           `yaml:"worker_bits" help:"layout: bits of worker ID"`
	SeqBits    int           `yaml:"sequence_bits" help:"layout: bits of sequence"`
	// MaxBackwards: a clock step back up to this is waited out.
	MaxBackwards time.Duration `yaml:"max_backwards" help:"clock steps backwards up to this are waited out; larger ones answer 503 until the clock catches up"`
	RandomStart  bool          `yaml:"random_start" help:"start each millisecond's sequence at a random number in [0, 100), as Leaf does, to spread IDs for id%n sharding"`
	Window       time.Duration `yaml:"window" help:"how far ahead of the clock the high-water mark is persisted; a restart waits out at most this"`
	MaxPeerSkew  time.Duration `yaml:"max_peer_skew" help:"refuse to start (and report degraded while running) when the clock differs from the live peers' average by more than this; 0 turns the check off"`
	Ordinal      Ordinal       `yaml:"ordinal"`
}

// Ordinal configures the ordinal registry: the worker ID of the Kubernetes
// StatefulSet pod NAME-N is N + Offset (package ordinal).
type Ordinal struct {
	Offset int `yaml:"offset" flag:"ordinal-offset" arg:"n" help:"ordinal registry: added to the pod's ordinal to make its worker ID, e.g. to give two StatefulSets sharing a registry distinct IDs"`
	// Claim: the registry that refuses a second live server with the same
	// worker ID; its connection settings are the registry's own keys.
	Claim string `yaml:"claim" flag:"ordinal-claim" enum:"none,etcd,mysql" help:"ordinal registry: where the worker ID is claimed, so that a second live server with the same ordinal is refused: etcd (snowflake.etcd and lease_ttl), mysql (snowflake.dsn and lease_ttl), or none (only a high-water mark file in data_dir: a copy of this configuration on another host is not detected)"`
	// Hostname overrides os.Hostname: a pod's host name is its name, unless
	// the pod sets hostname or hostNetwork; the downward API's
	// metadata.name is the name whatever the pod sets.
	Hostname string `yaml:"hostname" flag:"ordinal-hostname" arg:"name" help:"ordinal registry: the pod name NAME-N whose N is the ordinal; empty: this host's name. On Kubernetes, the downward API's metadata.name"`
}

// ClaimRegistry is the registry that claims the worker ID: Registry, or for
// the ordinal registry its claim ("" for none).
func (s Snowflake) ClaimRegistry() string {
	if s.Registry != RegistryOrdinal {
		return s.Registry
	}
	if s.Ordinal.Claim == ClaimNone {
		return ""
	}
	return s.Ordinal.Claim
}

// OrdinalWorkerID is the ordinal registry's worker ID on the host or pod
// named name: its ordinal plus the offset, within the layout. The error
// wraps leaf.ErrInvalidArgument, not ErrInvalid: the caller names the
// source of name.
func (s Snowflake) OrdinalWorkerID(name string) (int64, error) {
	return ordinal.WorkerID(name, int64(s.Ordinal.Offset), s.Layout().MaxWorkerID())
}

// Layout is the configured ID layout.
func (s Snowflake) Layout() snowflake.Layout {
	return snowflake.Layout{Epoch: int64(s.Epoch), TimeBits: s.TimeBits, WorkerBits: s.WorkerBits, SequenceBits: s.SeqBits}
}

// LocalWorkerIDs parses worker_ids; nil when it is empty.
func (s Snowflake) LocalWorkerIDs() (map[string]int64, error) {
	if strings.TrimSpace(s.WorkerIDs) == "" {
		return nil, nil
	}
	var m map[string]int64
	if err := json.Unmarshal([]byte(s.WorkerIDs), &m); err != nil {
		return nil, fmt.Errorf("not a JSON object of \"ip:port\": id: %v", err)
	}
	return m, nil
}

// Servers splits a comma-separated server list, dropping blanks.
func Servers(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Default returns the zero-configuration defaults: listen on loopback, keep
// segments in an embedded SQLite file under ./leaf-data, seed the test tag.
func Default() Config {
	// The packages' defaults have one home each: their DefaultConfig.
	// What is set here is the server's own choice (LowBuffer, the store).
	seg := segment.DefaultConfig()
	fence := sqlstore.DefaultFailoverConfig()
	sfDefaults := snowflake.DefaultConfig()
	met := metrics.DefaultConfig()
	return Config{
		Listen:  "127.0.0.1:8080",
		DataDir: "./leaf-data",
		Log:     Log{Level: "info", Format: "text"},
		Segment: Segment{
			Enabled:         true,
			Store:           StoreSQLite,
			RefreshInterval: seg.RefreshInterval,
			MaxStep:         seg.MaxStep,
			WaitTimeout:     seg.WaitTimeout,
			GiveBack:        seg.GiveBack,
			LowBuffer:       2 * time.Second,
			IdleTimeout:     seg.IdleTimeout,
			LookupRate:      int(seg.LookupRate),
			Ordered:         OrderedForward,
			OwnerLease:      ordered.DefaultConfig().OwnerLease,
			Failover:        Failover{Fence: true, Window: fence.Window, Lag: fence.Lag, MarginSteps: int(fence.MarginSteps)},
		},
		Snowflake: Snowflake{
			Enabled:      true,
			Registry:     RegistryLocal,
			Name:         "leaf",
			LeaseTTL:     leaf.DefaultClaimLease,
			LayoutName:   snowflake.LayoutLeaf,
			Epoch:        snowflake.LeafEpoch,
			TimeBits:     snowflake.LeafLayout.TimeBits,
			WorkerBits:   snowflake.LeafLayout.WorkerBits,
			SeqBits:      snowflake.LeafLayout.SequenceBits,
			MaxBackwards: sfDefaults.MaxBackwards,
			RandomStart:  sfDefaults.RandomStart,
			Window:       sfDefaults.Window,
			MaxPeerSkew:  sfDefaults.MaxPeerSkew,
			// No default claim: none is a choice to make knowingly.
		},
		Metrics:         Metrics{TopTags: met.TopTags, DegradedTags: met.DegradedTags},
		ShutdownTimeout: 10 * time.Second,
	}
}

// SQLitePath is the database file of the embedded store: segment.dsn if set,
// else <data_dir>/leaf.db.
func (c Config) SQLitePath() string {
	if c.Segment.DSN != "" {
		return c.Segment.DSN
	}
	return filepath.Join(c.DataDir, "leaf.db")
}

// DSNs splits segment.dsn into its databases, in order: none when unset,
// one for a store of one database.
func (s Segment) DSNs() []string { return splitList(s.DSN) }

// MultiDatabase reports whether segment.dsn lists several databases: the
// segment store is spread over them (see package multidb).
func (s Segment) MultiDatabase() bool { return len(s.DSNs()) > 1 }

// JoinDSNs is segment.dsn's value for a list of databases: one per line.
func JoinDSNs(dsns []string) string { return strings.Join(dsns, "\n") }

// splitList splits a list key's value at newlines, trimming each entry and
// dropping blank ones (a trailing newline in a variable is no database).
func splitList(v string) []string {
	var out []string
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// SeedMode says how the test tag is seeded.
type SeedMode int

const (
	// SeedNever: segment.seed is false.
	SeedNever SeedMode = iota
	// SeedIfEmpty: segment.seed is unset and the store is the embedded SQLite
	// one; seed only when the table has no tag at all. A fresh install answers
	// for leaf-segment-test at once, while a user who deleted the test tag from
	// a store in use does not see it come back on the next restart.
	SeedIfEmpty
	// SeedIfMissing: segment.seed is explicitly true; seed whenever the tag is
	// missing, whatever the store.
	SeedIfMissing
)

// SeedMode resolves segment.seed. Unset means: seed the embedded SQLite store
// when it is empty, never a shared MySQL/PostgreSQL database, where an
// unexpected row would surprise whoever owns the table.
func (s Segment) SeedMode() SeedMode {
	switch {
	case s.Seed != nil && *s.Seed:
		return SeedIfMissing
	case s.Seed != nil:
		return SeedNever
	case s.Store == StoreSQLite:
		return SeedIfEmpty
	default:
		return SeedNever
	}
}

// Validate checks the rules that span keys or go beyond a value's type.
// Every error wraps ErrInvalid and names the key.
func (c Config) Validate() error {
	return c.validate(nil)
}

// validate is Validate with, for better messages, where each key was set.
func (c Config) validate(origin map[string]string) error {
	var errs []error
	bad := func(path, format string, args ...any) {
		where := ""
		if o := origin[path]; o != "" {
			where = " (from " + o + ")"
		}
		errs = append(errs, fmt.Errorf("%w: %s%s: %s", ErrInvalid, path, where, fmt.Sprintf(format, args...)))
	}

	if err := validateListen(c.Listen); err != nil {
		bad("listen", "%v", err)
	}
	if c.GRPCListen != "" {
		if err := validateListen(c.GRPCListen); err != nil {
			bad("grpc_listen", "%v", err)
		}
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	def := Default()
	for _, f := range fields() {
		if f.enum == nil {
			continue
		}
		// An enum whose default is empty may stay unset; what unset means
		// is checked below (snowflake.ordinal.claim must be chosen when
		// the ordinal registry is).
		if v := c.value(f).String(); !contains(f.enum, v) && (v != "" || def.value(f).String() != "") {
			bad(f.path, "%q is not one of %s", v, strings.Join(f.enum, ", "))
		}
	}
	// Checked even when segment mode is disabled: naming a server store
	// without saying where it is is a mistake either way, and 'leaf tags'
	// reads the same keys.
	if s := c.Segment; s.DSN == "" && (s.Store == StoreMySQL || s.Store == StorePostgres) {
		bad("segment.dsn", "required when segment.store is %s (set LEAF_SEGMENT_DSN or --segment-dsn)", s.Store)
	}
	c.validateDSNList(bad)
	if c.Segment.RefreshInterval < time.Second {
		bad("segment.refresh_interval", "%v is too short, want at least 1s", c.Segment.RefreshInterval)
	}
	if err := leaf.ValidateStep(c.Segment.MaxStep); err != nil {
		bad("segment.max_step", "%d is out of range, want 1..%d", c.Segment.MaxStep, leaf.MaxStep)
	}
	if c.Segment.WaitTimeout <= 0 {
		bad("segment.wait_timeout", "%v must be positive", c.Segment.WaitTimeout)
	}
	if c.Segment.IdleTimeout < time.Second {
		bad("segment.idle_timeout", "%v is too short, want at least 1s", c.Segment.IdleTimeout)
	}
	if c.Segment.LookupRate < 1 {
		bad("segment.lookup_rate", "%d must be at least 1", c.Segment.LookupRate)
	}
	if f := c.Segment.Failover; f.Window < time.Second || f.Window > time.Minute {
		bad("segment.failover.window", "%v, want 1s..1m", f.Window)
	}
	if f := c.Segment.Failover; f.Lag < 10*time.Second || f.Lag > time.Hour {
		bad("segment.failover.lag", "%v, want 10s..1h", f.Lag)
	}
	if f := c.Segment.Failover; f.MarginSteps < 0 || f.MarginSteps > 1_000_000 {
		bad("segment.failover.margin_steps", "%d, want 0..1000000", f.MarginSteps)
	}
	if l := c.Segment.OwnerLease; l < time.Second || l > 10*time.Minute {
		bad("segment.owner_lease", "%v is out of range, want 1s..10m", l)
	}
	if c.AdvertiseURL != "" {
		if _, err := ParseAdvertiseURL(c.AdvertiseURL); err != nil {
			bad("advertise_url", "%v", err)
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "%v must be positive", c.ShutdownTimeout)
	}
	if c.Metrics.TopTags < 0 {
		bad("metrics.top_tags", "%d is negative; 0 exports none", c.Metrics.TopTags)
	}
	if c.Metrics.DegradedTags < 0 {
		bad("metrics.degraded_tags", "%d is negative; 0 exports none", c.Metrics.DegradedTags)
	}
	for _, t := range c.Metrics.TagList() {
		if err := leaf.ValidateTag(t); err != nil {
			bad("metrics.tags", "%v", err)
		}
	}
	c.validateSnowflake(bad)
	c.validateSecurity(bad)
	return errors.Join(errs...)
}

// validateDSNList checks a segment.dsn that lists several databases: a
// server store, at most leaf.MaxStripes of them, none twice. Whether each
// parses, and whether two spellings name one database, is the drivers'
// call (serve's checks).
func (c Config) validateDSNList(bad func(path, format string, args ...any)) {
	dsns := c.Segment.DSNs()
	if len(dsns) < 2 {
		return
	}
	if c.Segment.Store != StoreMySQL && c.Segment.Store != StorePostgres {
		bad("segment.dsn", "lists %d databases, but segment.store %s is one file: only mysql and postgres stores span several databases", len(dsns), c.Segment.Store)
		return
	}
	if len(dsns) > leaf.MaxStripes {
		bad("segment.dsn", "lists %d databases, want at most %d", len(dsns), leaf.MaxStripes)
	}
	seen := make(map[string]int, len(dsns))
	for i, d := range dsns {
		if j, dup := seen[d]; dup {
			bad("segment.dsn", "database %d (%s) is database %d again: each database may appear once", i, RedactDSN(d), j)
			continue
		}
		seen[d] = i
	}
}

// validateSecurity checks the admin, tls and rate_limit keys.
func (c Config) validateSecurity(bad func(path, format string, args ...any)) {
	if t := c.Admin.Token; t != "" {
		if err := checkToken(t); err != nil {
			bad("admin.token", "%v", err)
		}
	}
	if k := c.Segment.OpaqueKey; k != "" {
		if _, err := tagshape.ParseKey(k); err != nil {
			bad("segment.opaque_key", "%v", err)
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls", "tls.cert and tls.key go together: set both or neither")
	}
	if c.RateLimit.PerSecond < 0 {
		bad("rate_limit.per_second", "%d is negative; 0 turns the limit off", c.RateLimit.PerSecond)
	}
	if c.RateLimit.Burst < 0 {
		bad("rate_limit.burst", "%d is negative; 0 means per_second", c.RateLimit.Burst)
	}
}

// checkToken rejects tokens that are too short to resist guessing or that
// cannot travel in an Authorization header. The message never quotes the
// token.
func checkToken(t string) error {
	if len(t) < minAdminTokenLen {
		return fmt.Errorf("too short (%d bytes), want at least %d", len(t), minAdminTokenLen)
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("byte %d is a space, a control or a non-ASCII character; use printable ASCII", i+1)
		}
	}
	return nil
}

// AdminToken is the configured admin token: the first line of
// admin.token_file when set, else admin.token; empty when neither is.
func (c Config) AdminToken() (string, error) {
	if c.Admin.TokenFile == "" {
		return c.Admin.Token, nil
	}
	b, err := os.ReadFile(c.Admin.TokenFile)
	if err != nil {
		return "", fileError("admin.token_file", c.Admin.TokenFile, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if err := checkToken(line); err != nil {
		return "", fmt.Errorf("%w: admin.token_file %s: token %v", ErrInvalid, c.Admin.TokenFile, err)
	}
	return line, nil
}

// OpaqueKey is the configured opaque key: the first line of
// segment.opaque_key_file when set, else segment.opaque_key, both in
// tagshape.ParseKey's form; nil when neither is set. Errors never show the
// key.
func (c Config) OpaqueKey() ([]byte, error) {
	s := c.Segment
	if s.OpaqueKeyFile == "" {
		if s.OpaqueKey == "" {
			return nil, nil
		}
		key, err := tagshape.ParseKey(s.OpaqueKey)
		if err != nil { // Validate has said so already, unless it was skipped
			return nil, fmt.Errorf("%w: segment.opaque_key: %w", ErrInvalid, err)
		}
		return key, nil
	}
	b, err := os.ReadFile(s.OpaqueKeyFile)
	if err != nil {
		return nil, fileError("segment.opaque_key_file", s.OpaqueKeyFile, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	key, err := tagshape.ParseKey(line)
	if err != nil {
		return nil, fmt.Errorf("%w: segment.opaque_key_file %s: %w", ErrInvalid, s.OpaqueKeyFile, err)
	}
	return key, nil
}

// ErrAdminExposed is wrapped by CheckAdminExposure's error.
var ErrAdminExposed = errors.New("admin routes exposed without a token")

// CheckAdminExposure refuses, unless admin.insecure is set, to serve the
// admin routes without a token on a listen address other hosts can reach:
// every interface (":8080", "0.0.0.0"), a non-loopback IP, or a host name,
// which is not resolved here because what it resolves to can change.
func (c Config) CheckAdminExposure(token string) error {
	if token != "" || c.Admin.Insecure || IsLoopbackListen(c.Listen) {
		return nil
	}
	return fmt.Errorf("%w: %w: listen %s is reachable from other hosts and no admin token is set: set LEAF_ADMIN_TOKEN (or admin.token, admin.token_file), or pass --insecure-admin to let anyone who reaches the port manage tags",
		ErrInvalid, ErrAdminExposed, c.Listen)
}

// IsLoopbackListen reports whether a listen address accepts connections from
// this host only.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// validateSnowflake checks the snowflake keys, even when the mode is off, for
// the reason given for segment.dsn.
func (c Config) validateSnowflake(bad func(path, format string, args ...any)) {
	s := c.Snowflake
	if err := leaf.ValidateClusterName(s.Name); err != nil {
		bad("snowflake.name", "%v", err)
	}
	if err := ValidateEndpoint(s.Endpoint); err != nil {
		bad("snowflake.endpoint", "%v", err)
	}
	layout := s.Layout()
	s.validateLayoutName(bad)
	if err := layout.Validate(); err != nil {
		bad("snowflake.time_bits", "%v", err)
	} else if s.WorkerID < 0 || int64(s.WorkerID) > layout.MaxWorkerID() {
		bad("snowflake.worker_id", "%d is outside the layout's 0..%d", s.WorkerID, layout.MaxWorkerID())
	}
	if _, err := s.LocalWorkerIDs(); err != nil {
		bad("snowflake.worker_ids", "%v", err)
	}
	// Where etcd or mysql was chosen: the registry, or the ordinal
	// registry's claim.
	chosen, chosenKey := "snowflake.registry is", "snowflake.registry"
	if s.Registry == RegistryOrdinal {
		chosen, chosenKey = "snowflake.ordinal.claim is", "snowflake.ordinal.claim"
	}
	switch s.ClaimRegistry() {
	case RegistryZooKeeper, RegistryZooKeeperRecycle:
		if len(Servers(s.ZooKeeper)) == 0 {
			bad("snowflake.zk", "required when snowflake.registry is %s (set --zk host:port)", s.Registry)
		}
	case RegistryEtcd:
		if len(Servers(s.Etcd)) == 0 {
			bad("snowflake.etcd", "required when %s etcd (set --etcd host:port)", chosen)
		}
	case RegistryMySQL:
		if s.DSN == "" && c.Segment.Store == StoreMySQL && c.Segment.MultiDatabase() {
			// Which of the databases would hold the worker table is a
			// choice the operator makes, not one made for them.
			bad(chosenKey, "mysql needs snowflake.dsn when segment.dsn lists several databases (set --snowflake-dsn)")
		} else if s.DSN == "" && c.Segment.Store != StoreMySQL {
			// Reported under the registry, so that the message says where
			// mysql was chosen: leaf.properties' leaf.snowflake.mode sets it
			// without any key named here.
			bad(chosenKey, "mysql needs snowflake.dsn, or segment.store mysql and its segment.dsn (set --snowflake-dsn)")
		}
	}
	if s.Registry == RegistryOrdinal && s.Ordinal.Claim == "" {
		// A copied configuration, or two StatefulSets of one name
		// sharing a store, would give two live servers one worker ID:
		// going without a claim is a choice to make knowingly.
		bad("snowflake.ordinal.claim", "required with registry ordinal: etcd or mysql, where a second live server with the same ordinal is refused, or none, where nothing checks across hosts (a copied configuration issues the same IDs); set LEAF_SNOWFLAKE_ORDINAL_CLAIM or --ordinal-claim")
	}
	if o := s.Ordinal; layout.Validate() == nil && (o.Offset < 0 || int64(o.Offset) > layout.MaxWorkerID()) {
		bad("snowflake.ordinal.offset", "%d is outside the layout's worker IDs 0..%d", o.Offset, layout.MaxWorkerID())
	} else if s.Registry == RegistryOrdinal && o.Hostname != "" && layout.Validate() == nil {
		// An unset host name is this host's, read by serve.
		if _, err := s.OrdinalWorkerID(o.Hostname); err != nil {
			bad("snowflake.ordinal.hostname", "%v", err)
		}
	}
	if s.LeaseTTL < 2*time.Second {
		bad("snowflake.lease_ttl", "%v is too short, want at least 2s", s.LeaseTTL)
	}
	if s.MaxBackwards < 0 {
		bad("snowflake.max_backwards", "%v must not be negative", s.MaxBackwards)
	}
	if s.MaxPeerSkew < 0 {
		bad("snowflake.max_peer_skew", "%v must not be negative (0 turns the check off)", s.MaxPeerSkew)
	}
	if s.Window < 300*time.Millisecond {
		bad("snowflake.window", "%v is too short, want at least 300ms", s.Window)
	}
}

// EndpointPort reports whether endpoint is the port-only form ":PORT" (Java
// Leaf's leaf.snowflake.port: the IP is detected) and returns the port,
// which it does not check. "::1:80" is an IPv6 address and a port.
func EndpointPort(endpoint string) (port string, ok bool) {
	port, ok = strings.CutPrefix(endpoint, ":")
	return port, ok && !strings.Contains(port, ":")
}

// ValidateEndpoint checks snowflake.endpoint: empty, ":PORT" or "IP:PORT",
// with a port in 1..65535.
func ValidateEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if p, ok := EndpointPort(endpoint); ok {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q has no valid port: want ip:port or :port, the port in 1..65535", endpoint)
		}
		return nil
	}
	_, err := leaf.ParseEndpoint(endpoint)
	return err
}

// MySQLRegistryDSN is the DSN of the mysql worker registry: snowflake.dsn, or
// segment.dsn when the segments live in MySQL too.
func (c Config) MySQLRegistryDSN() string {
	if c.Snowflake.DSN != "" {
		return c.Snowflake.DSN
	}
	return c.Segment.DSN
}

// validateListen accepts host:port with a numeric port; an empty host means
// every interface, as net.Listen reads it.
func validateListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:8080 or :8080)", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q has an invalid host %q", addr, host)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q has an invalid port %q, want 0..65535", addr, port)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// RedactDSN hides the password in a DSN so it can be logged: URL forms
// (postgres://user:pass@host/db), key=value forms (password=...), and the
// MySQL driver's user:pass@tcp(host)/db form. A string it cannot parse is
// returned with everything before its last '@' hidden.
func RedactDSN(dsn string) string {
	const mask = "xxxxx"
	if strings.Contains(dsn, "://") {
		return redactURL(dsn, mask)
	}
	if keywordDSN.MatchString(dsn) {
		return keywordPassword.ReplaceAllString(dsn, "${1}"+mask)
	}
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return dsn
	}
	cred := dsn[:at]
	user, _, hasPass := strings.Cut(cred, ":")
	if !hasPass {
		return dsn
	}
	return user + ":" + mask + dsn[at:]
}

// redactURL hides the userinfo password and any password query parameter.
func redactURL(dsn, mask string) string {
	scheme, rest, _ := strings.Cut(dsn, "://")
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, ok := strings.Cut(authority[:at], ":"); ok {
			authority = user + ":" + mask + authority[at:]
		}
	}
	if q := strings.Index(tail, "?"); q >= 0 {
		params := strings.Split(tail[q+1:], "&")
		for i, p := range params {
			if k, _, ok := strings.Cut(p, "="); ok && strings.EqualFold(k, "password") {
				params[i] = k + "=" + mask
			}
		}
		tail = tail[:q+1] + strings.Join(params, "&")
	}
	return scheme + "://" + authority + tail
}

// keywordDSN matches a libpq key=value DSN ("host=db user=leaf ...");
// keywordPassword its password, bare or single-quoted.
var (
	keywordDSN      = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)
	keywordPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
)
