package testsupport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/logtest"

	mrand "math/rand/v2"

	"github.com/alicebob/miniredis/v2"

	"github.com/ckernel/playerdata/datadriver"

	"github.com/redis/go-redis/v9"
)

// Cluster is several game servers (Nodes) sharing one Redis and one bus on
// one virtual clock, for tests of the whole protocol with injected faults.
//
// Create it inside a testing/synctest bubble (synctest.Test): time there is
// virtual and advances only when every goroutine of the bubble is blocked,
// so a 15 s LockWait takes no real time and no test sleeps to let
// goroutines run. The Redis is a miniredis running inside the bubble (its
// connections are in-memory pipes), so its TIME, and with it every Lua
// script's clock, follows virtual time and the project's real scripts run.
// The bus is a MemBus: a nats.go connection keeps a goroutine blocked on
// the network, which would stop virtual time.
//
// The plain mock clock (clock.NewMock) has known traps that this avoids: a
// timer created after Add never fires, a slow ticker reader drops ticks,
// and two goroutines calling Add race.
type Cluster struct {
	tb    testing.TB
	Mini  *miniredis.Miniredis
	Bus   *MemBus
	Seed  uint64
	Namer func(n int) string // JobID of the n-th server started (default "server-<n>")

	mu      sync.Mutex
	servers map[string]*Server
	started int
	observe []func(job string, call ScriptCall)
}

// Server is one game server of a Cluster.
type Server struct {
	JobID string
	Node  *datadriver.Node
	Redis redis.UniversalClient
	// PresenceRedis is the client of the Node's presence beats and reads,
	// with the same hooks as Redis.
	PresenceRedis redis.UniversalClient
	Faults        *FaultHook
	Logs          *LogBuffer

	cluster *Cluster
	crashed bool
}

// ClusterOption tunes a Cluster.
type ClusterOption func(*Cluster)

// WithSeed makes the Nodes' lock tokens and jitter follow seed, so that a run
// can be replayed.
func WithSeed(seed uint64) ClusterOption { return func(c *Cluster) { c.Seed = seed } }

// NewCluster starts an empty cluster; call it inside a synctest bubble.
// Everything it starts stops at tb's cleanup.
func NewCluster(tb testing.TB, opts ...ClusterOption) *Cluster {
	tb.Helper()
	c := &Cluster{
		tb:      tb,
		Mini:    miniredis.NewMiniRedis(),
		Bus:     NewMemBus(nil),
		servers: make(map[string]*Server),
		Namer:   func(n int) string { return fmt.Sprintf("server-%d", n) },
	}
	for _, o := range opts {
		o(c)
	}
	tb.Cleanup(func() {
		c.mu.Lock()
		servers := make([]*Server, 0, len(c.servers))
		for _, s := range c.servers {
			servers = append(servers, s)
		}
		c.mu.Unlock()
		for _, s := range servers {
			if !s.crashed {
				s.Faults.Clear()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_ = s.Node.Close(ctx)
				cancel()
			}
			_ = s.Redis.Close()
			_ = s.PresenceRedis.Close()
		}
		c.Bus.Close()
		c.Mini.Close()
	})
	return c
}

// Client returns a new go-redis client on the cluster's Redis.
//
// Its pool is large on purpose: a go-redis client that waits for a free
// connection takes a timer from a package-wide sync.Pool, which may hold a
// timer made in another synctest bubble, and the runtime stops the test
// ("select on synctest channel from outside bubble"). Connections are
// opened lazily, so a large pool costs nothing until used.
func (c *Cluster) Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:0", // never dialled: the Dialer below is; no name lookup in the bubble
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			conn, err := c.Mini.Dial()
			if err != nil {
				return nil, err
			}
			return newWriteBehindConn(conn), nil
		},
		PoolSize: 4096,
	})
	return rdb
}

// Observe registers f to see every Lua script call any server of the
// cluster makes, with its answer, after it ran.
func (c *Cluster) Observe(f func(job string, call ScriptCall)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe = append(c.observe, f)
}

// Start starts a new server; cfg may adjust its NodeConfig (timings, a
// fixed JobID). It returns once the Node runs.
func (c *Cluster) Start(cfg func(*datadriver.NodeConfig)) *Server {
	c.tb.Helper()
	c.mu.Lock()
	c.started++
	job := c.Namer(c.started)
	n := c.started
	c.mu.Unlock()

	s := &Server{JobID: job, Redis: c.Client(c.tb), Faults: &FaultHook{}, Logs: &LogBuffer{}, cluster: c}
	s.Redis.AddHook(s.Faults)
	s.Redis.AddHook(&observer{c: c, job: job})
	// Beats go through a client of their own, with the same hooks, so that
	// faults on the server's calls reach its beats as they did.
	prdb := c.Client(c.tb)
	prdb.AddHook(s.Faults)
	prdb.AddHook(&observer{c: c, job: job})
	s.PresenceRedis = prdb
	nc := datadriver.NodeConfig{
		JobID:         job,
		Redis:         s.Redis,
		PresenceRedis: prdb,
		Bus:           c.Bus.Endpoint(job),
		Namespace:     "sim",
		Logger:        slog.New(slog.NewTextHandler(s.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Entropy:       mrand.NewChaCha8(seedBytes(c.Seed, uint64(n))),
	}
	if cfg != nil {
		cfg(&nc)
	}
	s.JobID = nc.JobID
	node, err := datadriver.NewNode(context.Background(), nc)
	if err != nil {
		c.tb.Fatalf("cluster: start %s: %v", job, err)
	}
	s.Node = node
	c.mu.Lock()
	c.servers[s.JobID] = s
	c.mu.Unlock()
	return s
}

// Server returns the server named job (nil if none).
func (c *Cluster) Server(job string) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[job]
}

// Crash stops s as a process death would: from now on nothing it sends
// reaches Redis or the bus, and its goroutines stop without releasing any
// lock (its presence field stays until it expires).
func (s *Server) Crash() {
	s.cluster.mu.Lock()
	if s.crashed {
		s.cluster.mu.Unlock()
		return
	}
	s.crashed = true
	s.cluster.mu.Unlock()
	s.Faults.SetBefore(func(context.Context, redis.Cmder) error { return ErrInjected })
	s.Faults.Abort() // calls held by a pause or a partition die with the process
	s.cluster.Bus.Disconnect(s.JobID)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.Node.Close(ctx)
}

// Pause stops s answering as a paused process (SIGSTOP) would look from
// outside: its Redis calls hang, unsent, until Resume (or until their own
// context ends), and bus messages to and from it are held until Resume.
//
// Inside a synctest bubble this is a pause of everything s exchanges with
// the world, not of s itself: its timers still fire and its goroutines
// still run (a lease deadline is seen on time, not late as after a real
// SIGCONT). faulttest stops a real process.
func (s *Server) Pause() {
	s.Faults.Hold()
	s.cluster.Bus.Pause(s.JobID)
}

// Resume ends a Pause: the held Redis calls go out (those whose context has
// not ended) and the held messages are delivered in order.
func (s *Server) Resume() {
	s.Faults.Release()
	s.cluster.Bus.Resume(s.JobID)
}

// Crashed reports whether s was crashed.
func (s *Server) Crashed() bool {
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return s.crashed
}

// RedisRestart restarts the cluster's Redis as a failover to a replica that
// never had the presence hash would: the hash is gone (every server's beat
// with it) and so is the script cache; the profile records survive.
func (c *Cluster) RedisRestart(ctx context.Context) error {
	rdb := c.Client(c.tb)
	defer rdb.Close()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		return err
	}
	keys, err := rdb.Keys(ctx, "*CKPresence").Result()
	if err != nil || len(keys) == 0 {
		return err
	}
	return rdb.Del(ctx, keys...).Err()
}

// seedBytes derives a ChaCha8 seed for the n-th server from the run's seed.
func seedBytes(seed, n uint64) [32]byte {
	var b [32]byte
	r := mrand.New(mrand.NewPCG(seed, n))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// LogBuffer is a concurrency-safe log sink whose lines a test can read
// (logtest.Buffer, the project's one such type).
type LogBuffer = logtest.Buffer

// ScriptCall is one call of one of the project's Lua scripts as a server
// made it, with its answer.
type ScriptCall struct {
	Script string // its name (see Identify)
	Keys   []string
	Args   []string
	Val    any   // the answer
	Err    error // nil when the script ran
}

// observer is the hook that reports script calls to the cluster's
// observers.
type observer struct {
	c   *Cluster
	job string
}

var _ redis.Hook = (*observer)(nil)

func (o *observer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (o *observer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		o.report(cmd, err)
		return err
	}
}

func (o *observer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			o.report(cmd, cmd.Err())
		}
		return err
	}
}

func (o *observer) report(cmd redis.Cmder, err error) {
	in, ok := Identify(cmd)
	if !ok {
		return
	}
	o.c.mu.Lock()
	fs := o.c.observe
	o.c.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	call := ScriptCall{Script: in.Script, Keys: in.Keys, Args: in.Args, Err: err}
	if c, ok := cmd.(*redis.Cmd); ok && err == nil {
		call.Val = c.Val()
	}
	for _, f := range fs {
		f(o.job, call)
	}
}
