package simulation

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// The operator's verbs that can move a lock, run as the CLI runs them
// (internal/lockrule: `playerdata unlock`, `playerdata repair --force`), at
// any moment, whatever the holders do: live, paused, cut from Redis or the
// bus, crashed. The library's rule decides; the simulation checks every
// lock they free (checkFreed) against invariant 2, and invariant 9 catches
// a freed holder that plays on.

// operatorJob is the operator's JobID on the bus (it never beats).
const operatorJob = "sim-operator"

// askWait bounds one round of the operator's release requests.
const askWait = 10 * time.Second

// operator is what the operator acts through: a presence reader of the
// servers' hash and a Handoff of its own on the bus (to ask the servers
// about a lock that names no holder).
type operator struct {
	pres *presencecore.Presence
	h    *handoffcore.Handoff
}

// operatorEnv is where the operator acts on key: the check client, the
// servers' presence, the servers' rules, and release requests naming key.
// The operator is made at the first use and closed with the run.
func (s *sim) operatorEnv(key string) lockrule.Env {
	s.mu.Lock()
	op := s.op
	s.mu.Unlock()
	if op == nil {
		quiet := slog.New(slog.DiscardHandler)
		pres, err := presencecore.New(s.checkRedis, presencecore.Config{Key: presencecore.KeyFor("sim"), JobID: operatorJob,
			TTL: presenceTTL, Beat: presenceBeat, Logger: quiet})
		if err != nil {
			s.tb.Fatalf("operator presence: %v", err)
		}
		h, err := handoffcore.New(handoffcore.Config{JobID: operatorJob, Bus: s.c.Bus.Endpoint(operatorJob),
			Presence: pres, Beat: presenceBeat, Logger: quiet})
		if err != nil {
			s.tb.Fatalf("operator handoff: %v", err)
		}
		h.Start()
		s.tb.Cleanup(func() { _ = h.Close(context.Background()) })
		op = &operator{pres: pres, h: h}
		s.mu.Lock()
		s.op = op
		s.mu.Unlock()
	}
	return lockrule.Env{
		Records:  s.checkRedis,
		Presence: op.pres,
		Rules: lockrule.Rules{MaxAge: defaults.LockTTL + defaults.LockSkew,
			Skew: defaults.LockSkew, Beat: presenceBeat},
		Ask: func(ctx context.Context, token string, jobs []string) []string {
			actx, cancel := context.WithTimeout(ctx, askWait)
			defer cancel()
			return op.h.AskAll(actx, driverName, key, token, jobs)
		},
	}
}

// operatorUnlock is `playerdata unlock` of a random player's record: most
// often one a paused or cut-off server's game plays, then one a live
// server's plays, else any record (held by a crashed server, or free).
func (s *sim) operatorUnlock() {
	pl := s.players[s.rng.IntN(len(s.players))]
	s.mu.Lock()
	var playing, troubled []*player
	for _, p := range s.players {
		switch {
		case p.srv == nil:
		case p.srv.paused || p.srv.cut || p.srv.busCut:
			troubled = append(troubled, p)
		default:
			playing = append(playing, p)
		}
	}
	s.mu.Unlock()
	switch r := s.rng.IntN(4); {
	case r < 2 && len(troubled) > 0:
		pl = troubled[s.rng.IntN(len(troubled))]
		// The operator comes back once the server's presence may have
		// expired: then its lock may go (it fenced itself) or not (it came
		// back and beats again).
		s.mu.Lock()
		s.tampers.unlockAt[pl] = time.Now().Add(presenceTTL + 2*presenceBeat)
		s.mu.Unlock()
	case r < 3 && len(playing) > 0:
		pl = playing[s.rng.IntN(len(playing))]
	}
	// Half the time the operator restores the record instead (restore.go;
	// drawn from a stream of its own: the main stream's draws are as they
	// were).
	if s.opRng.IntN(2) == 0 && s.operatorRestore(pl) {
		return
	}
	s.unlock(pl)
}

// unlockDue runs the operator's unlocks whose time has come.
func (s *sim) unlockDue() {
	now := time.Now()
	for _, pl := range s.players {
		s.mu.Lock()
		at, ok := s.tampers.unlockAt[pl]
		if ok && !now.Before(at) {
			delete(s.tampers.unlockAt, pl)
		}
		s.mu.Unlock()
		if ok && !now.Before(at) {
			s.unlock(pl)
		}
	}
}

// unlock is `playerdata unlock` of pl's record.
func (s *sim) unlock(pl *player) {
	rk := recordKey(pl.key)
	res, err := lockrule.Unlock(s.ctx, s.operatorEnv(pl.key), rk, false)
	if err != nil {
		if s.ctx.Err() == nil && !strings.Contains(err.Error(), "not a hash") {
			s.fail("unlock %s: %v", pl.key, err)
		}
		return
	}
	l := res.Read.Lock
	s.mu.Lock()
	s.result.Tampers.Unlocks++
	switch {
	case res.Outcome == lockrule.UnlockFreed:
		s.result.Tampers.UnlocksFreed++
	case res.Verdict.Answer == lockrule.Alive:
		s.result.Tampers.UnlocksAlive++
	case res.Verdict.Answer == lockrule.Unknown:
		s.result.Tampers.UnlocksUnknown++
	}
	s.mu.Unlock()
	if !l.Held {
		return
	}
	s.logf("OPERATOR unlock %s (held by %q, flag %q): %v: %s", pl.key, l.Job, l.Presence, res.Verdict.Answer,
		res.Verdict.Why)
	if res.Outcome == lockrule.UnlockFreed {
		s.checkFreed(rk, l.Job, l.Token, res.Verdict.Answer)
	}
}

// checkFreed checks a lock the operator freed (invariant 2): unless it
// went by age (no presence flag), its holder's presence has expired since
// the lock was last written; the holder of a lock that names none is found
// by its token.
func (s *sim) checkFreed(rk, job, token string, answer lockrule.Answer) {
	now := time.Now()
	s.mu.Lock()
	written := s.lockAt[rk]
	s.lockAt[rk] = now
	if job == "" {
		for k, h := range s.latest {
			if h.token == token && strings.HasPrefix(k, rk+"\x00") {
				job = strings.TrimPrefix(k, rk+"\x00")
			}
		}
	}
	exp, revived := s.expiresAt[job], s.revivedAt[job]
	s.mu.Unlock()
	if answer == lockrule.Aged || job == "" {
		return // by age, by design; or a token no server landed
	}
	if now.Before(exp) && !revived.After(written) {
		s.fail("invariant 2: the operator freed %s's lock of %s (%v), whose presence lives until %s and has not "+
			"expired since the lock was written at %s", job, rk, answer, exp.Sub(s.bornAt), written.Sub(s.bornAt))
	}
}
