package simulation

import (
	"context"
	"errors"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// The model: the servers, the players and the session each player believes
// in, and the ledger of what each player earned and what is durable.

// server is one simulated game server.
type server struct {
	s       *testsupport.Server
	d       *datadriver.Driver[Wallet]
	failTo  time.Time // saves fail until then
	stallTo time.Time // saves stall until then
	lose    int       // answers of the next saves to lose
	deafTo  time.Time // presence writes fail until then
	stalled int       // saves stalled so far (orders their way out)
}

// player is one simulated player and the session the player believes in.
type player struct {
	key   string
	busy  bool
	srv   *server
	p     *datadriver.Profile[Wallet]
	acked int64                       // coins earned and acknowledged (Update returned nil)
	floor int64                       // coins known durable (a Save or clean release returned nil)
	last  *datadriver.Profile[Wallet] // the session the player left (a rejoin may adopt it)
}

// startServer starts a server with the reference timings and this run's
// fault switches.
func (s *sim) startServer() *server {
	srv := &server{}
	srv.s = s.c.Start(func(c *datadriver.NodeConfig) {
		c.SaveTimeout = saveTimeout
	})
	srv.s.Faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error { return s.before(srv, ctx, cmd) })
	srv.s.Faults.SetAfter(func(ctx context.Context, cmd redis.Cmder, err error) error { return s.after(srv, cmd, err) })
	d, err := datadriver.NewDriver(srv.s.Node, datadriver.Config[Wallet]{
		Name:     driverName,
		Defaults: Wallet{Gems: initialGems},
		LockWait: lockWait,
		Kick:     func(key, reason string) { s.kicked(srv, key, reason) },
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

func recordKey(key string) string { return datadriver.RecordKey("sim", driverName, key) }

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
// makes everything acknowledged durable.
func (s *sim) endSession(pl *player, p *datadriver.Profile[Wallet]) {
	err := p.Err()
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, datadriver.ErrReleased) && pl.p == p {
		pl.floor = pl.acked
	}
}

// checkSessions notices sessions that ended on their own (kicked, lost,
// fenced, crashed) and takes the players offline.
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
		if pl.p == p {
			pl.p, pl.srv = nil, nil
		}
		s.mu.Unlock()
	}
}
