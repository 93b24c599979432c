package testsupport

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// quiet is how long a test listens for bytes that must not arrive: a
// forwarded line arrives in well under a millisecond on loopback.
const quiet = 200 * time.Millisecond

// startEcho runs a line echo server on a free port until the test ends.
func startEcho(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echoClient is one connection through the proxy.
type echoClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialEcho(tb testing.TB, addr string) *echoClient {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return &echoClient{conn: c, r: bufio.NewReader(c)}
}

func (e *echoClient) send(tb testing.TB, line string) {
	tb.Helper()
	if _, err := io.WriteString(e.conn, line+"\n"); err != nil {
		tb.Fatalf("write: %v", err)
	}
}

// recv reads one line within d.
func (e *echoClient) recv(d time.Duration) (string, error) {
	_ = e.conn.SetReadDeadline(time.Now().Add(d))
	s, err := e.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func (e *echoClient) roundTrip(tb testing.TB, line string) {
	tb.Helper()
	e.send(tb, line)
	got, err := e.recv(5 * time.Second)
	if err != nil || got != line {
		tb.Fatalf("echo of %q = %q, %v", line, got, err)
	}
}

// expectSilence checks that nothing arrives within quiet.
func (e *echoClient) expectSilence(tb testing.TB) {
	tb.Helper()
	got, err := e.recv(quiet)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("read while blackholed = %q, %v; want a timeout", got, err)
	}
}

// expectReset checks that the connection is dead: a read fails at once
// (RST or EOF), not by timeout.
func (e *echoClient) expectReset(tb testing.TB) {
	tb.Helper()
	got, err := e.recv(5 * time.Second)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("read on a refused connection = %q, %v; want reset or EOF", got, err)
	}
}

// expectRefused checks that a new connection to addr is reset: the dial
// itself fails (the RST came before connect returned), or the first read does.
func expectRefused(tb testing.TB, addr string) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			tb.Fatalf("dial %s timed out; want a reset", addr)
		}
		return
	}
	defer c.Close()
	(&echoClient{conn: c, r: bufio.NewReader(c)}).expectReset(tb)
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	c := dialEcho(t, p.Addr)
	c.roundTrip(t, "hello")
	c.roundTrip(t, strings.Repeat("x", 100_000)) // larger than one buffer
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns = %d, want 1", n)
	}
}

func TestProxyBlackholeHoldsUntilHeal(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	old := dialEcho(t, p.Addr)
	old.roundTrip(t, "before")

	p.Blackhole()
	p.Blackhole() // idempotent
	old.send(t, "held")
	old.expectSilence(t)
	fresh := dialEcho(t, p.Addr) // accepted, but nothing crosses
	fresh.send(t, "fresh")
	fresh.expectSilence(t)

	p.Heal()
	for _, c := range []struct {
		c    *echoClient
		want string
	}{{old, "held"}, {fresh, "fresh"}} {
		if got, err := c.c.recv(5 * time.Second); err != nil || got != c.want {
			t.Fatalf("after Heal: %q, %v; want the held %q", got, err, c.want)
		}
	}
	old.roundTrip(t, "after")
	dialEcho(t, p.Addr).roundTrip(t, "new")
}

func TestProxyRefuse(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	old := dialEcho(t, p.Addr)
	old.roundTrip(t, "before")

	p.Refuse()
	old.expectReset(t)
	expectRefused(t, p.Addr)

	p.Heal()
	dialEcho(t, p.Addr).roundTrip(t, "healed")
}

func TestProxyRefuseDropsHeldData(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	c := dialEcho(t, p.Addr)
	c.roundTrip(t, "before")
	p.Blackhole()
	c.send(t, "held")
	p.Refuse()
	c.expectReset(t)
	p.Heal()
	dialEcho(t, p.Addr).roundTrip(t, "healed")
}

func TestProxyDeadTarget(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p := StartProxy(t, dead)
	for p.Addr == dead { // the proxy got the freed port: it would dial itself
		p = StartProxy(t, dead)
	}
	expectRefused(t, p.Addr)
}

func TestProxyStop(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	c := dialEcho(t, p.Addr)
	c.roundTrip(t, "before")
	p.Blackhole()
	c.send(t, "held") // a pipe waits at the gate: Stop must still end it
	p.Stop()
	p.Stop()
	c.expectReset(t)
	if conn, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
		_ = conn.Close()
		t.Fatal("dial after Stop succeeded")
	}
}
