//go:build chaos

package main

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// envChaosClockFile names a file holding a Go duration ("-3s", "0s") that a
// chaos build adds to the snowflake generator's clock. The chaos test
// (internal/chaos) rewrites it to step one server's clock back and forth while
// the server runs; only a binary built with -tags chaos reads it, so a release
// binary cannot be talked into lying about the time.
const envChaosClockFile = "LEAF_CHAOS_CLOCK_FILE"

// chaosClockPoll is how often the offset file is re-read: well under the
// seconds-long steps the chaos test makes, so the step starts when the test
// says it does.
const chaosClockPoll = 50 * time.Millisecond

func init() {
	path := os.Getenv(envChaosClockFile)
	if path == "" {
		return
	}
	// Read here, before main, not through the configuration: serve is told
	// not to warn about it.
	buildEnv = append(buildEnv, envChaosClockFile)
	clockNow = chaosClock(path, chaosClockPoll)
}

// chaosClock returns a clock that runs offset ahead of time.Now (behind, for
// a negative offset), the offset being re-read from path every poll for the
// life of the process. A missing or empty file means no offset; a file that
// does not parse keeps the offset it had, so a half-written file cannot make
// the clock jump.
func chaosClock(path string, poll time.Duration) func() time.Time {
	var offset atomic.Int64
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				offset.Store(0)
			}
			return
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			offset.Store(0)
			return
		}
		if d, err := time.ParseDuration(s); err == nil {
			offset.Store(int64(d))
		}
	}
	read()
	go func() {
		t := time.NewTicker(poll)
		defer t.Stop()
		for range t.C {
			read()
		}
	}()
	// Add keeps the monotonic reading and shifts it too, so durations the
	// generator measures on this clock (its lease deadline) move with the
	// step. A real NTP step leaves the monotonic clock alone; the chaos test
	// never steps the clock while the registry is down, where that would
	// matter.
	return func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
}
