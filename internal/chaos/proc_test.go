package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a child process the test may start, kill and start again (same
// command, same log file). It is always killed by its own PID: other
// instances of the same programs on this machine belong to other tests.
type proc struct {
	name    string
	path    string
	args    []string
	env     []string // nil: the test's environment
	dir     string
	logPath string // stdout and stderr of every run, appended

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current run has been reaped
	waitErr error
	starts  int
}

// newProc makes a process logging to dir/NAME.log and registers a cleanup
// that kills it if it still runs.
func newProc(t *testing.T, dir, name, path string, args ...string) *proc {
	p := &proc{name: name, path: path, args: args, dir: dir, logPath: filepath.Join(dir, name+".log")}
	t.Cleanup(p.kill)
	return p
}

// start runs the command once more. A header line in the log separates runs.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.exited) {
		return fmt.Errorf("%s: already running as pid %d", p.name, p.cmd.Process.Pid)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child holds its own copy
	p.starts++
	fmt.Fprintf(f, "=== chaos: %s run %d at %s\n", p.name, p.starts, time.Now().Format("15:04:05.000"))
	cmd := exec.Command(p.path, p.args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.Stdout, cmd.Stderr = f, f
	// If the test binary dies without running its cleanups (a timeout
	// panic), the kernel kills the children instead of leaving a database
	// and three servers running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if p.cmd == cmd {
			p.waitErr = err
		}
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// current is the last run and its exit channel.
func (p *proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// exitErr is how the last run ended; nil while it runs.
func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// signal sends sig to the current run and waits up to wait for it to exit;
// past that it sends SIGKILL. A process that already exited is left alone.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) error {
	cmd, exited := p.current()
	if cmd == nil || isClosed(exited) {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("%s did not exit within %v of %v; killed", p.name, wait, sig)
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *proc) kill() { _ = p.signal(syscall.SIGKILL, time.Minute) }

// logTail is the end of the process's log, at most n lines.
func (p *proc) logTail(n int) string { return fileTail(p.logPath, n) }

func fileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// waitReady polls ready every 50ms until it succeeds, ctx ends or the
// process exits; the error says which, with the log's tail for an exit.
func (p *proc) waitReady(ctx context.Context, ready func(context.Context) error) error {
	_, exited := p.current()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited (%v) before it was ready: %w\n%s", p.name, p.exitErr(), errExited, indent(p.logTail(8)))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v)", p.name, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var errExited = errors.New("process exited")

func indent(s string) string { return "\t" + strings.ReplaceAll(s, "\n", "\n\t") }
