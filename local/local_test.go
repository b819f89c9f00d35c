package local_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/local"
)

// The map registry passes the conformance suite: each test endpoint has its
// own configured ID, and marks persist in the directory.
func TestMapRegistry(t *testing.T) {
	leaftest.TestWorkerRegistry(t, func(t *testing.T) leaftest.RegistryOpener {
		dir := t.TempDir()
		ids := make(map[string]int64)
		for i := range 64 {
			ids[leaftest.TestEndpoint(i).String()] = int64(i)
		}
		return func(context.Context) (leaf.WorkerRegistry, error) {
			return local.New(local.Config{WorkerIDs: ids, Dir: dir})
		}
	}, leaftest.RegistryTraits{Sticky: true})
}

func TestFixedWorkerID(t *testing.T) {
	r, err := local.New(local.Config{WorkerID: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c, err := r.Register(t.Context(), leaftest.TestEndpoint(i), 1023)
		if err != nil || c.WorkerID != 5 || !c.Expires.IsZero() {
			t.Fatalf("Register = %+v, %v; want worker 5, no lease", c, err)
		}
	}
	if _, err := r.Register(t.Context(), leaftest.TestEndpoint(0), 3); !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
		t.Fatalf("worker 5 with maxID 3: %v, want ErrWorkerIDsExhausted", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, c := range []local.Config{
		{},
		{WorkerID: -1, Dir: "d"},
		{WorkerIDs: map[string]int64{"10.0.0.1": 1}, Dir: "d"},
		{WorkerIDs: map[string]int64{"10.0.0.1:80": -1}, Dir: "d"},
		{WorkerIDs: map[string]int64{"10.0.0.1:80": 1, "10.0.0.2:80": 1}, Dir: "d"},
	} {
		if err := c.Validate(); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidArgument", c, err)
		}
		if _, err := local.New(c); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want ErrInvalidArgument", c, err)
		}
	}
	r, _ := local.New(local.Config{WorkerIDs: map[string]int64{"10.0.0.1:80": 1}, Dir: t.TempDir()})
	if _, err := r.Register(t.Context(), leaftest.TestEndpoint(3), 1023); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Fatalf("endpoint missing from the map: %v", err)
	}
}

func TestCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "workerID.properties")
	c := local.NewCache(path)
	if _, err := c.Load(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
	// Without a lease: exactly the fork's file.
	if err := c.Save(leaf.CachedClaim{WorkerID: 5, Mark: 1590000000000}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "workerID=5\nmaxTimestamp=1590000000000\n" {
		t.Fatalf("file %q is not the fork's workerID.properties", b)
	}
	if cc, err := c.Load(); err != nil || cc != (leaf.CachedClaim{WorkerID: 5, Mark: 1590000000000}) {
		t.Fatalf("Load = %+v, %v", cc, err)
	}
	// With one: a key of ours beside the fork's, which the fork ignores.
	want := leaf.CachedClaim{WorkerID: 5, Mark: 1590000000000, LeaseUntil: 1590000060000}
	if err := c.Save(want); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if string(b) != "workerID=5\nmaxTimestamp=1590000000000\nleaseUntil=1590000060000\n" {
		t.Fatalf("file %q", b)
	}
	if cc, err := c.Load(); err != nil || cc != want {
		t.Fatalf("Load = %+v, %v, want %+v", cc, err, want)
	}
}

// TestInstance: the identity is made once and kept; a second process on the
// directory is refused while the first holds it; a file that holds no
// identity is refused rather than replaced.
func TestInstance(t *testing.T) {
	dir := t.TempDir()
	a, err := local.OpenInstance(dir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(a.ID(), host+"/") || len(a.ID()) < len(host)+10 {
		t.Errorf("ID %q: want host/random", a.ID())
	}
	if _, err := local.OpenInstance(dir); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("second open while the first holds it: %v, want in use", err)
	}
	first := a.ID()
	_ = a.Close()
	b, err := local.OpenInstance(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID() != first {
		t.Errorf("reopened ID %q, want the same %q", b.ID(), first)
	}
	_ = b.Close()
	if c, err := local.OpenInstance(t.TempDir()); err != nil || c.ID() == first {
		t.Errorf("another directory: %v, %v; want another identity", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "instance"), []byte("two words\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := local.OpenInstance(dir); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("a garbled file: %v, want ErrInvalidArgument", err)
	}
}

// TestCacheJavaFiles: the cache reads files as Java's Properties.load reads
// them, whoever wrote them, and refuses, with a precise error, the ones
// that hold no usable ID and mark.
func TestCacheJavaFiles(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		id, mark int64
		err      string // empty: loads
	}{
		// Written by the fork, FileUtils-style: no newline at the end.
		{"fork, unterminated", "workerID=5\nmaxTimestamp=1590000000000", 5, 1590000000000, ""},
		// Written by Properties.store: a date comment, any key order.
		{"Properties.store", "#Sun May 10 12:00:00 CST 2020\nmaxTimestamp=77\nworkerID=9\n", 9, 77, ""},
		{"CRLF", "workerID=3\r\nmaxTimestamp=4\r\n", 3, 4, ""},
		{"old Mac CR", "workerID=3\rmaxTimestamp=4", 3, 4, ""},
		{"colon and blank separators", "workerID: 6\nmaxTimestamp 8\n", 6, 8, ""},
		{"blanks around", "  \tworkerID =  7  \n\fmaxTimestamp\t=\t9\t\n", 7, 9, ""},
		{"comments", "! bang\n   # indented hash\nworkerID=1 \nmaxTimestamp=2\n# workerID=99\n", 1, 2, ""},
		{"escapes", "work\\erID=\\u0031\\u0032\nmax\\Timestamp=3\n", 12, 3, ""},
		{"continuation", "workerID=1\\\n    5\nmaxTimestamp=2\n", 15, 2, ""},
		{"last one wins, as in Java", "workerID=1\nmaxTimestamp=2\nworkerID=3\n", 3, 2, ""},
		{"other keys ignored", "workerID=1\nmaxTimestamp=2\nip=10.0.0.1\n", 1, 2, ""},

		{"Meituan Leaf's file: no mark", "workerID=5", 0, 0, "no valid maxTimestamp"},
		{"empty", "", 0, 0, "no valid workerID"},
		{"only comments", "# workerID=5\n! maxTimestamp=1\n", 0, 0, "no valid workerID"},
		{"not key=value", "garbage\n", 0, 0, "no valid workerID"},
		{"not a number", "workerID=x\nmaxTimestamp=1\n", 0, 0, "no valid workerID"},
		{"number and more", "workerID=5 6\nmaxTimestamp=1\n", 0, 0, "no valid workerID"},
		{"negative ID", "workerID=-1\nmaxTimestamp=1\n", 0, 0, "no valid workerID"},
		{"negative mark", "workerID=1\nmaxTimestamp=-1\n", 0, 0, "no valid maxTimestamp"},
		{"mark too big", "workerID=1\nmaxTimestamp=9223372036854775808\n", 0, 0, "no valid maxTimestamp"},
		{"empty ID", "workerID=\nmaxTimestamp=1\n", 0, 0, "no valid workerID"},
		{"case matters", "workerid=1\nmaxTimestamp=1\n", 0, 0, "no valid workerID"},
		{"malformed escape", "workerID=1\nmaxTimestamp=\\u12\n", 0, 0, ":2: malformed \\uxxxx escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "workerID.properties")
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			cc, err := local.NewCache(path).Load()
			id, mark := cc.WorkerID, cc.Mark
			if tt.err != "" {
				if !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
					t.Errorf("Load of %q = %d, %d, %v; want ErrInvalidArgument naming %s and saying %q", tt.body, id, mark, err, path, tt.err)
				}
				return
			}
			if err != nil || id != tt.id || mark != tt.mark {
				t.Errorf("Load of %q = %d, %d, %v; want %d, %d", tt.body, id, mark, err, tt.id, tt.mark)
			}
		})
	}
}

// Two servers sharing a data directory cannot run with one worker ID: the
// second is refused until the first lets go.
func TestOneHolderPerDirectory(t *testing.T) {
	dir := t.TempDir()
	r1, _ := local.New(local.Config{WorkerID: 4, Dir: dir})
	r2, _ := local.New(local.Config{WorkerID: 4, Dir: dir})
	if _, err := r1.Register(t.Context(), leaftest.TestEndpoint(0), 1023); err != nil {
		t.Fatal(err)
	}
	_, err := r2.Register(t.Context(), leaftest.TestEndpoint(1), 1023)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second holder of worker 4: %v, want a refusal", err)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Register(t.Context(), leaftest.TestEndpoint(1), 1023); err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	_ = r2.Close()
}
