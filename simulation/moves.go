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

// step ends the faults whose time has come, then picks this step's moves
// and faults from the seed: the players' moves, then a server's sends
// (messages.go).
func (s *sim) step() {
	s.endFaults(false)
	s.repairDue(false)
	s.unlockDue()
	alive := s.aliveServers()
	if s.rng.Float64() < s.cfg.Faults {
		s.fault(alive)
		alive = s.aliveServers()
	}
	targets := s.activeServers(alive) // a player joins only a server that answers
	for _, pl := range s.players {
		r := s.rng.Float64()
		s.mu.Lock()
		busy, online, frozen := pl.busy, pl.p != nil, pl.srv != nil && pl.srv.paused
		s.mu.Unlock()
		if busy {
			continue
		}
		if frozen {
			// The game of a paused server makes no moves; a player may give
			// up on it and join another server.
			if r < 0.05 {
				if to := s.otherServer(pl, targets); to != nil {
					s.do(pl, "hop", func() { s.join(pl, to) })
				}
			}
			continue
		}
		switch {
		case !online && r < 0.03:
			if len(targets) == 0 {
				continue
			}
			to := targets[s.rng.IntN(len(targets))] // drawn here: the goroutines run in no fixed order
			s.do(pl, "join", func() { s.join(pl, to) })
		case online && r < 0.30:
			s.do(pl, "earn", func() { s.earn(pl) })
		case online && r < 0.31:
			s.do(pl, "save", func() { s.save(pl) })
		case online && r < 0.32:
			s.do(pl, "leave", func() { _ = s.leave(pl) })
		case online && r < 0.327:
			if to := s.otherServer(pl, targets); to != nil {
				s.do(pl, "hop", func() { s.join(pl, to) })
			}
		case online && r >= 0.34 && r < 0.346:
			// The game sends the player to another server (MoveTo), and
			// the player follows.
			if to := s.otherServer(pl, targets); to != nil {
				s.do(pl, "moveto", func() { s.moveTo(pl, to) })
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
	if len(targets) > 0 && s.rng.Float64() < sendRate {
		s.sendMove(targets)
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

// spawn runs f on its own goroutine, as do does, for what the game does
// beside a player's move.
func (s *sim) spawn(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	synctest.Wait()
}

// join loads pl on srv: a first join, a rejoin, or a hop from another server.
func (s *sim) join(pl *player, srv *server) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, joinGiveUp)
	joining := srv.s.JobID + "\x00" + pl.key
	s.mu.Lock()
	s.joining[joining]++
	s.mu.Unlock()
	p, err := srv.d.Join(ctx, pl.key)
	cancel()
	s.mu.Lock()
	s.joining[joining]--
	s.mu.Unlock()
	took := time.Since(start)
	// The trace shows it to the millisecond, as it shows times: the bus's
	// latency (busLatency) is not news.
	shown := took.Round(time.Millisecond)
	s.mu.Lock()
	s.result.Joins++
	s.mu.Unlock()
	// A paused process cannot answer in time: its pause adds to the bound.
	if paused := s.pausedFor(srv, start); took > lockWait+saveTimeout+paused {
		// A call of its server hung meanwhile (the join's own, or one it
		// waits on: the same key's leave, a presence read another join of the
		// server shares), or its server was cut from Redis.
		s.fail("invariant 5: a join of %s on %s took %s (LockWait %s, SaveTimeout %s, paused %s)",
			pl.key, srv.s.JobID, took, lockWait, saveTimeout, paused)
	}
	if err != nil {
		s.logf("join %s @%s -> %v (after %s)", pl.key, srv.s.JobID, err, shown)
		if s.joinRefused(pl, srv, start, err) {
			return
		}
		switch {
		case errors.Is(err, datadriver.ErrWaitTimeout), errors.Is(err, datadriver.ErrClosed), errors.Is(err, datadriver.ErrFenced),
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
	// As a game does on a join: the player's user id (for erasure requests)
	// and metadata naming the server, set anew by every join, so that the
	// session's first write sends them and the record's checksum covers
	// them through saves, moves, trades and faults (a record whose checksum
	// a write got wrong is refused as corrupt: invariant 11).
	p.SetUserIDs(pl.key)
	p.SetMeta("joined-on", srv.s.JobID)
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
	pl.srv, pl.p, pl.last, pl.since = srv, p, nil, start
	pl.acked = coins
	if !adopted && !start.Before(pl.lostAt) {
		pl.floor = coins // read from Redis: durable (unless the record was deleted since)
	}
	s.mu.Unlock()
	s.logf("join %s @%s -> epoch %d coins %d (after %s)", pl.key, srv.s.JobID, p.Epoch(), coins, shown)
	if coins < floor || coins > acked {
		s.fail("invariant 7: %s loaded %d coins on %s; the last durable save had %d and %d were earned",
			pl.key, coins, srv.s.JobID, floor, acked)
	}
}

// earn adds a coin to pl's session.
func (s *sim) earn(pl *player) {
	s.mu.Lock()
	p, srv := pl.p, pl.srv
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = s.update(session{pl, p}, srv)
}

// update adds a coin to the session ss on srv, as the game does, and keeps
// the ledger. An Update that succeeds is checked against invariant 9.
func (s *sim) update(ss session, srv *server) error {
	asked := s.stamp()
	err := ss.p.Update(func(w *Wallet) { w.Coins++ })
	if err != nil {
		if s.takenFrom(srv.s.JobID, recordKey(ss.pl.key), asked, time.Now()) != nil {
			s.mu.Lock()
			s.result.Guarded++ // accepted, it would have broken invariant 9
			s.mu.Unlock()
		}
		return err
	}
	s.checkLive("an Update", srv.s.JobID, recordKey(ss.pl.key), asked, time.Now())
	s.mu.Lock()
	if ss.pl.p == ss.p {
		ss.pl.acked++
	}
	s.mu.Unlock()
	return nil
}

// resumeUpdate is the first thing the game of a resumed server does with a
// session it believed live: an Update. It must be refused if the session
// was fenced off or taken while the server was paused.
func (s *sim) resumeUpdate(srv *server, ss session) {
	err := s.update(ss, srv)
	s.logf("resumed %s: Update of %s -> %v", srv.s.JobID, ss.pl.key, err)
	s.mu.Lock()
	s.result.ResumeUpdates++
	if err != nil {
		s.result.ResumeRefused++
	}
	s.mu.Unlock()
}

func (s *sim) save(pl *player) {
	s.mu.Lock()
	p, acked := pl.p, pl.acked
	s.mu.Unlock()
	if p == nil {
		return
	}
	start := time.Now()
	if err := p.Save(s.ctx); err == nil {
		s.mu.Lock()
		if pl.p == p && acked > pl.floor && !start.Before(pl.lostAt) {
			pl.floor = acked
		}
		s.mu.Unlock()
	}
}

// leave releases pl's session, and returns what Release did.
func (s *sim) leave(pl *player) error {
	s.mu.Lock()
	p, acked, srv := pl.p, pl.acked, pl.srv
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	start := time.Now()
	// A session that already ended (handed off: the kick runs on its own
	// goroutine and may not have reached the model) was released when it
	// ended, maybe before a rewind since: Release's nil (it is idempotent)
	// makes nothing durable now.
	var ended bool
	select {
	case <-p.Done():
		ended = true
	default:
	}
	err := p.Release(s.ctx)
	s.logf("leave %s @%s -> %v", pl.key, srv.s.JobID, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if pl.p == p {
		if err == nil && !ended && !start.Before(pl.lostAt) {
			pl.floor = acked
		}
		pl.p, pl.srv, pl.last = nil, nil, p
	}
	return err
}

// trade moves amount gems from a to b, if a has them.
func (s *sim) trade(a, b *player, amount int64) {
	s.mu.Lock()
	pa, pb, srv := a.p, b.p, a.srv // a and b are on one server
	s.mu.Unlock()
	if pa == nil || pb == nil {
		return
	}
	asked := s.stamp()
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
	if errors.Is(err, datadriver.ErrTradeOutcomeUnknown) {
		s.mu.Lock()
		s.result.TradesUnknown++
		s.mu.Unlock()
	}
	if err == nil {
		s.mu.Lock()
		s.result.Trades++
		s.mu.Unlock()
		// A trade commits before it returns: only one asked for after
		// another server's acquire landed is sure to break invariant 9.
		s.checkLive("a trade", srv.s.JobID, recordKey(a.key), asked, time.Time{})
		s.checkLive("a trade", srv.s.JobID, recordKey(b.key), asked, time.Time{})
	}
}

var errNoGems = errors.New("not enough gems")
