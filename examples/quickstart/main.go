// Command quickstart is the smallest complete game server: one Node, one
// Driver, one player session, and a clean shutdown on SIGTERM.
//
//	REDIS_URL=redis://localhost:6379 NATS_URL=nats://localhost:4222 go run ./examples/quickstart
package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
)

// Player is the stored profile: exported fields, msgpack tags.
type Player struct {
	Coins int            `msgpack:"coins"`
	Items map[string]int `msgpack:"items"`
}

func main() {
	if err := run(); err != nil {
		slog.Error("quickstart", "err", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	opt, err := redis.ParseURL(cmp.Or(os.Getenv("REDIS_URL"), "redis://localhost:6379"))
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled = true // a call's ctx deadline bounds it on the socket too
	rdb := redis.NewClient(opt)      // or redis.NewClusterClient, redis.NewFailoverClient
	defer rdb.Close()
	nc, err := nats.Connect(cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL))
	if err != nil {
		return err
	}
	defer nc.Close()

	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID:     os.Getenv("POD_NAME"), // unique per live process; "" picks a random one
		Redis:     rdb,
		NATS:      nc,
		Namespace: "mygame",
	})
	if err != nil {
		return err // ErrRedisUnavailable, ErrBusDown, ErrJobIDInUse, ErrInvalidConfig
	}
	players, err := datadriver.NewDriver(node, datadriver.Config[Player]{
		Name:     "PlayerData",
		Defaults: Player{Coins: 100, Items: map[string]int{}},
		Kick: func(key string, why datadriver.KickReason) {
			slog.Info("disconnect the player", "key", key, "reason", why, "tell", why.Message())
		},
	})
	if err != nil {
		return err
	}

	// One player session: what the game does when user:42 connects and plays.
	p, err := players.Join(ctx, "user:42") // waits (at most LockWait) for another server's handoff
	if errors.Is(err, datadriver.ErrWaitTimeout) {
		slog.Warn("held elsewhere and not handed over: refuse the player", "err", err)
	} else if err != nil {
		return err
	} else {
		go func() { <-p.Done(); slog.Info("session over", "key", p.Key(), "err", p.Err()) }()
		if err := p.Update(func(d *Player) { d.Coins += 10; d.Items["sword"]++ }); err != nil {
			slog.Warn("update refused: the session is over", "err", err) // ErrLockLost, ErrReleased
		}
		if err := p.Release(ctx); err != nil { // the leave save: data written, lock cleared
			slog.Warn("leave save failed; the profile is retained and retried", "err", err)
		}
	}

	<-ctx.Done() // SIGTERM: save and release every profile, then stop beating presence
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return node.Close(cctx)
}
