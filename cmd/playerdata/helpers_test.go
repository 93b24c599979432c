package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// Fast presence timings for servers a test crashes: a crash reads stopped
// about fastTTL after the last beat. The program reads with --presence-ttl
// fastTTL, as an operator passes the servers' PresenceTTL.
const (
	fastBeat = 50 * time.Millisecond
	fastTTL  = 400 * time.Millisecond
)

// testEnv is a Redis deployment with a fresh namespace, and the flags that
// point the program at it.
type testEnv struct {
	url     string
	ns      string
	rdb     redis.UniversalClient                     // the test's own client
	client  func(tb testing.TB) redis.UniversalClient // another client, closed with the test
	cluster *testsupport.RedisCluster                 // nil on one Redis
}

// newTestEnv starts a Redis for the test (testsupport.StartRedis).
func newTestEnv(t *testing.T) testEnv {
	t.Helper()
	noEnvRedisURL := os.Getenv(envRedis)
	r := testsupport.StartRedis(t)
	url := "redis://" + r.Addr
	if r.Kind == testsupport.KindEnv {
		url = noEnvRedisURL
	}
	client := func(tb testing.TB) redis.UniversalClient { return r.Client(tb) }
	return testEnv{url: url, ns: r.Namespace, rdb: client(t), client: client}
}

// newClusterEnv is a fresh namespace on the Redis Cluster c, which the
// program reaches through the plain URL of its second master (any node
// does, as with redis-cli -c).
func newClusterEnv(t *testing.T, c *testsupport.RedisCluster) testEnv {
	t.Helper()
	var b [4]byte
	_, _ = crand.Read(b[:])
	client := func(tb testing.TB) redis.UniversalClient { return c.Client(tb) }
	return testEnv{url: "redis://" + c.Addrs[1], ns: c.Namespace + "-" + hex.EncodeToString(b[:]), rdb: client(t),
		client: client, cluster: c}
}

// args is cmd with --redis and --namespace of the env, then extra.
func (e testEnv) args(cmd string, extra ...string) []string {
	return append([]string{cmd, "--redis", e.url, "--namespace", e.ns}, extra...)
}

// rk is the record key of driver/key in the env's namespace.
func (e testEnv) rk(driver, key string) string { return record.Key(e.ns, driver, key) }

// serverOpts are the knobs of a test server.
type serverOpts struct {
	presenceKey string // NodeConfig.PresenceKey ("" for the default)
	fast        bool   // fastBeat / fastTTL presence
	natsURL     string // NATS for handoff requests and notifications ("" for none)
	// historyEvery is Config.HistoryEvery (0 for the default, 1 h).
	historyEvery time.Duration
	// onMessage is Config.OnMessage (nil: messages wait in the inbox).
	onMessage func(d *profile, m datadriver.Message) error
	// migrations are Config.Migrations.
	migrations []datadriver.Migration
	// requestKey is NodeConfig.RequestKey (nil: messages unauthenticated).
	requestKey []byte
	// presenceShards is NodeConfig.PresenceShards (0 for the default, 1).
	presenceShards int
	// maxMessageAttempts is Config.MaxMessageAttempts (0 for the default).
	maxMessageAttempts int
}

// testServer is one game server: a real Node with its own Redis client,
// and a PlayerData driver.
type testServer struct {
	job     string
	node    *datadriver.Node
	players *datadriver.Driver[profile]
	rdb     redis.UniversalClient
}

// startServer starts a server named job; it is closed when the test ends.
func (e testEnv) startServer(t *testing.T, job string, o serverOpts) *testServer {
	t.Helper()
	rdb := e.client(t)
	cfg := datadriver.NodeConfig{JobID: job, Redis: rdb, PresenceRedis: rdb, Namespace: e.ns, PresenceKey: o.presenceKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RequestKey: o.requestKey, PresenceShards: o.presenceShards}
	if o.fast {
		cfg.Beat, cfg.PresenceTTL = fastBeat, fastTTL
	}
	if o.natsURL != "" {
		nc, err := nats.Connect(o.natsURL, nats.Name(job))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close) // after the node's Close (cleanups run last first)
		cfg.NATS = nc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, err := datadriver.NewNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = node.Close(ctx) // after a crash it fails: its client is closed
	})
	players, err := datadriver.NewDriver(node, datadriver.Config[profile]{Name: "PlayerData", Autosave: -1, LockWait: time.Second,
		HistoryEvery: o.historyEvery, OnMessage: o.onMessage, Migrations: o.migrations, MaxMessageAttempts: o.maxMessageAttempts})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{job: job, node: node, players: players, rdb: rdb}
}

// hold joins key on s and saves coins into it: s holds its lock.
func (s *testServer) hold(t *testing.T, key string, coins int) *datadriver.Profile[profile] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := s.players.Join(ctx, key)
	if err != nil {
		t.Fatalf("%s joins %s: %v", s.job, key, err)
	}
	if err := p.Update(func(d *profile) { d.Coins = coins }); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatalf("%s saves %s: %v", s.job, key, err)
	}
	return p
}

// crash stops s as a crashed process stops: its Redis client (which its
// presence beats on too) is closed, so it beats no more and releases
// nothing.
func (s *testServer) crash() { _ = s.rdb.Close() }

// waitPresence waits until job reads want in the presence hash key (read
// with fastTTL, as the program is told), failing the test after 10 s.
func (e testEnv) waitPresence(t *testing.T, key, job string, want presencecore.Status) {
	t.Helper()
	p, err := presencecore.New(e.rdb, presencecore.Config{Key: key, JobID: "test-reader", TTL: fastTTL, Beat: fastBeat})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		rd := p.Read(ctx, job)
		if rd.Status == want {
			return
		}
		// Wake when the reading can change: the beat's expiry, or the
		// grace after a restart; else poll one beat later.
		wait := max(rd.ExpiresIn, fastBeat)
		select {
		case <-ctx.Done():
			t.Fatalf("%s never read %s (last %s, %v)", job, want, rd.Status, rd.Err)
		case <-time.After(wait):
		}
	}
}

// lockOf reads the lock of a record.
func (e testEnv) lockOf(t *testing.T, rk string) recordLock {
	t.Helper()
	locks, _, err := readLocks(context.Background(), e.rdb, []string{rk})
	if err != nil || locks[0].Err != nil {
		t.Fatalf("read the lock of %s: %v %v", rk, err, locks)
	}
	return locks[0]
}

// putRecord writes a record directly: format 1 (no checksum), then fields as
// given (a later field wins).
func (e testEnv) putRecord(t *testing.T, rk string, fields ...any) {
	t.Helper()
	fields = append([]any{record.FieldFormat, 1}, fields...) // format 1: a record without a checksum (sum), as by hand
	if err := e.rdb.HSet(context.Background(), rk, fields...).Err(); err != nil {
		t.Fatal(err)
	}
}

// decodeJSON decodes a command's --json output into v.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
}
