package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a server process of the test's own (a private MariaDB,
// ZooKeeper or etcd): its own directory and port on 127.0.0.1, so that the
// test may kill, freeze and restart it without touching the shared servers
// other tests use. Its methods are safe for concurrent use.
type Server struct {
	// Addr is host:port; it stays the same across restarts, so that the
	// addresses handed out stay valid.
	Addr string

	t       testing.TB
	name    string
	dir     string
	argv    []string
	timeout time.Duration
	ready   func(ctx context.Context) error
	// credential, when set, is the user the server runs as: PostgreSQL
	// refuses to run as root, which the tests may be.
	credential *syscall.Credential

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// newServer describes a server run as argv in dir, answering on addr when
// ready says so; the test's cleanup kills it by PID. It is not started.
func newServer(t testing.TB, name, addr, dir string, timeout time.Duration, argv []string, ready func(context.Context) error) *Server {
	s := &Server{Addr: addr, t: t, name: name, dir: dir, argv: argv, timeout: timeout, ready: ready}
	t.Cleanup(s.end)
	return s
}

// needPrograms skips the test, or fails it under LEAF_TEST_STRICT=1, when
// one of programs (or a .jar it runs) is not installed.
func needPrograms(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		_, err := exec.LookPath(p)
		if strings.HasSuffix(p, ".jar") {
			_, err = os.Stat(p)
		}
		if err != nil {
			msg := fmt.Sprintf("testutil: %s is not installed (%v); scripts/services.sh installs it", p, err)
			if os.Getenv(EnvStrict) == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// PID is the process ID of the running server, 0 when none runs.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || isDone(s.exited) {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill9 kills the server, and every process it forked, with SIGKILL, as a
// crash would, and waits until they are gone.
func (s *Server) Kill9() {
	s.t.Helper()
	cmd, exited := s.current()
	if cmd == nil || isDone(exited) {
		s.t.Fatalf("testutil: %s on %s is not running", s.name, s.Addr)
	}
	if err := s.kill(cmd, exited); err != nil {
		s.t.Fatal(err)
	}
}

// Stop freezes the server and what it forked with SIGSTOP: its connections
// stay open and silent, as on a machine that hangs.
func (s *Server) Stop() { s.signal(syscall.SIGSTOP) }

// Cont resumes a server frozen by Stop.
func (s *Server) Cont() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	cmd, exited := s.current()
	if cmd == nil || isDone(exited) {
		s.t.Fatalf("testutil: %s on %s is not running", s.name, s.Addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("testutil: signal %v to %s on %s: %v", sig, s.name, s.Addr, err)
	}
	// And what it forked, or a stopped PostgreSQL's backends would answer
	// on: see kill.
	for _, pid := range s.processesInDir() {
		if pid != cmd.Process.Pid {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// Restart starts the server again in the same directory and on the same
// port after Kill9 (or kills it first if it still runs), and waits until it
// answers: a database's crash recovery runs first.
func (s *Server) Restart(ctx context.Context) error {
	if cmd, exited := s.current(); cmd != nil {
		if err := s.kill(cmd, exited); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.start(ctx)
}

func (s *Server) current() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.exited
}

// start launches the server and waits until it answers or exits.
func (s *Server) start(ctx context.Context) error {
	logPath := filepath.Join(s.dir, s.name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testutil: %w", err)
	}
	// Not CommandContext: the server must outlive the start's deadline.
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a ^C to the test goes to the test, whose
	// cleanup ends the server by PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.credential}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("testutil: start %s: %w", s.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.ready(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("testutil: %s on %s exited while starting:\n%s", s.name, s.Addr, tail(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("testutil: %s on %s did not answer: %v\n%s", s.name, s.Addr, err, tail(logPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// end kills the server by PID, a stopped one included (SIGKILL needs no
// SIGCONT), and waits for it; t.TempDir's cleanup, which runs after this
// one, removes the directory.
func (s *Server) end() {
	cmd, exited := s.current()
	if cmd == nil {
		return
	}
	if err := s.kill(cmd, exited); err != nil {
		s.t.Error(err)
	}
}

// kill ends the server and every process working in its directory with
// SIGKILL, and waits until all are gone. PostgreSQL's postmaster forks its
// backends into sessions of their own: killed alone, it leaves them running
// for a moment, able to finish a commit and still attached to its shared
// memory, which a restart then refuses to reuse. The server is frozen
// first so that it neither forks nor restarts children while they die.
func (s *Server) kill(cmd *exec.Cmd, exited chan struct{}) error {
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(time.Minute)
	for {
		pids := s.processesInDir()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if len(pids) == 0 && isDone(exited) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testutil: %s %d on %s (or its processes %v) did not exit after SIGKILL",
				s.name, cmd.Process.Pid, s.Addr, pids)
		}
		// SIGKILL takes effect when each is next scheduled.
		<-time.After(10 * time.Millisecond)
	}
}

// processesInDir lists the live processes, the test's own aside, whose
// working directory is in the server's: the server and what it forked,
// however they regrouped (a zombie has none). Empty without /proc.
func (s *Server) processesInDir() []int {
	dir, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		dir = s.dir
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tail is the last n lines of the file at path, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
