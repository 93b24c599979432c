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

// exampleNode is a Node named job on a fresh in-process Redis, for the
// examples; stop closes both.
func exampleNode(ctx context.Context, job string) (node *datadriver.Node, stop func()) {
	mr, _ := miniredis.Run() // any Redis: a real one in production
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: job, Redis: rdb, Namespace: "mygame",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	return node, func() { _ = node.Close(ctx); mr.Close() }
}

// A purchase is granted in the data with Update, and confirmed to the
// payment provider only once a landed write includes that Update.
func Example_grantAPurchase() {
	ctx := context.Background()
	node, stop := exampleNode(ctx, "server-a")
	defer stop()
	type Player struct {
		Gems     int
		Receipts []string // the purchases granted: a retried grant finds its receipt here
	}
	landed := make(chan datadriver.Saved, 16)
	players, err := datadriver.NewDriver(node, datadriver.Config[Player]{
		Name:    "PlayerData",
		OnSaved: func(key string, s datadriver.Saved) { landed <- s }, // must not block: buffered
	})
	if err != nil {
		panic(err)
	}
	p, err := players.Join(ctx, "user:42")
	if err != nil {
		panic(err)
	}

	// The payment provider reports purchase r-1001: grant it in the data...
	_ = p.Update(func(d *Player) { d.Gems += 100; d.Receipts = append(d.Receipts, "r-1001") })
	n := p.Updates()
	// ...and confirm it once it is stored: here Save lands it at once (an
	// autosave would too, a little later).
	if err := p.Save(ctx); err != nil {
		panic(err) // not stored: do not confirm (ErrLockLost: the session is over)
	}
	for s := range landed {
		if s.Updates >= n {
			fmt.Println("r-1001 stored at version", s.Ver, "replicated:", s.Replicated)
			break
		}
	}
	fmt.Println("LastSaved:", p.LastSaved().Ver, p.LastSaved().Updates >= n)
	_ = p.Release(ctx)
	// Output:
	// r-1001 stored at version 1 replicated: true
	// LastSaved: 1 true
}

// Peek reads a player's data without the lock, and Where says which server
// holds it.
func ExampleDriver_Peek() {
	ctx := context.Background()
	node, stop := exampleNode(ctx, "server-a")
	defer stop()
	type Player struct{ Coins int }
	players, err := datadriver.NewDriver(node, datadriver.Config[Player]{Name: "PlayerData", Defaults: Player{Coins: 10}})
	if err != nil {
		panic(err)
	}
	fresh, _ := players.Peek(ctx, "user:7") // never saved: Defaults
	fmt.Println("user:7 coins:", fresh.Coins)

	p, _ := players.Join(ctx, "user:42")
	_ = p.Update(func(d *Player) { d.Coins = 25 })
	_ = p.Save(ctx)
	_ = p.Update(func(d *Player) { d.Coins = 30 }) // not saved yet: Peek does not see it
	seen, _ := players.Peek(ctx, "user:42")
	h, _ := players.Where(ctx, "user:42")
	fmt.Println("user:42 coins:", seen.Coins, "held by:", h.JobID, h.Status, "since known:", !h.Since.IsZero())
	_ = p.Release(ctx)
	// Output:
	// user:7 coins: 10
	// user:42 coins: 25 held by: server-a alive since known: true
}

// Send stores a gift for a player, online or not; a retry with the same
// IdempotencyKey stores nothing new, and the next Join applies the gift once.
func ExampleDriver_Send() {
	ctx := context.Background()
	node, stop := exampleNode(ctx, "server-a")
	defer stop()
	type Player struct{ Coins int }
	type Gift struct{ Coins int }
	players, err := datadriver.NewDriver(node, datadriver.Config[Player]{
		Name: "PlayerData",
		OnMessage: func(d *Player, m datadriver.Message) error {
			var g Gift
			if err := m.Decode(&g); err != nil {
				return err
			}
			d.Coins += g.Coins
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	for range 2 { // the shop retries: the order id names the message
		var rc datadriver.SendReceipt
		_, err := players.Send(ctx, "user:7", Gift{Coins: 50},
			datadriver.SendOptions{IdempotencyKey: "order-1001", Receipt: &rc})
		if err != nil {
			panic(err)
		}
		fmt.Println("duplicate:", rc.Duplicate, "waiting:", rc.Waiting)
	}
	p, err := players.Join(ctx, "user:7")
	if err != nil {
		panic(err)
	}
	p.View(func(d *Player) { fmt.Println("coins:", d.Coins) })
	_ = p.Release(ctx)
	// Output:
	// duplicate: false waiting: true
	// duplicate: true waiting: true
	// coins: 50
}
