// Package simulation runs randomized multi-server games against the whole
// protocol on virtual time and checks its invariants after every step.
//
// It is a test rig: only this repository's tests use it (go test
// ./simulation/), it is not part of the library's API, and a game server
// never imports it.
//
// A run is a function of its seed: the servers, the players' moves (join,
// earn, save, leave, hop to another server, trade), the messages the servers
// send them (Driver.Send, to players online or not; see messages.go), and
// the faults all come from one PCG stream. Faults come in the three kinds a promise must be
// tested against (see faults.go), and a fourth outside the fault model:
//
//   - calls that fail: failing saves and presence writes, lost save
//     answers, dropped, delayed and duplicated messages, forged requests,
//     Redis restarts;
//   - calls that hang until their deadline instead of failing: a presence
//     beat, a save, a presence read, an acquire, a send, a trade's commit
//     or abort (the Node's own deadlines, or the caller's context, end
//     them; some land first and lose their answer: a trade's outcome is
//     then unknown until a later save reads the journal), stalled saves, and one-sided partitions: a server cut from
//     Redis (every call of it hangs, the others are unaffected) or from the
//     bus only;
//   - a process that pauses or dies: a server paused (nothing of it
//     answers; at its resume the game at once tries Update on every profile
//     it believed live) and crashes with restarts under a new JobID;
//   - tampers (Config.Tampers, tamper.go): what other tools and Redis do to
//     the keys behind the library's back: a field of a record broken (ver,
//     epoch, inbox.seq or lock.at not an integer, lock.at an hour ahead of
//     the Redis clock, lock.presence neither 1 nor 0, lock.job emptied) or
//     its inbox or history replaced by a key of the wrong type, repaired a
//     few seconds to a minute later by the operator's `playerdata repair
//     --force` (lockrule.Repair: repair.go) whoever holds the record; a
//     record deleted, held or not, alone or with its inbox and history; the
//     presence owners hash evicted; and the operator's `playerdata unlock`
//     (lockrule.Unlock: operator.go) of records held by live, paused,
//     cut-off or crashed servers.
//
// It runs inside a testing/synctest bubble on a testsupport.Cluster, so
// hours of game time take seconds. A pause there pauses everything the
// server exchanges with the world, not the server itself: its timers still
// fire and its goroutines still run, so its presence lease lapses on time
// (a real SIGSTOP sees the deadline only after SIGCONT, when the lease
// check in Update is what refuses; faulttest's SIGSTOP test covers that).
//
// After each step it checks:
//
//  1. one writer per key: every save that lands carries the epoch of the
//     acquisition that made its token (a stale token never writes);
//  2. a live, beating holder never loses its lock: a lock is taken from a
//     server (by presence or by age) only once that server's presence has
//     expired since the lock was last written (the server fenced itself
//     then: what it held before is dead even if it beats again since);
//  3. every load sees exactly the last landed write of its record;
//  4. trades are all-or-nothing and never twice: the gems of all players,
//     counting a settled trade's image where its mark is still pending, stay
//     what they were;
//  5. every join ends within its bound (stretched by the time its server
//     was paused);
//  6. no request ends a session it does not name: a kick for another
//     server always follows a delivered request naming that session's lock
//     token; a fenced session is kicked with ReasonFenced, without any
//     request, and a session that ends fenced always is;
//  7. a per-player ledger: a load never has less than what the player's last
//     acknowledged save or clean release held, and never more than was
//     earned; only a crash or a lost lock may lose progress (since the last
//     landed save);
//  8. liveness: at the end the faults stop and every player leaves; two
//     quiet minutes later no live server may still hold a lock;
//  9. no profile is live on two servers at once: no Update (and no trade)
//     succeeds on a server after another server's acquire of the key
//     landed, unless the server acquired the key again since (see
//     invariants.go for what "after" means at one virtual instant);
//  10. every message is applied exactly once: OnMessage never finds the
//     message it applies in the data already; no data loaded, written or
//     kept in Redis holds a message not sent to its player, or one whose
//     Send was refused (ErrInboxFull, ErrTooLarge), or one its inbox still
//     holds (a save deletes the messages it applied in the same script), or
//     gifts other than the sum of its messages' amounts (a message applied
//     twice); a save that deletes a message leaves data that holds it; at
//     the end, once every player has left and those with messages waiting
//     have joined once more (the load applies them), every inbox is empty
//     and every message whose Send was acknowledged, or that the simulation
//     saw stored, is in its player's record (once: a bit per message, the
//     gifts its sum), every other one at most once, and one refused never.
//     Half the messages carry an idempotency key and some are sent again
//     (msgkeys.go): a key names one message of its player (a message is
//     stored at most once; a key is never stored for another message inside
//     its window, nor while its message waits or lies dead; a duplicate
//     answers the key's own message, a conflict names it; the bound on keys
//     refuses only at the bound), and stubborn messages, refused until the
//     end, are retried by their holder until they are dead letters;
//  11. no state of a record wedges a key (DESIGN.md's invariant 12; see
//     tampercheck.go): while a tamper's damage stands, every script that
//     meets it refuses it (CORRUPT, nothing written; no script answers
//     CORRUPT otherwise), a join is refused with ErrCorruptRecord within
//     LockWait and never waits it out, a held session's next write ends it
//     (ErrLockLost, Kick ReasonRecordCorrupt); the epoch never goes back; a
//     deleted record is never written again under a lock taken before its
//     deletion (its holder's session ends, ReasonRecordGone); after the
//     repair every damaged record loads, with what the ledger says; the
//     eviction of the presence owners hash fences nobody (no beat of a
//     server ever meets another process's beat of its JobID) and every live
//     server re-claims its entry at its next full beat.
//
// A deletion loses the record by design: from it on, invariants 3, 4, 7 and
// 10 start over for the record (its landed writes, its gems, its ledger, the
// messages its data or destroyed inbox held: forgetRecord), and invariant 9
// does not cover an Update of a session whose lock predates the deletion
// (the old holder plays on until its next write: exemptDeleted).
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

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/testsupport"
)

// Config shapes a run.
type Config struct {
	Seed     uint64
	Servers  int           // servers up at once
	Players  int           // players
	Duration time.Duration // virtual time
	Step     time.Duration // virtual time between steps
	Faults   float64       // probability of a fault per step (0 to 1)
	// Hangs adds the faults that hang to the draw: calls that hang until
	// their deadline, one-sided partitions and process pauses. Off, a seed
	// draws the classic faults only (failing, stalled or unanswered saves,
	// failing beats, a lossy bus, crashes, Redis restarts), as the classic
	// regression seeds were found with.
	Hangs bool
	// Tampers adds what other tools and Redis itself do to the keys behind
	// the library's back, outside its fault model (tamper.go): a field of a
	// record broken or its inbox or history replaced by a key of the wrong
	// type (the operator repairs it later, as `playerdata repair --force`
	// does), a record deleted (a stray DEL, an eviction), the presence owners
	// hash evicted, and the operator's unlocks. Off, a seed draws what it drew
	// before the tampers existed, as the regression seeds were found with.
	Tampers bool
	// SoloCalls is every server's NodeConfig.SoloCalls. DefaultConfig and
	// ShortConfig give even seeds 1 (two lock calls in flight and the next
	// waits for a pipeline: the faults meet calls in pipelines as often as
	// alone) and odd seeds -1 (every call alone). An odd seed replays
	// exactly; an even one may not, where calls at one instant share a
	// pipeline in the scheduler's order (so may the library's default, 8,
	// when a burst at one instant passes it).
	SoloCalls int
}

// soloCalls is the SoloCalls of seed's DefaultConfig and ShortConfig.
func soloCalls(seed uint64) int {
	if seed%2 == 0 {
		return 1
	}
	return -1
}

// DefaultConfig is a long run: four servers, 200 players, two hours of game
// time.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Servers: 4, Players: 200, Duration: 2 * time.Hour, Step: 2 * time.Second, Faults: 0.05, Hangs: true, Tampers: true,
		SoloCalls: soloCalls(seed)}
}

// ShortConfig is the run CI repeats over hundreds of seeds: three servers,
// 40 players, 15 minutes of game time, twice the fault rate (about a second
// of one core).
func ShortConfig(seed uint64) Config {
	return Config{Seed: seed, Servers: 3, Players: 40, Duration: 15 * time.Minute, Step: 2 * time.Second, Faults: 0.1, Hangs: true, Tampers: true,
		SoloCalls: soloCalls(seed)}
}

// Wallet is the profile of the simulated game: coins are earned, gems only
// change hands in trades, gifts come in messages.
//
// Its encoding is kept small (one-letter keys, the messages applied as a
// bitmap): a trade's first pipeline after a Redis restart carries the
// scripts' sources and both images, and the cluster's in-memory Redis
// connection (net.Pipe to miniredis) deadlocks on a pipeline of three
// commands over 4 KiB until its deadline.
type Wallet struct {
	Coins int64 `msgpack:"c"`
	Gems  int64 `msgpack:"e"`
	// Gifts is the sum of the amounts of the messages applied; Got has bit
	// k-1 set once the player's k-th message is applied (gift.K).
	Gifts int64  `msgpack:"g,omitempty"`
	Got   []byte `msgpack:"m,omitempty"`
}

// has reports whether w has applied its player's k-th message.
func (w *Wallet) has(k int) bool {
	i := (k - 1) / 8
	return k > 0 && i < len(w.Got) && w.Got[i]&(1<<((k-1)%8)) != 0
}

// set records that w has applied its player's k-th message.
func (w *Wallet) set(k int) {
	for len(w.Got) <= (k-1)/8 {
		w.Got = append(w.Got, 0)
	}
	w.Got[(k-1)/8] |= 1 << ((k - 1) % 8)
}

// got lists the numbers (for its player) of the messages w has applied.
func (w *Wallet) got() []int {
	var ks []int
	for i, b := range w.Got {
		for j := range 8 {
			if b&(1<<j) != 0 {
				ks = append(ks, 8*i+j+1)
			}
		}
	}
	return ks
}

const (
	driverName   = "Wallet"
	initialGems  = 10
	lockWait     = 15 * time.Second
	saveTimeout  = 10 * time.Second
	presenceTTL  = 10 * time.Second
	presenceBeat = 3 * time.Second
	// joinGiveUp is the game's own bound on a join (the context it passes):
	// a player waits that long at most. It is past every bound the driver
	// promises, so that a join it ends has already broken invariant 5.
	joinGiveUp = time.Minute
)

// Result is what a run did, for the report.
type Result struct {
	Steps, Joins, Refused, Hops, Trades, Crashes, Faults int
	TradesUnknown                                        int      // trades that returned ErrTradeOutcomeUnknown
	Hangs, Pauses                                        int      // hang, partition and pause faults (counted in Faults too)
	Fenced                                               int      // sessions fenced off (Kick with ReasonFenced)
	ResumeUpdates                                        int      // Updates tried by a resumed server, and of those
	ResumeRefused                                        int      // refused
	Guarded                                              int      // Updates refused that, accepted, would have broken invariant 9
	Scripts                                              int      // Lua script calls the servers made
	LateSaves, LateRefused                               int      // saves delivered after their caller gave up, and of those refused as late
	Messages                                             Messages // the messages sent, and what became of them
	Tampers                                              Tampers  // what the tampers did, and what the library answered
	// MovesTo are the MoveTo calls the game made, MovedTo those that landed.
	MovesTo, MovedTo int
	Failure          error
	Trace            []string
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
	revivedAt    map[string]time.Time        // job -> when a beat of it last landed after its presence had expired
	lockAt       map[string]time.Time        // key -> when its lock was last written (taken, or saved under)
	delivered    map[string]map[string]bool  // job -> key+"\x00"+token of requests delivered
	latest       map[string]heldToken        // key+"\x00"+job -> the newest token job landed for key
	checkRedis   redis.UniversalClient
	bornAt       time.Time
	redisRestart time.Time // the last Redis restart

	// The script calls at one virtual instant (a hot-loop watchdog), and
	// whether the run was stopped because of one.
	instant         time.Time
	instantCalls    int
	instantAcquires int
	stopped         bool

	// Invariant 9: the acquisitions that landed, per key, and the order of
	// the events at one virtual instant.
	seq          uint64               // the last sequence number handed out
	acquisitions map[string][]landing // key -> its acquisitions that landed, in order
	fencedKicks  map[string]time.Time // job+"\x00"+key -> the last Kick(ReasonFenced)
	kicks        map[string]time.Time // job+"\x00"+key -> the last Kick, any reason
	joining      map[string]int       // job+"\x00"+key -> joins of key on job under way

	// Invariant 10: the ledger of the messages sent (by number), the
	// number of each one the simulation saw land, by record key and inbox
	// id, and the players by record key.
	msgs     map[uint64]*sentMsg
	lastMsg  uint64            // the last number handed out
	msgIDs   map[string]uint64 // key+"\x00"+inbox id -> number
	byRecord map[string]*player
	// The keyed sends (msgkeys.go): their draws, the last key handed out,
	// the message each key of a record names, and whether what refuses
	// stubborn messages was mended (the run's end).
	keyRng *rand.Rand
	// opRng draws the operator's restores (restore.go), apart from the
	// main stream.
	opRng     *rand.Rand
	lastKey   int
	keyOwners map[string]*keyOwner // record key+"\x00"+idempotency key -> its message
	// claimOwners are the namespace's claims of idempotency keys (msgkeys.go).
	claimOwners map[string]*claimOwner
	mended      bool

	// Invariant 11: what the tampers did (tamper.go).
	tampers tamperState
	// op is the operator's presence reader and Handoff (operator.go).
	op *operator
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
		revivedAt:  make(map[string]time.Time),
		lockAt:     make(map[string]time.Time),
		delivered:  make(map[string]map[string]bool),
		latest:     make(map[string]heldToken),

		acquisitions: make(map[string][]landing),
		fencedKicks:  make(map[string]time.Time),
		kicks:        make(map[string]time.Time),
		joining:      make(map[string]int),
		msgs:         make(map[uint64]*sentMsg),
		msgIDs:       make(map[string]uint64),
		byRecord:     make(map[string]*player),
		keyRng:       rand.New(rand.NewPCG(cfg.Seed, 0x6a09e667f3bcc909)),
		opRng:        rand.New(rand.NewPCG(cfg.Seed, 0xbb67ae8584caa73b)),
		keyOwners:    make(map[string]*keyOwner),
		claimOwners:  make(map[string]*claimOwner),
		tampers:      newTamperState(),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	tb.Cleanup(s.cancel)
	s.c = testsupport.NewCluster(tb, testsupport.WithSeed(cfg.Seed))
	s.c.Observe(s.observe)
	s.c.Bus.OnDeliver(s.onDeliver)
	s.c.Bus.SetLatency(busLatency)
	s.checkRedis = s.c.Client(tb)
	tb.Cleanup(func() { _ = s.checkRedis.Close() })
	s.bornAt = time.Now()
	for i := range cfg.Players {
		pl := &player{key: fmt.Sprintf("p%03d", i)}
		s.players = append(s.players, pl)
		s.byRecord[recordKey(pl.key)] = pl
	}
	for i := range cfg.Servers {
		if i > 0 {
			// Servers that start at one instant beat (and time all else) at
			// one instant for good, in the scheduler's order: which of them
			// meets an empty script cache first after a Redis restart, whether
			// a presence read at that instant sees a beat. A phase of its own
			// for each, below the millisecond grid steps fall on.
			time.Sleep(time.Duration(1000 + s.rng.IntN(999_000)))
		}
		s.startServer()
	}
	// The steps fall on the millisecond grid of the start, off the servers'
	// phases.
	time.Sleep(time.Since(s.bornAt).Truncate(time.Millisecond) + time.Millisecond - time.Since(s.bornAt))
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
	for time.Now().Before(end) && s.failure() == nil && !s.isStopped() {
		s.step()
		// Steps fall at irregular milliseconds, so that the protocol's timers
		// (set at earlier steps, in multiples of 0.5 s) seldom fire at the
		// very instant a step starts, where their order would be the
		// scheduler's.
		time.Sleep(s.cfg.Step + time.Duration(1+s.rng.IntN(999))*time.Millisecond - s.cfg.Step/4)
		synctest.Wait() // everything due by now has run
		s.checkSessions()
		s.checkRecords()
		s.checkReclaim()
		s.flush()
		s.mu.Lock()
		s.result.Steps++
		s.mu.Unlock()
	}
	if s.failure() == nil && !s.isStopped() {
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

// isStopped reports whether the run was stopped (see hotLoop).
func (s *sim) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Tail returns the last n lines of a trace.
func Tail(trace []string, n int) string {
	return strings.Join(trace[max(0, len(trace)-n):], "\n")
}
