package snowflake

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leafgo/leaf"
)

// PeerClockReader is implemented by registries that see the other live
// servers and can measure their clocks (Meituan's leaf_temporary check).
// A registry that cannot, this time (a lazily opened one whose backend has
// no such listing), answers an error wrapping errors.ErrUnsupported.
type PeerClockReader interface {
	// PeerClocks returns every other live server's clock offset from this
	// server's clock. Called only while this server holds a claim.
	PeerClocks(ctx context.Context) ([]leaf.PeerClock, error)
}

// WorkerCache keeps a worker ID, its high-water mark and its lease on local
// disk: the mark protects a restart against a clock that went back, and the
// lease lets a server start while its registry is down, inside the lease it
// last held. local.Cache implements it.
type WorkerCache interface {
	// Load returns what was cached; an error wrapping fs.ErrNotExist when
	// nothing is.
	Load() (leaf.CachedClaim, error)
	// Save stores c durably before returning.
	Save(c leaf.CachedClaim) error
}

// Config configures a Generator. Start from DefaultConfig and set
// Registry and Endpoint, which have no default; every value means what it
// says, zero included, and New refuses a Config Validate refuses.
type Config struct {
	// Layout of the IDs. Default LeafLayout.
	Layout Layout
	// Registry hands out the worker ID. The Generator does not close it.
	Registry leaf.WorkerRegistry
	// RegistryName is reported in Status ("zookeeper", "etcd", ...).
	RegistryName string
	// Endpoint is this server's ip:port as the registry knows it.
	Endpoint leaf.Endpoint
	// Cache, if set, receives the worker ID, every high-water mark and the
	// lease's end. It lets a leased worker go on issuing through a registry
	// outage for as long as its lease (the registry's mark covers the whole
	// lease; the cache's, a Window ahead, is what a restart of this same
	// server trusts, see leaf.WorkerClaim.Resumed), and provides the worker
	// ID when the registry is unreachable at start-up, inside the cached
	// lease only: past it the ID may be someone else's.
	Cache WorkerCache
	// MaxBackwards is the largest clock step backwards that is waited out;
	// beyond it NextID fails with ErrClockBackwards. Default 5ms (Leaf's);
	// 0 never waits.
	MaxBackwards time.Duration
	// RandomStart starts each millisecond's sequence at a random number in
	// [0, 100) instead of 0, as Leaf does to spread IDs for id%n sharding at
	// low traffic. Default true.
	RandomStart bool
	// Window is how far ahead of the clock the high-water mark is persisted.
	// Default 3s. A restart waits out at most this long (plus StartupGrace).
	Window time.Duration
	// HeartbeatInterval is how often the mark is moved forward and the lease
	// renewed. Default 1s; it must be shorter than Window.
	HeartbeatInterval time.Duration
	// StartupGrace: at start-up a clock below the stored mark by up to
	// Window + StartupGrace is waited out; further is a refusal to start.
	// The Window covers a quick restart after a crash, which finds the mark
	// up to a window ahead; the grace the time the restart took. Default 1s.
	StartupGrace time.Duration
	// LeaseMargin: issuing stops this long before the lease expires, to allow
	// for clock drift between this server and the registry. Default 500ms.
	LeaseMargin time.Duration
	// RegistryTimeout bounds each registry call. Default 5s.
	RegistryTimeout time.Duration
	// Lifetime is how long the layout must last from now; a layout whose end
	// comes sooner is refused. Default 10 years; 0 accepts any layout that
	// has not ended.
	Lifetime time.Duration
	// ClaimWait is how much longer than RegistryTimeout the first Register
	// may take: a registry whose live claim for this endpoint is still held
	// by a previous run of this server (killed without releasing it) waits
	// for that claim to lapse. The registry knows the bound (its session
	// timeout or lease TTL). Default 0.
	ClaimWait time.Duration
	// MaxPeerSkew is how far this server's clock may be from the average of
	// the live peers' clocks (registries that can list them implement
	// PeerClockReader). Beyond it New refuses to start with ErrClockSkew, and
	// a running worker reports itself degraded. Default 5s: well above the
	// measurement error (at most one heartbeat interval, on etcd), well below
	// what a broken time sync produces. 0 turns the check off.
	MaxPeerSkew time.Duration
	// PeerCheckInterval is how often a running worker compares its clock with
	// its peers'. Default 10s.
	PeerCheckInterval time.Duration
	// Now is the clock. Default time.Now; tests step it.
	Now func() time.Time
	// Logger receives the worker's events. Default slog.Default().
	Logger *slog.Logger
}

// DefaultLifetime is the default Config.Lifetime: how long a layout must
// still last when a generator starts.
const DefaultLifetime = 10 * 365 * 24 * time.Hour

// DefaultConfig returns the defaults every field documents. Registry and
// Endpoint are left for the caller.
func DefaultConfig() Config {
	return Config{
		Layout:            LeafLayout,
		MaxBackwards:      5 * time.Millisecond,
		RandomStart:       true,
		Window:            3 * time.Second,
		HeartbeatInterval: time.Second,
		StartupGrace:      time.Second,
		LeaseMargin:       500 * time.Millisecond,
		RegistryTimeout:   5 * time.Second,
		Lifetime:          DefaultLifetime,
		MaxPeerSkew:       5 * time.Second,
		PeerCheckInterval: 10 * time.Second,
		Now:               time.Now,
		Logger:            slog.Default(),
	}
}

// HeartbeatFor is the heartbeat interval for a window and, on a registry
// whose claims lapse unless renewed, the lease's TTL (0 for one whose claims
// do not): at most a second, a third of the window so the mark stays ahead
// of the clock through two missed beats, and a quarter of the TTL so a
// renewal is tried several times before the lease can pass.
func HeartbeatFor(window, leaseTTL time.Duration) time.Duration {
	d := min(time.Second, window/3)
	if leaseTTL > 0 {
		d = min(d, leaseTTL/4)
	}
	return d
}

// Validate refuses settings New cannot run with, naming the field; every
// error wraps leaf.ErrInvalidArgument. It does not read the clock: New
// checks the layout's epoch and lifetime against it.
func (s Config) Validate() error {
	if err := s.Layout.Validate(); err != nil {
		return fmt.Errorf("snowflake Config.Layout: %w", err)
	}
	if s.Registry == nil {
		return fmt.Errorf("%w: snowflake Config.Registry is nil: no worker registry", leaf.ErrInvalidArgument)
	}
	if err := s.Endpoint.Validate(); err != nil {
		return fmt.Errorf("snowflake Config.Endpoint: %w", err)
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		positive bool // else 0 is allowed
	}{
		{"MaxBackwards", s.MaxBackwards, false},
		{"Window", s.Window, true},
		{"HeartbeatInterval", s.HeartbeatInterval, true},
		{"StartupGrace", s.StartupGrace, false},
		{"LeaseMargin", s.LeaseMargin, false},
		{"RegistryTimeout", s.RegistryTimeout, true},
		{"Lifetime", s.Lifetime, false},
		{"ClaimWait", s.ClaimWait, false},
		{"MaxPeerSkew", s.MaxPeerSkew, false},
		{"PeerCheckInterval", s.PeerCheckInterval, true},
	} {
		switch {
		case d.v < 0:
			return fmt.Errorf("%w: snowflake Config.%s %v is negative", leaf.ErrInvalidArgument, d.name, d.v)
		case d.v == 0 && d.positive:
			return fmt.Errorf("%w: snowflake Config.%s is 0; it must be positive (DefaultConfig has the default)", leaf.ErrInvalidArgument, d.name)
		}
	}
	if s.HeartbeatInterval >= s.Window {
		return fmt.Errorf("%w: snowflake Config.HeartbeatInterval %v must be shorter than the Window %v",
			leaf.ErrInvalidArgument, s.HeartbeatInterval, s.Window)
	}
	if s.Now == nil {
		return fmt.Errorf("%w: snowflake Config.Now is nil: no clock (DefaultConfig has time.Now)", leaf.ErrInvalidArgument)
	}
	if s.Logger == nil {
		return fmt.Errorf("%w: snowflake Config.Logger is nil (DefaultConfig has slog.Default())", leaf.ErrInvalidArgument)
	}
	return nil
}

// Settings is the old name of Config.
//
// Deprecated: use Config; Settings goes in the release after the next.
type Settings = Config

// DefaultSettings is the old name of DefaultConfig.
//
// Deprecated: use DefaultConfig; DefaultSettings goes in the release after
// the next.
func DefaultSettings() Config { return DefaultConfig() }
