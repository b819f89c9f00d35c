//go:build race

package ratelimit

// raceEnabled: the race detector adds allocations and slows everything
// tenfold, so allocation counts and heap sizes mean nothing under it.
const raceEnabled = true
