package main

// The servers' settings the lock rule reads by (internal/lockrule), for the
// verbs that may move a lock: unlock and repair.

import (
	"context"
	"time"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// ruleFlags are --beat, --lock-ttl and --lock-skew.
type ruleFlags struct {
	beat, lockTTL, lockSkew time.Duration
}

// add adds the flags to c. --beat defaults to 0: the servers' default
// ratio of Beat to PresenceTTL (3 s to 10 s), of --presence-ttl.
func (f *ruleFlags) add(c *command) {
	c.fs.DurationVar(&f.beat, "beat", 0, "")
	c.fs.DurationVar(&f.lockTTL, "lock-ttl", defaults.LockTTL, "")
	c.fs.DurationVar(&f.lockSkew, "lock-skew", defaults.LockSkew, "")
}

// check refuses values no deployment can have, as usage mistakes; ttl is
// --presence-ttl.
func (f *ruleFlags) check(c *command, ttl time.Duration) error {
	switch {
	case f.beat < 0 || f.beat >= ttl:
		return c.mistake("--beat %v: want the servers' Beat, positive and under --presence-ttl %v", f.beat, ttl)
	case f.lockTTL <= 0 || f.lockSkew <= 0:
		return c.mistake("--lock-ttl %v, --lock-skew %v: want the servers' LockTTL and LockSkew, positive", f.lockTTL, f.lockSkew)
	}
	return nil
}

// rules are the lock rule's settings, for servers of PresenceTTL ttl.
func (f *ruleFlags) rules(ttl time.Duration) lockrule.Rules {
	beat := f.beat
	if beat == 0 {
		beat = defaultBeatOf(ttl)
	}
	return lockrule.Rules{MaxAge: f.lockTTL + f.lockSkew, Skew: f.lockSkew, Beat: beat}
}

// defaultBeatOf is the Beat of servers of PresenceTTL ttl that keep the
// defaults' ratio (3 s to 10 s).
func defaultBeatOf(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * float64(presencecore.DefaultBeat) / float64(presencecore.DefaultTTL))
}

// env is where a verb on the record rk acts: the record's node, the reader's
// presence, and the rules.
func (r *reader) env(ctx context.Context, rk string, rules lockrule.Rules) (lockrule.Env, error) {
	node, err := r.nodeOf(ctx, rk)
	if err != nil {
		return lockrule.Env{}, err
	}
	return lockrule.Env{Records: node, Presence: r.pres, Rules: rules}, nil
}
