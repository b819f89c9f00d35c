package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a real database server, for
// outage tests: Down cuts every connection and refuses new ones, Stall keeps
// connections open but stops passing bytes (a server that hangs), Up lets
// traffic through again, Switch moves it to another server (a failover). The
// database itself is never touched.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	flowing *sync.Cond // broadcast when down or stalled changes
	target  string
	// switches counts Switch calls, so that a connection dialled to the
	// former target while a Switch happened is closed, not kept.
	switches uint64
	down     bool
	stalled  bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port) and stops it at test cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.flowing = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port, to put in a DSN instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Down closes every proxied connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.flowing.Broadcast()
}

// Stall stops passing bytes on every connection, old and new, until Up: the
// database seems to hang.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// Switch sends new connections to target (host:port) from now on and closes
// every existing one, as a virtual IP moving to another host does: clients
// see their connections drop and reconnect, to the new server. A test
// promotes a replica with it. Down and Stall are kept as they are.
func (p *Proxy) Switch(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	p.switches++
	for c := range p.conns {
		c.Close()
	}
}

// Up lets connections through again.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.down, p.stalled = false, false
	p.flowing.Broadcast()
	p.mu.Unlock()
}

// waitFlowing blocks while the proxy is stalled; false means it went down.
func (p *Proxy) waitFlowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.stalled && !p.down {
		p.flowing.Wait()
	}
	return !p.down
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Down()
	p.wg.Wait()
}

// track adds c to the connections that Down and Switch close, unless the
// proxy is down or has switched since the caller read switches (a
// connection to the former target); it reports whether it did.
func (p *Proxy) track(c net.Conn, switches uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.switches != switches {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// route is where a new connection goes, and the Switch count it belongs to.
func (p *Proxy) route() (string, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target, p.switches
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		target, switches := p.route()
		if !p.track(client, switches) {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", target)
		if err != nil || !p.track(server, switches) {
			if server != nil {
				server.Close()
			}
			p.untrack(client)
			continue
		}
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && (!p.waitFlowing() || writeAll(dst, buf[:n]) != nil) {
			break
		}
		if err != nil {
			break
		}
	}
	p.untrack(dst)
	p.untrack(src)
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}
