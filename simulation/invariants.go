package simulation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

// The invariants checked outside the script observer: kicks (6), gems (4),
// liveness at the end of a run (8) and no profile live on two servers (9);
// messages applied exactly once (10) are msgcheck.go's.

// kicked checks invariant 6: a session is ended for another server only
// after a request naming its lock reached this server; a session fenced off
// (its server's presence lease lapsed, or its lock went unrefreshed) hears
// one Kick: ReasonFenced, without any request, and only once it ended so,
// or the reason of the leave that came before its fence.
func (s *sim) kicked(srv *server, key string, reason datadriver.KickReason) {
	s.mu.Lock()
	s.kicks[srv.s.JobID+"\x00"+key] = time.Now()
	s.tampers.kickWhy[srv.s.JobID+"\x00"+key] = reason
	s.mu.Unlock()
	switch reason {
	case datadriver.ReasonFenced:
		s.kickedFenced(srv, key)
		return
	case datadriver.ReasonRecordGone, datadriver.ReasonRecordCorrupt:
		s.kickedBroken(srv, key, reason)
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
//
// An Update of a session whose lock predates a deletion of the record is
// exempt after an acquisition that came after the deletion (exemptDeleted):
// by design the old holder learns of the deletion at its next write only.
func (s *sim) checkLive(what, job, key string, asked uint64, done time.Time) {
	if by := s.takenFrom(job, key, asked, done); by != nil && !(what == "an Update" && s.exemptDeleted(job, key, by)) {
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
		// A lock that names no holder (a tamper emptied lock.job) is not a
		// live server's by now: each released what it held; the operator's
		// repair below frees it.
		if token != "" && job != "" && !crashed[job] {
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
		s.repairDue(true)
		s.rejoinTouched()
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
	s.mu.Lock()
	want := int64(len(s.players))*initialGems + s.tampers.gemsShift // a deleted record's gems are gone
	s.mu.Unlock()
	if total != want {
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
	}); err != nil && (fields.Err() != nil || !s.inboxReplaced(rk, entries.Err())) {
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
