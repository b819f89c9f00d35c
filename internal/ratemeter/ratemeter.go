// Package ratemeter estimates how fast a counter grows, from samples taken
// about once a second, for the monitor page, /readyz and metrics ("IDs/s",
// "buffers run dry in 3s"). The counter itself stays a plain integer on the
// hot path; only the sampler and the readers touch the meter.
package ratemeter

import "time"

// Window is the span the rate is averaged over.
const Window = 10 * time.Second

// size bounds the samples kept: one a second over Window, plus one.
const size = 11

// Meter holds a counter's recent samples. The zero value is ready. It is not
// safe for concurrent use: callers hold the lock that guards the counter.
type Meter struct {
	at  [size]time.Time
	val [size]uint64
	n   int // samples held
	end int // index of the next sample
}

// Sample records the counter's value v at t.
func (m *Meter) Sample(t time.Time, v uint64) {
	m.at[m.end], m.val[m.end] = t, v
	m.end = (m.end + 1) % size
	m.n = min(m.n+1, size)
}

// Rate is the counter's growth per second from the oldest sample within
// Window of t to the live value v at t; 0 with no usable sample, when less
// than 100ms has passed, or when the counter went backwards (it was reset).
func (m *Meter) Rate(t time.Time, v uint64) float64 {
	for k := m.n; k > 0; k-- { // oldest first
		i := (m.end - k + size) % size
		d := t.Sub(m.at[i])
		if d > Window {
			continue
		}
		if d < 100*time.Millisecond || v < m.val[i] {
			return 0
		}
		return float64(v-m.val[i]) / d.Seconds()
	}
	return 0
}
