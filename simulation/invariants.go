package simulation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

// The invariants checked outside the script observer: kicks (6), gems (4),
// liveness at the end of a run (8), no profile live on two servers (9) and
// messages applied exactly once (10; the observer checks it too, on what a
// script loads or writes).

// kicked checks invariant 6: a session is ended for another server only
// after a request naming its lock reached this server; a session fenced off
// (its server's presence lease lapsed, or its lock went unrefreshed) hears
// one Kick: ReasonFenced, without any request, and only once it ended so,
// or the reason of the leave that came before its fence.
func (s *sim) kicked(srv *server, key string, reason datadriver.KickReason) {
	s.mu.Lock()
	s.kicks[srv.s.JobID+"\x00"+key] = time.Now()
	s.mu.Unlock()
	switch reason {
	case datadriver.ReasonFenced:
		s.kickedFenced(srv, key)
		return
	case datadriver.ReasonJoinedElsewhere:
	default:
		return
	}
	// The session's lock is the newest this server got to land for the key
	// (the profile may not know yet: an adoption whose answer was lost). It
	// is read from what the scripts did, not from the players' model: the
	// kick runs on its own goroutine, at the very instant the joiner's load
	// may return and move the model on.
	//
	// A join of the key on the same server ends the session too, with no
	// request at all (the same-server handoff): the simulation's model may
	// have lost that session (an adoption that went on with the retained
	// copy elsewhere, then its server crashed).
	rk := recordKey(key)
	s.mu.Lock()
	held := s.latest[rk+"\x00"+srv.s.JobID]
	named := s.delivered[srv.s.JobID][rk+"\x00"+held.token]
	local := s.joining[srv.s.JobID+"\x00"+key] > 0
	s.mu.Unlock()
	if local {
		s.logf("kick %s on %s (epoch %d) by a join of it there", key, srv.s.JobID, held.epoch)
		return
	}
	s.logf("kick %s on %s (epoch %d)", key, srv.s.JobID, held.epoch)
	if !named {
		s.fail("invariant 6: %s ended the session of %s (epoch %d) without a request naming its lock", srv.s.JobID, key, held.epoch)
	}
}

// kickedFenced checks a Kick with ReasonFenced: the session the game holds
// on srv for key (if any) has ended with an error matching both
// ErrFenced and ErrLockLost.
func (s *sim) kickedFenced(srv *server, key string) {
	s.mu.Lock()
	s.result.Fenced++
	s.fencedKicks[srv.s.JobID+"\x00"+key] = time.Now()
	var p *datadriver.Profile[Wallet]
	for _, pl := range s.players {
		if pl.key == key && pl.srv == srv {
			p = pl.p
		}
	}
	s.mu.Unlock()
	s.logf("kick %s on %s (fenced off)", key, srv.s.JobID)
	if p == nil {
		return
	}
	if err := p.Err(); !errors.Is(err, datadriver.ErrFenced) || !errors.Is(err, datadriver.ErrLockLost) {
		s.fail("invariant 6: %s kicked %s as fenced off, but its session's error is %v", srv.s.JobID, key, err)
	}
}

// landing is an acquisition of a key that landed: job took its lock at
// virtual time at, the seq-th event the simulation saw.
type landing struct {
	job string
	at  time.Time
	seq uint64
}

// stamp numbers the moment a change is asked for, in the order of the
// events the simulation sees (acquisitions that landed and changes asked
// for), which orders them even at one virtual instant.
func (s *sim) stamp() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

// checkLive checks invariant 9, no profile live on two servers at once, for
// a change of key (what: an Update or a trade) that job's game asked for at
// stamp asked and that was accepted (returned nil) at virtual time done
// (zero: the change was accepted before it returned, at an unknown
// moment).
//
// The change broke the invariant when another server's acquisition of key
// landed before it and job has not acquired key again since. "Before" is
// the delicate part, because many things happen at one virtual instant
// (the bus and miniredis answer in no time): an acquisition landed before
// the change when it landed at an earlier virtual instant than the one the
// change was accepted at (an Update checks its lease last, just before it
// returns, and nothing between that check and its return waits on time),
// or when the simulation saw it land before the change was even asked for
// (then every check the change made ran after it, even at one instant). An
// acquisition that lands at the very instant an Update returns, seen after
// the Update was asked for, is not counted: the Update's last check may have
// run first, and then the profile was live on one server only at every
// moment (as when a release lands and another server's acquire follows at
// once).
func (s *sim) checkLive(what, job, key string, asked uint64, done time.Time) {
	if by := s.takenFrom(job, key, asked, done); by != nil {
		s.fail("invariant 9: %s of %s succeeded on %s at %s, after %s's acquisition landed at %s (and %s has not acquired it since)",
			what, key, job, time.Since(s.bornAt).Round(time.Millisecond), by.job, by.at.Sub(s.bornAt).Round(time.Millisecond), job)
	}
}

// takenFrom returns the acquisition of key by another server that landed
// before a change job's game asked for at stamp asked and that was accepted
// at done (see checkLive), when job has not acquired key since; else nil.
func (s *sim) takenFrom(job, key string, asked uint64, done time.Time) *landing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return lastOther(s.acquisitions[key], job, asked, done)
}

// lastOther is the newest of ls (acquisitions of one key, in the order they
// landed) that landed before a change asked for at stamp asked and accepted
// at done, when it is another server's than job; else nil.
func lastOther(ls []landing, job string, asked uint64, done time.Time) *landing {
	for i := len(ls) - 1; i >= 0; i-- {
		l := &ls[i]
		if l.seq > asked && !l.at.Before(done) {
			continue // not before the change
		}
		if l.job != job {
			return l
		}
		return nil // job took it again since
	}
	return nil
}

// drain ends the run: the faults stop, every player leaves, and after two
// quiet minutes no lock may be held by a live server (a server may keep a
// lock only while one of its profiles uses it: an orphan would lock the
// player out for as long as the server lives). Then the messages still
// waiting are delivered, and every message is counted (invariant 10).
func (s *sim) drain() {
	s.logf("DRAIN faults stop, every player leaves")
	s.endFaults(true)
	s.mu.Lock()
	for _, srv := range s.servers {
		srv.failTo, srv.stallTo, srv.deafTo, srv.lose = time.Time{}, time.Time{}, time.Time{}, 0
		srv.hangTo = [numCallKinds]time.Time{}
	}
	s.mu.Unlock()
	s.c.Bus.SetFault(nil)
	s.wg.Wait()
	for _, pl := range s.players {
		s.mu.Lock()
		online := pl.p != nil
		s.mu.Unlock()
		if online {
			_ = s.leave(pl)
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
		f, err := s.checkRedis.HMGet(context.Background(), recordKey(pl.key), record.FieldLockToken, record.FieldLockJob).Result()
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
	if s.failure() == nil {
		s.deliverRest()
		s.checkDelivered()
	}
}

// checkRecords checks invariants 4 and 10 on what Redis holds: the gems
// of all records, counting where a trade's mark is pending on a committed
// trade its image; the messages of every record (and image) and inbox.
func (s *sim) checkRecords() {
	ctx := context.Background()
	total := int64(0)
	for _, pl := range s.players {
		h, err := s.readRecord(ctx, pl)
		if err != nil {
			s.fail("check: %s: %v", pl.key, err)
			return
		}
		s.checkMsgs("the record", pl, h.data, h.inbox)
		w := h.data
		if h.image != nil {
			w = *h.image
			s.checkMsgs("a pending trade's image", pl, w, h.inbox)
		}
		total += w.Gems
	}
	if want := int64(len(s.players)) * initialGems; total != want {
		s.fail("invariant 4: %d gems in all, want %d", total, want)
	}
}

// held is what Redis holds for a player at one moment.
type held struct {
	data  Wallet
	image *Wallet  // the image of a committed trade whose mark is pending on the record
	inbox []uint64 // the numbers of the messages in its inbox, oldest first
}

// readRecord reads what Redis holds for pl: its record's data and inbox in
// one transaction, then the image of a trade whose mark is on it.
func (s *sim) readRecord(ctx context.Context, pl *player) (held, error) {
	rk := recordKey(pl.key)
	var fields *redis.SliceCmd
	var entries *redis.XMessageSliceCmd
	if _, err := s.checkRedis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HMGet(ctx, rk, record.FieldData, record.FieldTrade)
		entries = p.XRange(ctx, record.InboxKey(rk), "-", "+")
		return nil
	}); err != nil {
		return held{}, err
	}
	var h held
	f := fields.Val()
	data, _ := f[0].(string)
	trade, _ := f[1].(string)
	var err error
	if h.data, err = decodeWallet(data); err != nil {
		return held{}, err
	}
	for _, e := range entries.Val() {
		b, _ := e.Values[record.EntryBody].(string)
		var g gift
		if err := msgpack.Unmarshal([]byte(b), &g); err != nil {
			return held{}, fmt.Errorf("inbox entry %s: %w", e.ID, err)
		}
		h.inbox = append(h.inbox, g.N)
	}
	if trade == "" {
		return h, nil
	}
	m, err := s.checkRedis.HGetAll(ctx, "sim:trade:{"+trade+"}").Result()
	if err != nil || m["state"] != "COMMITTED" {
		return h, err
	}
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
			img, err := decodeWallet(m[fmt.Sprintf("img%d", i)])
			if err != nil {
				return held{}, fmt.Errorf("trade %s's image: %w", trade, err)
			}
			h.image = &img
		}
	}
	return h, nil
}

// decodeWallet decodes a record's data ("": the defaults).
func decodeWallet(data string) (Wallet, error) {
	w := Wallet{Gems: initialGems}
	if data == "" {
		return w, nil
	}
	err := msgpack.Unmarshal([]byte(data), &w)
	return w, err
}

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
		case m.refused() || m.full:
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
			case m.refused() || m.full:
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
	servers := s.activeServers(s.aliveServers())
	for range 4 {
		// Messages OnMessage refused MaxMessageAttempts times are dead
		// letters: an operator replays them once what refused them is
		// mended (a fussy gift applies at odd seconds), and then they apply
		// like any other.
		for _, pl := range s.players {
			rep, err := record.ReplayDeadLetters(ctx, s.checkRedis, recordKey(pl.key), nil)
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
			case in && m.refused(), !in && (m.state == msgAcked || m.landed):
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
