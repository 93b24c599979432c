//go:build linux

package testsupport

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

//go:embed clockshim/clockshim.c
var clockShimSource string

// SteppableRedis is a redis-server whose wall clock a test can step while
// it runs, as an NTP correction or an operator's `date -s` would step the
// host's: whatever Redis reads from its wall clock follows the shift (the
// TIME command, the TIME its Lua scripts read, key expiry, and in Redis
// 7.0 the timeouts of blocking commands too), while CLOCK_MONOTONIC, which
// Redis uses for its event loop and latency figures, is left alone. Make it with
// [StartRedisSteppable]; its methods are safe for concurrent use.
//
// The shift comes from an LD_PRELOAD library over clock_gettime
// (CLOCK_REALTIME, CLOCK_REALTIME_COARSE), gettimeofday and time, built
// for the test with the system C compiler. It reads the offset from a file
// it maps shared, so a Step is seen by the server's very next clock read.
type SteppableRedis struct {
	*RedisProcess
	// Namespace is fresh per call ("t" and 16 hex digits), as StartRedis
	// gives; tests prefix their keys with it (see Key).
	Namespace string

	mu     sync.Mutex
	offset *int64 // mapped from the shim's offset file, nanoseconds
	total  time.Duration
}

// StartRedisSteppable starts a private redis-server (no persistence, a free
// 127.0.0.1 port) whose wall clock starts true and moves by every
// [SteppableRedis.Step]. The shim is compiled into tb.TempDir() with gcc
// (or $CC). It skips the test when gcc or redis-server is not on PATH; the
// server is killed when the test ends.
func StartRedisSteppable(tb testing.TB) *SteppableRedis {
	tb.Helper()
	redisBin := lookPathOrSkip(tb, "redis-server", "StartRedisSteppable")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	ccPath := lookPathOrSkip(tb, cc, "StartRedisSteppable (it builds an LD_PRELOAD clock shim)")
	dir := tb.TempDir()
	shim, err := buildClockShim(ccPath, dir)
	if err != nil {
		tb.Fatalf("testsupport: %v", err)
	}
	offsetPath := filepath.Join(dir, "clock-offset")
	offset, err := mapOffsetFile(tb, offsetPath)
	if err != nil {
		tb.Fatalf("testsupport: clock offset file: %v", err)
	}
	// redis-server under the shim, started through a script that execs it:
	// the process id stays the server's, which the readiness probe checks.
	wrapper := filepath.Join(dir, "redis-server-steppable")
	script := fmt.Sprintf("#!/bin/sh\nLD_PRELOAD=%s CLOCKSHIM_FILE=%s exec %s \"$@\"\n",
		shellQuote(shim), shellQuote(offsetPath), shellQuote(redisBin))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		tb.Fatalf("testsupport: write %s: %v", wrapper, err)
	}
	p := spawnRedisProcess(tb, wrapper, "steppable redis", func() ([]string, error) { return nil, nil })
	return &SteppableRedis{RedisProcess: p, Namespace: newNamespace(tb), offset: offset}
}

// buildClockShim compiles the shim into dir and returns the library's path.
func buildClockShim(cc, dir string) (string, error) {
	src := filepath.Join(dir, "clockshim.c")
	if err := os.WriteFile(src, []byte(clockShimSource), 0o644); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "clockshim.so")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the clock shim with %s: %v\n%s", cc, err, out)
	}
	return lib, nil
}

// mapOffsetFile creates the 8-byte offset file (zero) and maps it shared
// for writing; it is unmapped when the test ends.
func mapOffsetFile(tb testing.TB, path string) (*int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(8); err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	// Unmapped after the server is killed: cleanups run last-in first-out,
	// and spawnRedisProcess registers its kill after this.
	tb.Cleanup(func() { _ = syscall.Munmap(mem) })
	return (*int64)(unsafe.Pointer(&mem[0])), nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Step moves the server's wall clock by d from where it is now: forward
// when d > 0, back when d < 0. The server's next clock read sees it.
func (r *SteppableRedis) Step(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total += d
	atomic.StoreInt64(r.offset, int64(r.total))
}

// Offset is the sum of every Step so far: how far the server's wall clock
// is from the host's.
func (r *SteppableRedis) Offset() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Key returns Namespace and parts joined by ":", as [Redis.Key] does.
func (r *SteppableRedis) Key(parts ...string) string {
	return strings.Join(append([]string{r.Namespace}, parts...), ":")
}
