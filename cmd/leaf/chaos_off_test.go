//go:build !chaos

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A release build must not read the chaos test's clock file: anyone who can
// set a server's environment could otherwise step its snowflake clock. The
// check needs a fresh process, because the variable would be read in init,
// before any test runs: the test binary runs itself with the variable set.
func TestReleaseBuildIgnoresChaosClock(t *testing.T) {
	const child = "LEAF_TEST_CHAOS_CLOCK_CHILD"
	if os.Getenv(child) == "1" {
		if clockNow != nil {
			t.Fatal("a release build installed a clock from LEAF_CHAOS_CLOCK_FILE")
		}
		if os.Getenv("LEAF_CHAOS_CLOCK_FILE") == "" {
			t.Fatal("the variable should still be set: only a chaos build consumes it")
		}
		return
	}
	file := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(file, []byte("-1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReleaseBuildIgnoresChaosClock$", "-test.v")
	cmd.Env = append(os.Environ(), child+"=1", "LEAF_CHAOS_CLOCK_FILE="+file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestReleaseBuildIgnoresChaosClock") {
		t.Fatalf("the child did not run the check:\n%s", out)
	}
	if clockNow != nil {
		t.Error("clockNow is set in a release build")
	}
}
