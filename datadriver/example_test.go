package datadriver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
)

func Example() {
	ctx := context.Background()
	mr, _ := miniredis.Run() // any Redis: a real one in production
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})

	type Player struct {
		Coins int
		Items map[string]int
	}
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: "server-a", Redis: rdb, Namespace: "mygame",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)
	if err := node.AwaitLease(ctx); err != nil { // its first beat acknowledged: ready to serve
		panic(err)
	}
	players, err := datadriver.NewDriver(node, datadriver.Config[Player]{
		Name:     "PlayerData",
		Defaults: Player{Coins: 10},
	})
	if err != nil {
		panic(err)
	}

	p, err := players.Join(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	_ = p.Update(func(d *Player) { d.Coins += 5 })
	if err := p.Release(ctx); err != nil { // the leave save: writes and clears the lock
		panic(err)
	}

	q, _ := players.Join(ctx, "user:42")
	q.View(func(d *Player) { fmt.Println("coins:", d.Coins, "epoch:", q.Epoch()) })
	// Output: coins: 15 epoch: 2
}
