package testutil

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvPrefix begins every variable the leaf binary reads (cmd/leaf's
// config.EnvPrefix, which this package cannot import; cmd/leaf's
// TestHarnessNames holds the two equal).
const EnvPrefix = "LEAF_"

// SeedTag is the tag a fresh embedded store is seeded with (cmd/leaf's
// config.SeedTag; held equal by the same test).
const SeedTag = "leaf-segment-test"

// CleanEnv is the test's environment without any LEAF_* variable, so that
// the binary runs with its defaults whatever the developer has set.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// LeafServer is a 'leaf serve' process started by StartLeaf or TryStartLeaf.
type LeafServer struct {
	Cmd    *exec.Cmd
	Log    *LogBuffer // its stdout and stderr
	Addr   string     // the address it logged it listens on
	Exited chan struct{}
	Err    error // from Wait, valid once Exited is closed
}

var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// StartLeaf starts 'leaf serve' in dir and waits until it logs the
// address it bound; it fails the test if the server exits first.
func StartLeaf(t testing.TB, bin, dir string, env []string, args ...string) *LeafServer {
	t.Helper()
	s, exited := TryStartLeaf(t, bin, dir, env, args...)
	if exited {
		t.Fatalf("leaf serve exited before listening (%v):\n%s", s.Err, s.Log.String())
	}
	return s
}

// TryStartLeaf starts 'leaf serve' in dir and waits until it either logs the
// address it bound or exits (refused is then true: a server that refuses
// to start is what some tests ask for). The process is killed at the end of
// the test if it still runs.
func TryStartLeaf(t testing.TB, bin, dir string, env []string, args ...string) (s *LeafServer, refused bool) {
	t.Helper()
	s = &LeafServer{Log: &LogBuffer{}, Exited: make(chan struct{})}
	s.Cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	s.Cmd.Dir, s.Cmd.Env = dir, env
	s.Cmd.Stdout, s.Cmd.Stderr = s.Log, s.Log
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.Err = s.Cmd.Wait()
		close(s.Exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.Exited:
		default:
			_ = s.Cmd.Process.Kill()
			<-s.Exited
		}
	})
	for deadline := time.Now().Add(time.Minute); ; {
		if m := listeningRE.FindStringSubmatch(s.Log.String()); m != nil {
			s.Addr = m[1]
			return s, false
		}
		select {
		case <-s.Exited:
			return s, true
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaf serve neither listened nor exited within a minute:\n%s", s.Log.String())
		}
	}
}

// URL is the server's base URL followed by path.
func (s *LeafServer) URL(path string) string { return "http://" + s.Addr + path }

// Stop sends SIGTERM and returns the exit status.
func (s *LeafServer) Stop(t testing.TB) int {
	t.Helper()
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("leaf serve did not stop on SIGTERM:\n%s", s.Log.String())
	}
	if ee := (*exec.ExitError)(nil); errors.As(s.Err, &ee) {
		return ee.ExitCode()
	}
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return 0
}

// ExitCode waits for the server to exit and returns its exit status.
func (s *LeafServer) ExitCode() int {
	<-s.Exited
	if s.Cmd.ProcessState == nil {
		return -1
	}
	return s.Cmd.ProcessState.ExitCode()
}

// FetchID gets one ID from a Leaf GET route and checks it is positive. A
// 503 (no range loaded within the server's wait, as can happen on a loaded
// test machine) issues no ID, so it is retried a few times, 200ms apart.
func FetchID(t testing.TB, url string) int64 {
	t.Helper()
	for attempt := 1; ; attempt++ {
		status, body := Get(t, url)
		if status == http.StatusServiceUnavailable && attempt < 5 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d: %s", url, status, body)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(body), 10, 64)
		if err != nil || id < 1 {
			t.Fatalf("GET %s: body %q is not a positive ID", url, body)
		}
		return id
	}
}

// Get sends a GET and returns the status and the body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
