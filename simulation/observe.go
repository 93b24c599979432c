package simulation

import (
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// Observation: what the scripts did (from the cluster's script observer)
// and which requests reached which server (from the bus).

// observe records what the scripts did, and checks invariants 1 to 3, 10
// (on the data loaded and written) and 11 as they happen.
func (s *sim) observe(job string, call testsupport.ScriptCall) {
	s.mu.Lock()
	s.result.Scripts++
	if now := time.Now(); !now.Equal(s.instant) {
		s.instant, s.instantCalls, s.instantAcquires = now, 0, 0
	}
	s.instantCalls++
	if call.Script == record.ScriptAcquire {
		s.instantAcquires++
	}
	hot, acquires := s.instantCalls == hotLoopCalls, s.instantAcquires
	s.mu.Unlock()
	if hot {
		s.hotLoop(acquires)
	}
	if call.Err != nil {
		return
	}
	key := ""
	if len(call.Keys) > 0 {
		key = call.Keys[0]
	}
	switch call.Script {
	case presencescript.NameBeat:
		s.observeBeat(job, call)
	case record.ScriptAcquire:
		s.observeAcquire(job, key, call)
	case record.ScriptSend:
		s.observeSend(job, key, call.Args, call.Val)
	case record.ScriptSave:
		s.observeSave(job, key, call)
	case record.ScriptFlip:
		s.observeFlip(job, key, call)
	case record.ScriptClaim:
		s.observeClaim(job, key, call)
	}
}

// observeBeat follows job's presence: when it expires, and when a beat
// revived it after it had expired.
func (s *sim) observeBeat(job string, call testsupport.ScriptCall) {
	a, err1 := presencescript.ParseBeatArgs(call.Args)
	ans, err2 := presencescript.ParseBeatAnswer(call.Val)
	if err1 != nil || err2 != nil || a.JobID != job {
		return
	}
	s.observeBeatTampered(job, a, ans)
	s.mu.Lock()
	if !time.Now().Before(s.expiresAt[job]) {
		s.revivedAt[job] = time.Now() // its presence had expired (or never was)
	}
	if ans.ExpiresAt.After(s.expiresAt[job]) {
		s.expiresAt[job] = ans.ExpiresAt
	}
	s.mu.Unlock()
}

// observeAcquire checks an acquisition that landed: invariant 2 (a live
// holder's lock is never taken by age or proof), invariant 3 (the data
// loaded is the last landed write's) and invariant 11 (no broken record is
// acquired; the epoch never goes back); and a refusal of a broken record
// (invariant 11).
func (s *sim) observeAcquire(job, key string, call testsupport.ScriptCall) {
	a, err1 := record.ParseAcquireArgs(call.Args)
	res, err2 := record.ParseAcquire(call.Val)
	if err1 != nil || err2 != nil {
		s.fail("acquire call unreadable: %v %v", err1, err2)
		return
	}
	if res.Outcome != record.Acquired {
		if res.Outcome == record.Corrupt {
			s.corruptAnswer(job, key, "an acquire", res.Corrupt)
		}
		return
	}
	s.noteAcquisition(job, key)
	s.noteToken(job, key, res.Epoch, a.Token)
	s.acquiredTampered(job, key, res.Epoch, a.Token, res.How)
	now := time.Now()
	s.mu.Lock()
	s.restoredLoadLocked(job, key, a.Token, res.Ver, string(res.Data))
	written := s.lockAt[key] // the lock just taken was last written then
	s.lockAt[key] = now
	s.mu.Unlock()
	if res.How == record.TakenStolen || res.How == record.TakenExpired {
		s.mu.Lock()
		exp, revived, restart := s.expiresAt[res.PrevJob], s.revivedAt[res.PrevJob], s.redisRestart
		s.mu.Unlock()
		// By design an unknown presence answer (the first TTL after a Redis
		// restart) does not protect a lock past LockTTL+LockSkew.
		graceAfterRestart := res.How == record.TakenExpired && time.Since(restart) < presenceTTL+presenceBeat
		// The holder's presence expired after the lock was last written if
		// it is expired now, or if a beat revived it since.
		expiredSince := !now.Before(exp) || revived.After(written)
		if !expiredSince && !graceAfterRestart {
			s.fail("invariant 2: %s took %s %s from %s, whose presence lives until %s and has not expired since the lock was written at %s",
				job, key, res.How, res.PrevJob, exp.Sub(s.bornAt), written.Sub(s.bornAt))
		}
	}
	s.mu.Lock()
	want, known := s.landed[key][res.Ver]
	s.mu.Unlock()
	if data := string(res.Data); res.Ver > 0 && known && want != data {
		s.fail("invariant 3: %s loaded %s at ver %d with data %x, but the write that made ver %d had %x",
			job, key, res.Ver, data, res.Ver, want)
	}
	s.checkLoaded(job, key, res.Data, res.Messages)
}

// observeSave checks a write that landed: invariant 1 (the token fence),
// and records what it wrote for the loads after it; and invariant 11 on
// every write (writeRefused, writtenTampered).
func (s *sim) observeSave(job, key string, call testsupport.ScriptCall) {
	a, err1 := record.ParseSaveArgs(call.Args)
	res, err2 := record.ParseSave(call.Val)
	if err1 != nil || err2 != nil {
		s.fail("save call unreadable: %v %v", err1, err2)
		return
	}
	if res.Outcome != record.Written {
		s.writeRefused(job, key, a.Token, res)
		return
	}
	if res.Moved { // an adoption's save took the lock again
		s.noteAcquisition(job, key)
		s.noteToken(job, key, res.Epoch, a.Token)
		s.acquiredTampered(job, key, res.Epoch, a.Token, "")
	}
	s.writtenTampered(job, key, a.Token)
	if res.Moved || res.How == record.HowSaved || res.How == record.HowReleased {
		s.mu.Lock()
		s.lockAt[key] = time.Now() // every accepted write refreshes lock.at
		s.mu.Unlock()
	}
	s.mu.Lock()
	want, known := s.tokenEpoch[a.Token]
	s.mu.Unlock()
	if res.How == record.HowSaved || res.How == record.HowReleased {
		if known && want != res.Epoch {
			s.fail("invariant 1: %s wrote %s with the token of epoch %d while the record is at epoch %d",
				job, key, want, res.Epoch)
		}
		s.restoredWrite(key, a.Token, res.Ver, a.Data)
		if a.Data != nil {
			s.mu.Lock()
			if s.landed[key] == nil {
				s.landed[key] = make(map[int64]string)
			}
			s.landed[key][res.Ver] = string(a.Data)
			s.mu.Unlock()
		}
		s.checkWritten(job, key, a, res.Ver)
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
	if cur, ok := s.latest[key+"\x00"+job]; !ok || cur.stale || epoch > cur.epoch {
		s.latest[key+"\x00"+job] = heldToken{epoch: epoch, token: token}
	}
}

// hotLoopCalls is how many script calls at one virtual instant make a hot
// loop: a loop that never waits on time, which would keep the bubble busy
// forever. A crash or the drain of a long run makes a few hundred.
const hotLoopCalls = 20000

// hotLoop reports a hot loop and stops the run: the context of every move
// ends and every Redis call of every server fails from now on.
func (s *sim) hotLoop(acquires int) {
	what := fmt.Sprintf("%d script calls at one virtual instant, %d of them acquires: a loop that never waits",
		hotLoopCalls, acquires)
	s.fail("livelock: %s", what)
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
}

// noteAcquisition records that job's acquisition of key landed now
// (invariant 9). The observer runs as the script's answer comes back, at the
// virtual instant the script ran: nothing in between waits on time.
func (s *sim) noteAcquisition(job, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.acquisitions[key] = append(s.acquisitions[key], landing{job: job, at: time.Now(), seq: s.seq})
}

// heldToken is the newest lock token of a key a server got to land.
type heldToken struct {
	epoch int64
	token string
	stale bool // the record was deleted since: the next token landed is the newest, whatever its epoch
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
