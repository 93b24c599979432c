package simulation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/enum"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/vmihailenco/msgpack/v5"
)

// The senders: the send move (a server's game sends gifts to a player,
// online or not, with Driver.Send), the game's OnMessage, and the ledger of
// every message sent, which invariant 10 (invariants.go) checks the records
// against.

const (
	// sendRate is the probability of a send move at a step.
	sendRate = 0.4
	// maxInbox is the drivers' MaxInbox: small, so that a burst to a player
	// who is away fills the inbox (ErrInboxFull).
	maxInbox = 4
	// maxMessageBytes is the drivers' MaxMessageBytes: a gift with padding is
	// over it (ErrTooLarge).
	maxMessageBytes = 256
	// sendTimeout bounds a Send (the context the game passes): a Send that
	// hangs ends then, stored or not.
	sendTimeout = 5 * time.Second
	// maxIdempotencyKeys is the drivers' MaxIdempotencyKeys: small, so that
	// keyed sends meet the bound (ErrTooManyIdempotencyKeys).
	maxIdempotencyKeys = 3
	// idempotencyWindow is the drivers' IdempotencyWindow: short, so that
	// keys are forgotten within a run, and reused after it.
	idempotencyWindow = 4 * time.Minute
)

// Messages counts the messages of a run and what became of them.
type Messages struct {
	Sent     int // Send calls
	Acked    int // answered with an id
	Full     int // refused with ErrInboxFull
	TooLarge int // refused with ErrTooLarge
	Failed   int // failed otherwise: stored or not
	Landed   int // of the failed, those the simulation saw stored
	Refusals int // refusals by OnMessage (a fussy message at an even second, a stubborn one: it stays in the inbox)
	Replayed int // dead letters (refused MaxMessageAttempts times) replayed at the end
	Applied  int // in their player's record exactly once at the end
	Keys     Keys
}

// Keys counts the sends with an idempotency key (msgkeys.go).
type Keys struct {
	Keyed      int // Send calls with a key, retries included
	Retries    int // Send calls that retried a keyed message
	Duplicates int // answered the first id: the message was stored already
	Conflicts  int // refused with ErrIdempotencyConflict: the key names another message
	Cross      int // of the claims, refused because the key names another player's message
	Bound      int // refused with ErrTooManyIdempotencyKeys
	DeadDups   int // duplicates whose message lay in the dead letters
}

// String is the per-run summary line's part on messages.
func (m Messages) String() string {
	return fmt.Sprintf("messages: %d sent, %d acknowledged, %d refused (%d inbox full, %d too large), "+
		"%d failed (%d of them stored), %d applied exactly once, %d refusals by OnMessage, %d dead letters replayed; "+
		"%d keyed sends (%d retries): %d duplicates (%d of dead letters), %d key conflicts (%d another player's), %d at the key bound",
		m.Sent, m.Acked, m.Full+m.TooLarge, m.Full, m.TooLarge, m.Failed, m.Landed, m.Applied, m.Refusals, m.Replayed,
		m.Keys.Keyed, m.Keys.Retries, m.Keys.Duplicates, m.Keys.DeadDups, m.Keys.Conflicts, m.Keys.Cross, m.Keys.Bound)
}

// gift is the body of a message the simulation sends.
type gift struct {
	N      uint64 // the message's number, unique in the run
	To     string // the player it is sent to
	K      int    // the message's number for that player (from 1): its bit in Wallet.Got
	Amount int64  // added to Wallet.Gifts
	Fussy  bool   `msgpack:",omitempty"` // OnMessage refuses it at even seconds
	// Stubborn: OnMessage refuses it until the end of the run, when what
	// refused it is mended (it becomes a dead letter meanwhile).
	Stubborn bool   `msgpack:",omitempty"`
	Pad      []byte `msgpack:",omitempty"` // makes it too large
}

// msgState is what a message's Send answered.
type msgState int

const (
	msgSending  msgState = iota // Send has not returned
	msgAcked                    // Send returned its id
	msgFull                     // ErrInboxFull: not stored
	msgTooLarge                 // ErrTooLarge: not stored
	msgFailed                   // another error: stored or not
	msgConflict                 // ErrIdempotencyConflict: not stored
	msgKeyBound                 // ErrTooManyIdempotencyKeys: not stored
)

func (st msgState) String() string {
	if name, ok := enum.Name(st, "sending", "acknowledged", "refused (inbox full)", "refused (too large)", "failed",
		"refused (key conflict)", "refused (key bound)"); ok {
		return name
	}
	return fmt.Sprintf("msgState(%d)", int(st))
}

// sentMsg is one message of the ledger.
type sentMsg struct {
	n      uint64
	to     *player
	k      int    // its number for to: to.sent[k-1]
	from   string // the sending server's JobID
	amount int64
	fussy  bool
	big    bool
	// stubborn: OnMessage refuses it until the run's end.
	stubborn bool
	// key is its idempotency key ("": none); retries are the Sends that
	// repeat it after the first (keyed messages only: msgkeys.go).
	key     string
	retries []retry
	// state is what its Sends answered, the best of them (msgkeys.go:
	// merge): acknowledged by any, else failed by any (stored or not), else
	// the last refusal.
	state msgState
	// What the simulation saw send.lua do with it, whatever Send answered:
	// store it (under id), or refuse it (inbox full, its key naming another
	// message, the key bound).
	landed bool
	full   bool
	id     string
	// answered are the refusals its send.lua calls answered (a key
	// conflict, the key bound).
	answered map[msgState]bool
	// lost: a tamper destroyed the message with the inbox it waited in, or
	// with the data that had applied it: it may be in its player's final
	// record (once), or not at all.
	lost bool
}

func (m *sentMsg) body() gift {
	g := gift{N: m.n, To: m.to.key, K: m.k, Amount: m.amount, Fussy: m.fussy, Stubborn: m.stubborn}
	if m.big {
		g.Pad = make([]byte, maxMessageBytes)
	}
	return g
}

// refused reports whether its Sends said the message was not stored.
func (m *sentMsg) refused() bool {
	return m.state == msgFull || m.state == msgTooLarge || m.state == msgConflict || m.state == msgKeyBound
}

// neverStored reports whether the message was never stored: its Sends
// said so, or the script refused it (inbox full), and no script stored it.
func (m *sentMsg) neverStored() bool { return !m.landed && (m.refused() || m.full) }

// sendMove is the send move: a server whose game runs sends one message, or
// a burst, to one player, online or not. Everything is drawn here, on the
// driving goroutine; each send runs on a goroutine of its own.
func (s *sim) sendMove(targets []*server) {
	srv := targets[s.rng.IntN(len(targets))]
	pl := s.players[s.rng.IntN(len(s.players))]
	n := 1
	if s.rng.Float64() < 0.2 {
		n = 2 + s.rng.IntN(5) // a burst: past MaxInbox for a player who is away
	}
	burst := make([]*sentMsg, n)
	for i := range burst {
		burst[i] = &sentMsg{to: pl, from: srv.s.JobID, amount: 1 + s.rng.Int64N(5),
			fussy: s.rng.Float64() < 0.1, big: s.rng.Float64() < 0.03}
		s.drawKey(burst[i]) // from a stream of its own: the draws above are as they were
	}
	s.mu.Lock()
	for _, m := range burst {
		s.lastMsg++
		m.n = s.lastMsg
		s.msgs[m.n] = m
		pl.sent = append(pl.sent, m)
		m.k = len(pl.sent)
	}
	s.mu.Unlock()
	for _, m := range burst {
		// One after the other, each with what it sets off (the holder's
		// pull), as the moves start: the goroutines of two sends at one
		// instant would interleave as the scheduler has them.
		s.spawn(func() { s.sendAndRetry(srv, m) })
	}
}

// send sends m from srv, as the game does (with m's idempotency key), and
// keeps the ledger.
func (s *sim) send(srv *server, m *sentMsg) {
	s.mu.Lock()
	s.result.Messages.Sent++
	if m.key != "" {
		s.result.Messages.Keys.Keyed++
	}
	s.mu.Unlock()
	start := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, sendTimeout)
	var rc datadriver.SendReceipt
	id, err := srv.d.Send(ctx, m.to.key, m.body(), datadriver.SendOptions{IdempotencyKey: m.key, Receipt: &rc})
	cancel()
	s.mu.Lock()
	got := msgFailed
	switch {
	case err == nil:
		got = msgAcked
		s.result.Messages.Acked++
		if rc.Duplicate {
			s.result.Messages.Keys.Duplicates++
		}
		if rc.DeadLettered {
			s.result.Messages.Keys.DeadDups++
		}
	case errors.Is(err, datadriver.ErrInboxFull):
		got = msgFull
		s.result.Messages.Full++
	case errors.Is(err, datadriver.ErrTooLarge):
		got = msgTooLarge
		s.result.Messages.TooLarge++
	case errors.Is(err, datadriver.ErrIdempotencyConflict):
		got = msgConflict
		s.result.Messages.Keys.Conflicts++
	case errors.Is(err, datadriver.ErrTooManyIdempotencyKeys):
		got = msgKeyBound
		s.result.Messages.Keys.Bound++
	default:
		s.result.Messages.Failed++
	}
	m.state = merge(m.state, got)
	landed, full, seen, answered := m.landed, m.full, m.id, m.answered[got]
	s.mu.Unlock()
	what, fussy := id, ""
	if err != nil {
		what = err.Error()
	}
	if m.fussy {
		fussy = ", fussy"
	}
	s.logf("send #%d (%d gifts%s) %s -> %s -> %s", m.n, m.amount, fussy, srv.s.JobID, m.to.key, what)
	// The answer and what the script did must agree (the simulation's own
	// consistency: the observer sees every answer before Send does).
	switch {
	case err == nil && (!landed || id != seen):
		s.fail("messages: the Send of #%d answered id %s, but the simulation saw the script store %q", m.n, id, seen)
	case got == msgFull && !full:
		s.fail("messages: the Send of #%d answered %v, but the simulation never saw the inbox full", m.n, err)
	case got == msgTooLarge && (landed || full):
		s.fail("messages: the Send of #%d answered %v, but its script ran", m.n, err)
	case (got == msgConflict || got == msgKeyBound) && !answered:
		s.fail("messages: the Send of #%d answered %v, but the simulation never saw its script say so", m.n, err)
	case got == msgFailed && !strings.Contains(err.Error(), "injected") && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, testsupport.ErrInjected) && !s.sendRefused(m, start, err):
		s.fail("send of #%d from %s: unexpected error %v", m.n, srv.s.JobID, err)
	}
}

// errFussy and errStubborn are OnMessage's refusals of a fussy and a
// stubborn message.
var (
	errFussy    = errors.New("a fussy gift is refused at even seconds")
	errStubborn = errors.New("a stubborn gift is refused until the end")
)

// onMessage is the game's OnMessage on srv: it adds the gift to the data and
// sets its bit. A fussy gift is refused at even seconds of virtual
// time (it stays in the inbox for a later pull). A data that holds the
// gift already breaks invariant 10.
func (s *sim) onMessage(srv *server, w *Wallet, m datadriver.Message) error {
	var g gift
	if err := m.Decode(&g); err != nil {
		s.fail("invariant 10: %s cannot read message %s: %v", srv.s.JobID, m.ID, err)
		return err
	}
	s.mu.Lock()
	mended := s.mended
	s.mu.Unlock()
	if (g.Fussy && time.Now().Unix()%2 == 0) || (g.Stubborn && !mended) {
		s.mu.Lock()
		s.result.Messages.Refusals++
		s.mu.Unlock()
		if g.Stubborn {
			s.logf("%s refuses #%d for %s (stubborn, until the end)", srv.s.JobID, g.N, g.To)
			return errStubborn
		}
		s.logf("%s refuses #%d for %s (fussy, at an even second)", srv.s.JobID, g.N, g.To)
		return errFussy
	}
	if w.has(g.K) {
		s.fail("invariant 10: %s applied message #%d (the %d-th of %s) to data that holds it already", srv.s.JobID, g.N, g.K, g.To)
	}
	w.set(g.K)
	w.Gifts += g.Amount
	s.logf("%s applies #%d to %s", srv.s.JobID, g.N, g.To)
	return nil
}

// observeSend records what a send.lua call of job did: it stored a message
// (under an id), found it stored (a duplicate), or refused it (inbox full,
// its key naming another message, the key bound); and checks that a key
// names one message (msgkeys.go: observeKey).
func (s *sim) observeSend(job, key string, args []string, val any) {
	if len(args) == 0 {
		s.fail("send call of %s without arguments", job)
		return
	}
	var g gift
	if err := msgpack.Unmarshal([]byte(args[0]), &g); err != nil {
		s.fail("send call of %s unreadable: %v", job, err)
		return
	}
	res, err := record.ParseSend(val)
	if err != nil {
		s.fail("send call of %s for #%d answered %v: %v", job, g.N, val, err)
		return
	}
	s.mu.Lock()
	m := s.msgs[g.N]
	s.mu.Unlock()
	switch {
	case m == nil:
		s.fail("send call of %s for a message #%d the simulation never sent", job, g.N)
		return
	case recordKey(m.to.key) != key:
		s.fail("the send of #%d to %s went to record %s", g.N, m.to.key, key)
		return
	case res.Outcome == record.SendCorrupt:
		s.corruptAnswer(job, key, "a send", res.Corrupt)
		return
	}
	s.observeKey(job, key, m, res)
}
