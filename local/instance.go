package local

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/leafgo/leaf"
)

// Instance is a server's identity towards its worker registries: a random
// name created once in its data directory, with the host name in front for
// the operators who read it in a registry. A registry that finds its claim
// held by the same identity hands it back at once (leaf.WorkerClaim.Resumed)
// instead of waiting out the lease: the previous holder was this server,
// and it is dead, because the identity is locked while a process uses it,
// so two processes sharing one directory cannot both hold it.
//
// What it cannot tell apart: a copy of the data directory on a host of the
// same name (a cloned VM, a restored backup, a volume mounted by two
// containers that share a host name). The copy believes it is the server
// that held the claim, takes it back while the original may be cut off from
// the registry and still issuing, and the two repeat each other's IDs. A
// copy on a host of another name is another identity and waits the lease out
// like any other process.
type Instance struct {
	id     string
	unlock func()
}

// instanceFile is the identity's file in the directory; maxInstance bounds
// what is read of it.
const (
	instanceFile = "instance"
	maxInstance  = 200
)

// OpenInstance returns the identity kept in dir, creating it on first use,
// and locks it until Close. A second process on the same directory fails
// with an error that says so.
func OpenInstance(dir string) (*Instance, error) {
	path := filepath.Join(dir, instanceFile)
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("instance identity %s: %w", path, err)
	}
	id, err := readInstance(path)
	if errors.Is(err, fs.ErrNotExist) {
		id, err = newInstance(path)
	}
	if err != nil {
		unlock()
		return nil, fmt.Errorf("instance identity %s: %w", path, err)
	}
	host, herr := os.Hostname()
	if herr != nil || host == "" {
		host = "unknown-host"
	}
	if len(host) > 64 {
		host = host[:64]
	}
	return &Instance{id: host + "/" + id, unlock: unlock}, nil
}

// ID is the identity: "host/random".
func (i *Instance) ID() string { return i.id }

// Close releases the lock.
func (i *Instance) Close() error {
	if i.unlock != nil {
		i.unlock()
		i.unlock = nil
	}
	return nil
}

func readInstance(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" || len(id) > maxInstance || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("%w: the file does not hold an identity (%q); delete it to make a new one, after making sure no other server was started from a copy of this directory",
			leaf.ErrInvalidArgument, truncate(string(b), 40))
	}
	return id, nil
}

// newInstance writes a new random identity, durably.
func newInstance(path string) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	id := hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".instance-*.tmp")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
