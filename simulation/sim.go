// Package simulation runs randomized multi-server games against the whole
// protocol on virtual time and checks its invariants after every step.
//
// A run is a function of its seed: the servers, the players' moves (join,
// earn, save, leave, hop to another server, trade), and the faults (failing,
// stalling and lost-answer saves, failing presence writes, dropped, delayed
// and duplicated messages, forged requests, server crashes with restarts
// under a new JobID, Redis restarts) all come from one PCG stream. It runs
// inside a testing/synctest bubble on a testsupport.Cluster, so hours of
// game time take seconds. After each step it checks:
//
//  1. one writer per key: every save that lands carries the epoch of the
//     acquisition that made its token (a stale token never writes);
//  2. a live, beating holder never loses its lock: a lock is taken from a
//     server (by presence or by age) only once that server's presence has
//     expired;
//  3. every load sees exactly the last landed write of its record;
//  4. trades are all-or-nothing and never twice: the gems of all players,
//     counting a settled trade's image where its mark is still pending, stay
//     what they were;
//  5. every join ends within its bound;
//  6. no request ends a session it does not name: a kick always follows a
//     delivered request naming that session's lock token;
//  7. a per-player ledger: a load never has less than what the player's last
//     acknowledged save or clean release held, and never more than was
//     earned; only a crash or a lost lock may lose progress (since the last
//     landed save);
//  8. liveness: at the end the faults stop and every player leaves; two
//     quiet minutes later no live server may still hold a lock.
//
// A failure reports the seed and a readable trace of the steps that led to
// it.
package simulation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/presence"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"
)

// Config shapes a run.
type Config struct {
	Seed     uint64
	Servers  int           // servers up at once
	Players  int           // players
	Duration time.Duration // virtual time
	Step     time.Duration // virtual time between steps
	Faults   float64       // probability of a fault per step (0 to 1)
}

// DefaultConfig is a long run: four servers, 200 players, two hours of game
// time.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Servers: 4, Players: 200, Duration: 2 * time.Hour, Step: 2 * time.Second, Faults: 0.05}
}

// ShortConfig is the run CI repeats over hundreds of seeds: three servers,
// 40 players, 15 minutes of game time, twice the fault rate (about a second
// of one core).
func ShortConfig(seed uint64) Config {
	return Config{Seed: seed, Servers: 3, Players: 40, Duration: 15 * time.Minute, Step: 2 * time.Second, Faults: 0.1}
}

// Wallet is the profile of the simulated game: coins are earned, gems only
// change hands in trades.
type Wallet struct {
	Coins int64
	Gems  int64
}

const (
	driverName   = "Wallet"
	initialGems  = 10
	lockWait     = 15 * time.Second
	saveTimeout  = 10 * time.Second
	presenceTTL  = 10 * time.Second
	presenceBeat = 3 * time.Second
)

// Result is what a run did, for the report.
type Result struct {
	Steps, Joins, Refused, Hops, Trades, Crashes, Faults int
	Scripts                                              int // Lua script calls the servers made
	Failure                                              error
	Trace                                                []string
}

// Run runs one simulation; call it inside a synctest bubble.
func Run(t testing.TB, cfg Config) *Result {
	s := newSim(t, cfg)
	s.run()
	return &s.result
}

type sim struct {
	tb     testing.TB
	cfg    Config
	rng    *rand.Rand
	c      *testsupport.Cluster
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards everything below, and the model
	servers []*server
	players []*player
	result  Result
	trace   []string
	pending []event
	failed  error
	wg      sync.WaitGroup

	// Observations (from the cluster's script observer and the bus).
	epochToken   map[string]map[int64]string // key -> epoch -> lock token
	tokenEpoch   map[string]int64            // token -> epoch
	landed       map[string]map[int64]string // key -> ver -> data written at that version
	expiresAt    map[string]time.Time        // job -> expiry of its last successful beat
	delivered    map[string]map[string]bool  // job -> key+"\x00"+token of requests delivered
	latest       map[string]heldToken        // key+"\x00"+job -> the newest token job landed for key
	checkRedis   redis.UniversalClient
	bornAt       time.Time
	redisRestart time.Time // the last Redis restart
}

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

func newSim(tb testing.TB, cfg Config) *sim {
	s := &sim{
		tb:         tb,
		cfg:        cfg,
		rng:        rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
		epochToken: make(map[string]map[int64]string),
		tokenEpoch: make(map[string]int64),
		landed:     make(map[string]map[int64]string),
		expiresAt:  make(map[string]time.Time),
		delivered:  make(map[string]map[string]bool),
		latest:     make(map[string]heldToken),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	tb.Cleanup(s.cancel)
	s.c = testsupport.NewCluster(tb, testsupport.WithSeed(cfg.Seed))
	s.c.Observe(s.observe)
	s.c.Bus.OnDeliver(s.onDeliver)
	s.checkRedis = s.c.Client(tb)
	tb.Cleanup(func() { _ = s.checkRedis.Close() })
	s.bornAt = time.Now()
	for i := range cfg.Players {
		s.players = append(s.players, &player{key: fmt.Sprintf("p%03d", i)})
	}
	for range cfg.Servers {
		s.startServer()
	}
	return s
}

// logf records a line for the trace. Lines of one step are put in order of
// time, then text, when the step ends: things that happen at the same
// virtual instant on different goroutines have no order of their own, and a
// replay must print the same trace.
func (s *sim) logf(format string, args ...any) {
	e := event{at: time.Since(s.bornAt).Round(time.Millisecond), text: fmt.Sprintf(format, args...)}
	s.mu.Lock()
	s.pending = append(s.pending, e)
	s.mu.Unlock()
}

// event is one line of the trace.
type event struct {
	at   time.Duration
	text string
}

// flush moves the step's lines to the trace, in order.
func (s *sim) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.SortStableFunc(s.pending, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.text, b.text)
	})
	for _, e := range s.pending {
		s.trace = append(s.trace, fmt.Sprintf("%9s  %s", e.at, e.text))
	}
	s.pending = s.pending[:0]
}

// fail records the first invariant violation.
func (s *sim) fail(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	s.logf("VIOLATION: %v", err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = err
	}
}

func (s *sim) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
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

// isSave reports whether cmd is the record's save.lua call.
func isSave(cmd redis.Cmder) bool {
	in, ok := testsupport.Identify(cmd)
	return ok && in.Script == record.ScriptSave
}

// isBeat reports whether cmd is srv's own presence beat.
func isBeat(srv *server, cmd redis.Cmder) bool {
	in, ok := testsupport.Identify(cmd)
	if !ok || in.Script != presence.ScriptBeat {
		return false
	}
	a, err := presence.ParseBeatArgs(in.Args)
	return err == nil && a.JobID == srv.s.JobID
}

// before injects the faults that act before a command reaches Redis.
func (s *sim) before(srv *server, ctx context.Context, cmd redis.Cmder) error {
	now := time.Now()
	s.mu.Lock()
	failTo, stallTo, deafTo := srv.failTo, srv.stallTo, srv.deafTo
	s.mu.Unlock()
	switch {
	case isSave(cmd) && now.Before(failTo):
		return testsupport.ErrInjected
	case isSave(cmd) && now.Before(stallTo):
		// Stalled saves come out in the order they went in, a microsecond
		// apart, rather than all at one instant in the scheduler's order.
		s.mu.Lock()
		srv.stalled++
		out := stallTo.Add(time.Duration(srv.stalled) * time.Microsecond)
		s.mu.Unlock()
		t := time.NewTimer(out.Sub(now))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	case isBeat(srv, cmd) && now.Before(deafTo):
		return testsupport.ErrInjected
	}
	return nil
}

// after loses answers of saves that landed.
func (s *sim) after(srv *server, cmd redis.Cmder, err error) error {
	if err != nil || !isSave(cmd) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv.lose > 0 {
		srv.lose--
		return testsupport.ErrInjected
	}
	return nil
}

// observe records what the scripts did, and checks invariants 1 to 3 as
// they happen.
func (s *sim) observe(job string, call testsupport.ScriptCall) {
	s.mu.Lock()
	s.result.Scripts++
	s.mu.Unlock()
	if call.Err != nil {
		return
	}
	key := ""
	if len(call.Keys) > 0 {
		key = call.Keys[0]
	}
	switch call.Script {
	case presence.ScriptBeat:
		a, err1 := presence.ParseBeatArgs(call.Args)
		ans, err2 := presence.ParseBeatAnswer(call.Val)
		if err1 != nil || err2 != nil || a.JobID != job {
			return
		}
		s.mu.Lock()
		if ans.ExpiresAt.After(s.expiresAt[job]) {
			s.expiresAt[job] = ans.ExpiresAt
		}
		s.mu.Unlock()
	case record.ScriptAcquire:
		a, err1 := record.ParseAcquireArgs(call.Args)
		res, err2 := record.ParseAcquire(call.Val)
		if err1 != nil || err2 != nil {
			s.fail("acquire call unreadable: %v %v", err1, err2)
			return
		}
		if res.Outcome != record.Acquired {
			return
		}
		s.noteToken(job, key, res.Epoch, a.Token)
		if res.How == record.TakenStolen || res.How == record.TakenExpired {
			s.mu.Lock()
			exp, restart := s.expiresAt[res.PrevJob], s.redisRestart
			s.mu.Unlock()
			// By design an unknown presence answer (the first TTL after a Redis
			// restart) does not protect a lock past LockTTL+LockSkew.
			graceAfterRestart := res.How == record.TakenExpired && time.Since(restart) < presenceTTL+presenceBeat
			if now := time.Now(); now.Before(exp) && !graceAfterRestart {
				s.fail("invariant 2: %s took %s %s from %s, whose presence lives until %s", job, key, res.How, res.PrevJob,
					exp.Sub(s.bornAt))
			}
		}
		s.mu.Lock()
		want, known := s.landed[key][res.Ver]
		s.mu.Unlock()
		if data := string(res.Data); res.Ver > 0 && known && want != data {
			s.fail("invariant 3: %s loaded %s at ver %d with data %x, but the write that made ver %d had %x",
				job, key, res.Ver, data, res.Ver, want)
		}
	case record.ScriptSave:
		a, err1 := record.ParseSaveArgs(call.Args)
		res, err2 := record.ParseSave(call.Val)
		if err1 != nil || err2 != nil {
			s.fail("save call unreadable: %v %v", err1, err2)
			return
		}
		if res.Outcome != record.Written {
			return
		}
		if res.Moved {
			s.noteToken(job, key, res.Epoch, a.Token)
		}
		s.mu.Lock()
		want, known := s.tokenEpoch[a.Token]
		s.mu.Unlock()
		if res.How == record.HowSaved || res.How == record.HowReleased {
			if known && want != res.Epoch {
				s.fail("invariant 1: %s wrote %s with the token of epoch %d while the record is at epoch %d",
					job, key, want, res.Epoch)
			}
			if a.Data != nil {
				s.mu.Lock()
				if s.landed[key] == nil {
					s.landed[key] = make(map[int64]string)
				}
				s.landed[key][res.Ver] = string(a.Data)
				s.mu.Unlock()
			}
		}
	}
}

// noteToken records that job's lock token for key landed at epoch.
func (s *sim) noteToken(job, key string, epoch int64, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epochToken[key] == nil {
		s.epochToken[key] = make(map[int64]string)
	}
	s.epochToken[key][epoch] = token
	s.tokenEpoch[token] = epoch
	if cur, ok := s.latest[key+"\x00"+job]; !ok || epoch > cur.epoch {
		s.latest[key+"\x00"+job] = heldToken{epoch, token}
	}
}

// heldToken is the newest lock token of a key a server got to land.
type heldToken struct {
	epoch int64
	token string
}

// onDeliver records requests as they reach their server.
func (s *sim) onDeliver(to string, m messaging.Message) {
	if m.Type != messaging.TypeRequest {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delivered[to] == nil {
		s.delivered[to] = make(map[string]bool)
	}
	s.delivered[to][recordKey(m.Key)+"\x00"+m.Token] = true
}

func recordKey(key string) string { return datadriver.RecordKey("sim", driverName, key) }

// kicked checks invariant 6: a session is ended for another server only
// after a request naming its lock reached this server.
func (s *sim) kicked(srv *server, key, reason string) {
	if reason != datadriver.ReasonJoinedElsewhere {
		return
	}
	s.mu.Lock()
	var pl *player
	for _, p := range s.players {
		if p.key == key {
			pl = p
		}
	}
	// The session's lock is the newest this server got to land for the key
	// (the profile may not know yet: an adoption whose answer was lost).
	var epoch int64 = -1
	rk := recordKey(key)
	held := s.latest[rk+"\x00"+srv.s.JobID]
	if pl != nil && pl.srv == srv && pl.p != nil {
		epoch = held.epoch
	}
	named := s.delivered[srv.s.JobID][rk+"\x00"+held.token]
	s.mu.Unlock()
	s.logf("kick %s on %s (epoch %d)", key, srv.s.JobID, epoch)
	if epoch >= 0 && !named {
		s.fail("invariant 6: %s ended the session of %s (epoch %d) without a request naming its lock", srv.s.JobID, key, epoch)
	}
}

// run plays the whole run.
func (s *sim) run() {
	end := s.bornAt.Add(s.cfg.Duration)
	for time.Now().Before(end) && s.failure() == nil {
		s.step()
		// Steps fall at irregular milliseconds, so that the protocol's timers
		// (set at earlier steps, in multiples of 0.5 s) seldom fire at the
		// very instant a step starts, where their order would be the
		// scheduler's.
		time.Sleep(s.cfg.Step + time.Duration(1+s.rng.IntN(999))*time.Millisecond - s.cfg.Step/4)
		synctest.Wait() // everything due by now has run
		s.checkSessions()
		s.checkGems()
		s.flush()
		s.mu.Lock()
		s.result.Steps++
		s.mu.Unlock()
	}
	if s.failure() == nil {
		s.drain()
	}
	s.cancel()
	s.wg.Wait()
	s.flush()
	s.mu.Lock()
	s.result.Failure = s.failed
	s.result.Trace = s.trace
	s.mu.Unlock()
}

// drain ends the run: the faults stop, every player leaves, and after two
// quiet minutes no lock may be held by a live server (a server may keep a
// lock only while one of its profiles uses it: an orphan would lock the
// player out for as long as the server lives).
func (s *sim) drain() {
	s.logf("DRAIN faults stop, every player leaves")
	s.mu.Lock()
	for _, srv := range s.servers {
		srv.failTo, srv.stallTo, srv.deafTo, srv.lose = time.Time{}, time.Time{}, time.Time{}, 0
	}
	s.mu.Unlock()
	s.c.Bus.SetFault(nil)
	s.wg.Wait()
	for _, pl := range s.players {
		s.mu.Lock()
		online := pl.p != nil
		s.mu.Unlock()
		if online {
			s.leave(pl)
		}
	}
	time.Sleep(2 * time.Minute)
	synctest.Wait()
	crashed := map[string]bool{}
	for _, srv := range s.servers {
		if srv.s.Crashed() {
			crashed[srv.s.JobID] = true
		}
	}
	for _, pl := range s.players {
		f, err := s.checkRedis.HMGet(context.Background(), recordKey(pl.key), "lock.token", "lock.job").Result()
		if err != nil {
			s.fail("drain: %v", err)
			return
		}
		token, _ := f[0].(string)
		job, _ := f[1].(string)
		if token != "" && !crashed[job] {
			s.fail("liveness: %s is still locked by live server %s two quiet minutes after every player left", pl.key, job)
			s.mu.Lock()
			for _, srv := range s.servers {
				if srv.s.JobID != job {
					continue
				}
				for _, line := range strings.Split(srv.s.Logs.String(), "\n") {
					if strings.Contains(line, "key="+pl.key) && !strings.Contains(line, "presence read") {
						s.pending = append(s.pending, event{at: time.Since(s.bornAt), text: "  " + job + " log: " + line})
					}
				}
			}
			s.mu.Unlock()
		}
	}
}

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

// checkGems checks invariant 4 on what Redis holds: every record's gems,
// or, where a trade's mark is pending on a committed trade, its image.
func (s *sim) checkGems() {
	ctx := context.Background()
	total := int64(0)
	for _, pl := range s.players {
		rk := recordKey(pl.key)
		f, err := s.checkRedis.HMGet(ctx, rk, "data", "trade").Result()
		if err != nil {
			s.fail("check: %v", err)
			return
		}
		data, _ := f[0].(string)
		trade, _ := f[1].(string)
		if trade != "" {
			m, err := s.checkRedis.HGetAll(ctx, "sim:trade:{"+trade+"}").Result()
			if err != nil {
				s.fail("check: %v", err)
				return
			}
			if m["state"] == "COMMITTED" {
				for i := 0; ; i++ {
					desc, ok := m[fmt.Sprintf("p%d", i)]
					if !ok {
						break
					}
					var d struct {
						K string `msgpack:"k"`
					}
					_ = msgpack.Unmarshal([]byte(desc), &d)
					if d.K == pl.key {
						data = m[fmt.Sprintf("img%d", i)]
					}
				}
			}
		}
		w := Wallet{Gems: initialGems}
		if data != "" {
			if err := msgpack.Unmarshal([]byte(data), &w); err != nil {
				s.fail("check: %s: %v", pl.key, err)
				return
			}
		}
		total += w.Gems
	}
	if want := int64(len(s.players)) * initialGems; total != want {
		s.fail("invariant 4: %d gems in all, want %d", total, want)
	}
}

// fault injects one fault, chosen from the seed.
func (s *sim) fault(alive []*server) {
	s.mu.Lock()
	s.result.Faults++
	s.mu.Unlock()
	srv := alive[s.rng.IntN(len(alive))]
	now := time.Now()
	dur := time.Duration(1+s.rng.IntN(20)) * time.Second
	switch k := s.rng.IntN(10); k {
	case 0:
		s.logf("FAULT saves of %s fail for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.failTo = now.Add(dur)
		s.mu.Unlock()
	case 1:
		s.logf("FAULT saves of %s stall for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.stallTo = now.Add(dur)
		s.mu.Unlock()
	case 2:
		n := 1 + s.rng.IntN(3)
		s.logf("FAULT the answers of the next %d saves of %s are lost", n, srv.s.JobID)
		s.mu.Lock()
		srv.lose += n
		s.mu.Unlock()
	case 3:
		s.logf("FAULT presence writes of %s fail for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.deafTo = now.Add(dur)
		s.mu.Unlock()
	case 4:
		s.logf("FAULT the bus drops, delays and duplicates messages for %s", dur)
		until, salt := now.Add(dur), s.rng.Uint64()
		s.c.Bus.SetFault(func(to string, m messaging.Message) testsupport.Fault {
			now := time.Now()
			if now.After(until) {
				return testsupport.Fault{}
			}
			// What happens to a message is a function of the message and the
			// moment, not of the order messages are sent in: a replay repeats it.
			h := fnv.New64a()
			fmt.Fprintf(h, "%d|%s|%s|%s|%s|%s|%d", salt, to, m.Type, m.Key, m.Requester, m.Token, now.UnixNano())
			r := h.Sum64()
			switch r % 4 {
			case 0:
				return testsupport.Fault{Drop: true}
			case 1:
				return testsupport.Fault{Delay: time.Duration(r>>8%3000) * time.Millisecond}
			case 2:
				return testsupport.Fault{Echo: time.Duration(1+r>>8%30) * time.Second}
			}
			return testsupport.Fault{}
		})
	case 5:
		if len(alive) < 2 {
			return
		}
		s.logf("FAULT crash %s", srv.s.JobID)
		s.mu.Lock()
		s.result.Crashes++
		s.mu.Unlock()
		srv.s.Crash()
		s.startServer()
	case 6:
		s.logf("FAULT Redis restarts: the presence hash and the script cache are gone")
		s.mu.Lock()
		s.redisRestart = now
		s.mu.Unlock()
		if err := s.c.RedisRestart(context.Background()); err != nil {
			s.fail("redis restart: %v", err)
		}
	default:
		// A forged request (a random token) to a server, for a random key.
		pl := s.players[s.rng.IntN(len(s.players))]
		token := fmt.Sprintf("%016x", s.rng.Uint64())
		s.logf("FAULT a forged request for %s to %s", pl.key, srv.s.JobID)
		bus := s.c.Bus.Endpoint("forger")
		_ = bus.Publish(context.Background(), srv.s.JobID, messaging.Message{
			Type: messaging.TypeRequest, Driver: driverName, Key: pl.key, Requester: "forger", Token: token,
		})
	}
}

// Tail returns the last n lines of a trace.
func Tail(trace []string, n int) string {
	return strings.Join(trace[max(0, len(trace)-n):], "\n")
}
