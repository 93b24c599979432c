package simulation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
)

// Invariant 11 (DESIGN.md's invariant 12), checked against what the
// tampers did (tamper.go): no state of a record wedges a key: a record
// loads and saves
// normally, or is refused at once (ErrCorruptRecord naming the field) with
// nothing overwritten; the epoch never decreases (but after a deletion,
// which by design loses the record); a deleted record is never recreated by
// its old holder, whose session ends at its next write; the eviction of the
// presence owners hash fences nobody.

// refuseBound is the longest a join of a broken record may take to be
// refused, from the damage or from its start: less than its LockWait (a
// join that waits on a broken record's holder, or on its own server's
// lease, tries the acquire again long before).
const refuseBound = lockWait

// damagedBetween returns the newest damage of rk that allows a CORRUPT
// answer and stood at some moment between from and to, or nil.
func (s *sim) damagedBetween(rk string, from, to time.Time) *damage {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.tampers.damages[rk]
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.allows && !d.from.After(to) && (d.to.IsZero() || !d.to.Before(from)) {
			return d
		}
	}
	return nil
}

// refusing returns the damage of rk that refuses every acquire and stood
// over all of from to to, or nil. A damage repaired at to no longer stands
// then: what lands at the instant of a repair came after it (before it, it
// would have been refused).
func (s *sim) refusing(rk string, from, to time.Time) *damage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.standingLocked(rk); d != nil && d.refuses && !d.from.After(from) {
		return d
	}
	ds := s.tampers.damages[rk]
	for i := len(ds) - 1; i >= 0; i-- {
		if d := ds[i]; d.refuses && !d.from.After(from) && !d.to.IsZero() && d.to.After(to) {
			return d
		}
	}
	return nil
}

// corruptAnswer checks a script's CORRUPT answer (what: an acquire, a
// write, a send) naming field: a tamper broke the record, and the damage
// still stands.
func (s *sim) corruptAnswer(job, rk, what string, field record.CorruptField) {
	now := time.Now()
	if s.damagedBetween(rk, now, now) == nil {
		s.fail("invariant 11: %s of %s by %s answered corrupt (%s: %s), but no tamper broke the record",
			what, rk, job, field.Field, field.Why)
	}
}

// acquiredTampered checks an acquisition of rk by job that landed at epoch
// under token, how it was taken (or an adoption's write that took the lock
// again, how ""): no damage that refuses every acquire stands, and the epoch
// is above every epoch since the record's last deletion.
func (s *sim) acquiredTampered(job, rk string, epoch int64, token string, how record.Taken) {
	now := time.Now()
	switch d := s.refusing(rk, now, now); {
	case d != nil:
		s.fail("invariant 11: %s acquired %s at epoch %d while it is broken (%s since %s): it must be refused",
			job, rk, epoch, d.how, d.from.Sub(s.bornAt).Round(time.Millisecond))
	}
	s.mu.Lock()
	last, seen := s.tampers.lastEpoch[rk]
	if !seen || epoch > last {
		s.tampers.lastEpoch[rk] = epoch
	}
	s.tampers.tokenSeq[token] = s.seq
	s.mu.Unlock()
	if seen && epoch <= last {
		s.fail("invariant 11: %s acquired %s at epoch %d, after an acquisition at epoch %d: the epoch went back",
			job, rk, epoch, last)
	}
}

// writeRefused checks a write of rk by job under token that was refused:
// answered corrupt, a tamper broke the record; found gone under a lock that
// landed, a tamper deleted the record since (a give-back of a lock whose
// acquire never landed may find no record at all).
func (s *sim) writeRefused(job, rk, token string, res record.SaveResult) {
	switch res.Outcome {
	case record.CorruptRecord:
		s.mu.Lock()
		s.result.Tampers.WritesRefused++
		s.mu.Unlock()
		s.corruptAnswer(job, rk, "a write", res.Corrupt)
	case record.Gone:
		s.mu.Lock()
		s.result.Tampers.WritesGone++
		seq, landed := s.tampers.tokenSeq[token]
		deleted := slices.ContainsFunc(s.tampers.deletions[rk], func(d uint64) bool { return d > seq })
		s.mu.Unlock()
		if landed && !deleted {
			s.fail("invariant 11: a write of %s by %s found the record gone, but no tamper deleted it", rk, job)
		}
	}
}

// writtenTampered checks a write of rk by job under token that landed:
// nothing lands while a field every write checks is broken, and no token
// taken before the record's last deletion writes it again (the old holder
// never recreates a deleted record).
func (s *sim) writtenTampered(job, rk, token string) {
	now := time.Now()
	s.mu.Lock()
	d := s.standingLocked(rk)
	seq, known := s.tampers.tokenSeq[token]
	dels := s.tampers.deletions[rk]
	s.mu.Unlock()
	if d != nil && d.writes && !d.from.After(now) {
		s.fail("invariant 11: a write of %s by %s landed while it is broken (%s): nothing may be written", rk, job, d.how)
	}
	if known && len(dels) > 0 && seq < dels[len(dels)-1] {
		s.fail("invariant 11: a write of %s by %s under a lock taken before the record was deleted landed: "+
			"the old holder recreated the record", rk, job)
	}
}

// joinRefused checks a join of pl on srv, started at start, that failed
// with err, against the damages of its record; it reports whether it dealt
// with err. A join answered ErrCorruptRecord was refused by a damage, and at
// once (within refuseBound of the damage, or of its start); a join that
// started while a damage refused every acquire, and ended before its
// repair, never waits out its LockWait (ErrWaitTimeout, but for its own
// server's lease).
func (s *sim) joinRefused(pl *player, srv *server, start time.Time, err error) bool {
	rk, now := recordKey(pl.key), time.Now()
	if errors.Is(err, datadriver.ErrCorruptRecord) {
		d := s.damagedBetween(rk, start, now)
		if d == nil {
			s.fail("invariant 11: a join of %s on %s answered %v, but no tamper broke the record", pl.key, srv.s.JobID, err)
			return true
		}
		since := maxTime(start, d.from)
		took := now.Sub(since) - s.pausedFor(srv, since)
		s.mu.Lock()
		s.result.Refused++
		s.result.Tampers.JoinsRefused++
		s.result.Tampers.SlowestRefusal = max(s.result.Tampers.SlowestRefusal, took)
		s.mu.Unlock()
		if took > refuseBound {
			s.fail("invariant 11: a join of %s on %s was refused %s after the record was broken (%s) or the join began",
				pl.key, srv.s.JobID, took, d.how)
		}
		return true
	}
	if d := s.refusing(rk, start, now); d != nil && errors.Is(err, datadriver.ErrWaitTimeout) && !errors.Is(err, datadriver.ErrFenced) {
		s.fail("invariant 11: a join of %s on %s waited out its LockWait on a broken record (%s): %v", pl.key, srv.s.JobID, d.how, err)
		return true
	}
	return false
}

// sendRefused reports whether err, the error of a Send of m started at
// start, is a refusal of a record a tamper broke meanwhile.
func (s *sim) sendRefused(m *sentMsg, start time.Time, err error) bool {
	return errors.Is(err, datadriver.ErrCorruptRecord) && s.damagedBetween(recordKey(m.to.key), start, time.Now()) != nil
}

// kickedBroken checks a Kick of key on srv for a broken or deleted record:
// ReasonRecordCorrupt after a tamper broke a field every write checks,
// ReasonRecordGone after a deletion, each since srv's lock of the key
// landed; the session the game holds there (if any) ended with
// ErrLockLost (and ErrCorruptRecord).
func (s *sim) kickedBroken(srv *server, key string, reason datadriver.KickReason) {
	rk, job := recordKey(key), srv.s.JobID
	s.mu.Lock()
	var own landing
	for _, l := range s.acquisitions[rk] {
		if l.job == job {
			own = l
		}
	}
	found := false
	if reason == datadriver.ReasonRecordGone {
		s.result.Tampers.KickedGone++
		found = slices.ContainsFunc(s.tampers.deletions[rk], func(seq uint64) bool { return seq > own.seq })
	} else {
		s.result.Tampers.KickedCorrupt++
		found = slices.ContainsFunc(s.tampers.damages[rk], func(d *damage) bool {
			return d.writes && (d.to.IsZero() || d.to.After(own.at))
		})
	}
	var p *datadriver.Profile[Wallet]
	for _, pl := range s.players {
		if pl.key == key && pl.srv == srv {
			p = pl.p
		}
	}
	s.mu.Unlock()
	s.logf("kick %s on %s (%s)", key, job, reason)
	if !found {
		s.fail("invariant 11: %s kicked %s with %s, but no tamper broke or deleted the record since its lock landed", job, key, reason)
	}
	if p == nil {
		return
	}
	if err := p.Err(); !errors.Is(err, datadriver.ErrLockLost) ||
		(reason == datadriver.ReasonRecordCorrupt && !errors.Is(err, datadriver.ErrCorruptRecord)) {
		s.fail("invariant 11: %s kicked %s with %s, but its session's error is %v", job, key, reason, err)
	}
}

// endedBroken checks a session of key on srv, started at since, that ended
// on its own with err: one that a broken record ended (ErrCorruptRecord)
// or that found its record gone lost its lock (ErrLockLost) and its game
// heard of it (ReasonRecordCorrupt or ReasonRecordGone, or the reason of a
// leave that came first).
func (s *sim) endedBroken(srv *server, key string, since time.Time, err error) {
	want := datadriver.ReasonRecordCorrupt
	switch {
	case err == nil || srv.s.Crashed():
		return
	case strings.Contains(err.Error(), "vanished from Redis"): // the library's errRecordGone
		want = datadriver.ReasonRecordGone
	case !errors.Is(err, datadriver.ErrCorruptRecord):
		return
	}
	s.mu.Lock()
	at, why := s.kicks[srv.s.JobID+"\x00"+key], s.tampers.kickWhy[srv.s.JobID+"\x00"+key]
	s.mu.Unlock()
	heard := !at.Before(since) && (why == want || why == datadriver.ReasonJoinedElsewhere)
	if !errors.Is(err, datadriver.ErrLockLost) || !heard {
		s.fail("invariant 11: the session of %s on %s ended on a broken or deleted record (%v), its game heard %v, not %v",
			key, srv.s.JobID, err, why, want)
	}
}

// exemptDeleted reports whether an Update of key on job, accepted after
// by (another server's acquisition of key), falls in the window invariant 9
// does not cover: job's session took its lock before a deletion of the
// record that came before by. A join then reads the record as new (or, once
// the operator started it over, as free) while the old holder plays on
// until its next write, which ends its session (ReasonRecordGone, or
// ReasonLockLost once another server holds the record): guarantees.md.
func (s *sim) exemptDeleted(job, key string, by *landing) bool {
	s.mu.Lock()
	var own uint64
	for _, l := range s.acquisitions[key] {
		if l.job == job && l.seq < by.seq {
			own = l.seq
		}
	}
	exempt := slices.ContainsFunc(s.tampers.deletions[key], func(seq uint64) bool { return seq > own && seq < by.seq })
	if exempt {
		s.result.Tampers.Exempted++
	}
	s.mu.Unlock()
	if exempt {
		s.logf("EXEMPT invariant 9: an Update of %s on %s after %s's acquisition at %s: its session predates the "+
			"record's deletion", key, job, by.job, by.at.Sub(s.bornAt).Round(time.Millisecond))
	}
	return exempt
}

// observeBeatTampered checks a beat of job that landed: no beat of a
// simulated server ever meets another process's beat of its JobID (each
// has a JobID of its own; an evicted owners hash must not make one look
// like another), so none may fence itself for that; and it notes the full
// beats, which re-claim the server's owner entry (checkReclaim).
func (s *sim) observeBeatTampered(job string, a presencescript.BeatArgs, ans presencescript.BeatAnswer) {
	if ans.Outcome != presencescript.BeatWritten {
		s.fail("presence: a beat of %s was %s against instance %q: no other process beats that JobID, yet it "+
			"would fence itself", job, ans.Outcome, ans.Other)
	}
	if a.Check || a.Expected.IsZero() { // the full path: it writes the owner entry
		s.mu.Lock()
		s.tampers.fullBeat[job] = beatMark{at: time.Now(), inst: a.Instance}
		s.mu.Unlock()
	}
}

// checkReclaim checks that every live server whose full beat came after an
// eviction of the owners hash (and after the last Redis restart, which
// empties it too) re-claimed its entry there.
func (s *sim) checkReclaim() {
	s.mu.Lock()
	var due []string
	for job, at := range s.tampers.reclaim {
		if fb := s.tampers.fullBeat[job]; fb.at.After(at) && fb.at.After(s.redisRestart) {
			due = append(due, job)
		}
	}
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	slices.Sort(due)
	owners, err := s.checkRedis.HGetAll(context.Background(), ownerKey()).Result()
	if err != nil {
		s.fail("owners: %v", err)
		return
	}
	for _, job := range due {
		s.mu.Lock()
		inst := s.tampers.fullBeat[job].inst
		delete(s.tampers.reclaim, job)
		s.mu.Unlock()
		if srv := s.c.Server(job); srv == nil || srv.Crashed() {
			continue
		}
		s.mu.Lock()
		s.result.Tampers.Reclaimed++
		s.mu.Unlock()
		if owners[job] != inst {
			s.fail("presence: a full beat of %s after the owners hash was evicted left its entry %q, not its instance %q",
				job, owners[job], inst)
		}
	}
}

// inboxReplaced reports whether err, a read of rk's inbox, failed because
// a tamper replaced the inbox by a key of the wrong type.
func (s *sim) inboxReplaced(rk string, err error) bool {
	d := s.standing(rk)
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") && d != nil && d.what == "inbox"
}

// rejoinTouched ends invariant 11's run, once the operator repaired what
// was left: every player whose record a tamper damaged or deleted joins
// once more and leaves. Each record must load (join checks invariant 7 on
// what it loads).
func (s *sim) rejoinTouched() {
	servers := s.activeServers(s.aliveServers())
	i := 0
	for _, pl := range s.players {
		s.mu.Lock()
		touched := s.tampers.touched[pl]
		s.mu.Unlock()
		if !touched {
			continue
		}
		srv := servers[i%len(servers)]
		i++
		s.join(pl, srv)
		s.mu.Lock()
		online := pl.p != nil
		s.mu.Unlock()
		if !online {
			s.fail("invariant 11: %s does not load on %s after the operator repaired it", pl.key, srv.s.JobID)
			return
		}
		if err := s.leave(pl); err != nil {
			s.fail("invariant 11: %s cannot leave %s after the operator repaired it: %v", pl.key, srv.s.JobID, err)
			return
		}
	}
}
