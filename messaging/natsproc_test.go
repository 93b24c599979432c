package messaging

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// natsProcess is a nats-server process for one test, which the test can
// kill (SIGKILL) and start again on the same port. (testsupport has a
// cluster of these, but importing it would make this package's tests build
// every package testsupport builds on, datadriver included.) Its methods
// are for the test goroutine.
type natsProcess struct {
	binary, port string
	proc         *exec.Cmd
	exited       chan struct{} // closed once proc is reaped
	out          *syncBuffer   // the current process's output
}

// startNATSProcess starts nats-server on a free 127.0.0.1 port and returns
// once it greets clients; it is killed when the test ends. The test is
// skipped when nats-server is not on PATH.
func startNATSProcess(tb testing.TB) *natsProcess {
	tb.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		tb.Skip("nats-server not on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	p := &natsProcess{binary: bin, port: port, out: &syncBuffer{}}
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("nats-server output:\n%s", p.out)
		}
	})
	p.Restart(tb)
	return p
}

// URL is the client URL of the server.
func (p *natsProcess) URL() string { return "nats://127.0.0.1:" + p.port }

// Kill kills the server with SIGKILL and reaps it; its clients see their
// TCP connection drop. Killing a killed server does nothing.
func (p *natsProcess) Kill() {
	if p.proc == nil {
		return
	}
	_ = p.proc.Process.Kill()
	<-p.exited
	p.proc = nil
}

// Restart starts the server again on its port (killing it first if it
// runs) and returns once it greets clients.
func (p *natsProcess) Restart(tb testing.TB) {
	tb.Helper()
	p.Kill()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := p.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nats-server on port %s: %v\n%s", p.port, err, p.out)
		}
		time.Sleep(20 * time.Millisecond) // the old process's port may be held a moment
	}
}

// start starts one process and polls its port until it greets a client.
func (p *natsProcess) start() error {
	p.out = &syncBuffer{}
	cmd := exec.Command(p.binary, "-a", "127.0.0.1", "-p", p.port)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var last error
	for range 500 {
		select {
		case <-exited:
			return fmt.Errorf("exited before it was ready (port taken?): %v", last)
		default:
		}
		if last = greets(p.port); last == nil {
			p.proc, p.exited = cmd, exited
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("not ready: %v", last)
}

// greets reports whether a NATS server on port sends its INFO line.
func greets(port string) error {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("greeted with %.40q", line)
	}
	return nil
}
