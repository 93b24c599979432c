package testsupport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The values of [Redis.Kind].
const (
	// KindEnv is the server named by REDIS_URL, shared with other tests.
	KindEnv = "env"
	// KindRedisServer is a redis-server process spawned for one test.
	KindRedisServer = "redis-server"
	// KindMiniredis is an in-process miniredis, used when redis-server is not
	// on PATH.
	KindMiniredis = "miniredis"
)

const (
	// redisReadyWithin bounds the wait for a spawned redis-server to answer;
	// it starts in milliseconds, so this only catches a broken binary or host.
	redisReadyWithin = 5 * time.Second
	// redisSpawnAttempts is how many free ports a first start tries: another
	// process may take a port between our probe and the server's bind.
	redisSpawnAttempts = 5
	// redisPoll is the pause between readiness probes and between restart
	// attempts on a port that is still taken.
	redisPoll = 10 * time.Millisecond
	// redisCleanupWithin bounds deleting a namespace's keys from REDIS_URL.
	redisCleanupWithin = 10 * time.Second
	// redisLogTail is how many log lines a failure report shows.
	redisLogTail = 30
)

// Redis is a Redis for one test. Make it with [StartRedis] or
// [StartOwnRedis]; its methods are safe for concurrent use.
type Redis struct {
	// Addr is "host:port". It never changes, not even across Restart, so
	// clients reconnect to the new server by themselves.
	Addr string
	// Namespace is fresh per call ("t" and 16 hex digits); tests prefix every
	// key with it (see Key), so tests sharing a REDIS_URL never meet.
	Namespace string
	// Kind says which Redis this is: KindEnv, KindRedisServer or
	// KindMiniredis.
	Kind string
	// Mini is the in-process server when Kind is KindMiniredis (for SetTime,
	// FastForward, direct inspection), else nil.
	Mini *miniredis.Miniredis

	url     string // KindEnv: REDIS_URL
	binary  string // KindRedisServer: path of redis-server
	dir     string // KindRedisServer: working directory, holds the log (and the AOF)
	logPath string // KindRedisServer: the servers' stdout and stderr
	aof     bool   // KindRedisServer: AOF on, fsync on every write (StartOwnRedisAOF)
	// snapshots counts the RDB snapshots kept aside (Snapshot).
	snapshots int

	mu       sync.Mutex
	proc     *redisProc // KindRedisServer: the running server; nil when stopped
	miniDown bool       // KindMiniredis: stopped
}

// redisConfig says which Redis a start may use; tests build one directly to
// force a path (the zero value forces miniredis).
type redisConfig struct {
	url    string // REDIS_URL; "" when unset or not to be used
	binary string // path of redis-server; "" when not installed
}

// StartRedis gives a test a Redis and a fresh namespace, preferring:
//   - REDIS_URL when set (parsed by [redis.ParseURL]); when the test ends, the
//     namespace's keys are deleted (SCAN MATCH <ns>* then UNLINK, or DEL on
//     servers without UNLINK). Restart, Stop and Start skip the test.
//   - else a private redis-server when the binary is on PATH, spawned on a free
//     127.0.0.1 port without persistence (--save "" --appendonly no), its log
//     in tb.TempDir(); killed and reaped when the test ends.
//   - else miniredis, and tb.Log says so.
//
// It fails the test when the chosen server does not answer within about five
// seconds (a spawned server is retried on another port if its port was taken).
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	return startRedis(tb, redisConfig{url: os.Getenv("REDIS_URL"), binary: lookRedisServer()})
}

// StartOwnRedis gives a test a private redis-server, never REDIS_URL, so the
// test may crash it with Restart or take it away with Stop and Start. When the
// binary is not on PATH it uses miniredis, and tb.Log says so.
func StartOwnRedis(tb testing.TB) *Redis {
	tb.Helper()
	return startRedis(tb, redisConfig{binary: lookRedisServer()})
}

// StartOwnRedisAOF gives a test a private redis-server that persists every
// write before answering it: AOF on with appendfsync always (and no RDB
// snapshots), its data directory in tb.TempDir(). Unlike the other Redis
// kinds its data survives: [Redis.Stop] (kill -9) then [Redis.Start], or
// [Redis.Restart], or [Redis.Shutdown] (graceful) then Start, bring back a
// server on the same address with every write it acknowledged. It skips the
// test when redis-server is not on PATH (miniredis cannot persist).
func StartOwnRedisAOF(tb testing.TB) *Redis {
	tb.Helper()
	bin := lookRedisServer()
	if bin == "" {
		tb.Skip("testsupport: redis-server is not on PATH; a persistent Redis needs it")
	}
	r := &Redis{Namespace: newNamespace(tb), aof: true}
	r.startSpawned(tb, bin, tb.TempDir())
	return r
}

// lookRedisServer returns the path of redis-server on PATH, or "".
func lookRedisServer() string {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	return path
}

func startRedis(tb testing.TB, cfg redisConfig) *Redis {
	tb.Helper()
	r := &Redis{Namespace: newNamespace(tb)}
	switch {
	case cfg.url != "":
		r.startEnv(tb, cfg.url)
	case cfg.binary != "":
		r.startSpawned(tb, cfg.binary, tb.TempDir())
	default:
		tb.Log("testsupport: redis-server is not on PATH; using miniredis")
		r.startMini(tb)
	}
	return r
}

// newNamespace returns "t" and 16 random hex digits: no glob metacharacters,
// and no namespace is a prefix of another, so SCAN MATCH <ns>* is exact.
func newNamespace(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("testsupport: namespace: %v", err)
	}
	return "t" + hex.EncodeToString(b[:])
}

// Client returns a new client, with its own connection pool, to this Redis,
// closed when the test ends. Each simulated game server should get its own.
// opts change the options after the defaults (REDIS_URL's, or just Addr) are
// set, e.g. func(o *redis.Options) { o.MaxRetries = -1 }. A client of the
// shared Redis (REDIS_URL) refuses, with ErrSharedRedis and without sending
// them, the commands that would change what other tests on it share: SCRIPT
// FLUSH, FLUSHALL, CONFIG SET and the like (see sharedOnly).
func (r *Redis) Client(tb testing.TB, opts ...func(*redis.Options)) redis.UniversalClient {
	tb.Helper()
	opt := &redis.Options{Addr: r.Addr}
	if r.Kind == KindEnv {
		var err error
		if opt, err = redis.ParseURL(r.url); err != nil {
			tb.Fatalf("testsupport: REDIS_URL: %v", err)
		}
	}
	for _, o := range opts {
		o(opt)
	}
	c := redis.NewClient(opt)
	if r.Kind == KindEnv {
		c.AddHook(sharedGuard{})
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Key returns Namespace and parts joined by ":" (Key("user", "42") is
// "<ns>:user:42"); with no parts it returns Namespace.
func (r *Redis) Key(parts ...string) string {
	if len(parts) == 0 {
		return r.Namespace
	}
	return r.Namespace + ":" + strings.Join(parts, ":")
}

// Restart crashes the server and starts an empty one on the same address, as
// a crash and restart without persistence would: the data and the script cache
// are gone and a redis-server has a new run_id. A server from
// [StartOwnRedisAOF] is killed (-9) and comes back with its data. Existing clients reconnect by
// themselves; their first command may fail. It returns once the new server
// answers. A stopped server is just started. On REDIS_URL it skips the test.
//
// For miniredis it flushes the data and scripts, closes it and restarts the
// same object (its SetTime clock is kept).
func (r *Redis) Restart(tb testing.TB) {
	tb.Helper()
	if r.Kind == KindEnv {
		tb.Skip("testsupport: cannot restart REDIS_URL")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked(tb)
	r.startLocked(tb)
}

// Stop makes the server unreachable until Start: a redis-server is killed
// (SIGKILL) and reaped, a miniredis is closed. The data directory is kept, so
// a server from [StartOwnRedisAOF] comes back with every acknowledged write. Commands fail with a
// connection error meanwhile. Stopping a stopped server does nothing. On
// REDIS_URL it skips the test.
func (r *Redis) Stop(tb testing.TB) {
	tb.Helper()
	if r.Kind == KindEnv {
		tb.Skip("testsupport: cannot stop REDIS_URL")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked(tb)
}

// Start brings a stopped server back on the same address, empty (for
// miniredis too, so that every kind behaves the same: Stop then Start is a
// crash and restart with an outage in between); a server from
// [StartOwnRedisAOF] loads its AOF instead. It returns once the server
// answers. Starting a running server does nothing. On REDIS_URL it skips the
// test.
//
// A go-redis client whose dials failed while the server was down waits up to
// about a second before it dials again, so its first commands after Start
// may still fail; retry them (or use a new client).
func (r *Redis) Start(tb testing.TB) {
	tb.Helper()
	if r.Kind == KindEnv {
		tb.Skip("testsupport: cannot start REDIS_URL")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startLocked(tb)
}

func (r *Redis) stopLocked(tb testing.TB) {
	tb.Helper()
	switch r.Kind {
	case KindRedisServer:
		if r.proc != nil {
			r.proc.kill()
			r.proc = nil
		}
	case KindMiniredis:
		if !r.miniDown {
			r.crashMini(tb)
			r.miniDown = true
		}
	}
}

func (r *Redis) startLocked(tb testing.TB) {
	tb.Helper()
	switch r.Kind {
	case KindRedisServer:
		if r.proc == nil {
			r.respawn(tb)
		}
	case KindMiniredis:
		if r.miniDown {
			r.restartMini(tb)
			r.miniDown = false
		}
	}
}

// ---- REDIS_URL

func (r *Redis) startEnv(tb testing.TB, url string) {
	tb.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("testsupport: REDIS_URL: %v", err)
	}
	r.Kind, r.url, r.Addr = KindEnv, url, opt.Addr
	c := redis.NewClient(opt)
	tb.Cleanup(func() {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), redisCleanupWithin)
		defer cancel()
		if err := deleteMatching(ctx, c, r.Namespace+"*"); err != nil {
			tb.Logf("testsupport: delete keys of namespace %s from REDIS_URL: %v", r.Namespace, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), redisReadyWithin)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("testsupport: REDIS_URL %s: %v", opt.Addr, err)
	}
}

// deleteMatching deletes every key matching the SCAN pattern.
func deleteMatching(ctx context.Context, c *redis.Client, match string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				if err := c.Del(ctx, keys...).Err(); err != nil {
					return fmt.Errorf("del: %w", err)
				}
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// ---- miniredis

func (r *Redis) startMini(tb testing.TB) {
	tb.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		tb.Fatalf("testsupport: start miniredis: %v", err)
	}
	tb.Cleanup(m.Close)
	r.Kind, r.Mini, r.Addr = KindMiniredis, m, m.Addr()
}

// crashMini empties and closes the miniredis, as a crash without persistence
// would leave it.
func (r *Redis) crashMini(tb testing.TB) {
	tb.Helper()
	// The script cache has no direct API; a real crash loses it too, and
	// code under test must survive NOSCRIPT.
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialerRetries: 1, DisableIdentity: true})
	err := c.ScriptFlush(context.Background()).Err()
	_ = c.Close()
	if err != nil {
		tb.Fatalf("testsupport: miniredis SCRIPT FLUSH: %v", err)
	}
	r.Mini.FlushAll()
	r.Mini.Close()
	// Close cancels Mini.Ctx for good, which would end every blocking
	// command (BLPOP, XREAD BLOCK) at once after the restart; give it a new
	// one while no server runs.
	r.Mini.Lock()
	r.Mini.Ctx, r.Mini.CtxCancel = context.WithCancel(context.Background())
	r.Mini.Unlock()
}

// restartMini starts the closed miniredis on its old port, retrying while the
// port is still taken.
func (r *Redis) restartMini(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(redisReadyWithin)
	for {
		err := r.Mini.Restart()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testsupport: restart miniredis on %s: %v", r.Addr, err)
		}
		time.Sleep(redisPoll)
	}
}

// RestartKeepData restarts the server as one with persistence would: it
// saves its data and exits, and a new process on the same address loads it.
// The new redis-server has a new run_id and an empty script cache; whatever
// the data held (records, the presence hash with its old beats) survives.
// For miniredis the data is kept and only the scripts are dropped (it has no
// run id). On REDIS_URL it skips the test.
func (r *Redis) RestartKeepData(tb testing.TB) {
	tb.Helper()
	if r.Kind == KindEnv {
		tb.Skip("testsupport: cannot restart REDIS_URL")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.Kind {
	case KindMiniredis:
		c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DisableIdentity: true})
		_ = c.ScriptFlush(context.Background()).Err()
		_ = c.Close()
		r.Mini.Close()
		r.Mini.Lock()
		r.Mini.Ctx, r.Mini.CtxCancel = context.WithCancel(context.Background())
		r.Mini.Unlock()
		r.restartMini(tb)
	case KindRedisServer:
		if r.proc == nil {
			tb.Fatal("testsupport: RestartKeepData on a stopped server")
		}
		r.shutdownLocked(tb, true)
		r.respawn(tb)
		// The dump has been loaded; a later crash restart must start empty.
		_ = os.Remove(filepath.Join(r.dir, "dump.rdb"))
	}
}

// Shutdown stops a spawned redis-server gracefully: SHUTDOWN, which for a
// server from [StartOwnRedisAOF] fsyncs the AOF before the process exits. It
// returns once the process is reaped; Start brings the server back. A
// stopped server is left alone. Other kinds skip the test.
func (r *Redis) Shutdown(tb testing.TB) {
	tb.Helper()
	if r.Kind != KindRedisServer {
		tb.Skipf("testsupport: Shutdown needs a spawned redis-server, not %s", r.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.shutdownLocked(tb, false)
	}
}

// shutdownLocked sends SHUTDOWN (SHUTDOWN SAVE when save) to the running
// server and waits until it is reaped, killing it if it does not exit.
// r.mu must be held.
func (r *Redis) shutdownLocked(tb testing.TB, save bool) {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DisableIdentity: true})
	if save {
		_ = c.ShutdownSave(context.Background()).Err() // the connection drops as it exits
	} else {
		_ = c.Shutdown(context.Background()).Err()
	}
	_ = c.Close()
	p := r.proc
	r.proc = nil
	select {
	case <-p.done:
	case <-time.After(redisReadyWithin):
		p.kill()
		tb.Fatal("testsupport: redis-server did not exit on SHUTDOWN")
	}
}

// StartCopy starts a second redis-server, on a free port, over a copy of
// the data directory of this stopped server (Stop or Shutdown first): a test
// reads exactly what the server had persisted, which its own clients cannot
// reach and change. This server may be started again at once. The copy has
// the same Namespace and persistence and is killed when the test ends. Only
// for a spawned redis-server; other kinds skip the test.
func (r *Redis) StartCopy(tb testing.TB) *Redis {
	tb.Helper()
	if r.Kind != KindRedisServer {
		tb.Skipf("testsupport: StartCopy needs a spawned redis-server, not %s", r.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		tb.Fatal("testsupport: StartCopy of a running redis-server (Stop or Shutdown it first)")
	}
	dir := tb.TempDir()
	if err := os.CopyFS(dir, os.DirFS(r.dir)); err != nil {
		tb.Fatalf("testsupport: copy the data of redis-server %s: %v", r.Addr, err)
	}
	c := &Redis{Namespace: r.Namespace, aof: r.aof}
	c.startSpawned(tb, r.binary, dir)
	return c
}
