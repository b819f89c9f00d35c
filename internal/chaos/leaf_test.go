package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
)

// envClockFile is read by a chaos build of leaf (cmd/leaf/chaos.go): a Go
// duration added to its snowflake clock.
const envClockFile = "LEAF_CHAOS_CLOCK_FILE"

// leafStartTimeout bounds one start of 'leaf serve' until /healthz answers.
// A server restarting on the worker cache waits out up to the 3 s window,
// and a registry or database that is down makes serve exit only after its
// own connect timeout (5 s for etcd).
const leafStartTimeout = 30 * time.Second

// span is a stretch of the run, as offsets from its start.
type span struct{ from, to time.Duration }

func (s span) String() string {
	return fmt.Sprintf("%.1fs–%.1fs", s.from.Seconds(), s.to.Seconds())
}

// overlaps reports whether [from, to] meets s; an open span (to == 0) lasts
// to the end of the run.
func (s span) overlaps(from, to time.Duration) bool {
	return from <= s.to && to >= s.from || s.to == 0 && to >= s.from
}

// leafServer is one 'leaf serve' the test kills and restarts. Its address and
// data directory stay the same across restarts, so it registers as the same
// snowflake endpoint and finds its worker cache again.
type leafServer struct {
	idx       int
	addr      string
	clockFile string
	*proc

	up atomic.Bool // serving, as far as the test knows: clients mostly avoid it otherwise

	mu        sync.Mutex
	downs     []span          // from the kill signal until /healthz answered again
	failed    int             // starts that exited or timed out
	failMsgs  []string        // why each failed start failed
	startedIn []time.Duration // how long each successful restart took
}

// newLeafServer prepares server idx on a fixed port. With ordered, it
// advertises its base URL (where the other servers forward an ordered tag's
// requests while it owns the tag) and holds the tag under a short lease, so
// that another server takes over from a killed owner within the run.
func newLeafServer(t *testing.T, idx int, bin string, registryArgs, storeArgs []string, ordered bool) *leafServer {
	t.Helper()
	dir := t.TempDir()
	s := &leafServer{
		idx:       idx,
		addr:      fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		clockFile: filepath.Join(dir, "clock"),
	}
	args := append([]string{"serve",
		"--listen", s.addr,
		"--data-dir", filepath.Join(dir, "data"),
		"--name", "chaos",
	}, storeArgs...)
	args = append(args, registryArgs...)
	if ordered {
		args = append(args, "--advertise-url", "http://"+s.addr)
	}
	s.proc = newProc(t, dir, fmt.Sprintf("leaf-%d", idx), bin, args...)
	s.env = append(leaflessEnv(), envClockFile+"="+s.clockFile)
	if ordered {
		s.env = append(s.env, "LEAF_SEGMENT_OWNER_LEASE="+ownerLease.String())
	}
	return s
}

// leaflessEnv is the test's environment without LEAF_* variables (the test
// itself is run with some), so each server runs with its flags alone.
func leaflessEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEAF_") {
			env = append(env, kv)
		}
	}
	return env
}

var healthClient = &http.Client{
	Timeout:   500 * time.Millisecond,
	Transport: &http.Transport{DisableKeepAlives: true},
}

func (s *leafServer) healthz(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz: %s", resp.Status)
	}
	return nil
}

// launch starts the server once and waits for /healthz. On success the down
// span the last kill opened is closed at now().
func (s *leafServer) launch(ctx context.Context, now func() time.Duration) error {
	began := now()
	if err := s.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, leafStartTimeout)
	defer cancel()
	if err := s.waitReady(ctx, s.healthz); err != nil {
		s.kill() // a start that timed out may still be waiting on a service
		reason := err.Error()
		if errors.Is(err, errExited) {
			reason = s.logTail(1) // serve's last word is why it exited
		}
		s.mu.Lock()
		s.failed++
		s.failMsgs = append(s.failMsgs, reason)
		s.mu.Unlock()
		return err
	}
	at := now()
	s.mu.Lock()
	if n := len(s.downs); n > 0 && s.downs[n-1].to == 0 {
		s.downs[n-1].to = at
		s.startedIn = append(s.startedIn, at-began)
	}
	s.mu.Unlock()
	s.up.Store(true)
	return nil
}

// crash kills the server with SIGKILL, opening a down span first so that
// errors of requests in flight at the signal fall inside it.
func (s *leafServer) crash(now func() time.Duration) {
	s.up.Store(false)
	s.mu.Lock()
	s.downs = append(s.downs, span{from: now()})
	s.mu.Unlock()
	s.kill()
}

// lastUp is when the server last came back; 0 if it never went down.
func (s *leafServer) lastUp() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.downs); n > 0 {
		return s.downs[n-1].to
	}
	return 0
}

// wasDown reports whether the server was down at some moment of [from, to].
func (s *leafServer) wasDown(from, to time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.downs {
		if d.overlaps(from, to) {
			return true
		}
	}
	return false
}

// tagOwner asks the server who owns an ordered tag (GET /v2/tags/{tag}):
// the owner's base URL, "" while no lease holds. The servers listen on
// loopback without an admin token, so the admin route is open.
func (s *leafServer) tagOwner(ctx context.Context, tag string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/v2/tags/"+tag, nil)
	if err != nil {
		return "", err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /v2/tags/%s: %s", tag, resp.Status)
	}
	var row struct {
		Ordered bool   `json:"ordered"`
		Owner   string `json:"owner"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&row); err != nil {
		return "", fmt.Errorf("GET /v2/tags/%s: %w", tag, err)
	}
	if !row.Ordered {
		return "", fmt.Errorf("GET /v2/tags/%s: the tag is not ordered", tag)
	}
	return row.Owner, nil
}

// setClock writes the offset the server's snowflake clock runs at. The
// rename makes the change atomic for the server's poller.
func (s *leafServer) setClock(offset time.Duration) error {
	tmp := s.clockFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(offset.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.clockFile)
}

// runLeaf runs the binary to completion (a CLI command such as 'tags create').
func runLeaf(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = leaflessEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("leaf %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
