package simulation

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

// The operator (Config.Tampers): a few seconds to a minute after a tamper
// broke a record, the operator runs `playerdata repair` on it (what
// record.Repair runs), and `repair --force` where a human may decide.

// repairDue has the operator repair the damages whose time has come (all
// of them when all is true, at the end of the run).
func (s *sim) repairDue(all bool) {
	now := time.Now()
	for _, pl := range s.players {
		d := s.standing(recordKey(pl.key))
		if d != nil && (all || !now.Before(d.repairAt)) {
			s.repairRecord(d, all)
		}
	}
}

// repairRecord is the operator's repair of d's record: `playerdata repair`,
// then, for what it leaves, `repair --force` where a human may decide: a
// missing record is started over; a broken lock is freed once no process
// uses it (its holder crashed; with all, at the end of the run, when every
// player left). While a live server holds a broken lock the operator waits
// (its next write heals it).
func (s *sim) repairRecord(d *damage, all bool) {
	ctx := context.Background()
	rk := recordKey(d.pl.key)
	args := record.RepairArgs{Skew: datadriver.DefaultLockSkew}
	res, err := record.Repair(ctx, s.checkRedis, rk, args)
	if err != nil {
		s.fail("repair %s: %v", d.pl.key, err)
		return
	}
	forced := false
	if len(res.Left) > 0 {
		if why := s.mayForce(rk, res.Left, all); why != "" {
			if !d.waited {
				s.logf("REPAIR %s: %s left (%s): the operator waits", d.pl.key, res.Left[0].Field, why)
				d.waited = true
			}
			return
		}
		args.Force, forced = true, true
		more, err := record.Repair(ctx, s.checkRedis, rk, args)
		if err != nil || len(more.Left) > 0 {
			s.fail("repair --force %s: %v, left %v", d.pl.key, err, more.Left)
			return
		}
		res.Changed = append(res.Changed, more.Changed...)
	}
	s.repaired(d, res.Changed, forced)
}

// mayForce says why the operator may not force the repair of what left
// names ("" when it may).
func (s *sim) mayForce(rk string, left []record.CorruptField, all bool) string {
	for _, f := range left {
		switch {
		case f.Field == "(record)":
		case strings.HasPrefix(f.Field, "lock."):
			job, err := s.checkRedis.HGet(context.Background(), rk, record.FieldLockJob).Result()
			if err != nil && err != redis.Nil {
				return err.Error()
			}
			if srv := s.c.Server(job); !all && srv != nil && !srv.Crashed() {
				return "its holder " + job + " lives"
			}
		default:
			s.fail("repair %s left %s (%s): no tamper breaks it", rk, f.Field, f.Why)
			return "a field for a human"
		}
	}
	return ""
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
