package testsupport

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// proxyDialTimeout bounds the proxy's dial of its target for one accepted
// connection; a target that does not answer by then gets the client's
// connection reset, as a dead backend would.
const proxyDialTimeout = time.Second

// proxyMode is what a Proxy does with traffic.
type proxyMode int

const (
	modeForward   proxyMode = iota // copy bytes both ways
	modeBlackhole                  // keep sockets open, forward nothing
	modeRefuse                     // reset every connection
)

// Proxy is a TCP proxy between a test's clients and one target, with fault
// switches: [Proxy.Blackhole], [Proxy.Refuse], [Proxy.Heal]. Make it with
// [StartProxy]; its methods are safe for concurrent use. Point the code under
// test at Addr instead of the target.
//
// Blackholed data is held, not dropped: while the proxy is blackholed it
// stops reading from both sides, so what a peer sends waits in the kernel's
// socket buffers (and then in the peer's, whose writes block) exactly as
// behind a stuck switch where TCP keeps retransmitting. Heal lets the held
// bytes through on connections still open, so a command sent during the
// partition may still reach the target afterwards: the late write a fencing
// token must refuse. A chunk already past the switch when Blackhole is
// called (a packet on the wire) is still delivered.
type Proxy struct {
	// Addr is the proxy's "127.0.0.1:port". It never changes.
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every pipe

	mu     sync.Mutex
	mode   proxyMode
	gate   chan struct{} // closed while forwarding; open (blocking) while blackholed
	conns  map[*proxyConn]struct{}
	closed bool
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	client, server *net.TCPConn
	once           sync.Once
	done           chan struct{} // closed when the pair is closed
}

// close closes both sides once; reset sends RST instead of FIN.
func (c *proxyConn) close(reset bool) {
	c.once.Do(func() {
		if reset {
			_ = c.client.SetLinger(0)
			_ = c.server.SetLinger(0)
		}
		_ = c.client.Close()
		_ = c.server.Close()
		close(c.done)
	})
}

// StartProxy starts a proxy to target ("host:port") on a free 127.0.0.1
// port, forwarding. It is stopped when the test ends (Stop).
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testsupport: proxy listen: %v", err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{
		Addr:   ln.Addr().String(),
		target: target,
		ln:     ln,
		gate:   gate,
		conns:  make(map[*proxyConn]struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Stop)
	return p
}

// Blackhole keeps every connection open and accepts new ones, but forwards
// nothing either way until Heal; what is sent meanwhile is held (see
// [Proxy]). A client with read timeouts sees them expire; one without hangs.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = modeBlackhole
	select {
	case <-p.gate: // forwarding: shut the gate
		p.gate = make(chan struct{})
	default:
	}
}

// Refuse resets every open connection (both sides get an RST) and resets
// each new one as soon as it is accepted, until Heal: what a crashed host or
// a firewall that rejects does. Held data of a blackhole is discarded.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.mode = modeRefuse
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	for _, c := range conns {
		c.close(true)
	}
}

// Heal forwards again: new connections work, and connections a blackhole
// kept open deliver what they held and go on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = modeForward
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Stop closes the listener and every connection and waits for the proxy's
// goroutines. It is idempotent; the test's cleanup calls it.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		c.close(false)
	}
	p.wg.Wait()
}

// Conns reports how many client connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// takeConnsLocked empties the connection set and returns what it held.
func (p *Proxy) takeConnsLocked() []*proxyConn {
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	clear(p.conns)
	return conns
}

// accept runs until the listener is closed.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE, an aborted handshake)
		}
		client := conn.(*net.TCPConn)
		p.mu.Lock()
		refuse, closed := p.mode == modeRefuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			_ = client.SetLinger(0)
			_ = client.Close()
			continue
		}
		// Dial on its own goroutine, so a slow target never stalls accepts.
		p.wg.Add(1)
		go p.connect(client)
	}
}

// connect dials the target for one client and starts the two pipes.
func (p *Proxy) connect(client *net.TCPConn) {
	defer p.wg.Done()
	sc, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	c := &proxyConn{client: client, server: sc.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.mode == modeRefuse {
		p.mu.Unlock()
		c.close(true)
		return
	}
	p.conns[c] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipe(c, c.client, c.server)
	go p.pipe(c, c.server, c.client)
}

// pipe copies src to dst, waiting at the gate before every write, until
// either side fails or the pair is closed; then it closes the pair.
func (p *Proxy) pipe(c *proxyConn, src, dst *net.TCPConn) {
	defer p.wg.Done()
	defer func() {
		c.close(false)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitGate(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitGate blocks while the proxy is blackholed; false when the pair was
// closed meanwhile.
func (p *Proxy) waitGate(c *proxyConn) bool {
	for {
		p.mu.Lock()
		g := p.gate
		p.mu.Unlock()
		select {
		case <-c.done:
			return false
		case <-g:
		}
		p.mu.Lock()
		open := p.gate == g // not blackholed again since it opened
		p.mu.Unlock()
		if open {
			return true
		}
	}
}
