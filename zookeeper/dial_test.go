package zookeeper

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestHandshakeGivesUp: a server that accepts the connection but never
// answers the handshake (one still starting after a restart, on a busy
// host) is given up on after the session timeout, as the Java client does,
// not after ten receive timeouts (40s by default), while every call of the
// registry queued behind it and the lease ran out. The client's own
// deadline for the handshake is an hour here: only the cap ends the read.
func TestHandshakeGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never answered
		}
	}()
	conn, err := handshakeDialer(50*time.Millisecond)("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Cleanup(func() { (<-accepted).Close() })
	if err := conn.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 4))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read = %v, want the deadline exceeded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read still waits after 30s: the hour's deadline was not capped")
	}
}
