package simulation

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/record"
)

// The operator (Config.Tampers): a few seconds to a minute after a tamper
// broke a record, the operator runs `playerdata repair --force` on it (what
// lockrule.Repair runs: a human decided), whoever holds the record and
// whatever state it is in. The library's rule decides what may be done: a
// broken lock is mended in place, the holder keeping its token; a lock
// that names no holder is freed only once every live server answered that
// it holds no lock under its token and the rest are proven stopped;
// otherwise the operator is told what would make it safe, and comes back
// at the next step.

// repairDue has the operator repair the damages whose time has come (all
// of them when all is true, at the end of the run).
func (s *sim) repairDue(all bool) {
	now := time.Now()
	for _, pl := range s.players {
		d := s.standing(recordKey(pl.key))
		if d != nil && (all || !now.Before(d.repairAt)) {
			s.repairRecord(d)
		}
	}
}

// repairRecord is the operator's `playerdata repair --force` of d's record.
func (s *sim) repairRecord(d *damage) {
	rk := recordKey(d.pl.key)
	res, err := lockrule.Repair(s.ctx, s.operatorEnv(d.pl.key), rk, lockrule.RepairOptions{Force: true})
	if err != nil {
		if s.ctx.Err() == nil {
			s.fail("repair --force %s: %v", d.pl.key, err)
		}
		return
	}
	if len(res.Left) > 0 {
		f := res.Left[0]
		switch {
		case !strings.HasPrefix(f.Field, "lock."):
			s.fail("repair --force %s left %s (%s): no tamper breaks it", d.pl.key, f.Field, f.Why)
		case !d.waited:
			s.logf("REPAIR %s: %s left (%s): the operator comes back", d.pl.key, f.Field, f.Why)
			d.waited = true
		}
		return
	}
	forced := false
	for _, c := range res.Changed {
		switch c.Field {
		case "(record)":
			forced = forced || strings.HasPrefix(c.Why, "started over")
		case record.FieldLockJob:
			if res.Freed {
				forced = true
				l := res.Read.Lock
				s.checkFreed(rk, l.Job, l.Token, res.Lock.Answer)
			}
		case record.FieldLockAt:
			s.mu.Lock()
			s.lockAt[rk] = time.Now() // stamped: the lock looks written now
			s.mu.Unlock()
		}
	}
	s.repaired(d, res.Changed, forced)
}

// repaired ends d once the repair landed, and brings the bookkeeping to
// what it changed: a new ver names the data the record holds (invariant 3);
// a new epoch is the epoch of the lock the record holds (invariant 1).
func (s *sim) repaired(d *damage, changed []record.CorruptField, forced bool) {
	ctx := context.Background()
	rk := recordKey(d.pl.key)
	f, err := s.checkRedis.HMGet(ctx, rk, record.FieldVer, record.FieldData, record.FieldEpoch, record.FieldLockToken).Result()
	if err != nil {
		s.fail("repair %s: %v", d.pl.key, err)
		return
	}
	v := strs(f)
	var what []string
	s.mu.Lock()
	d.to = time.Now()
	if len(changed) > 0 {
		s.result.Tampers.Repairs++
	}
	if forced {
		s.result.Tampers.Forced++
	}
	for _, c := range changed {
		what = append(what, c.Field+": "+c.Why)
		switch c.Field {
		case record.FieldVer:
			ver, _ := strconv.ParseInt(v[0], 10, 64)
			s.landed[rk] = map[int64]string{ver: v[1]}
		case record.FieldEpoch:
			if epoch, _ := strconv.ParseInt(v[2], 10, 64); v[3] != "" {
				s.tokenEpoch[v[3]] = epoch
				what = append(what, "the lock it carries is at that epoch now")
			}
		}
	}
	s.mu.Unlock()
	if len(what) == 0 {
		what = []string{"nothing to repair"}
	}
	force := ""
	if forced {
		force = " --force"
	}
	s.logf("REPAIR%s %s (%s): %s", force, d.pl.key, d.how, strings.Join(what, "; "))
}
