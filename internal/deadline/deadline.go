// Package deadline gives a listener's connections cheap read and write
// deadlines, enforced to within a tick by one goroutine per listener.
//
// Why: fasthttp sets a connection's deadlines on every request (the idle
// timeout, then the read timeout, then the write timeout), each a clock read
// and a runtime timer update under the poller's lock. On the ID routes,
// where the whole request costs a few microseconds of CPU, the three cost
// about a microsecond, 7% of it (measured: scripts/bench.sh's yardstick
// against leaf built without timeouts). Here setting a deadline is one
// atomic store; a janitor compares the deadlines with the clock every tick
// and, for one that has passed, sets the real deadline in the past, so the
// blocked Read or Write fails with os.ErrDeadlineExceeded exactly as it
// would have. The price is precision: a deadline takes effect up to one tick
// late. A deadline already past when it is set (an interrupt) takes effect
// at once.
//
// A connection can also be asked to close gracefully (Linger), which the
// server does after refusing a request it has not read to the end.
package deadline

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener wraps a net.Listener; its connections have coarse deadlines. Its
// janitor stops when it is closed.
type Listener struct {
	net.Listener
	tick time.Duration
	base time.Time    // deadlines are kept as monotonic nanoseconds since base
	now  atomic.Int64 // the janitor's last reading, nanoseconds since base

	mu    sync.Mutex
	conns map[*conn]struct{}

	stop     chan struct{}
	stopOnce sync.Once
}

// Wrap returns ln with coarse deadlines enforced every tick and starts the
// janitor. tick must be positive.
func Wrap(ln net.Listener, tick time.Duration) *Listener {
	if tick <= 0 {
		panic("deadline: tick must be positive")
	}
	l := &Listener{Listener: ln, tick: tick, base: time.Now(), conns: map[*conn]struct{}{}, stop: make(chan struct{})}
	go l.run()
	return l
}

// Accept accepts a connection and tracks it until it is closed.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &conn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[dc] = struct{}{}
	l.mu.Unlock()
	return dc, nil
}

// Close closes the listener and stops the janitor. Connections already
// accepted keep their deadlines only as far as they were enforced: close
// them too.
func (l *Listener) Close() error {
	l.stopOnce.Do(func() { close(l.stop) })
	return l.Listener.Close()
}

// CloseAll closes every connection accepted and not closed yet, at once
// (no lingering), and reports how many it closed: the end of a graceful
// shutdown whose drain ran out of time.
func (l *Listener) CloseAll() int {
	l.mu.Lock()
	conns := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.linger.Store(false)
		_ = c.Close()
	}
	return len(conns)
}

func (l *Listener) run() {
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		now := time.Since(l.base).Nanoseconds()
		l.now.Store(now)
		l.mu.Lock()
		for c := range l.conns {
			c.read.expireIf(c.Conn.SetReadDeadline, now)
			c.write.expireIf(c.Conn.SetWriteDeadline, now)
		}
		l.mu.Unlock()
	}
}

// conn is an accepted connection with coarse deadlines.
type conn struct {
	net.Conn
	l           *Listener
	read, write side
	closeOnce   sync.Once
	linger      atomic.Bool
}

// side is one direction's deadline.
type side struct {
	at atomic.Int64 // nanoseconds since the listener's base; 0: none
	// expired says the real deadline was set in the past by the janitor: a
	// new deadline must clear it. mu orders the janitor's expiry with that
	// clearing.
	expired atomic.Bool
	mu      sync.Mutex
}

// pastDeadline is any time in the past: the real deadline of an expired
// side.
var pastDeadline = time.Unix(1, 0)

// set records a deadline. The store and the expired check pair with
// expireIf's, in the opposite order (sync/atomic is sequentially
// consistent): either the janitor sees the new deadline and does not expire
// it, or this sees that it did and clears the real deadline.
func (s *side) set(l *Listener, real func(time.Time) error, t time.Time) error {
	if t.IsZero() {
		s.at.Store(0)
	} else {
		at := t.Sub(l.base).Nanoseconds()
		if at <= l.now.Load() {
			// Already past, an interrupt: enforced now.
			s.mu.Lock()
			defer s.mu.Unlock()
			s.at.Store(0)
			s.expired.Store(true)
			return real(pastDeadline)
		}
		s.at.Store(at) // > now >= 0: never the 0 of "no deadline"
	}
	if s.expired.Load() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.expired.Load() {
			s.expired.Store(false)
			return real(time.Time{})
		}
	}
	return nil
}

// expireIf sets the real deadline in the past if the recorded one has
// passed by now, and forgets it, so that the next tick does not set it
// again.
func (s *side) expireIf(real func(time.Time) error, now int64) {
	if at := s.at.Load(); at == 0 || at > now {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired.Store(true)
	if at := s.at.Load(); at != 0 && at <= now {
		_ = real(pastDeadline)
		s.at.CompareAndSwap(at, 0) // a deadline set meanwhile stays
		return
	}
	s.expired.Store(false)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	return c.read.set(c.l, c.Conn.SetReadDeadline, t)
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	return c.write.set(c.l, c.Conn.SetWriteDeadline, t)
}

func (c *conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// Lingering bounds a graceful close: how long, and how many bytes, the
// client's unread request may take to drain.
const (
	LingerTimeout = 500 * time.Millisecond
	lingerBytes   = 1 << 20
)

// Linger asks that Close shut the connection down gracefully: send the
// answer's end (FIN), read and discard what the client is still sending, for
// up to LingerTimeout, then close. Why: a server that closes a socket with
// unread data makes the kernel send RST, and a client still writing an
// oversize request then gets "connection reset" instead of the 431 or 413
// it was sent. net/http does the same after such answers.
func (c *conn) Linger() { c.linger.Store(true) }

// Close closes the connection and stops tracking it; if Linger was called,
// the socket is drained and closed in the background.
func (c *conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !first || !c.linger.Load() || !ok {
		return c.Conn.Close()
	}
	if err := cw.CloseWrite(); err != nil {
		return c.Conn.Close()
	}
	// The janitor no longer tracks c: the real deadline, set directly.
	_ = c.Conn.SetReadDeadline(time.Now().Add(LingerTimeout))
	go func() {
		_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
		_ = c.Conn.Close()
	}()
	return nil
}
