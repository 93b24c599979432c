package simulation

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The model: the servers, the players and the session each player believes
// in, and the ledger of what each player earned and what is durable.

// server is one simulated game server and the faults it suffers now (see
// faults.go).
type server struct {
	s       *testsupport.Server
	d       *datadriver.Driver[Wallet]
	failTo  time.Time     // saves fail until then
	stallTo time.Time     // saves stall until then
	lose    int           // answers of the next saves to lose
	deafTo  time.Time     // presence writes fail until then
	stalled int           // saves stalled so far (orders their way out)
	stalls  []stalledSave // the saves stalled now

	hangTo     [numCallKinds]time.Time // calls of a kind sent before then hang until their deadline
	hangLanded [numCallKinds]bool      // ... after they landed (the answer is lost), else before
	hangLateAt [numCallKinds]time.Time // ... before, and Redis gets them then, after the hang (deliverLate; zero: never)
	lates      []lateSave              // the saves deliverLate holds now
	cut        bool                    // cut from Redis: every call hangs (Faults.Hold)
	cutTo      time.Time               // until then
	busCut     bool                    // cut from the bus (MemBus.Disconnect)
	busCutTo   time.Time               // until then
	paused     bool                    // paused: nothing of it answers, its game makes no moves
	pausedTo   time.Time               // until then
	pauses     []span                  // every pause (they stretch the bound of its joins)
	believed   []session               // at its pause: the sessions its game believed live
	dead       chan struct{}           // closed when it crashes: its hanging calls die with it
}

// span is a stretch of virtual time; an open one has a zero end.
type span struct{ from, to time.Time }

// session is a profile a server's game holds for a player.
type session struct {
	pl *player
	p  *datadriver.Profile[Wallet]
}

// player is one simulated player and the session the player believes in.
type player struct {
	key   string
	busy  bool
	srv   *server
	p     *datadriver.Profile[Wallet]
	since time.Time                   // when the session p started
	acked int64                       // coins earned and acknowledged (Update returned nil)
	floor int64                       // coins known durable (a Save or clean release returned nil)
	last  *datadriver.Profile[Wallet] // the session the player left (a rejoin may adopt it)
	sent  []*sentMsg                  // the messages sent to the player: the k-th is sent[k-1]
	// lostAt is when a tamper last deleted the player's record: a save, a
	// release or a load asked for before then never counts as durable
	// (invariant 7's ledger starts over from the deletion).
	lostAt time.Time
}

// startServer starts a server with the reference timings and this run's
// fault switches.
func (s *sim) startServer() *server {
	srv := &server{dead: make(chan struct{})}
	srv.s = s.c.Start(func(c *datadriver.NodeConfig) {
		c.SaveTimeout = saveTimeout
		c.SoloCalls = s.cfg.SoloCalls
	})
	srv.s.Faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error { return s.before(srv, ctx, cmd) })
	srv.s.Faults.SetAfter(func(ctx context.Context, cmd redis.Cmder, err error) error { return s.after(srv, ctx, cmd, err) })
	d, err := datadriver.NewDriver(srv.s.Node, datadriver.Config[Wallet]{
		Name:            driverName,
		Defaults:        Wallet{Gems: initialGems},
		LockWait:        lockWait,
		Kick:            func(key string, reason datadriver.KickReason) { s.kicked(srv, key, reason) },
		OnMessage:       func(w *Wallet, m datadriver.Message) error { return s.onMessage(srv, w, m) },
		MaxInbox:        maxInbox,
		MaxMessageBytes: maxMessageBytes,
		// Small and short, so that runs meet the bound and forget keys.
		MaxIdempotencyKeys: maxIdempotencyKeys,
		IdempotencyWindow:  idempotencyWindow,
	})
	if err != nil {
		s.tb.Fatalf("simulation: driver: %v", err)
	}
	srv.d = d
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	s.logf("start %s", srv.s.JobID)
	return srv
}

func recordKey(key string) string { return record.Key("sim", driverName, key) }

// aliveServers lists the servers not crashed.
func (s *sim) aliveServers() []*server {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*server
	for _, srv := range s.servers {
		if !srv.s.Crashed() {
			out = append(out, srv)
		}
	}
	return out
}

// activeServers lists the servers of alive that are not paused: a player
// joins only a server that answers.
func (s *sim) activeServers(alive []*server) []*server {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*server
	for _, srv := range alive {
		if !srv.paused {
			out = append(out, srv)
		}
	}
	return out
}

// pausedFor is how long srv was paused since from.
func (s *sim) pausedFor(srv *server, from time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return overlap(srv.pauses, from, time.Now())
}

// overlap is how much of spans falls between from and now (an open span
// ends now).
func overlap(spans []span, from, now time.Time) time.Duration {
	var d time.Duration
	for _, sp := range spans {
		to := sp.to
		if to.IsZero() {
			to = now
		}
		if lo := maxTime(sp.from, from); to.After(lo) {
			d += to.Sub(lo)
		}
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// otherServer picks an alive server other than pl's, or nil.
func (s *sim) otherServer(pl *player, alive []*server) *server {
	s.mu.Lock()
	cur := pl.srv
	s.mu.Unlock()
	var cands []*server
	for _, srv := range alive {
		if srv != cur {
			cands = append(cands, srv)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[s.rng.IntN(len(cands))]
}

// tradePartner finds an idle online player on pl's server.
func (s *sim) tradePartner(pl *player) *player {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cands []*player
	for _, o := range s.players {
		if o != pl && !o.busy && o.p != nil && o.srv == pl.srv {
			cands = append(cands, o)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[s.rng.IntN(len(cands))]
}

// endSession folds a finished session into pl's ledger: a clean release
// makes everything acknowledged durable (unless the record was deleted
// since the session began).
func (s *sim) endSession(pl *player, p *datadriver.Profile[Wallet]) {
	err := p.Err()
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, datadriver.ErrReleased) && pl.p == p && !pl.since.Before(pl.lostAt) {
		pl.floor = pl.acked
	}
}

// checkSessions notices sessions that ended on their own (kicked, lost,
// fenced, crashed) and takes the players offline; a session that ended
// fenced must have been kicked (invariant 6): with ReasonFenced, or with
// the reason of the leave that came first.
func (s *sim) checkSessions() {
	s.mu.Lock()
	var ended []*player
	for _, pl := range s.players {
		if !pl.busy && pl.p != nil && pl.p.Err() != nil {
			ended = append(ended, pl)
		}
	}
	s.mu.Unlock()
	for _, pl := range ended {
		s.mu.Lock()
		p := pl.p
		s.mu.Unlock()
		s.endSession(pl, p)
		s.logf("session of %s ended: %v", pl.key, p.Err())
		s.mu.Lock()
		srv, since := pl.srv, pl.since
		if pl.p == p {
			pl.p, pl.srv = nil, nil
		}
		var kickedAt time.Time
		if srv != nil {
			kickedAt = s.kicks[srv.s.JobID+"\x00"+pl.key]
		}
		s.mu.Unlock()
		if srv != nil && errors.Is(p.Err(), datadriver.ErrFenced) && !srv.s.Crashed() && kickedAt.Before(since) {
			s.fail("invariant 6: the session of %s on %s ended fenced off (%v), but the game was never kicked",
				pl.key, srv.s.JobID, p.Err())
		}
		if srv != nil {
			s.endedBroken(srv, pl.key, since, p.Err())
		}
	}
}
