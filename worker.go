package leaf

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Endpoint is how a snowflake server names itself to a worker registry:
// Leaf's "ip:port". Registries that promise an endpoint its old worker ID
// back (zookeeper, mysql, local) key the ID by it.
type Endpoint struct {
	IP   string
	Port int
}

// String returns "ip:port" exactly as Java Leaf writes it (no brackets).
func (e Endpoint) String() string { return e.IP + ":" + strconv.Itoa(e.Port) }

// Validate checks that the endpoint is an IPv4 or IPv6 address, or empty,
// and a port in 1..65535. An IPv6 address is accepted, although Java Leaf
// only ever uses IPv4: the last ":" of "ip:port" separates the port. The
// empty IP is Java Leaf's on a host without a non-loopback IPv4 address (its
// node is then ":port-seq"), kept so that such a host keeps its worker ID.
func (e Endpoint) Validate() error {
	if e.IP != "" && net.ParseIP(e.IP) == nil {
		return fmt.Errorf("%w: endpoint IP %q is not an IP address", ErrInvalidArgument, truncate(e.IP, 60))
	}
	if e.Port < 1 || e.Port > 65535 {
		return fmt.Errorf("%w: endpoint port %d, want 1..65535", ErrInvalidArgument, e.Port)
	}
	return nil
}

// DefaultClaimLease is the lease a registry holds a worker ID under unless
// configured otherwise (snowflake.lease_ttl), on every registry that leases:
// long enough that a restart of the registry, a leader election or a
// failover never stops a holder issuing, short enough that a dead server's
// ID (or its endpoint, given to a replacement host) is free again within a
// minute.
const DefaultClaimLease = time.Minute

// MaxClusterNameLen is the longest cluster name, in bytes.
const MaxClusterNameLen = 128

// ValidateClusterName checks a cluster name (Java Leaf's leaf.name): 1–128
// bytes of [A-Za-z0-9._-], not "." or "..". It becomes a ZooKeeper node, an
// etcd key segment and a directory name, so it must be one plain path
// element everywhere.
func ValidateClusterName(name string) error {
	ok := name != "" && len(name) <= MaxClusterNameLen && name != "." && name != ".."
	for i := 0; ok && i < len(name); i++ {
		ok = IsTagByte(name[i]) && name[i] != ':'
	}
	if !ok {
		return fmt.Errorf("%w: cluster name %q must be 1..%d bytes of [A-Za-z0-9._-], not \".\" or \"..\"",
			ErrInvalidArgument, truncate(name, 60), MaxClusterNameLen)
	}
	return nil
}

// ValidateRegistration checks the arguments of WorkerRegistry.Register: a
// valid endpoint and a non-negative maxID. Registries call it before any I/O.
func ValidateRegistration(ep Endpoint, maxID int64) error {
	if err := ep.Validate(); err != nil {
		return err
	}
	if maxID < 0 {
		return fmt.Errorf("%w: max worker ID %d is negative", ErrInvalidArgument, maxID)
	}
	return nil
}

// ParseEndpoint parses and validates "ip:port".
func ParseEndpoint(s string) (Endpoint, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Endpoint{}, fmt.Errorf("%w: endpoint %q is not ip:port", ErrInvalidArgument, truncate(s, 60))
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: endpoint %q has no numeric port", ErrInvalidArgument, truncate(s, 60))
	}
	e := Endpoint{IP: strings.Trim(s[:i], "[]"), Port: port}
	return e, e.Validate()
}

// WorkerClaim is a worker ID held by one server.
type WorkerClaim struct {
	// WorkerID is the claimed ID, in [0, maxID] of the Register call.
	WorkerID int64
	// HighWater is the high-water mark (Unix milliseconds) stored with the ID
	// by its previous holder: that holder issued no ID stamped at or after it.
	// 0 when the ID has no history. The new holder must not issue before it.
	HighWater int64
	// Expires is when the claim lapses unless Heartbeat renews it. The zero
	// Time means never (the local registry: nothing is shared). A holder
	// must stop issuing before Expires, because afterwards the registry may
	// hand the ID to another process.
	Expires time.Time
	// Resumed: the registry's record shows that this very instance (the
	// identity the registry was opened with, kept in the server's data
	// directory) held the claim last, and no other process has held it
	// since: a restart after a crash takes its own claim back at once
	// instead of waiting out its lease. The holder's own cache then knows
	// what it issued better than HighWater, which a leased holder sets far
	// enough ahead to cover its whole lease.
	Resumed bool
}

// CachedClaim is what a server keeps of its claim on local disk (package
// local's Cache, for the snowflake generator).
type CachedClaim struct {
	WorkerID int64
	// Mark is the high-water mark, Unix ms: no ID under WorkerID was stamped
	// at or after it by this server.
	Mark int64
	// LeaseUntil is when the lease last granted ends, by this server's wall
	// clock (Unix ms); 0 when none is held (released, or a registry that
	// does not lease). A server whose registry is unreachable at start-up
	// starts on the cached worker ID only before it.
	LeaseUntil int64
}

// WorkerRegistry hands out snowflake worker IDs so that no two live servers
// hold the same one. One value serves one server: Register once, then
// Heartbeat until Release. Implementations: local, zookeeper, etcd, mysql.
//
// Registration must be atomic in the registry itself (a sequential node, a
// transaction on the ID's own key, a unique index): concurrent cold starts of
// many servers never yield one ID twice.
type WorkerRegistry interface {
	// Register claims a worker ID in [0, maxID] for ep. Where the registry
	// promises it, an endpoint gets back the ID it held before. It fails with
	// ErrWorkerIDsExhausted when no ID is free or ep's ID is above maxID;
	// other errors (the registry unreachable) may pass.
	Register(ctx context.Context, ep Endpoint, maxID int64) (WorkerClaim, error)
	// Heartbeat stores mark (Unix ms) as the claim's high-water mark, the
	// holder's promise to issue no ID stamped at or after it, and renews the
	// lease. It returns the lease's new expiry, counted from before the
	// renewal was sent so that it is never later than the registry's (zero
	// if the registry does not lease). ErrWorkerLost means the claim is
	// gone: the lease expired and another process took the ID, or the
	// registry's record changed hands.
	Heartbeat(ctx context.Context, mark int64) (expires time.Time, err error)
	// Release ends the claim, storing mark as its final high-water mark.
	// Leasing registries return the ID to the pool; the others keep it for
	// the endpoint.
	Release(ctx context.Context, mark int64) error
	// Close frees the client's resources. It does not Release.
	Close() error
}

// PeerClock is another live server's clock as a registry measured it, for
// the start-up and runtime comparison of clocks across the cluster (the
// leaf_temporary check of Meituan's design).
type PeerClock struct {
	// Endpoint is the peer's ip:port as registered.
	Endpoint string
	// WorkerID is the peer's worker ID, -1 where the registry does not say.
	WorkerID int64
	// Offset is the peer's clock minus this server's clock.
	Offset time.Duration
}

// WorkerStatus is a snowflake worker's state, for /v2/status and metrics.
type WorkerStatus struct {
	Registry string
	Endpoint string
	// Layout names the ID layout: a preset ("leaf", "js-safe") or "custom".
	Layout string
	// WorkerID is -1 while no ID is held (lost and not yet re-registered).
	WorkerID int64
	// FromCache: the registry was unreachable at start-up and the ID came
	// from the local cache.
	FromCache bool
	// HighWater is the persisted high-water mark, Unix ms: no ID is issued
	// stamped at or after it until a heartbeat moves it.
	HighWater int64
	// LastIssued is the timestamp of the last ID issued, Unix ms (0: none yet).
	LastIssued int64
	// LeaseExpires is zero for registries without leases.
	LeaseExpires  time.Time
	LastHeartbeat time.Time
	// HeartbeatError is the last heartbeat's error, empty when it succeeded.
	HeartbeatError string
	// HeartbeatFailures counts failed heartbeats since start.
	HeartbeatFailures int64
	// Rollbacks counts clock steps backwards seen while issuing; MaxRollbackMs
	// is the largest, in milliseconds.
	Rollbacks     int64
	MaxRollbackMs int64
	// RollbackMs is the sum of all those steps, in milliseconds.
	RollbackMs int64
	// Peers is how many other live servers the last peer clock check saw;
	// PeerSkewMs is this server's clock minus their average, in
	// milliseconds (0 with no peers), and PeerCheck when it was measured
	// (zero if the registry cannot list peers).
	Peers      int
	PeerSkewMs int64
	PeerCheck  time.Time
	// Issued counts IDs issued since start.
	Issued uint64
	// Rate is IDs issued per second over the last 10 seconds.
	Rate float64
}

// SnowflakeParts is a snowflake ID taken apart by its layout.
type SnowflakeParts struct {
	ID int64
	// Timestamp is the ID's time, Unix milliseconds (the layout's epoch added).
	Timestamp int64
	WorkerID  int64
	Sequence  int64
}
