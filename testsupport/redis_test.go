package testsupport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownRedisKinds are the restartable Redis kinds, each forced through its own
// path so both are tested wherever redis-server is installed.
var ownRedisKinds = []struct {
	name  string
	start func(testing.TB) *Redis
}{
	{KindRedisServer, func(tb testing.TB) *Redis {
		tb.Helper()
		bin := lookRedisServer()
		if bin == "" {
			tb.Skip("redis-server is not on PATH")
		}
		return startRedis(tb, redisConfig{binary: bin})
	}},
	{KindMiniredis, func(tb testing.TB) *Redis {
		tb.Helper()
		return startRedis(tb, redisConfig{})
	}},
}

// noRetries makes a client fail at once while the server is down.
func noRetries(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 }

func TestStartRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := StartRedis(t), StartRedis(t)
	if a.Namespace == b.Namespace {
		t.Fatalf("namespace %q given twice", a.Namespace)
	}
	for _, r := range []*Redis{a, b} {
		if !strings.HasPrefix(r.Namespace, "t") || len(r.Namespace) != 17 {
			t.Errorf("namespace %q: want t + 16 hex digits", r.Namespace)
		}
		if want := r.Namespace + ":user:42"; r.Key("user", "42") != want {
			t.Errorf("Key = %q, want %q", r.Key("user", "42"), want)
		}
		if r.Key() != r.Namespace {
			t.Errorf("Key() = %q, want %q", r.Key(), r.Namespace)
		}
		if (r.Kind == KindMiniredis) != (r.Mini != nil) {
			t.Errorf("Kind %q with Mini %v", r.Kind, r.Mini)
		}
		c := r.Client(t)
		keys, err := c.Keys(ctx, r.Namespace+"*").Result()
		if err != nil || len(keys) != 0 {
			t.Fatalf("keys of a fresh namespace = %v, %v; want none", keys, err)
		}
		if err := c.Set(ctx, r.Key("k"), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, r.Key("k")).Result(); err != nil || got != "v" {
			t.Fatalf("GET = %q, %v; want v", got, err)
		}
	}
	t.Logf("kind %s", a.Kind)
}

func TestStartRedisKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range ownRedisKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			r := kind.start(t)
			if r.Kind != kind.name {
				t.Fatalf("Kind = %q, want %q", r.Kind, kind.name)
			}
			if err := r.Client(t).Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStartRedisEnv points the REDIS_URL path at a private server and checks
// that the namespace's keys, and only those, are deleted when the test ends.
func TestStartRedisEnv(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := StartOwnRedis(t)
	c := own.Client(t)
	foreign := own.Key("foreign")
	if err := c.Set(ctx, foreign, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var ns string
	t.Run("use", func(t *testing.T) {
		r := startRedis(t, redisConfig{url: "redis://" + own.Addr, binary: lookRedisServer()})
		if r.Kind != KindEnv || r.Mini != nil || r.Addr != own.Addr {
			t.Fatalf("got Kind %q Addr %q Mini %v; want env at %s", r.Kind, r.Addr, r.Mini, own.Addr)
		}
		ns = r.Namespace
		rc := r.Client(t)
		for i := range 2500 { // more than one SCAN page
			if err := rc.Set(ctx, r.Key("k", string(rune('a'+i%26)), time.Duration(i).String()), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := rc.HSet(ctx, r.Namespace+":{PlayerData:user:1}", "data", "x").Err(); err != nil {
			t.Fatal(err)
		}
		for name, f := range map[string]func(testing.TB){"Restart": r.Restart, "Stop": r.Stop, "Start": r.Start} {
			t.Run(name, func(t *testing.T) {
				f(t)
				t.Errorf("%s on REDIS_URL did not skip", name)
			})
		}
	})
	keys, err := c.Keys(ctx, ns+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("after cleanup, %d keys of namespace %s left (%v)", len(keys), ns, err)
	}
	if n, err := c.Exists(ctx, foreign).Result(); err != nil || n != 1 {
		t.Errorf("key of another namespace deleted: EXISTS = %d, %v", n, err)
	}
}

func TestRedisRestart(t *testing.T) {
	t.Parallel()
	for _, kind := range ownRedisKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := kind.start(t)
			addr := r.Addr
			c := r.Client(t)
			script := redis.NewScript(`return 1`)
			if err := c.Set(ctx, r.Key("k"), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := script.Load(ctx, c).Err(); err != nil {
				t.Fatal(err)
			}
			before := runID(t, c, r)

			r.Restart(t)

			if r.Addr != addr {
				t.Fatalf("Addr changed from %s to %s", addr, r.Addr)
			}
			eventually(t, func() error { return c.Ping(ctx).Err() })
			if n, err := c.Exists(ctx, r.Key("k")).Result(); err != nil || n != 0 {
				t.Errorf("after restart EXISTS = %d, %v; want the data gone", n, err)
			}
			if ok, err := script.Exists(ctx, c).Result(); err != nil || ok[0] {
				t.Errorf("after restart SCRIPT EXISTS = %v, %v; want the script cache empty", ok, err)
			}
			if after := runID(t, c, r); before == after && r.Kind == KindRedisServer {
				t.Errorf("run_id %q unchanged by restart", after)
			}
			if err := c.Set(ctx, r.Key("k"), "w", 0).Err(); err != nil {
				t.Errorf("write after restart: %v", err)
			}
		})
	}
}

func TestRedisStopStart(t *testing.T) {
	t.Parallel()
	for _, kind := range ownRedisKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := kind.start(t)
			c := r.Client(t, noRetries)
			if err := c.Set(ctx, r.Key("k"), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}

			r.Stop(t)
			r.Stop(t) // stopping twice does nothing
			for i := range 3 {
				if err := c.Ping(ctx).Err(); err == nil {
					t.Fatalf("PING %d while stopped succeeded", i)
				}
			}
			if err := r.Client(t, noRetries).Ping(ctx).Err(); err == nil {
				t.Fatal("a new client reached a stopped server")
			}

			r.Start(t)
			r.Start(t) // starting twice does nothing
			eventually(t, func() error { return c.Ping(ctx).Err() })
			if n, err := c.Exists(ctx, r.Key("k")).Result(); err != nil || n != 0 {
				t.Errorf("after Stop and Start EXISTS = %d, %v; want the data gone", n, err)
			}
		})
	}
}

// TestMiniredisRestartKeepsBlocking checks that blocking commands still wait
// after a miniredis restart (Close cancels its context).
func TestMiniredisRestartKeepsBlocking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := startRedis(t, redisConfig{})
	r.Restart(t)
	c := r.Client(t)
	eventually(t, func() error { return c.Ping(ctx).Err() })
	start := time.Now()
	err := c.BLPop(ctx, time.Second, r.Key("list")).Err()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("BLPOP = %v, want redis.Nil after the timeout", err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("BLPOP returned after %v, want it to block about 1s", waited)
	}
}

// runID returns INFO server's run_id, or "" on miniredis, which has none.
func runID(tb testing.TB, c redis.UniversalClient, r *Redis) string {
	tb.Helper()
	if r.Kind == KindMiniredis {
		return ""
	}
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		tb.Fatal(err)
	}
	id := infoField(info, "run_id")
	if id == "" {
		tb.Fatalf("no run_id in INFO server:\n%s", info)
	}
	return id
}

// eventually retries f for a few seconds: the first commands after a restart
// may meet connections the old server closed, and a go-redis pool whose dials
// failed waits about a second before it dials again.
func eventually(tb testing.TB, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("still failing after 5s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
