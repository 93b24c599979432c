package simulation

import (
	"context"
	"fmt"
	"slices"
	"testing/synctest"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
)

// Invariant 10, messages applied exactly once: on what a script loads or
// writes (the observer calls checkLoaded and checkWritten), on the records
// in Redis, and at the end of a run, once every message left is delivered.

// checkMsgs checks invariant 10 on w, data of pl's record that where says
// (loaded, written, in Redis), and on inbox, the numbers of the messages
// its inbox held at the same moment (nil: unknown): no message not sent to
// pl or whose Send was refused, none that its inbox still holds, gifts that
// are the sum of its messages' amounts; in the inbox, no message twice,
// none sent to another player or refused.
func (s *sim) checkMsgs(where string, pl *player, w Wallet, inbox []uint64) {
	s.mu.Lock()
	problem := ""
	var sum int64
	var applied []string // the messages w holds, by number
	for _, k := range w.got() {
		if k > len(pl.sent) {
			problem = fmt.Sprintf("the %d-th message of %s, which was never sent", k, pl.key)
			break
		}
		m := pl.sent[k-1]
		applied = append(applied, fmt.Sprintf("#%d", m.n))
		switch {
		case m.neverStored():
			problem = fmt.Sprintf("message #%d, whose Send was %s", m.n, m.state)
		case slices.Contains(inbox, m.n):
			problem = fmt.Sprintf("message #%d, which its inbox %v still holds", m.n, inbox)
		}
		if problem != "" {
			break
		}
		sum += m.amount
	}
	if problem == "" && sum != w.Gifts {
		problem = fmt.Sprintf("%d gifts, but its messages bring %d (a message applied twice?)", w.Gifts, sum)
	}
	where += " of " + pl.key
	if problem == "" {
		queued := make(map[uint64]bool, len(inbox))
		for _, n := range inbox {
			m := s.msgs[n]
			switch {
			case queued[n]:
				problem = fmt.Sprintf("message #%d twice", n)
			case m == nil:
				problem = fmt.Sprintf("message #%d, which was never sent", n)
			case m.to != pl:
				problem = fmt.Sprintf("message #%d, sent to %s", n, m.to.key)
			case m.neverStored():
				problem = fmt.Sprintf("message #%d, whose Send was %s", n, m.state)
			}
			if problem != "" {
				where = "the inbox of " + pl.key + " beside " + where
				break
			}
			queued[n] = true
		}
	}
	s.mu.Unlock()
	if problem != "" {
		s.fail("invariant 10: %s holds %s (messages applied: %v)", where, problem, applied)
	}
}

// checkLoaded checks invariant 10 on what an acquire of job loaded: the
// record's data and the inbox messages it read in the same script.
func (s *sim) checkLoaded(job, rk string, data []byte, msgs []record.Message) {
	pl := s.byRecord[rk]
	if pl == nil {
		return
	}
	w, err := decodeWallet(string(data))
	if err != nil {
		s.fail("%s loaded %s: %v", job, rk, err)
		return
	}
	inbox := make([]uint64, 0, len(msgs))
	for _, rm := range msgs {
		var g gift
		if err := msgpack.Unmarshal(rm.Body, &g); err != nil {
			s.fail("%s loaded %s with inbox entry %s unreadable: %v", job, rk, rm.ID, err)
			return
		}
		inbox = append(inbox, g.N)
	}
	s.checkMsgs("the data "+job+" loaded", pl, w, inbox)
}

// checkWritten checks invariant 10 on a save of job that landed at ver:
// the data it wrote, and that every message it deleted from the inbox is
// in the data the record holds now (what it wrote, or what it kept).
func (s *sim) checkWritten(job, rk string, a record.SaveArgs, ver int64) {
	pl := s.byRecord[rk]
	if pl == nil {
		return
	}
	data := string(a.Data)
	if a.Data == nil {
		s.mu.Lock()
		stored, known := s.landed[rk][ver]
		s.mu.Unlock()
		if !known {
			return
		}
		data = stored
	}
	w, err := decodeWallet(data)
	if err != nil {
		s.fail("%s wrote %s: %v", job, rk, err)
		return
	}
	if a.Data != nil {
		s.checkMsgs("the data "+job+" wrote", pl, w, nil)
	}
	for _, id := range a.Applied {
		s.mu.Lock()
		m := s.msgs[s.msgIDs[rk+"\x00"+id]]
		s.mu.Unlock()
		if m != nil && !w.has(m.k) {
			s.fail("invariant 10: a save of %s deleted message #%d (%s) from the inbox of %s, but the data it leaves lacks it",
				job, m.n, id, pl.key)
		}
	}
}

// deliverRest is the end of invariant 10's run, after the quiet period:
// every player whose inbox holds messages joins once more and leaves (the
// load applies the inbox, the release saves what it applied), and again a
// second later while a fussy gift keeps one waiting.
func (s *sim) deliverRest() {
	ctx := context.Background()
	s.mu.Lock()
	s.mended = true // what refused the stubborn messages is mended: the replays below apply them
	s.mu.Unlock()
	servers := s.activeServers(s.aliveServers())
	for range 4 {
		// Messages OnMessage refused MaxMessageAttempts times are dead
		// letters: an operator replays them once what refused them is
		// mended (a fussy gift applies at odd seconds), and then they apply
		// like any other.
		for _, pl := range s.players {
			rep, err := record.Replay(ctx, s.checkRedis, recordKey(pl.key), nil)
			if err != nil {
				s.fail("deliver: replay: %v", err)
				return
			}
			if rep.Moved > 0 {
				s.logf("REPLAY %d dead letters of %s", rep.Moved, pl.key)
				s.mu.Lock()
				s.result.Messages.Replayed += rep.Moved
				s.mu.Unlock()
			}
		}
		var waiting []*player
		for _, pl := range s.players {
			n, err := s.checkRedis.XLen(ctx, record.InboxKey(recordKey(pl.key))).Result()
			if err != nil {
				s.fail("deliver: %v", err)
				return
			}
			if n > 0 {
				waiting = append(waiting, pl)
			}
		}
		if len(waiting) == 0 {
			return
		}
		s.logf("DELIVER %d players with messages waiting join once more and leave", len(waiting))
		for i, pl := range waiting {
			srv := servers[i%len(servers)]
			s.join(pl, srv)
			s.mu.Lock()
			online := pl.p != nil
			s.mu.Unlock()
			if !online {
				s.fail("liveness: %s cannot join %s after the quiet period", pl.key, srv.s.JobID)
				return
			}
			if err := s.leave(pl); err != nil {
				s.fail("liveness: %s cannot leave %s after the quiet period: %v", pl.key, srv.s.JobID, err)
				return
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
	}
}

// checkDelivered checks invariant 10 at the very end: every inbox is
// empty, and every message whose Send was acknowledged, or that the
// simulation saw stored, is in its player's record (or in the image of a
// committed trade whose mark the record still carries: what the next load
// makes it); one refused is not.
func (s *sim) checkDelivered() {
	ctx := context.Background()
	final := make(map[*player]Wallet, len(s.players))
	for _, pl := range s.players {
		h, err := s.readRecord(ctx, pl)
		if err != nil {
			s.fail("check: %s: %v", pl.key, err)
			return
		}
		if len(h.inbox) > 0 {
			s.fail("invariant 10: the inbox of %s still holds %v after its player joined once more", pl.key, h.inbox)
		}
		s.checkMsgs("the final record", pl, h.data, h.inbox)
		final[pl] = h.data
		if h.image != nil { // a committed trade's mark, left by a release for the next loader to settle
			s.checkMsgs("the final record's pending trade image", pl, *h.image, h.inbox)
			final[pl] = *h.image
		}
	}
	s.mu.Lock()
	var problems []string
	st := &s.result.Messages
	for _, pl := range s.players {
		w := final[pl]
		for _, m := range pl.sent {
			in := w.has(m.k)
			if m.state == msgFailed && m.landed {
				st.Landed++
			}
			if in {
				st.Applied++
			}
			switch {
			case m.state == msgSending:
				problems = append(problems, fmt.Sprintf("the Send of #%d to %s never returned", m.n, pl.key))
			case in && m.neverStored(), !in && !m.lost && (m.state == msgAcked || m.landed):
				stored, not := "", "not "
				if m.landed {
					stored = ", seen stored"
				}
				if in {
					not = ""
				}
				problems = append(problems, fmt.Sprintf("message #%d (%s%s) is %sin the final record of %s",
					m.n, m.state, stored, not, pl.key))
			}
		}
	}
	s.mu.Unlock()
	for _, p := range problems[:min(len(problems), 10)] {
		s.fail("invariant 10: %s", p)
	}
}
