package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// A go-redis Ring sends the keys of a shard that misses three pings to the
// others until it answers again, so a lock record there would be found
// missing on another shard and taken while its holder lives: NewNode refuses
// a Ring as Redis and as PresenceRedis, before writing anything.
func TestNewNodeRefusesARing(t *testing.T) {
	r1, r2 := testsupport.StartOwnRedis(t), testsupport.StartOwnRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"s1": r1.Addr, "s2": r2.Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	ctx := context.Background()
	if err := ring.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatalf("the ring's shards: %v", err)
	}
	for name, cfg := range map[string]datadriver.NodeConfig{
		"Redis":         {JobID: "ring-a", Redis: ring, Namespace: r1.Namespace},
		"PresenceRedis": {JobID: "ring-a", Redis: r1.Client(t), PresenceRedis: ring, Namespace: r1.Namespace},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := datadriver.NewNode(ctx, cfg)
			if err == nil {
				_ = n.Close(ctx)
				t.Fatal("NewNode took a Ring")
			}
			if !errors.Is(err, datadriver.ErrInvalidConfig) || !strings.Contains(err.Error(), name+" is a *redis.Ring") {
				t.Fatalf("NewNode = %v, want ErrInvalidConfig naming %s as a Ring", err, name)
			}
		})
	}
	for _, r := range []*testsupport.Redis{r1, r2} {
		if n, err := r.Client(t).DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("%s holds %d keys (%v) after the refusals, want none", r.Addr, n, err)
		}
	}
}
