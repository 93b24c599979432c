package testsupport

// The spawned redis-server of a Redis (KindRedisServer): one process per
// test, on a free port, reaped by its own goroutine.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisProc is one redis-server process; its goroutine reaps it.
type redisProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *redisProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// startSpawned starts redis-server in dir on a free port. dir must be made
// by tb.TempDir before this call registers its kill cleanup, so the process
// dies before its directory is removed (cleanups run last-in first-out).
func (r *Redis) startSpawned(tb testing.TB, binary, dir string) {
	tb.Helper()
	r.Kind, r.binary = KindRedisServer, binary
	r.dir = dir
	r.logPath = filepath.Join(r.dir, "redis-server.log")
	tb.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.proc != nil {
			r.proc.kill()
			r.proc = nil
		}
		if tb.Failed() {
			tb.Logf("testsupport: redis-server log %s:\n%s", r.logPath, tailFile(r.logPath, redisLogTail))
		}
	})
	var errs []error
	for range redisSpawnAttempts {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testsupport: find a free port: %v", err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := r.spawn(addr)
		if err == nil {
			r.Addr, r.proc = addr, p
			return
		}
		errs = append(errs, err)
	}
	tb.Fatalf("testsupport: start redis-server: %v\nlog %s:\n%s",
		errors.Join(errs...), r.logPath, tailFile(r.logPath, redisLogTail))
}

// respawn starts a new redis-server on r.Addr, retrying while the port is
// still taken, for about redisReadyWithin.
func (r *Redis) respawn(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(redisReadyWithin)
	for {
		p, err := r.spawn(r.Addr)
		if err == nil {
			r.proc = p
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testsupport: restart redis-server on %s: %v\nlog %s:\n%s",
				r.Addr, err, r.logPath, tailFile(r.logPath, redisLogTail))
		}
		time.Sleep(redisPoll)
	}
}

// spawn starts redis-server on addr and waits until it answers as itself.
func (r *Redis) spawn(addr string) (*redisProc, error) {
	_, port, _ := net.SplitHostPort(addr)
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "--- testsupport: %s starting redis-server on %s\n", time.Now().Format(time.RFC3339Nano), addr)
	persist := []string{"--appendonly", "no"}
	if r.aof {
		persist = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	args := append([]string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--save", "",
		"--dir", r.dir,
	}, persist...)
	cmd := exec.Command(r.binary, args...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &redisProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := waitRedisReady(addr, cmd.Process.Pid, p.done); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// waitRedisReady polls addr until INFO server names pid as process_id (so a
// server that already held the port is not taken for ours), the process exits,
// or redisReadyWithin passes.
func waitRedisReady(addr string, pid int, exited <-chan struct{}) error {
	want := strconv.Itoa(pid)
	timeout := time.NewTimer(redisReadyWithin)
	defer timeout.Stop()
	var last error
	for {
		info, err := probeInfoServer(addr)
		switch {
		case err != nil:
			last = err
		case infoField(info, "process_id") == want:
			return nil
		default:
			last = fmt.Errorf("%s is held by another server (process_id %s)", addr, infoField(info, "process_id"))
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited before answering (port taken?)", addr)
		case <-timeout.C:
			return fmt.Errorf("redis-server on %s did not answer within %v: %v", addr, redisReadyWithin, last)
		case <-time.After(redisPoll):
		}
	}
}

// probeInfoServer sends INFO server on a plain connection and returns the
// reply. It does not use a go-redis client: a pool that failed to dial waits
// about a second before it dials again, and logs every failure.
func probeInfoServer(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return "", err
	}
	br := bufio.NewReader(conn)
	head, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	head = strings.TrimRight(head, "\r\n")
	size, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
	if !strings.HasPrefix(head, "$") || err != nil || size < 0 {
		return "", fmt.Errorf("INFO server answered %q", head) // e.g. -LOADING
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// infoField returns the value of name in an INFO reply, or "".
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+":"); ok {
			return v
		}
	}
	return ""
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailFile returns the last n lines of the file at path, or why it cannot.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
