// Package reqlog is what the transports (httpapi, grpcapi) share for
// answering errors: request IDs, which tie an answer to the log line that
// holds its cause, and a budget that bounds those lines.
//
// Why: an answer carries a message written for the client, never the cause
// (driver text, hosts and ports, Go types); the cause goes to the log. The
// request ID, in both, lets an operator go from a client's report to the
// cause. The budget exists because the failures worth a log line (a store
// down, the clock gone back) fail every request at once: a line per request
// would turn an outage into a flood of identical lines.
package reqlog

import (
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"
)

// NewID returns a new request ID: 16 lowercase hex digits of randomness, so
// that IDs from different servers behind one load balancer do not collide in
// practice and reveal nothing (no counter to guess traffic from).
func NewID() string {
	var b [8]byte
	v := rand.Uint64()
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// Budget lets at most Lines log lines through per Window; the rest are
// dropped and counted, and the next line let through reports how many were
// dropped before it. The zero value lets every line through. It is safe for
// concurrent use.
type Budget struct {
	// Lines is how many lines a window lets through; 0 means no limit.
	Lines int
	// Window is the length of a window; 0 means no limit.
	Window time.Duration

	mu      sync.Mutex
	start   time.Time // the current window's start
	used    int       // lines let through in the current window
	dropped int       // lines dropped since the last line let through
}

// Allow reports whether a line may be written now and, when it may, how
// many lines were dropped since the last one written, for the line to say
// so.
func (b *Budget) Allow() (ok bool, dropped int) {
	if b.Lines <= 0 || b.Window <= 0 {
		return true, 0
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.start) >= b.Window || now.Before(b.start) {
		b.start, b.used = now, 0
	}
	if b.used >= b.Lines {
		b.dropped++
		return false, 0
	}
	b.used++
	dropped, b.dropped = b.dropped, 0
	return true, dropped
}
