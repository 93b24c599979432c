package main

import (
	"context"
	"sync"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/faulttest"
)

// moveAll moves every live session to server to (Profile.MoveTo), each on
// a goroutine of wg, and reports each: moved with the value it carried, or
// move_failed.
func (g *game) moveAll(ctx context.Context, to string, wg *sync.WaitGroup) {
	g.mu.Lock()
	live := make(map[string]*datadriver.Profile[faulttest.Player], len(g.live))
	for k, p := range g.live {
		live[k] = p
	}
	g.mu.Unlock()
	for key, p := range live {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			sent := time.Now()
			err := p.MoveTo(mctx, to)
			if err != nil {
				g.out.emit(faulttest.Event{Ev: faulttest.EvMoveFailed, Key: key, Epoch: p.Epoch(), Err: err.Error(),
					Sent: sent.UnixNano()})
				return
			}
			var coins int
			p.View(func(d *faulttest.Player) { coins = d.Coins }) // the session ended: this is what moved
			g.out.emit(faulttest.Event{Ev: faulttest.EvMoved, Key: key, Epoch: p.Epoch(), Coins: coins,
				Sent: sent.UnixNano(), JoinNS: int64(time.Since(sent))})
		})
	}
}
