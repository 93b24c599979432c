package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/redisfault"
	"github.com/ckernel/playerdata/internal/scriptcatalog"
	"github.com/ckernel/playerdata/messaging"
)

// lostCommits is the lost-commit fault (-lost-commit-fault), which SIGUSR2
// turns on and off: while on, every move commit this server sends as a
// move's source is dropped (the target never hears it), and every second
// flip's answer is lost to it (the flip ran on Redis; the client is told
// the call failed). Each is logged at WARN ("fault: ...").
type lostCommits struct {
	on    atomic.Bool
	flips atomic.Uint64
	log   *slog.Logger
}

// errAnswerLost is the error a flip whose answer the fault took returns.
var errAnswerLost = errors.New("fault: the flip's answer was lost")

// toggleOnSignal flips the fault on each SIGUSR2 until ctx ends.
func (l *lostCommits) toggleOnSignal(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				on := !l.on.Load()
				l.on.Store(on)
				l.log.Warn("fault: lost commits", "on", on)
			}
		}
	}()
}

// bus wraps b: while the fault is on, move commits are not published.
func (l *lostCommits) bus(b messaging.Bus) messaging.Bus { return commitDropBus{Bus: b, l: l} }

// commitDropBus is a Bus that drops move commits while its fault is on.
type commitDropBus struct {
	messaging.Bus
	l *lostCommits
}

// Publish publishes m, unless it is a move commit and the fault is on.
func (b commitDropBus) Publish(ctx context.Context, jobID string, m messaging.Message) error {
	if b.l.on.Load() && m.Type == messaging.TypeMove {
		var step struct {
			S string `msgpack:"s"`
		}
		if msgpack.Unmarshal([]byte(m.Body), &step) == nil && step.S == "commit" {
			b.l.log.Warn("fault: move commit dropped", "to", jobID, "key", m.Key)
			return nil
		}
	}
	return b.Bus.Publish(ctx, jobID, m)
}

// hook is a Redis hook that, while the fault is on, reports every second
// flip (move.lua) that ran as failed.
func (l *lostCommits) hook() *redisfault.Hook {
	h := &redisfault.Hook{}
	h.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if err != nil || !l.on.Load() {
			return err
		}
		if in, ok := scriptcatalog.Identify(cmd); ok && in.Name() == record.ScriptFlip && l.flips.Add(1)%2 == 1 {
			l.log.Warn("fault: a flip's answer lost", "key", in.Keys)
			return errAnswerLost
		}
		return nil
	})
	return h
}
