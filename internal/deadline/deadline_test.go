package deadline

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
)

const tick = 10 * time.Millisecond

// pair returns both ends of a loopback TCP connection, the server's end
// accepted through Wrap.
func pair(t *testing.T) (server net.Conn, client net.Conn, l *Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = Wrap(ln, tick)
	t.Cleanup(func() { l.Close() })
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return server, client, l
}

// pipePair is pair on net.Pipe, for the tests that run in a synctest
// bubble: a pipe's deadlines are timers on the bubble's clock, as the
// janitor's ticker is, and a goroutine blocked on a pipe is durably
// blocked, which synctest.Wait can wait for. A socket's deadlines follow
// the real clock, and a goroutine blocked on one is not durably blocked.
// A pipe has no CloseWrite, so the lingering tests need pair. Call it
// inside the bubble.
func pipePair(t *testing.T) (server net.Conn, client net.Conn, l *Listener) {
	t.Helper()
	s, client := net.Pipe()
	l = Wrap(&pipeListener{conn: s}, tick)
	t.Cleanup(func() { l.Close() })
	t.Cleanup(func() { client.Close() })
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return server, client, l
}

// pipeListener accepts one end of a net.Pipe, once.
type pipeListener struct {
	conn     net.Conn
	accepted bool
}

func (l *pipeListener) Accept() (net.Conn, error) {
	if l.accepted {
		return nil, net.ErrClosed
	}
	l.accepted = true
	return l.conn, nil
}

func (l *pipeListener) Close() error   { return nil }
func (l *pipeListener) Addr() net.Addr { return l.conn.LocalAddr() }

func TestReadDeadlineFires(t *testing.T) {
	server, _, _ := pair(t)
	start := time.Now()
	if err := server.SetReadDeadline(start.Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := server.Read(make([]byte, 1))
	took := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v, want os.ErrDeadlineExceeded", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the error is not a net.Error timeout: %v", err)
	}
	if took < 100*time.Millisecond {
		t.Errorf("the deadline fired after %v, before it was due", took)
	}
}

// A deadline moved later before it fires does not fire at the old time, and
// one that fired stops mattering once a new one is set.
func TestDeadlineMovesAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server, client, _ := pipePair(t)
		start := time.Now()
		server.SetReadDeadline(start.Add(50 * time.Millisecond))
		server.SetReadDeadline(start.Add(2 * time.Second))
		go func() {
			// On the bubble's clock: well past the old deadline and the
			// janitor's next ticks.
			time.Sleep(200 * time.Millisecond)
			client.Write([]byte("a"))
		}()
		buf := make([]byte, 1)
		if _, err := server.Read(buf); err != nil {
			t.Fatalf("Read after the deadline moved: %v (at %v)", err, time.Since(start))
		}

		server.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		if _, err := server.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read = %v, want the deadline", err)
		}
		// A new deadline, or none, lifts the expired one.
		for _, d := range []time.Time{time.Now().Add(2 * time.Second), {}} {
			server.SetReadDeadline(d)
			go client.Write([]byte("b"))
			if _, err := server.Read(buf); err != nil {
				t.Fatalf("Read after a new deadline %v: %v", d, err)
			}
		}
	})
}

// A deadline set in the past interrupts at once, as on a plain connection.
func TestPastDeadlineInterrupts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server, _, l := pipePair(t)
		// Let a tick pass, so that the janitor has read the clock.
		time.Sleep(tick)
		synctest.Wait()
		if l.now.Load() == 0 {
			t.Fatal("the janitor has not read the clock after a tick")
		}
		errc := make(chan error, 1)
		go func() {
			_, err := server.Read(make([]byte, 1))
			errc <- err
		}()
		synctest.Wait() // the Read is blocked
		server.SetReadDeadline(time.Unix(1, 0))
		synctest.Wait() // the Read has returned, if it was interrupted
		select {
		case err := <-errc:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Read = %v, want os.ErrDeadlineExceeded", err)
			}
		default:
			t.Fatal("a past deadline did not interrupt the Read at once")
		}
	})
}

func TestWriteDeadlineFires(t *testing.T) {
	server, _, _ := pair(t)
	server.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	chunk := make([]byte, 1<<20)
	var err error
	// The client never reads: the socket buffers fill, then Write blocks.
	for range 1000 {
		if _, err = server.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write = %v, want os.ErrDeadlineExceeded", err)
	}
}

func TestCloseUntracks(t *testing.T) {
	server, _, l := pair(t)
	count := func() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.conns) }
	if n := count(); n != 1 {
		t.Fatalf("%d tracked, want 1", n)
	}
	server.Close()
	server.Close()
	if n := count(); n != 0 {
		t.Fatalf("%d tracked after Close, want 0", n)
	}
}

// Deadlines that expire over and over, each followed at once by a fresh one
// while data flows and the janitor ticks every millisecond: an operation
// under a fresh deadline must never fail, however the janitor's expiry and
// the reset interleave.
func TestNoSpuriousExpiry(t *testing.T) {
	// On the bubble's clock the janitor's ticks and the pauses below end at
	// the same instants: in every round that pauses, the janitor's expiry
	// and the reset are woken together and race, instead of whenever real
	// time happens to line them up.
	synctest.Test(t, func(t *testing.T) {
		s, client := net.Pipe()
		l := Wrap(&pipeListener{conn: s}, time.Millisecond)
		defer l.Close()
		defer client.Close()
		server, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer server.Close()
		go io.Copy(client, client) // echo; returns when client is closed

		buf := make([]byte, 64)
		for i := range 300 {
			// Due about when the janitor looks: sometimes it expires
			// first, sometimes the reset below wins.
			server.SetDeadline(time.Now().Add(time.Duration(i%3) * time.Millisecond))
			time.Sleep(time.Duration(i%4) * time.Millisecond)
			server.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := server.Write(buf); err != nil {
				t.Fatalf("round %d: Write: %v", i, err)
			}
			if _, err := io.ReadFull(server, buf); err != nil {
				t.Fatalf("round %d: Read: %v", i, err)
			}
		}
	})
}

// A server that answers and closes while the client's request is still
// unread, and the client goes on writing, as an HTTP client sending an
// oversize request does before it reads the answer. With Linger the writes
// succeed and the client reads the whole answer; without it the kernel
// resets the connection and the client's write fails (the control case,
// which shows the test can tell them apart). Go's HTTP client reports that
// write error and drops the answer.
func TestLingerDeliversAnswerDespiteUnreadRequest(t *testing.T) {
	const answer = "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n"
	for _, linger := range []bool{true, false} {
		server, client, _ := pair(t)
		if _, err := client.Write(make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Read(make([]byte, 1024)); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Write([]byte(answer)); err != nil {
			t.Fatal(err)
		}
		if linger {
			server.(interface{ Linger() }).Linger()
		}
		if err := server.Close(); err != nil {
			t.Fatal(err)
		}
		// Paced in real time, on purpose: with Linger the client's writes
		// must keep succeeding over these 100ms (well within
		// LingerTimeout), which no event marks; without it the pauses give
		// the kernel's reset time to arrive, and the loop stops at the
		// first failed write.
		var werr error
		for i := 0; i < 10 && werr == nil; i++ {
			time.Sleep(10 * time.Millisecond)
			_, werr = client.Write(make([]byte, 1024))
		}
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, rerr := io.ReadAll(client)
		switch {
		case linger && (werr != nil || rerr != nil || string(got) != answer):
			t.Errorf("with Linger: write error %v, read %q, %v; want no write error, the answer and EOF", werr, got, rerr)
		case !linger && werr == nil:
			t.Errorf("without Linger every write succeeded: the control case no longer resets")
		}
	}
}

// A lingering close keeps the socket open for the client's late bytes, and
// closes it after LingerTimeout against a client that neither stops sending
// nor closes. Seen from the client, which keeps sending a byte (at each
// poll of testutil.WaitFor, at most 20ms apart): its writes succeed while
// the server drains, and fail (reset) once the socket is closed. The
// server's socket is left alone: a deadline set on it here would end the
// drain itself.
func TestLingerIsBounded(t *testing.T) {
	server, client, _ := pair(t)
	server.(interface{ Linger() }).Linger()
	start := time.Now()
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > LingerTimeout/2 {
		t.Errorf("Close blocked for %v; the drain belongs in the background", took)
	}
	var err error
	testutil.WaitFor(t, "a write to the lingering socket to fail", func() bool {
		_, err = client.Write([]byte{1})
		return err != nil
	})
	took := time.Since(start)
	switch {
	case took > LingerTimeout+3*time.Second:
		t.Fatalf("the lingering socket still took writes %v after Close", took)
	case took < LingerTimeout/2:
		t.Fatalf("the socket closed %v after Close (%v): it did not linger", took, err)
	}
}

// TestCloseAll: after the listener is closed (its janitor stopped, as at a
// shutdown), CloseAll closes the connections still open, lingering ones
// too: a read blocked on one returns at once, and the client sees the end.
func TestCloseAll(t *testing.T) {
	server, client, l := pair(t)
	server.(*conn).Linger()
	l.Close()
	read := make(chan error, 1)
	go func() {
		_, err := server.Read(make([]byte, 1))
		read <- err
	}()
	if n := l.CloseAll(); n != 1 {
		t.Fatalf("CloseAll closed %d connections, want 1", n)
	}
	if err := <-read; err == nil {
		t.Fatal("a read on a connection CloseAll closed succeeded")
	}
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the client read %v, want EOF", err)
	}
	if n := l.CloseAll(); n != 0 {
		t.Fatalf("a second CloseAll closed %d, want 0", n)
	}
}
