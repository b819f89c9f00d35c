//go:build chaos

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// offsetOf is how far clock runs from time.Now, to the millisecond.
func offsetOf(clock func() time.Time) time.Duration {
	return time.Until(clock()).Round(time.Millisecond)
}

// waitOffset polls clock until it is want off time.Now.
func waitOffset(t *testing.T, clock func() time.Time, want time.Duration) {
	t.Helper()
	testutil.WaitForState(t, fmt.Sprintf("the clock to run %v off", want), func() (bool, string) {
		got := offsetOf(clock)
		return got == want, fmt.Sprintf("clock offset %v", got)
	})
}

func TestChaosClockFollowsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clock")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("-3s\n")
	const poll = 10 * time.Millisecond
	clock := chaosClock(file, poll)
	if got := offsetOf(clock); got != -3*time.Second {
		t.Fatalf("initial offset %v, want -3s: the file is read before the clock is returned", got)
	}
	write("250ms")
	waitOffset(t, clock, 250*time.Millisecond)
	write("not a duration")
	// That nothing changes is the point: the clock shows no sign of having
	// read the file, so it is given five of its polls to go wrong.
	time.Sleep(5 * poll)
	if got := offsetOf(clock); got != 250*time.Millisecond {
		t.Errorf("after a bad file the offset is %v, want the previous 250ms", got)
	}
	write("")
	waitOffset(t, clock, 0)
	write("-1s")
	waitOffset(t, clock, -time.Second)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitOffset(t, clock, 0)
}

// A chaos build started with the variable installs the clock and tells serve
// the variable is known, so it is not reported as an unknown LEAF_* name. init
// runs before any test, so the test binary runs itself with it set.
func TestChaosBuildInstallsClock(t *testing.T) {
	const child = "LEAF_TEST_CHAOS_CLOCK_CHILD"
	if os.Getenv(child) == "1" {
		if clockNow == nil {
			t.Fatal("a chaos build started with " + envChaosClockFile + " did not install its clock")
		}
		if got := offsetOf(clockNow); got != -time.Hour {
			t.Errorf("clock offset %v, want the file's -1h", got)
		}
		if os.Getenv(envChaosClockFile) == "" {
			t.Error(envChaosClockFile + " was taken out of the environment")
		}
		if unknown := config.UnknownEnv(os.Environ(), knownEnv()...); len(unknown) > 0 {
			t.Errorf("serve would warn about %v", unknown)
		}
		return
	}
	file := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(file, []byte("-1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, config.EnvPrefix) {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChaosBuildInstallsClock$", "-test.v")
	cmd.Env = append(env, child+"=1", envChaosClockFile+"="+file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestChaosBuildInstallsClock") {
		t.Fatalf("the child did not run the check:\n%s", out)
	}
}
