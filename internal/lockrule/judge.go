package lockrule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// Judge answers whether lock l, read at local time readAt, may change hands
// now, reading presence through p as often as a proof needs. It is the
// authority for a caller that reads once and acts (the operator's unlock
// and repair, through Unlock and Repair); a Node's joins follow the same
// rule through lockhandoff's prover (which folds with Stop) and acquire.lua.
// Its yeses:
//
//   - Free: nobody holds the lock;
//   - Stopped: the holder it names is proven stopped (Stop) by reads sent
//     after the lock was written, whatever its flag says (a broken flag
//     counts as the presence flag: the stricter rule);
//   - Aged: without the presence flag, older than MaxAge on the Redis clock;
//   - NoLiveHolder: a lock that names no holder, once no live server can
//     hold its token: without the presence flag by age as any such lock;
//     otherwise every server in the presence hash either answered, asked
//     over the bus (env.Ask), that it holds no lock under that token, or is
//     proven stopped, and so is a JobID that never beats in every shard
//     (which reads stopped only once a missing beat proves a stop there:
//     never within one TTL of a Redis restart or failover, when a live
//     server's beat may be missing from the hash).
//
// An unknown reading is never a stop. A holder that reads alive or unknown
// ends the judgment at once; a holder that reads stopped is read again one
// Beat later, so a yes for a stop takes about one Beat. Judge returns
// ctx.Err() when ctx ends first.
func Judge(ctx context.Context, env Env, l Lock, readAt time.Time) (Verdict, error) {
	clk, r := env.clock(), env.Rules
	start := clk.Now()
	var (
		v   Verdict
		err error
	)
	switch {
	case !l.Held:
		v = Verdict{Answer: Free, Why: "the lock is free"}
	case l.Job == "":
		v, err = judgeUnnamed(ctx, env, l, readAt.Add(-l.Age))
	case l.Flag == FlagOff:
		v = judgeAge(l, r)
	default:
		v, err = judgeHolder(ctx, env, l, readAt.Add(-l.Age))
	}
	v.Took = clk.Since(start)
	return v, err
}

// judgeAge is the rule of a lock without the presence flag: by age only.
func judgeAge(l Lock, r Rules) Verdict {
	switch {
	case l.AtBroken:
		return Verdict{Answer: Young, Why: "the lock carries no presence flag and its stamp (lock.at) cannot be read, " +
			"so its age is unknown: a repair (the CLI's repair verb) stamps it with the Redis time, and it moves by age " +
			fmt.Sprintf("%s after that", r.MaxAge)}
	case l.Age > r.MaxAge:
		return Verdict{Answer: Aged, Why: fmt.Sprintf("the lock carries no presence flag and is %s old on the Redis "+
			"clock, past LockTTL+LockSkew (%s)", l.Age.Round(time.Millisecond), r.MaxAge)}
	}
	wait := r.MaxAge - l.Age + time.Millisecond
	return Verdict{Answer: Young, RetryIn: wait, Why: fmt.Sprintf("the lock carries no presence flag: its holder "+
		"does not protect it by presence, so it moves when the holder releases it, or by age once older than "+
		"LockTTL+LockSkew (%s; it is %s old: %s more)", r.MaxAge, l.Age.Round(time.Millisecond), wait.Round(time.Millisecond))}
}

// judgeHolder proves the holder l names stopped, or says why not.
func judgeHolder(ctx context.Context, env Env, l Lock, writtenBy time.Time) (Verdict, error) {
	all, proofs, err := prove(ctx, env.Presence, env.clock(), []string{l.Job}, env.Rules.Beat, writtenBy)
	if err != nil {
		return Verdict{}, err
	}
	pf := proofs[0]
	v := Verdict{Reading: pf.last, Reads: pf.reads}
	rd := pf.last
	switch {
	case all:
		v.Answer, v.Why = Stopped, fmt.Sprintf("%s is proven stopped: %d presence reads at least one Beat (%s) apart "+
			"found no live beat, the last sent after the lock was written", l.Job, pf.reads, env.Rules.Beat)
	case rd.Status == presencecore.Alive:
		v.Answer, v.Why = Alive, fmt.Sprintf("%s is alive (its beat expires in %s): freeing its lock would make a "+
			"second owner while it plays on; it moves when %s releases it (a join elsewhere asks it to)",
			l.Job, rd.ExpiresIn.Round(time.Millisecond), l.Job)
	case rd.Err != nil:
		v.Answer, v.Why = Unknown, fmt.Sprintf("%s's presence could not be read (%v): it may be alive", l.Job, rd.Err)
	case rd.Status == presencecore.Unknown:
		v.Answer, v.RetryIn = Unknown, rd.ExpiresIn
		v.Why = fmt.Sprintf("%s's presence is unknown: a missing beat proves nothing for %s more (Redis restarted or "+
			"failed over, or the presence hash was first beaten into, or its clock stepped, less than one "+
			"PresenceTTL ago, and its data may be older than the beats): %s may be alive",
			l.Job, rd.ExpiresIn.Round(time.Millisecond), l.Job)
	default:
		v.Answer = Unknown
		v.Why = fmt.Sprintf("%s read stopped, but the proof did not complete in %d reads: it may be alive", l.Job, pf.reads)
	}
	return v, nil
}

// judgeUnnamed judges a lock that names no holder (a broken lock.job).
func judgeUnnamed(ctx context.Context, env Env, l Lock, writtenBy time.Time) (Verdict, error) {
	p, r := env.Presence, env.Rules
	if l.Flag == FlagOff && !l.AtBroken {
		v := judgeAge(l, r)
		if v.Answer == Aged {
			v.Answer = NoLiveHolder
			v.Why = "the lock names no holder; " + v.Why + ": no live server holds it by the library's rule"
		} else {
			v.Answer, v.Why = LiveServers, "the lock names no holder; "+v.Why
		}
		return v, nil
	}
	entries, err := p.List(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Verdict{}, ctx.Err()
		}
		return Verdict{Answer: Unknown, Why: fmt.Sprintf("the lock names no holder, and the presence hash could not "+
			"be listed (%v): any server may hold it", err)}, nil
	}
	var live, stopped []string
	for _, e := range entries {
		if e.Status == presencecore.Stopped {
			stopped = append(stopped, e.JobID)
		} else {
			live = append(live, e.JobID)
		}
	}
	var answered []string
	if len(live) > 0 && env.Ask != nil {
		answered = env.Ask(ctx, l.Token, slices.Clone(live))
		if err := ctx.Err(); err != nil {
			return Verdict{}, err
		}
		live = slices.DeleteFunc(live, func(j string) bool { return slices.Contains(answered, j) })
	}
	if len(live) > 0 {
		how := "give --nats to ask them whether they hold it"
		if env.Ask != nil {
			how = "they did not answer a release request naming its token"
		}
		return Verdict{Answer: LiveServers, Servers: live, Why: fmt.Sprintf("the lock names no holder and %d %s "+
			"whose presence is alive or unknown may hold its token (%s; %s): freeing it could make a second owner; "+
			"its holder's release clears it", len(live), plural(len(live), "server", "servers"),
			strings.Join(live, ", "), how)}, nil
	}
	return proveNoHolder(ctx, env, stopped, answered, writtenBy)
}

// proveNoHolder proves every server not answered stopped, and every
// shard's missing beat a proof of a stop.
func proveNoHolder(ctx context.Context, env Env, stopped, answered []string, writtenBy time.Time) (Verdict, error) {
	all, proofs, err := prove(ctx, env.Presence, env.clock(), append(stopped, silentJobs(env.Presence.Config().Shards)...),
		env.Rules.Beat, writtenBy)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Servers: append(stopped, answered...)}
	for _, pf := range proofs {
		v.Reads += pf.reads
	}
	if all {
		v.Answer = NoLiveHolder
		v.Why = fmt.Sprintf("the lock names no holder, and no live server can hold its token: %d %s answered that "+
			"they hold no lock under it, and every other server in the presence hash (%d) and every shard's missing "+
			"beat are proven stopped (reads at least one Beat, %s, apart)", len(answered),
			plural(len(answered), "server", "servers"), len(stopped), env.Rules.Beat)
		return v, nil
	}
	i := slices.IndexFunc(proofs, func(pf *proof) bool { return pf.last.Status != presencecore.Stopped })
	v.Answer = Unknown
	v.Why = "the lock names no holder, and presence cannot prove that no live server holds its token"
	if i >= 0 {
		rd := proofs[i].last
		v.Reading, v.RetryIn = rd, rd.ExpiresIn
		v.Why += fmt.Sprintf(": %s reads %s", proofs[i].job, rd.Status)
		if rd.Err != nil {
			v.Why += fmt.Sprintf(" (%v)", rd.Err)
		}
	}
	return v, nil
}

// silentJobs are JobIDs no server beats, one in each of shards shards: a
// read of one answers stopped only where a missing beat proves a stop.
func silentJobs(shards int) []string {
	out := make([]string, max(shards, 1))
	seen := 0
	for i := 0; seen < len(out); i++ {
		job := fmt.Sprintf("playerdata-silent-%d", i)
		if s := presencecore.ShardOf(job, shards); out[s] == "" {
			out[s] = job
			seen++
		}
	}
	return out
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
