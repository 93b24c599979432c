package simulation

import (
	"context"
	"errors"
	"strings"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// The moves: what the players do at each step, each on its own goroutine.

// step picks this step's moves and faults from the seed.
func (s *sim) step() {
	alive := s.aliveServers()
	if s.rng.Float64() < s.cfg.Faults {
		s.fault(alive)
		alive = s.aliveServers()
	}
	for _, pl := range s.players {
		r := s.rng.Float64()
		s.mu.Lock()
		busy, online := pl.busy, pl.p != nil
		s.mu.Unlock()
		if busy {
			continue
		}
		switch {
		case !online && r < 0.03:
			to := alive[s.rng.IntN(len(alive))] // drawn here: the goroutines run in no fixed order
			s.do(pl, "join", func() { s.join(pl, to) })
		case online && r < 0.30:
			s.do(pl, "earn", func() { s.earn(pl) })
		case online && r < 0.31:
			s.do(pl, "save", func() { s.save(pl) })
		case online && r < 0.32:
			s.do(pl, "leave", func() { s.leave(pl) })
		case online && r < 0.327:
			if to := s.otherServer(pl, alive); to != nil {
				s.do(pl, "hop", func() { s.join(pl, to) })
			}
		case online && r < 0.34:
			if other := s.tradePartner(pl); other != nil {
				amount := 1 + s.rng.Int64N(3)
				s.mu.Lock()
				other.busy = true
				s.mu.Unlock()
				s.do(pl, "trade", func() {
					defer func() { s.mu.Lock(); other.busy = false; s.mu.Unlock() }()
					s.trade(pl, other, amount)
				})
			}
		}
	}
}

// do runs one move of pl on its own goroutine (a player does one thing at a
// time; players act at once).
//
// Moves start one after the other: each runs until it is done or waits on
// a timer before the next one starts, so that a replay starts them in the
// same order against the same state.
func (s *sim) do(pl *player, what string, f func()) {
	s.mu.Lock()
	pl.busy = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { s.mu.Lock(); pl.busy = false; s.mu.Unlock() }()
		f()
	}()
	synctest.Wait()
}

// join loads pl on srv: a first join, a rejoin, or a hop from another server.
func (s *sim) join(pl *player, srv *server) {
	start := time.Now()
	p, err := srv.d.Join(s.ctx, pl.key)
	took := time.Since(start)
	s.mu.Lock()
	s.result.Joins++
	s.mu.Unlock()
	if took > lockWait+saveTimeout {
		s.fail("invariant 5: a join of %s on %s took %s (LockWait %s, SaveTimeout %s)", pl.key, srv.s.JobID, took, lockWait, saveTimeout)
	}
	if err != nil {
		s.logf("join %s @%s -> %v (after %s)", pl.key, srv.s.JobID, err, took)
		switch {
		case errors.Is(err, datadriver.ErrWaitTimeout), errors.Is(err, datadriver.ErrClosed),
			errors.Is(err, context.Canceled), errors.Is(err, testsupport.ErrInjected):
			s.mu.Lock()
			s.result.Refused++
			s.mu.Unlock()
		default:
			if !strings.Contains(err.Error(), "injected") && !errors.Is(err, context.DeadlineExceeded) {
				s.fail("join of %s on %s: unexpected error %v", pl.key, srv.s.JobID, err)
			}
		}
		return
	}
	var coins int64
	p.View(func(w *Wallet) { coins = w.Coins })
	s.mu.Lock()
	prev := pl.p
	s.mu.Unlock()
	if prev != nil && prev != p {
		s.endSession(pl, prev)
	}
	s.mu.Lock()
	floor, acked := pl.floor, pl.acked
	if prev != nil && prev != p {
		s.result.Hops++
	}
	adopted := p == pl.last // the retained profile of a failed leave: its data is the newest, not yet durable
	pl.srv, pl.p, pl.last = srv, p, nil
	pl.acked = coins
	if !adopted {
		pl.floor = coins // read from Redis: durable
	}
	s.mu.Unlock()
	s.logf("join %s @%s -> epoch %d coins %d (after %s)", pl.key, srv.s.JobID, p.Epoch(), coins, took)
	if coins < floor || coins > acked {
		s.fail("invariant 7: %s loaded %d coins on %s; the last durable save had %d and %d were earned",
			pl.key, coins, srv.s.JobID, floor, acked)
	}
}

func (s *sim) earn(pl *player) {
	s.mu.Lock()
	p := pl.p
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Update(func(w *Wallet) { w.Coins++ }); err == nil {
		s.mu.Lock()
		if pl.p == p {
			pl.acked++
		}
		s.mu.Unlock()
	}
}

func (s *sim) save(pl *player) {
	s.mu.Lock()
	p, acked := pl.p, pl.acked
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Save(s.ctx); err == nil {
		s.mu.Lock()
		if pl.p == p && acked > pl.floor {
			pl.floor = acked
		}
		s.mu.Unlock()
	}
}

func (s *sim) leave(pl *player) {
	s.mu.Lock()
	p, acked, srv := pl.p, pl.acked, pl.srv
	s.mu.Unlock()
	if p == nil {
		return
	}
	err := p.Release(s.ctx)
	s.logf("leave %s @%s -> %v", pl.key, srv.s.JobID, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if pl.p == p {
		if err == nil {
			pl.floor = acked
		}
		pl.p, pl.srv, pl.last = nil, nil, p
	}
}

// trade moves amount gems from a to b, if a has them.
func (s *sim) trade(a, b *player, amount int64) {
	s.mu.Lock()
	pa, pb := a.p, b.p
	s.mu.Unlock()
	if pa == nil || pb == nil {
		return
	}
	err := datadriver.Trade(s.ctx, func(tx *datadriver.Tx) error {
		x, y := datadriver.TradeData(tx, pa), datadriver.TradeData(tx, pb)
		if x.Gems < amount {
			return errNoGems
		}
		x.Gems -= amount
		y.Gems += amount
		return nil
	}, pa, pb)
	s.logf("trade %d gems %s -> %s -> %v", amount, a.key, b.key, err)
	if err == nil {
		s.mu.Lock()
		s.result.Trades++
		s.mu.Unlock()
	}
}

var errNoGems = errors.New("not enough gems")
