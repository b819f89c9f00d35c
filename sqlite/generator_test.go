package sqlite_test

import (
	"fmt"
	"testing"

	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
)

// The generator on SQLite: several instances (separate pools on one file,
// like processes), restarts. These were also run on the in-memory store
// that package inmem kept for the generator's tests; they now run here only.

// Three instances and batches of 7, which do not divide the step: batches
// cross range ends.
func TestGeneratorHammer(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	leaftest.HammerSegment(t, opener(testutil.SQLitePath(t)),
		leaftest.Hammer{Instances: 3, Goroutines: 32, Total: total, Step: 100, Batch: 7})
}

func TestGeneratorRestart(t *testing.T) {
	leaftest.RestartSegment(t, opener(testutil.SQLitePath(t)))
}

func TestGeneratorTombstone(t *testing.T) {
	leaftest.TombstoneSegment(t, opener(testutil.SQLitePath(t)))
}

// With and without give-backs.
func TestGeneratorIdleHammer(t *testing.T) {
	for _, giveBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("GiveBack=%v", giveBack), func(t *testing.T) {
			leaftest.HammerIdle(t, opener(testutil.SQLitePath(t)), leaftest.IdleHammer{GiveBack: giveBack})
		})
	}
}

func TestGeneratorPeriodic(t *testing.T) {
	leaftest.PeriodicSegment(t, opener(testutil.SQLitePath(t)))
}

// An opaque tag under three servers sharing one key: unique IDs, all
// decoding back to distinct raw IDs of the row.
func TestGeneratorOpaqueHammer(t *testing.T) {
	leaftest.HammerSegment(t, opener(testutil.SQLitePath(t)),
		leaftest.Hammer{Instances: 3, Goroutines: 16, Total: 100_000, Step: 100, Batch: 10,
			OpaqueBits: 40, OpaqueKey: []byte("0123456789abcdef0123456789abcdef")})
}
