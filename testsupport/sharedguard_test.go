package testsupport

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A client of the shared Redis refuses what would change the server for
// every other test on it, and passes the rest; a client of a test's own
// Redis refuses nothing.
func TestSharedRedisRefusesWhatOthersShare(t *testing.T) {
	own := StartOwnRedis(t)
	url := "redis://" + own.Addr
	shared := startRedis(t, redisConfig{url: url}) // the same server, as REDIS_URL would give it
	ctx := context.Background()
	c := shared.Client(t)
	script := redis.NewScript("return 1")
	if err := script.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	for name, cmd := range map[string]func() error{
		"SCRIPT FLUSH":     func() error { return c.ScriptFlush(ctx).Err() },
		"FLUSHALL":         func() error { return c.FlushAll(ctx).Err() },
		"FLUSHDB":          func() error { return c.FlushDB(ctx).Err() },
		"CONFIG SET":       func() error { return c.ConfigSet(ctx, "slowlog-log-slower-than", "1").Err() },
		"CONFIG RESETSTAT": func() error { return c.ConfigResetStat(ctx).Err() },
		"CLIENT PAUSE":     func() error { return c.Do(ctx, "client", "pause", "10").Err() },
		"in a pipeline": func() error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, shared.Key("p"), 1, 0)
				p.ScriptFlush(ctx)
				return nil
			})
			return err
		},
	} {
		if err := cmd(); !errors.Is(err, ErrSharedRedis) {
			t.Errorf("%s on the shared Redis = %v, want ErrSharedRedis", name, err)
		}
	}
	if ok, err := script.Exists(ctx, c).Result(); err != nil || !ok[0] {
		t.Fatalf("SCRIPT EXISTS = %v, %v after the refused flushes; want the cache intact", ok, err)
	}
	if n, _ := c.Exists(ctx, shared.Key("p")).Result(); n != 0 {
		t.Errorf("the refused pipeline's SET ran")
	}
	// Everyday commands pass, CONFIG GET among them.
	if err := c.Set(ctx, shared.Key("k"), "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigGet(ctx, "maxmemory-policy").Err(); err != nil {
		t.Fatal(err)
	}
	if err := script.Run(ctx, c, nil).Err(); err != nil {
		t.Fatal(err)
	}
	// The test's own server takes them.
	if err := own.Client(t).ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH on the test's own Redis: %v", err)
	}
}
