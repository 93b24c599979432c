package presencecore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/logtest"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// testRedis is a Redis for one test: a real redis-server child process when one
// is on PATH, else miniredis. (A shared helper package will replace this.)
type testRedis struct {
	addr   string
	real   bool
	port   int
	cmd    *exec.Cmd            // real only
	exited chan struct{}        // real only: closed when cmd has exited
	mr     *miniredis.Miniredis // fallback only
}

// startRedis starts a Redis that lives until the test ends. Set
// PRESENCE_TEST_REDIS=miniredis to use miniredis even where redis-server is
// installed.
func startRedis(tb testing.TB) *testRedis {
	tb.Helper()
	_, err := exec.LookPath("redis-server")
	if os.Getenv("PRESENCE_TEST_REDIS") == "miniredis" {
		err = errors.New("PRESENCE_TEST_REDIS=miniredis")
	}
	if err != nil {
		tb.Logf("no redis-server (%v); using miniredis", err)
		mr := miniredis.RunT(tb)
		return &testRedis{addr: mr.Addr(), mr: mr}
	}
	r := &testRedis{real: true}
	for range 3 { // a free port can be taken between probe and bind: retry
		r.port = freePort(tb)
		if err = r.spawn(tb); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	tb.Cleanup(r.kill)
	return r
}

// spawn starts redis-server on r.port and waits until it answers PING.
func (r *testRedis) spawn(tb testing.TB) error {
	tb.Helper()
	r.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
	cmd := exec.Command("redis-server", "--save", "", "--appendonly", "no",
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1")
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	rdb := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := rdb.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			r.cmd = nil
			return errors.New("redis-server exited at start (port taken?)")
		default:
		}
		if time.Now().After(deadline) {
			r.kill()
			return err
		}
		time.Sleep(10 * time.Millisecond) // polling an external process, not scheduling
	}
}

// kill stops the real server and waits for it to exit.
func (r *testRedis) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// restart replaces the Redis process: all data gone and, for a real server, a
// new run id. miniredis cannot change its (empty) run id, so there it only
// empties the data.
func (r *testRedis) restart(tb testing.TB) {
	tb.Helper()
	if !r.real {
		tb.Log("miniredis: restart simulated by FLUSHALL (run id stays empty)")
		r.mr.FlushAll()
		return
	}
	r.kill()
	if err := r.spawn(tb); err != nil {
		tb.Fatalf("restart redis-server on port %d: %v", r.port, err)
	}
}

// client returns a client of r closed at the end of the test. Retries are off
// so a failure shows up at once.
func (r *testRedis) client(tb testing.TB, hooks ...redis.Hook) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// closedPortClient returns a client pointed at a port nobody listens on.
func closedPortClient(tb testing.TB, hooks ...redis.Hook) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(tb))), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, DialerRetries: 1,
	})
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// testKey returns a presence key under a random namespace.
func testKey(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return KeyFor("test-" + hex.EncodeToString(b))
}

// newTestPresence builds a Presence closed at the end of the test; a nil
// Logger discards.
func newTestPresence(tb testing.TB, rdb redis.UniversalClient, cfg Config) *Presence {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p, err := New(rdb, cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return p
}

// eventually polls cond until it holds or within passes.
func eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// logBuffer collects slog text output from any goroutine.
type logBuffer struct{ logtest.Buffer }

func (b *logBuffer) logger() *slog.Logger { return b.Logger(slog.LevelDebug) }

var errInjected = errors.New("injected fault")

// faultHook counts script calls and fails or blocks commands on demand.
type faultHook struct {
	fail    atomic.Bool
	block   atomic.Bool   // hold each command until its ctx ends
	hang    atomic.Bool   // hold each command until unhang, whatever its ctx (a client that ignores contexts)
	entered chan struct{} // receives (non-blocking) when a blocked or hung command waits
	evalSHA atomic.Int64  // EVALSHA calls finished: one per script Run

	mu      sync.Mutex
	release chan struct{} // closed by unhang
}

func newFaultHook() *faultHook {
	return &faultHook{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// unhang lets every hung command go on to Redis, and stops hanging new ones.
func (h *faultHook) unhang() {
	h.hang.Store(false)
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.release)
	h.release = make(chan struct{})
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			defer h.evalSHA.Add(1)
		}
		if h.hang.Load() {
			h.mu.Lock()
			release := h.release
			h.mu.Unlock()
			select {
			case h.entered <- struct{}{}:
			default:
			}
			<-release
			ctx = context.WithoutCancel(ctx) // it goes on as if nothing told it to stop
		}
		if h.block.Load() {
			select {
			case h.entered <- struct{}{}:
			default:
			}
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		if h.fail.Load() {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}
