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
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
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

// Tail returns the last n lines of a trace.
func Tail(trace []string, n int) string {
	return strings.Join(trace[max(0, len(trace)-n):], "\n")
}
