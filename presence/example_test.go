package presence_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/presence"
)

// Two servers share one presence hash. Server A beats; server B reads A, and a
// server that never beat, before and after their beats could have expired.
// (miniredis stands in for Redis here; SetTime drives the TIME the scripts see.)
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	newServer := func(jobID string) *presence.Presence {
		p, err := presence.New(rdb, presence.Config{Key: presence.KeyFor("mygame"), JobID: jobID})
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
