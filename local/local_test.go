package local_test

import (
	"context"
	"errors"
	"fmt"
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
	if _, _, err := c.Load(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := c.Save(5, 1590000000000); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "workerID=5\nmaxTimestamp=1590000000000\n" {
		t.Fatalf("file %q is not the fork's workerID.properties", b)
	}
	if id, mark, err := c.Load(); err != nil || id != 5 || mark != 1590000000000 {
		t.Fatalf("Load = %d, %d, %v", id, mark, err)
	}
	for _, body := range []string{
		"workerID=5\n",                  // Meituan Leaf's file: no mark
		"workerID=x\nmaxTimestamp=1\n",  // not a number
		"workerID=-1\nmaxTimestamp=1\n", // negative
		"garbage\n",                     // not key=value
		"# comment\nmaxTimestamp=12\n",  // no ID
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Load(); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Load of %q = %v, want ErrInvalidArgument", body, err)
		}
	}
	// A Java properties file with comments and spaces is read.
	if err := os.WriteFile(path, []byte(fmt.Sprintf("#Sun May 10 2020\nworkerID = %d\nmaxTimestamp=%d\n", 9, 77)), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, mark, err := c.Load(); err != nil || id != 9 || mark != 77 {
		t.Fatalf("Load of a Java-written file = %d, %d, %v", id, mark, err)
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
