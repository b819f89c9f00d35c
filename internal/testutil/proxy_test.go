package testutil

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestProxySwitch moves a proxy from one server to another: the connection
// made before the switch is closed, the next one reaches the new server.
func TestProxySwitch(t *testing.T) {
	a, b := greeter(t, 'a'), greeter(t, 'b')
	p := NewProxy(t, a)
	before := dialGreeting(t, p.Addr(), 'a')
	p.Switch(b)
	if err := before.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := before.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection made before the switch stayed open")
	} else if err == nil {
		t.Fatalf("the connection made before the switch read %d bytes, want it closed", n)
	}
	dialGreeting(t, p.Addr(), 'b')
}

// greeter is the address of a server that writes greeting to each
// connection and then holds it open, as a database server that waits for a
// query does.
func greeter(t *testing.T, greeting byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			if _, err := c.Write([]byte{greeting}); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// dialGreeting connects to addr and checks that the server there greets
// with want; the connection is closed at the test's end.
func dialGreeting(t *testing.T, addr string, want byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1)
	if _, err := c.Read(got); err != nil || got[0] != want {
		t.Fatalf("greeting through the proxy: %q, %v; want %q", got, err, want)
	}
	return c
}
