package testsupport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisProcess is one redis-server process of a multi-process topology: a
// master of a [RedisCluster], the primary or a replica of a
// [ReplicatedRedis]. Its methods are safe for concurrent use.
type RedisProcess struct {
	// Addr is "127.0.0.1:port"; it never changes.
	Addr string

	name    string // for logs: "cluster master 1", "replica 0"
	logPath string

	mu     sync.Mutex
	proc   *osProc // nil once killed
	paused bool
}

// Client returns a new client of this process alone, closed when the test
// ends. It follows neither cluster redirects (a cluster master answers MOVED
// for a key it does not serve) nor a failover. opts change the options after
// Addr is set.
func (p *RedisProcess) Client(tb testing.TB, opts ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	c := p.dial(opts...)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// dial returns a new client of this process alone; the caller closes it.
func (p *RedisProcess) dial(opts ...func(*redis.Options)) *redis.Client {
	opt := &redis.Options{Addr: p.Addr}
	for _, o := range opts {
		o(opt)
	}
	return redis.NewClient(opt)
}

// do sends one command on a connection of its own and returns its error,
// naming the process and the command.
func (p *RedisProcess) do(ctx context.Context, args ...any) error {
	rdb := p.dial()
	defer rdb.Close()
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("%s (%s): %v: %w", p.name, p.Addr, args, err)
	}
	return nil
}

// Running reports whether the process runs (a paused one does; a killed one
// does not).
func (p *RedisProcess) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc != nil && !p.proc.exited()
}

// kill sends SIGKILL and reaps the process; killing a dead one does nothing.
func (p *RedisProcess) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		p.proc.kill()
		p.proc, p.paused = nil, false
	}
}

// pause stops the process with SIGSTOP; pausing a paused one does nothing.
func (p *RedisProcess) pause(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		tb.Fatalf("testsupport: pause %s (%s): it was killed", p.name, p.Addr)
	}
	if p.paused {
		return
	}
	if err := p.proc.pause(); err != nil {
		tb.Fatalf("testsupport: pause %s (%s): %v", p.name, p.Addr, err)
	}
	p.paused = true
}

// resume continues a paused process with SIGCONT; resuming a running one
// does nothing.
func (p *RedisProcess) resume(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		tb.Fatalf("testsupport: resume %s (%s): it was killed", p.name, p.Addr)
	}
	if !p.paused {
		return
	}
	if err := p.proc.resume(); err != nil {
		tb.Fatalf("testsupport: resume %s (%s): %v", p.name, p.Addr, err)
	}
	p.paused = false
}

// logTail returns the end of the process's log, for failure messages.
func (p *RedisProcess) logTail() string {
	return fmt.Sprintf("%s log %s:\n%s", p.name, p.logPath, tailFile(p.logPath, redisLogTail))
}

// spawnRedisProcess starts a redis-server named name (for logs) on a free
// 127.0.0.1 port, in its own temporary directory without persistence, with
// the arguments extra returns (called once per attempt, so it may pick ports
// of its own). It returns once the server answers as itself; another port
// is tried when the chosen one was taken. The process is killed and reaped
// when the test ends, and its log shown when the test failed.
func spawnRedisProcess(tb testing.TB, binary, name string, extra func() ([]string, error)) *RedisProcess {
	tb.Helper()
	// TempDir before the kill cleanup, so the process dies before its
	// directory is removed (cleanups run last-in first-out).
	dir := tb.TempDir()
	p := &RedisProcess{name: name, logPath: filepath.Join(dir, "redis-server.log")}
	tb.Cleanup(func() {
		p.kill()
		if tb.Failed() {
			tb.Logf("testsupport: %s", p.logTail())
		}
	})
	var errs []error
	for range redisSpawnAttempts {
		proc, addr, err := tryRedisProcess(binary, dir, p.logPath, extra)
		if err == nil {
			p.Addr, p.proc = addr, proc
			return p
		}
		errs = append(errs, err)
	}
	tb.Fatalf("testsupport: start %s: %v\n%s", name, errors.Join(errs...), p.logTail())
	return nil
}

// tryRedisProcess makes one attempt of spawnRedisProcess.
func tryRedisProcess(binary, dir, logPath string, extra func() ([]string, error)) (*osProc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", fmt.Errorf("find a free port: %w", err)
	}
	more, err := extra()
	if err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
	}, more...)
	proc, err := startOSProc(binary, dir, logPath, args...)
	if err != nil {
		return nil, "", err
	}
	if err := waitRedisReady(addr, proc.pid(), proc.done); err != nil {
		proc.kill()
		return nil, "", err
	}
	return proc, addr, nil
}

// lookPathOrSkip returns the path of the named binary, or skips the test,
// saying what needed it.
func lookPathOrSkip(tb testing.TB, binary, what string) string {
	tb.Helper()
	path, err := exec.LookPath(binary)
	if err != nil {
		tb.Skipf("testsupport: %s is not on PATH; %s needs it", binary, what)
	}
	return path
}
