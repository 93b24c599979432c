package simulation

import (
	"context"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// The operator's `playerdata restore` (Driver.RestoreAt, which the CLI
// runs on a Node of its own): a player's record put back as it was some
// time ago, whoever holds it, live, paused or cut off. It takes the lock as
// a join does (the lock rule decides: a live holder is asked to release, an
// unknown one waited for), writes the kept version as the current data and
// releases. The simulation checks its lock as every acquisition's
// (invariants 1, 2 and 9), and models what the rewind undoes: the gems and
// the messages the replaced data held and the restored data lacks.

// restoreGiveUp bounds one restore: the load's waits (LockWait) and its
// writes.
const restoreGiveUp = 30 * time.Second

// restoreOp is a restore under way of one record, guarded by sim.mu: the
// server it runs on, and once its acquire landed, its token and what it
// loaded.
type restoreOp struct {
	job       string
	token     string
	loadedVer int64
	loaded    string
	known     bool // loaded is set
}

// operatorRestore runs the operator's restore of pl's record on an active
// server, as of now or of a time up to two minutes ago (the data as of now
// is the current data: no write, but the lock changes hands all the same).
// It reports false when it could not run (no active server, or pl busy),
// and the operator unlocks instead.
func (s *sim) operatorRestore(pl *player) bool {
	r := s.opRng
	servers := s.activeServers(s.aliveServers())
	s.mu.Lock()
	busy := pl.busy
	s.mu.Unlock()
	if len(servers) == 0 || busy {
		return false
	}
	srv := servers[r.IntN(len(servers))]
	var back time.Duration
	if r.IntN(2) == 0 {
		back = time.Duration(1+r.IntN(120)) * time.Second
	}
	s.do(pl, "restore", func() { s.restore(pl, srv, back) })
	return true
}

// restore is `playerdata restore --at` (now - back) of pl's record, run
// from srv: RestoreAt, then the release of the profile it returns.
func (s *sim) restore(pl *player, srv *server, back time.Duration) {
	rk := recordKey(pl.key)
	op := &restoreOp{job: srv.s.JobID}
	s.mu.Lock()
	s.tampers.restores[rk] = op
	s.result.Tampers.Restores++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.tampers.restores, rk)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(s.ctx, restoreGiveUp)
	defer cancel()
	// As `playerdata restore --nats` waits: the lock handed over, or
	// its holder proven stopped, within the lock wait.
	p, err := srv.d.RestoreAt(ctx, pl.key, time.Now().Add(-back), datadriver.LoadOptions{HandoffWait: lockWait})
	s.logf("OPERATOR restore %s as of %s ago, from %s: %v", pl.key, back, srv.s.JobID, err)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.result.Tampers.RestoresDone++
	s.mu.Unlock()
	if err := p.Release(ctx); err != nil {
		s.logf("OPERATOR restore %s: release: %v", pl.key, err)
	}
}

// restoredLoadLocked notes what the restore of key loaded, when job's acquire
// with token is the restore's. s.mu held.
func (s *sim) restoredLoadLocked(job, key, token string, ver int64, data string) {
	op := s.tampers.restores[key]
	if op == nil || op.job != job || op.token != "" {
		return
	}
	op.token, op.loadedVer, op.loaded, op.known = token, ver, data, true
}

// restoredWrite models a write that landed at ver under a restore's token
// (the restore's own, or a save of the messages its load applied): the
// gems it takes or gives, and the messages the data it replaces held and
// it lacks, lost by the operator's choice. What a player joins to after it
// is durable from now (invariant 7 starts over, as after a deletion).
func (s *sim) restoredWrite(key, token string, ver int64, data []byte) {
	s.mu.Lock()
	op := s.tampers.restores[key]
	if op == nil || op.token != token || data == nil {
		s.mu.Unlock()
		return
	}
	prev, known := s.landed[key][ver-1]
	if !known && op.known && op.loadedVer == ver-1 {
		prev, known = op.loaded, true
	}
	pl := s.byRecord[key]
	s.mu.Unlock()
	if pl == nil {
		return
	}
	if !known {
		s.fail("restore of %s wrote ver %d, and the simulation does not know the data of ver %d it replaced", key, ver, ver-1)
		return
	}
	was, err1 := decodeWallet(prev)
	now, err2 := decodeWallet(string(data))
	if err1 != nil || err2 != nil {
		s.fail("restore of %s: %v %v", key, err1, err2)
		return
	}
	lost := 0
	s.mu.Lock()
	for _, k := range was.got() {
		if k <= len(pl.sent) && !now.has(k) {
			pl.sent[k-1].lost = true
			lost++
		}
	}
	s.tampers.gemsShift += now.Gems - was.Gems
	if now.Coins != was.Coins || now.Gems != was.Gems || lost > 0 {
		pl.floor, pl.lostAt = 0, time.Now()
		s.result.Tampers.Rewound++
		s.result.Tampers.RewoundMessages += lost
	}
	s.mu.Unlock()
}
