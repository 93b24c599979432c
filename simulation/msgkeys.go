package simulation

import (
	"fmt"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// Sends with an idempotency key, the edges of invariant 10: a game that
// retries a keyed Send (after an ambiguous failure, or blindly), a caller's
// bug that reuses the key of an earlier message for another, the per-profile
// bound on keys (maxIdempotencyKeys, small), keys whose window
// (idempotencyWindow, short) passes within the run, and stubborn messages
// that OnMessage refuses until the run's end: the holder retries them on its
// own until they are dead letters, retried sends find them there, and the
// end replays them. Every draw here comes from a stream of its own
// (sim.keyRng), so that the draws of the main stream are what they were
// before keys existed.
//
// What is checked, as the observer sees each send.lua call (observeKey):
// a key names one message of its player: a message is stored at most once
// (a retry stores nothing new), a key that named a stored message within
// its window is never stored again for another message, a duplicate answer
// is for the message that owns the key, a conflict names that message, the
// bound refuses only at the bound; and, with the rest of invariant 10, a
// message refused (a conflict, the bound) is never applied and one
// acknowledged by any of its Sends is applied exactly once.

const (
	// keyedRate is the share of messages sent with an idempotency key;
	// conflictRate the share of those that reuse the key of an earlier
	// message to the same player (a caller's bug); stubbornRate the share
	// of messages OnMessage refuses until the end.
	keyedRate, conflictRate, stubbornRate = 0.5, 0.15, 0.04
	// crossRate is the share of the other keyed messages that reuse the
	// key of a message to another player (the same bug across profiles).
	crossRate = 0.05
	// keySlack covers the time between a send.lua call and the observer's
	// seeing it (a call that hangs before its answer comes back).
	keySlack = 30 * time.Second
)

// retry is a Send that repeats a keyed message: after its wait, from the
// pick-th server (modulo their number) whose game runs then.
type retry struct {
	after time.Duration
	pick  int
}

// keyOwner is the message a key of a player names, as the simulation saw
// send.lua store it, and when.
type keyOwner struct {
	m  *sentMsg
	at time.Time
}

// drawKey draws whether m is stubborn, its idempotency key (a new one, or
// now and then an earlier message's to the same player) and the retries of
// a keyed message: within seconds, and for a stubborn one now and then
// minutes later, past the key's window (it waits or lies dead meanwhile:
// its key must still be remembered).
func (s *sim) drawKey(m *sentMsg) {
	r := s.keyRng
	m.stubborn = r.Float64() < stubbornRate
	if r.Float64() >= keyedRate {
		return
	}
	s.lastKey++
	m.key = fmt.Sprintf("order-%d", s.lastKey)
	var earlier []*sentMsg
	for _, e := range m.to.sent {
		if e.key != "" {
			earlier = append(earlier, e)
		}
	}
	if len(earlier) > 0 && r.Float64() < conflictRate {
		m.key = earlier[r.IntN(len(earlier))].key
	} else if r.Float64() < crossRate {
		// The key of a message to another player: a key names one message
		// of the namespace, so it is refused (claim.lua) while the other's
		// claim stands.
		var others []*sentMsg
		for _, pl := range s.players {
			if pl == m.to {
				continue
			}
			for _, e := range pl.sent {
				if e.key != "" {
					others = append(others, e)
				}
			}
		}
		if len(others) > 0 {
			m.key = others[r.IntN(len(others))].key
		}
	}
	n := 0
	switch x := r.Float64(); {
	case x > 0.85:
		n = 2
	case x > 0.5:
		n = 1
	}
	for range n {
		m.retries = append(m.retries, retry{after: time.Second + time.Duration(r.IntN(20_000))*time.Millisecond,
			pick: r.IntN(1 << 16)})
	}
	if m.stubborn && r.Float64() < 0.6 {
		m.retries = append(m.retries, retry{after: 2*idempotencyWindow + time.Duration(r.IntN(240_000))*time.Millisecond,
			pick: r.IntN(1 << 16)})
	}
}

// sendAndRetry sends m from srv, then repeats it as its retries say.
func (s *sim) sendAndRetry(srv *server, m *sentMsg) {
	s.send(srv, m)
	for _, r := range m.retries {
		time.Sleep(r.after)
		servers := s.activeServers(s.aliveServers())
		if len(servers) == 0 || s.ctx.Err() != nil {
			continue
		}
		to := servers[r.pick%len(servers)]
		s.mu.Lock()
		s.result.Messages.Keys.Retries++
		s.mu.Unlock()
		s.logf("retry of #%d (key %s) from %s", m.n, m.key, to.s.JobID)
		s.send(to, m)
	}
}

// merge is the state of a message whose Sends answered old, then got:
// acknowledged by any, else failed by any (stored or not), else the last
// refusal.
func merge(old, got msgState) msgState {
	switch {
	case old == msgAcked || got == msgAcked:
		return msgAcked
	case old == msgFailed || got == msgFailed:
		return msgFailed
	}
	return got
}

// observeKey records what a send.lua call of job did with m, for record
// rk, and checks that its key names one message.
func (s *sim) observeKey(job, rk string, m *sentMsg, res record.SendResult) {
	s.mu.Lock()
	now := time.Now()
	var owner *keyOwner
	if m.key != "" {
		owner = s.keyOwners[rk+"\x00"+m.key]
	}
	problem := ""
	switch res.Outcome {
	case record.Sent:
		switch {
		case m.landed && !m.lost:
			problem = fmt.Sprintf("message #%d stored twice (%s, then %s) under key %q", m.n, m.id, res.ID, m.key)
		case owner != nil && owner.m != m && !owner.m.lost && now.Sub(owner.at) < idempotencyWindow-keySlack:
			problem = fmt.Sprintf("key %q stored for message #%d, %s after message #%d (%s) stored under it, inside "+
				"its window", m.key, m.n, now.Sub(owner.at), owner.m.n, owner.m.id)
		case owner != nil && owner.m != m && !owner.m.lost && owner.m.stubborn && !s.mended:
			problem = fmt.Sprintf("key %q stored for message #%d while message #%d (%s), stored under it, still "+
				"waits or lies dead (OnMessage refuses it until the end)", m.key, m.n, owner.m.n, owner.m.id)
		}
		m.landed, m.id = true, res.ID
		s.msgIDs[rk+"\x00"+res.ID] = m.n
		if m.key != "" {
			s.keyOwners[rk+"\x00"+m.key] = &keyOwner{m: m, at: now}
		}
	case record.Duplicate:
		if owner == nil || owner.m != m {
			problem = fmt.Sprintf("a send of message #%d under key %q answered a duplicate of %s, but %s", m.n, m.key,
				res.ID, ownerText(owner))
		}
	case record.IdempotencyConflict:
		if owner == nil || owner.m == m || owner.m.id != res.ID {
			problem = fmt.Sprintf("a send of message #%d under key %q was refused as naming %s, but %s", m.n, m.key,
				res.ID, ownerText(owner))
		}
		m.answer(msgConflict)
	case record.TooManyKeys:
		if res.Count < maxIdempotencyKeys {
			problem = fmt.Sprintf("a send of message #%d under key %q was refused at the key bound with %d keys, "+
				"below the bound %d", m.n, m.key, res.Count, maxIdempotencyKeys)
		}
		m.answer(msgKeyBound)
	case record.InboxFull:
		m.full = true
	}
	s.mu.Unlock()
	if problem != "" {
		s.fail("invariant 10: %s (%s)", problem, job)
	}
}

// answer records that a send.lua call of m answered st. s.mu held.
func (m *sentMsg) answer(st msgState) {
	if m.answered == nil {
		m.answered = make(map[msgState]bool)
	}
	m.answered[st] = true
}

// ownerText says which message owns a key, for a failure.
func ownerText(o *keyOwner) string {
	if o == nil {
		return "no message was seen stored under it"
	}
	return fmt.Sprintf("it names message #%d (%s), stored at %s", o.m.n, o.m.id, o.at.Format("15:04:05.000"))
}

// claimOwner is the record whose message claimed an idempotency key for
// the namespace (claim.lua), as the observer saw it, and when.
type claimOwner struct {
	rk string
	at time.Time
}

// observeClaim checks a claim.lua call of job: a key claimed for one
// player's record is claimed for no other while that claim stands (the
// simulation's Redis never expires the claim: miniredis keeps its TTL
// until time is fast-forwarded, which the simulation does not do); a
// claim that names another record is answered only when another record
// claimed the key; and a claim refused marks the Sends of that key to this
// player as told so (Send answers ErrIdempotencyConflict).
func (s *sim) observeClaim(job, claimKey string, call testsupport.ScriptCall) {
	a, err1 := record.ParseClaimArgs(call.Args)
	res, err2 := record.ParseClaim(call.Val)
	if err1 != nil || err2 != nil {
		s.fail("claim call unreadable: %v %v", err1, err2)
		return
	}
	idem := strings.TrimPrefix(claimKey, record.ClaimKey("sim", ""))
	rk := recordKey(a.Key)
	now := time.Now()
	s.mu.Lock()
	owner, pl := s.claimOwners[idem], s.byRecord[rk]
	problem := ""
	switch res.Outcome {
	case record.Claimed:
		if owner != nil && owner.rk != rk {
			problem = fmt.Sprintf("key %q claimed for %s, which %s claimed %s earlier", idem, rk, owner.rk, now.Sub(owner.at))
		}
		s.claimOwners[idem] = &claimOwner{rk: rk, at: now}
	case record.SameTarget:
		if owner != nil && owner.rk != rk {
			problem = fmt.Sprintf("key %q answered as %s's own, but %s claimed it", idem, rk, owner.rk)
		}
	case record.ClaimedByOther:
		if owner == nil || owner.rk == rk {
			problem = fmt.Sprintf("key %q refused for %s as another profile's, but %s", idem, rk, claimText(owner))
		}
		if pl != nil {
			for _, m := range pl.sent {
				if m.key == idem {
					m.answer(msgConflict)
				}
			}
		}
		s.result.Messages.Keys.Cross++
	case record.ClaimCorrupt:
		problem = fmt.Sprintf("key %q: the claim reads corrupt: %s", idem, res.Why)
	}
	s.mu.Unlock()
	if problem != "" {
		s.fail("invariant 10: %s (%s)", problem, job)
	}
}

// claimText says which record claimed a key, for a failure.
func claimText(o *claimOwner) string {
	if o == nil {
		return "no claim of it was seen"
	}
	return fmt.Sprintf("%s claimed it at %s", o.rk, o.at.Format("15:04:05.000"))
}
