// Package local keeps snowflake worker state on local disk: Cache, the file
// that lets a server start with its worker ID while its registry is down,
// and Registry, the "local" worker registry (a worker ID from configuration,
// its high-water mark in such a file).
//
// The cache file is the NotFound9 fork of Java Leaf's workerID.properties,
// a java.util.Properties file, read and written as Java does (package
// javaprops):
//
//	workerID=5
//	maxTimestamp=1590000000000
//	leaseUntil=1590000060000
//
// A file without maxTimestamp (written by Meituan's Leaf, which cached only
// the ID) is refused: without a mark the cache cannot prove the clock has not
// gone back (Leaf#97). leaseUntil is ours (Java ignores it): when the lease
// this server last held on the ID ends; absent or 0, none is held.
//
// Instance is the identity a server proves to its registries that it held a
// claim before (leaf.WorkerClaim.Resumed): a random name kept in the data
// directory and locked while the process runs.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/javaprops"
)

// Cache is a worker cache file. Its methods are safe for concurrent use
// within one process.
type Cache struct {
	path string
	mu   sync.Mutex
}

// NewCache returns the cache at path; the file and its directory are created
// on the first Save.
func NewCache(path string) *Cache { return &Cache{path: path} }

// Path is the cache file's path.
func (c *Cache) Path() string { return c.path }

// Load reads the cached worker ID, high-water mark and lease. It fails with
// an error wrapping fs.ErrNotExist when there is no file, and with one
// wrapping leaf.ErrInvalidArgument when the file is malformed.
func (c *Cache) Load() (leaf.CachedClaim, error) {
	var cc leaf.CachedClaim
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := os.ReadFile(c.path)
	if err != nil {
		return cc, fmt.Errorf("worker cache: %w", err)
	}
	props, err := javaprops.Parse(c.path, b)
	if err != nil {
		return cc, fmt.Errorf("%w: worker cache: %w", leaf.ErrInvalidArgument, err)
	}
	// Java's Long.valueOf would refuse blanks around the number; the
	// trimming is leniency toward a hand-edited file.
	number := func(key string) (int64, bool) {
		p, ok := javaprops.Lookup(props, key)
		n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 64)
		return n, ok && err == nil && n >= 0
	}
	var ok bool
	if cc.WorkerID, ok = number("workerID"); !ok {
		return cc, fmt.Errorf("%w: worker cache %s: no valid workerID", leaf.ErrInvalidArgument, c.path)
	}
	if cc.Mark, ok = number("maxTimestamp"); !ok {
		return cc, fmt.Errorf("%w: worker cache %s: no valid maxTimestamp (a file written by Meituan's Leaf has none; without it the clock cannot be checked)", leaf.ErrInvalidArgument, c.path)
	}
	if _, present := javaprops.Lookup(props, "leaseUntil"); present {
		if cc.LeaseUntil, ok = number("leaseUntil"); !ok {
			return cc, fmt.Errorf("%w: worker cache %s: leaseUntil is not a number", leaf.ErrInvalidArgument, c.path)
		}
	}
	return cc, nil
}

// Save writes cc durably: a temporary file, fsync, rename over the old one,
// fsync of the directory. A crash leaves either the old or the new content,
// never a torn file. A zero LeaseUntil is not written.
func (c *Cache) Save(cc leaf.CachedClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := filepath.Dir(c.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("worker cache: %w", err)
	}
	f, err := os.CreateTemp(dir, ".workerID-*.tmp")
	if err != nil {
		return fmt.Errorf("worker cache: %w", err)
	}
	tmp := f.Name()
	body := javaprops.AppendEntry(nil, "workerID", strconv.FormatInt(cc.WorkerID, 10))
	body = javaprops.AppendEntry(body, "maxTimestamp", strconv.FormatInt(cc.Mark, 10))
	if cc.LeaseUntil != 0 {
		body = javaprops.AppendEntry(body, "leaseUntil", strconv.FormatInt(cc.LeaseUntil, 10))
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("worker cache: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return fmt.Errorf("worker cache: sync %s: %w", dir, err)
		}
	}
	return nil
}

// Config configures a local Registry. Either WorkerIDs maps each endpoint
// ("ip:port") to its ID, or WorkerID is the ID of every endpoint.
type Config struct {
	WorkerID  int64
	WorkerIDs map[string]int64
	// Dir keeps one cache file per worker ID with its high-water mark
	// (worker-N.properties). Required: without it a restart could not be
	// checked against the clock.
	Dir string
}

// Registry is the "local" worker registry: the worker ID comes from
// configuration, nothing is shared between servers, and the high-water mark
// lives in a file under Config.Dir. The ID's lock file keeps two processes
// sharing the directory from running with one ID; across machines, distinct
// IDs are the operator's promise to keep.
type Registry struct {
	cfg      Config
	id       int64
	cache    *Cache // of the registered ID; nil before Register
	unlockFn func() // releases the ID's lock file; nil when not held
}

// Validate reports the first field New would refuse, wrapping
// leaf.ErrInvalidArgument. Config has no defaults: Dir is required, and
// a zero WorkerID is the ID 0.
func (cfg Config) Validate() error {
	if cfg.Dir == "" {
		return fmt.Errorf("%w: local worker registry needs a directory for its high-water marks", leaf.ErrInvalidArgument)
	}
	if cfg.WorkerID < 0 {
		return fmt.Errorf("%w: worker ID %d is negative", leaf.ErrInvalidArgument, cfg.WorkerID)
	}
	seen := make(map[int64]string, len(cfg.WorkerIDs))
	for ep, id := range cfg.WorkerIDs {
		if _, err := leaf.ParseEndpoint(ep); err != nil {
			return fmt.Errorf("local worker IDs: %w", err)
		}
		if id < 0 {
			return fmt.Errorf("%w: worker ID %d of %s is negative", leaf.ErrInvalidArgument, id, ep)
		}
		if other, dup := seen[id]; dup {
			return fmt.Errorf("%w: worker ID %d given to both %s and %s", leaf.ErrInvalidArgument, id, other, ep)
		}
		seen[id] = ep
	}
	return nil
}

// New returns a Registry, or Validate's error.
func New(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Registry{cfg: cfg}, nil
}

// Register returns the configured ID of ep and the mark stored for it.
func (r *Registry) Register(_ context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	id := r.cfg.WorkerID
	if r.cfg.WorkerIDs != nil {
		var ok bool
		if id, ok = r.cfg.WorkerIDs[ep.String()]; !ok {
			return leaf.WorkerClaim{}, fmt.Errorf("%w: no worker ID for %s in the local worker ID map", leaf.ErrInvalidArgument, ep)
		}
	}
	if id > maxID {
		return leaf.WorkerClaim{}, fmt.Errorf("%w: configured worker ID %d of %s is above the layout's maximum %d",
			leaf.ErrWorkerIDsExhausted, id, ep, maxID)
	}
	base := filepath.Join(r.cfg.Dir, "worker-"+strconv.FormatInt(id, 10))
	r.unlock()
	unlock, err := lockFile(base + ".lock")
	if err != nil {
		return leaf.WorkerClaim{}, fmt.Errorf("worker ID %d: %w", id, err)
	}
	c := NewCache(base + ".properties")
	claim := leaf.WorkerClaim{WorkerID: id}
	switch cc, err := c.Load(); {
	case err == nil && cc.WorkerID == id:
		claim.HighWater = cc.Mark
	case err == nil:
		err = fmt.Errorf("%w: %s holds worker ID %d, not %d", leaf.ErrInvalidArgument, c.Path(), cc.WorkerID, id)
		fallthrough
	case !errors.Is(err, fs.ErrNotExist):
		unlock()
		return leaf.WorkerClaim{}, err
	}
	r.id, r.cache, r.unlockFn = id, c, unlock
	return claim, nil
}

// unlock releases the lock on the registered ID's files, if held.
func (r *Registry) unlock() {
	if r.unlockFn != nil {
		r.unlockFn()
		r.unlockFn = nil
	}
}

// Heartbeat stores mark in the worker's file. There is no lease.
func (r *Registry) Heartbeat(_ context.Context, mark int64) (time.Time, error) {
	if r.cache == nil {
		return time.Time{}, errors.New("local registry: heartbeat before Register")
	}
	return time.Time{}, r.cache.Save(leaf.CachedClaim{WorkerID: r.id, Mark: mark})
}

// Release stores the final mark and lets another process on this machine
// take the ID; the ID stays configured.
func (r *Registry) Release(ctx context.Context, mark int64) error {
	_, err := r.Heartbeat(ctx, mark)
	r.unlock()
	return err
}

// Close releases the lock on the ID, if held.
func (r *Registry) Close() error {
	r.unlock()
	return nil
}
