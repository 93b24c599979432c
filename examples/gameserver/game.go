package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// Player is the stored profile. Every stored field is exported and of a
// concrete type, so it comes back from Redis exactly as it went in.
type Player struct {
	Coins  int            `msgpack:"coins"`
	Visits int            `msgpack:"visits"`
	Items  map[string]int `msgpack:"items"`
}

// Gift is the body of a message sent to a player (Driver.Send), applied by
// Config.OnMessage wherever the player is, or at their next join.
type Gift struct {
	Coins int    `msgpack:"coins"`
	Note  string `msgpack:"note"`
}

// giftTo is the player who gets the one gift, and giftKey its idempotency
// key: whatever the retries, and however many servers send it within a day,
// the player gets it once.
const (
	giftTo  = "player:1"
	giftKey = "welcome-gift-2026"
)

// leaveWithin bounds a player's leave save.
const leaveWithin = 10 * time.Second

// game is one server: its Node and driver, and the sessions it plays.
type game struct {
	cfg     config
	out     *printer
	node    *datadriver.Node
	players *datadriver.Driver[Player]
	wg      sync.WaitGroup // one per session goroutine
}

func newGame(ctx context.Context, cfg config, c *conns, out *printer, log *slog.Logger) (*game, error) {
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: cfg.job, Redis: c.rdb, NATS: c.nc, Namespace: cfg.namespace, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	g := &game{cfg: cfg, out: out, node: node}
	g.players, err = datadriver.NewDriver(node, datadriver.Config[Player]{
		Name:      "PlayerData",
		Defaults:  Player{Coins: 100, Items: map[string]int{}},
		Kick:      g.kick,
		OnMessage: g.applyGift,
	})
	if err != nil {
		_ = node.Close(ctx)
		return nil, err
	}
	out.say("server %s up: a player joins every %s and leaves %s later; Ctrl-C or SIGTERM drains", node.JobID(), cfg.every, cfg.stay)
	return g, nil
}

// kick is Config.Kick: the driver ended a live session itself. A real game
// disconnects the player here and may show reason.Message().
func (g *game) kick(key string, reason datadriver.KickReason) {
	g.out.say("%s kicked (%s): %q", key, reason, reason.Message())
}

// applyGift is Config.OnMessage. It runs on a copy of the data: an error
// leaves the message in the inbox to be tried again; nil applies it, and
// the next save removes it from the inbox in the same write.
func (g *game) applyGift(d *Player, m datadriver.Message) error {
	var gift Gift
	if err := m.Decode(&gift); err != nil {
		return fmt.Errorf("gift %s: %w", m.ID, err)
	}
	d.Coins += gift.Coins
	g.out.say("gift applied: +%d coins (%q), now %d coins", gift.Coins, gift.Note, d.Coins)
	return nil
}

// play joins a player every cfg.every, taking turns among cfg.players, and
// sends one gift after the first join, until ctx ends (SIGTERM).
func (g *game) play(ctx context.Context) {
	tick := time.NewTicker(g.cfg.every)
	defer tick.Stop()
	for n := 0; ; n++ {
		key := fmt.Sprintf("player:%d", n%g.cfg.players+1)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.session(ctx, key)
		}()
		if n == 1 {
			g.sendGift(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sendGift sends the one gift: stored in the player's inbox whether they
// are online here, on another server, or offline. The idempotency key makes
// it safe to send again after a failure (a timeout may have stored it): a
// second Send with the key stores nothing and answers the first id.
func (g *game) sendGift(ctx context.Context) {
	id, err := g.players.Send(ctx, giftTo, Gift{Coins: 50, Note: "welcome back"}, datadriver.SendOptions{IdempotencyKey: giftKey})
	if err != nil {
		g.out.say("gift to %s not sent: %v", giftTo, err)
		return
	}
	g.out.say("gift sent to %s (message %s)", giftTo, id)
}

// session is one player's visit: join, play, leave after cfg.stay. A
// session the driver ends (a shutdown drain, the player joining another
// server) is over at once: the driver saves and releases it itself.
func (g *game) session(ctx context.Context, key string) {
	p, err := g.players.Join(ctx, key) // waits, at most LockWait, for another session of key to end
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, datadriver.ErrWaitTimeout):
		g.out.say("%s refused: still held elsewhere (%v)", key, err)
		return
	case err != nil:
		g.out.say("%s could not join: %v", key, err)
		return
	}
	var d Player
	err = p.Update(func(pl *Player) {
		pl.Visits++
		pl.Coins += 10
		pl.Items["torch"]++
		d = Player{Coins: pl.Coins, Visits: pl.Visits}
	})
	if err != nil {
		g.out.say("%s: update refused: %v", key, err)
		return
	}
	g.out.say("%s joined: visit %d, %d coins (lock epoch %d)", key, d.Visits, d.Coins, p.Epoch())

	stay := time.NewTimer(g.cfg.stay)
	defer stay.Stop()
	select {
	case <-p.Done(): // kicked: see kick
		return
	case <-stay.C:
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveWithin)
	defer cancel()
	if err := p.Release(lctx); err != nil {
		if !errors.Is(err, datadriver.ErrReleased) { // else the drain got there first
			g.out.say("%s left, but the leave save failed (the profile is retained and retried): %v", key, err)
		}
		return
	}
	g.out.say("%s left: saved and released", key)
}

// drain is the SIGTERM path: Node.Close kicks every live session, saves
// and releases every profile (in parallel, within within), then stops
// beating presence, so another server takes these players at once.
func (g *game) drain(within time.Duration) error {
	g.out.say("SIGTERM: draining")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := g.node.Close(ctx)
	g.wg.Wait()
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	g.out.say("drained in %s: every profile saved and released; exiting", time.Since(start).Round(time.Millisecond))
	return nil
}

// printer writes the game's lines to stdout, each with the time since start.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newPrinter(w io.Writer) *printer { return &printer{w: w, start: time.Now()} }

func (p *printer) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%7.2fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}
