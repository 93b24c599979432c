package presence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/presence"
)

// Two servers share one presence hash. Server A beats; server B reads A, and a
// server that never beat, before and after their beats could have expired.
// (miniredis stands in for Redis here; SetTime drives the TIME the scripts
// see, and a mock clock the servers' own, which must keep in step: a Redis
// clock running ahead of a reader's reads as a step, see Read.)
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)
	clk := clock.NewMock()
	clk.Set(start)

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	newServer := func(jobID string) *presence.Presence {
		p, err := presence.New(rdb, presence.Config{Namespace: "mygame", JobID: jobID, Clock: clk})
		if err != nil {
			panic(err)
		}
		return p
	}
	a, b := newServer("server-a"), newServer("server-b")
	defer a.Close(ctx)
	defer b.Close(ctx)

	// In a game server: a.Start(), and on shutdown a.Close(ctx), then release
	// locks, then a.Remove(ctx). Here one beat is enough.
	if err := a.Beat(ctx); err != nil {
		panic(err)
	}
	r := b.Read(ctx, "server-a")
	fmt.Println("server-a:", r.Status, r.ExpiresIn)
	fmt.Println("server-c:", b.IsAlive(ctx, "server-c"), "(this Redis run is younger than one TTL)")

	mr.SetTime(start.Add(presence.DefaultTTL + time.Second))
	clk.Set(start.Add(presence.DefaultTTL + time.Second))
	fmt.Println("11s later")
	fmt.Println("server-a:", b.IsAlive(ctx, "server-a"))
	fmt.Println("server-c:", b.IsAlive(ctx, "server-c"))
	fmt.Println("server-b (itself):", b.IsAlive(ctx, "server-b"))

	// Output:
	// server-a: alive 10s
	// server-c: unknown (this Redis run is younger than one TTL)
	// 11s later
	// server-a: stopped
	// server-c: stopped
	// server-b (itself): alive
}

// With Shards set, each server beats into the shard its JobID hashes to, so
// that no single key (nor, on Redis Cluster, a single master) carries every
// beat. Every server and reader of a deployment must use the same count: a
// reader left at the default of one shard cannot find a server beating into
// shard 1, and answers unknown (with ErrShardMismatch) rather than stopped.
func Example_shards() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)
	clk := clock.NewMock()
	clk.Set(start)

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	newServer := func(jobID string, shards int) *presence.Presence {
		p, err := presence.New(rdb, presence.Config{Namespace: "mygame", JobID: jobID, Shards: shards, Clock: clk})
		if err != nil {
			panic(err)
		}
		return p
	}
	var servers []*presence.Presence
	for _, job := range []string{"server-a", "server-b", "server-c"} {
		p := newServer(job, 4)
		defer p.Close(ctx)
		if err := p.Claim(ctx); err != nil { // its first beat
			panic(err)
		}
		servers = append(servers, p)
	}

	mr.SetTime(start.Add(presence.DefaultTTL + time.Second)) // every shard's run is a TTL old
	clk.Set(start.Add(presence.DefaultTTL + time.Second))
	for _, p := range servers {
		if err := p.Beat(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("server-b:", servers[0].IsAlive(ctx, "server-b"))

	misconfigured := newServer("reader", 1)
	defer misconfigured.Close(ctx)
	r := misconfigured.Read(ctx, "server-b")
	fmt.Println("server-b read with one shard:", r.Status, errors.Is(r.Err, presence.ErrShardMismatch))

	// Output:
	// server-b: alive
	// server-b read with one shard: unknown true
}
