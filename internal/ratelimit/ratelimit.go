// Package ratelimit limits how fast each client may call the ID routes
// (issue #6): one token bucket per client address.
//
// Why a limiter at all: an ID costs the server well under a microsecond, so a
// single client in a tight retry loop can take every ID a segment buffers,
// pull the next range from the store early, drive the adaptive step up and
// leave other clients waiting on the database. A per-client rate caps what one
// misbehaving caller can do without touching the generators.
//
// Why this shape: the limiter sits on the fasthttp hot path (60k+ requests/s
// on two cores, zero allocations per request), so
//
//   - a bucket is one int64, its theoretical arrival time (the GCRA form of a
//     token bucket): integer nanoseconds, no float drift, so a client gets
//     exactly Burst + ⌊elapsed/interval⌋ requests, never more than
//     Burst + Rate×elapsed;
//   - a shard's table is a map from a 16-byte key to a slot in a slice of
//     those int64s: one hash per request, the bucket updated in place, no
//     pointer anywhere, so the garbage collector never scans the tables and
//     an existing client costs no allocation;
//   - 64 shards, each a mutex and a map, chosen by a seeded hash of the key,
//     so concurrent requests rarely meet on a lock;
//   - no goroutine: buckets are evicted lazily, by the requests themselves, so
//     there is nothing to start, stop or race with a fake clock.
//
// Memory is bounded by Config.MaxClients whatever the traffic; what happens
// to clients beyond the bound is described at Limiter.
package ratelimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
	"unsafe"
)

// DefaultMaxClients is the bound on tracked clients when Config.MaxClients is
// 0: about 4 MB of tables at most, and far more distinct addresses than one
// ID server sees within a refill time outside an attack.
const DefaultMaxClients = 100_000

const (
	// maxShards spreads lock traffic well beyond the cores a server has;
	// more only costs memory (one padded shard each).
	maxShards = 64

	// sweepGap is the least time between two sweeps of one shard: a sweep
	// walks the whole shard, and under a flood of new addresses every
	// request could otherwise trigger one.
	sweepGap = int64(time.Second)

	// evictProbes bounds the entries a new client looks at, when its
	// shard is full, for one to replace: with a quarter of them idle, 8
	// probes find one nine times in ten.
	evictProbes = 8

	// shrinkMin: a shard whose map once held this many clients is rebuilt
	// when a sweep leaves a quarter or less, because Go maps never give
	// back the memory of deleted entries. Smaller maps are not worth it.
	shrinkMin = 1024

	// maxWindow bounds Burst/Rate, in nanoseconds, so that a bucket's time
	// (time since New plus the window) cannot overflow an int64 in the
	// next 146 years.
	maxWindow = 1 << 62

	// cacheLine is what a shard is padded to, so that two shards' locks
	// never share a line; 128 covers the adjacent-line prefetch of x86 and
	// the line size of Apple's arm64.
	cacheLine = 128
)

// Config sets a Limiter's rate. There is no "off" value: a server that does
// not limit creates no Limiter, and a nil *Limiter allows every request, so
// callers need no branch of their own.
type Config struct {
	// Rate is the requests per second one client may make on average,
	// 0 < Rate ≤ 1e9. The interval between two tokens is 1/Rate rounded up
	// to the nanosecond, so a client never gets more than Rate.
	Rate float64
	// Burst is how many requests a client that has been quiet may make at
	// once, the bucket's size; at least 1.
	Burst int
	// Now is the clock; nil means time.Now. Only differences between its
	// readings matter, so a time.Now clock measures with the monotonic
	// reading and is immune to wall-clock steps.
	Now func() time.Time
	// MaxClients bounds the clients tracked at once, at most 2^32-1
	// (0: DefaultMaxClients). Each costs about 40 bytes.
	MaxClients int
}

// Limiter decides, per client address, whether a request may proceed. It is
// safe for concurrent use.
//
// Clients are keyed by address: an IPv4 address, or an IPv4-mapped IPv6
// address (::ffff:a.b.c.d, what a dual-stack listener reports for an IPv4
// peer) as the same IPv4 address; an IPv6 address by its /64 prefix, zone
// dropped. IPv6 is keyed by /64 because that is what one subscriber or host
// is given: hosts pick addresses inside it at will (privacy extensions
// rotate them daily), so per-address buckets would make one machine 2^64
// clients and let it fill the tables alone. The cost is that hosts sharing a
// /64 share a bucket, as hosts behind one NAT do in IPv4. The zero Addr (a
// peer with no IP address) is one client of its own; callers exempt trusted
// peers before calling Allow, and pass the client's address, not a proxy's.
//
// Eviction never changes an answer: a bucket is dropped only once it is full
// again, and a full bucket is exactly what a client never seen gets. Each
// shard is swept when a new client arrives and a second has passed since its
// last sweep; a new client that finds its shard full also looks at a few
// random entries for a full bucket to replace.
//
// When the tables hold MaxClients clients and none is found full, a new
// client is not tracked: it shares its shard's overflow bucket (same Rate
// and Burst) with every other untracked client of that shard. So a flood of new or
// spoofed addresses gets, all together, at most 64 clients' worth of
// requests, memory stays bounded, and the clients already tracked keep their
// own buckets untouched. The alternatives are worse: letting untracked
// clients through unlimited turns the bound into a way around the limit, and
// evicting active clients to make room hands every evicted client a fresh
// full bucket, so an attacker cycling more addresses than the bound would
// never be limited. The price is that new legitimate clients share the
// overflow buckets until the flood's buckets are full again (Burst/Rate
// after it stops); Stats.Overflow counts the requests that met this.
type Limiter struct {
	interval int64            // nanoseconds per token: 1/Rate rounded up
	window   int64            // Burst × interval: how far ahead of now a bucket may run
	clock    func() time.Time // nil: time.Since, which reads only the monotonic clock
	epoch    time.Time        // times are nanoseconds since, small and monotonic
	seed     uint64
	mask     uint64
	shards   []shard
}

// key is a client: an IPv6 /64 in hi (lo zero), an IPv4 address as its
// IPv4-mapped form in lo (hi zero), or zeroAddrKey. The three never collide.
type key struct{ hi, lo uint64 }

// zeroAddrKey is the zero Addr's key: lo=1 is neither a /64 (lo=0) nor an
// IPv4-mapped address (lo ≥ 0xffff<<32).
var zeroAddrKey = key{lo: 1}

type shardState struct {
	mu sync.Mutex
	// slot maps a client to its bucket in tats: the time at which the
	// bucket will be full again. Full (tat ≤ now) means Burst tokens.
	slot map[key]uint32
	tats []int64
	// free holds the slots of evicted clients; len(tats) never passes max.
	free      []uint32
	overflow  int64 // the shared bucket of the clients with no room
	max       int   // bound on len(slot)
	peak      int   // largest len(slot) since the map was made
	nextSweep int64
	overflows uint64
}

type shard struct {
	shardState
	_ [(cacheLine - unsafe.Sizeof(shardState{})%cacheLine) % cacheLine]byte
}

// DefaultConfig returns the defaults a zero field of Config takes; Rate
// and Burst have none, and a nil Now stays nil: the runtime's monotonic
// clock, read more cheaply than through time.Now.
func DefaultConfig() Config {
	return Config{MaxClients: DefaultMaxClients}
}

// Validate reports the first field New would refuse.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Rate):
		return errors.New("ratelimit: Rate is NaN")
	case math.IsInf(c.Rate, 0):
		return fmt.Errorf("ratelimit: Rate %v is not finite", c.Rate)
	case c.Rate <= 0:
		return fmt.Errorf("ratelimit: Rate %v is not positive (to turn limiting off, create no Limiter: a nil *Limiter allows every request)", c.Rate)
	case c.Rate > 1e9:
		return fmt.Errorf("ratelimit: Rate %v is above 1e9 per second, the clock's resolution", c.Rate)
	case c.Burst < 1:
		return fmt.Errorf("ratelimit: Burst %d is below 1: no request could ever pass", c.Burst)
	case c.MaxClients < 0:
		return fmt.Errorf("ratelimit: MaxClients %d is negative (0 means %d)", c.MaxClients, DefaultMaxClients)
	case uint64(c.MaxClients) > math.MaxUint32: // slots are uint32, and that is 170 GB of tables
		return fmt.Errorf("ratelimit: MaxClients %d is above %d", c.MaxClients, uint32(math.MaxUint32))
	}
	// The conversion to nanoseconds in New is exact below this bound.
	if w := math.Ceil(1e9/c.Rate) * float64(c.Burst); w > maxWindow {
		return fmt.Errorf("ratelimit: Burst %d at Rate %v takes %.4g s to refill, above the limit of %.4g s (146 years)",
			c.Burst, c.Rate, float64(c.Burst)/c.Rate, float64(maxWindow)/1e9)
	}
	return nil
}

// New returns a Limiter for c, or Validate's error.
func New(c Config) (*Limiter, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultConfig().MaxClients
	}
	// Rounding up keeps every client at or below Rate. The result is a
	// whole number at most maxWindow, so the conversion below is exact.
	interval := math.Ceil(1e9 / c.Rate)
	maxClients := c.MaxClients
	// Every shard holds at least one client, so that no address is
	// untracked while the tables are empty.
	n := maxShards
	for n > maxClients {
		n /= 2
	}
	l := &Limiter{
		interval: int64(interval),
		window:   int64(interval) * int64(c.Burst),
		clock:    c.Now,
		seed:     rand.Uint64(),
		mask:     uint64(n - 1),
		shards:   make([]shard, n),
	}
	if l.clock == nil {
		l.epoch = time.Now()
	} else {
		l.epoch = l.clock()
	}
	// The bound is exact: the shards' shares add up to maxClients.
	for i := range l.shards {
		s := &l.shards[i]
		s.max = maxClients / n
		if i < maxClients%n {
			s.max++
		}
		s.slot = make(map[key]uint32)
		// Full at any reading, even one before epoch (a fake clock set
		// back), as a new client's bucket is; far enough from MinInt64
		// that take's arithmetic cannot wrap.
		s.overflow = math.MinInt64 / 2
	}
	return l, nil
}

// Allow takes a token from client's bucket. If there is none, it returns
// false and how long until there is one: a Retry-After header rounds it up
// to whole seconds. A nil Limiter allows everything. For a client already
// tracked, Allow does not allocate.
func (l *Limiter) Allow(client netip.Addr) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	k := keyOf(client)
	s := l.shardOf(k)
	// The clock is read outside the lock to keep the lock short. A reading
	// that lands after a newer one only ever grants less: take uses
	// max(tat, now), and an older now has fewer tokens.
	now := l.elapsed()
	s.mu.Lock()
	if i, found := s.slot[k]; found {
		ok, retryAfter = l.take(&s.tats[i], now)
	} else {
		ok, retryAfter = l.admit(s, k, now)
	}
	s.mu.Unlock()
	return ok, retryAfter
}

// elapsed is the time since New, in nanoseconds.
func (l *Limiter) elapsed() int64 {
	if l.clock == nil {
		// Cheaper than time.Now, which reads the wall clock too.
		return int64(time.Since(l.epoch))
	}
	return int64(l.clock().Sub(l.epoch))
}

// take is the GCRA step on one bucket: a request is one interval of the
// bucket's time, allowed if that time stays within window of now.
func (l *Limiter) take(tat *int64, now int64) (bool, time.Duration) {
	next := max(*tat, now) + l.interval
	if wait := next - now - l.window; wait > 0 {
		return false, time.Duration(wait)
	}
	*tat = next
	return true, 0
}

// admit answers a client s does not track: in a bucket of its own, full, if
// there is room, else in the shard's overflow bucket.
func (l *Limiter) admit(s *shard, k key, now int64) (bool, time.Duration) {
	// Only new clients pay for sweeps: the steady state of known clients
	// never walks a map.
	if now >= s.nextSweep {
		s.sweep(now)
	}
	if len(s.slot) >= s.max && !s.evictOne(now) {
		s.overflows++
		return l.take(&s.overflow, now)
	}
	var i uint32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
	} else {
		i = uint32(len(s.tats))
		s.tats = append(s.tats, 0)
	}
	s.tats[i] = now + l.interval // a full bucket, less this request
	s.slot[k] = i
	s.peak = max(s.peak, len(s.slot))
	return true, 0
}

// evictOne drops a full bucket, if one is among the first evictProbes a map
// walk meets. Walks start at a random place, so a full table recycles its
// idle clients without waiting for the next sweep, at a bounded cost per new
// client even in a flood.
func (s *shard) evictOne(now int64) bool {
	n := 0
	for k, i := range s.slot {
		if s.tats[i] <= now {
			delete(s.slot, k)
			s.free = append(s.free, i)
			return true
		}
		if n++; n == evictProbes {
			break
		}
	}
	return false
}

// sweep drops the full buckets, which hold nothing a new bucket would not.
func (s *shard) sweep(now int64) {
	for k, i := range s.slot {
		if s.tats[i] <= now {
			delete(s.slot, k)
			s.free = append(s.free, i)
		}
	}
	s.nextSweep = now + sweepGap
	if s.peak >= shrinkMin && len(s.slot) <= s.peak/4 {
		// Compact into new tables: the old ones keep their peak size.
		slot := make(map[key]uint32, len(s.slot))
		tats := make([]int64, 0, len(s.slot))
		for k, i := range s.slot {
			slot[k] = uint32(len(tats))
			tats = append(tats, s.tats[i])
		}
		s.slot, s.tats, s.free, s.peak = slot, tats, nil, len(slot)
	}
}

func (l *Limiter) shardOf(k key) *shard {
	// splitmix64's finaliser over both halves and a per-Limiter seed:
	// addresses an attacker picks do not pile into one shard, and IPv4
	// keys, which differ only in their low 32 bits, spread over all.
	x := k.hi*0x9e3779b97f4a7c15 ^ k.lo ^ l.seed
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return &l.shards[x&l.mask]
}

func keyOf(a netip.Addr) key {
	a = a.Unmap()
	switch {
	case a.Is4():
		b := a.As4()
		return key{lo: 0xffff<<32 | uint64(binary.BigEndian.Uint32(b[:]))}
	case a.Is6():
		b := a.As16()
		return key{hi: binary.BigEndian.Uint64(b[:8])}
	default:
		return zeroAddrKey
	}
}

// Stats is a snapshot for metrics and logs.
type Stats struct {
	// Clients is how many clients hold a bucket of their own, including
	// full ones no sweep has dropped yet. At most MaxClients.
	Clients int
	// Overflow counts the requests, since New, of clients the tables had
	// no room for: nonzero means MaxClients was reached (a flood, or a
	// bound too small for the traffic).
	Overflow uint64
}

// Stats returns the limiter's counts. It takes each shard's lock in turn:
// for a scrape, not for the hot path.
func (l *Limiter) Stats() Stats {
	var st Stats
	if l == nil {
		return st
	}
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		st.Clients += len(s.slot)
		st.Overflow += s.overflows
		s.mu.Unlock()
	}
	return st
}

// Close stops the Limiter's goroutines: there are none, since eviction
// happens inside Allow, so it does nothing. It is there so that owners can
// defer it now and stay correct if a background sweeper is ever added. Safe
// to call more than once, and on nil; Allow keeps working after it.
func (l *Limiter) Close() {}
