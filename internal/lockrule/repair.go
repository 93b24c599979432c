package lockrule

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

// RepairOptions say what Repair may do.
type RepairOptions struct {
	// DryRun only says what would change (it still reads presence, and
	// proves a stop where freeing a lock needs one).
	DryRun bool
	// Force also starts over a record missing while keys beside it remain,
	// and frees a lock that names no holder once no live server can hold
	// its token (Judge: NoLiveHolder).
	Force bool
	// Aside is the suffix a key of the wrong type is renamed aside with.
	// default: record.Repair's
	Aside string
}

// RepairResult is what Repair changed (or would change) and what it left,
// each a field and a sentence.
type RepairResult struct {
	// Exists: the record key existed when read.
	Exists bool
	// Read is the lock as read before the repair.
	Read Read
	// Freed: the repair freed the lock read (one that named no holder).
	Freed         bool
	Changed, Left []record.CorruptField
	// Lock is the verdict on a lock that names no holder (nil when the lock
	// named one, or was free).
	Lock *Verdict
}

// Repair puts right what another tool broke in the record rk so that it
// loads and saves again (record.Repair), and never makes a second owner:
// a broken lock is mended in place, the holder keeping its lock and token
// (lock.at stamped with the Redis time; a broken presence flag set to 1
// once the holder's presence was read: alive, stopped, or a missing beat
// that proves nothing yet, never a failed read); a lock that names no
// holder is freed, with Force, only once Judge says that no live server can
// hold its token (record.Free, a second fenced call), and left otherwise,
// saying what would make it safe.
func Repair(ctx context.Context, env Env, rk string, o RepairOptions) (RepairResult, error) {
	rd, err := ReadLock(ctx, env, rk)
	if err != nil {
		return RepairResult{}, err
	}
	l := rd.Lock
	args := record.RepairArgs{DryRun: o.DryRun, Force: o.Force, Skew: env.Rules.Skew, Aside: o.Aside}
	flagWhy := ""
	if l.Held && l.Job == "" {
		flagWhy = "left with the lock, which names no holder (see lock.job)"
	} else if l.Held && l.Flag == FlagBroken {
		r := env.Presence.Read(ctx, l.Job)
		if err := ctx.Err(); err != nil {
			return RepairResult{}, err
		}
		if r.Err == nil {
			args.FlagToken = l.Token
		} else {
			flagWhy = fmt.Sprintf("left: %s's presence could not be read (%v), so whether it beats presence is not "+
				"known; run repair again once presence reads", l.Job, r.Err)
		}
	}
	res, err := record.Repair(ctx, env.Records, rk, args)
	if err != nil {
		return RepairResult{}, fmt.Errorf("repair %s (it may or may not have landed; read it again to see): %w", rk, err)
	}
	out := RepairResult{Exists: rd.Exists, Read: rd, Changed: res.Changed}
	for _, f := range res.Left {
		switch f.Field {
		case record.FieldLockPresence:
			f.Why = cmp.Or(flagWhy, "left: the lock changed since it was read; run repair again")
		case record.FieldLockJob:
			continue // judged below
		}
		out.Left = append(out.Left, f)
	}
	if !l.Held || l.Job != "" {
		return out, nil
	}
	return repairUnnamed(ctx, env, rk, rd, o, out)
}

// repairUnnamed judges a lock that names no holder and frees it, with
// force, on a yes.
func repairUnnamed(ctx context.Context, env Env, rk string, rd Read, o RepairOptions, out RepairResult) (RepairResult, error) {
	v, err := Judge(ctx, env, rd.Lock, rd.At)
	if err != nil {
		return out, err
	}
	out.Lock = &v
	field := func(why string) record.CorruptField { return record.CorruptField{Field: record.FieldLockJob, Why: why} }
	if !v.Answer.May() && env.Ask != nil {
		// A holder asked releases the lock before it answers: whatever the
		// verdict on the rest, the lock read may be gone.
		if now, err := ReadLock(ctx, env, rk); err == nil && now.Lock.Token != rd.Lock.Token {
			out.Changed = append(out.Changed, field("the lock was released meanwhile (its holder, asked, let it go): "+
				"nothing to free"))
			return out, nil
		}
	}
	switch {
	case !v.Answer.May():
		out.Left = append(out.Left, field("a lock that names no holder, left: "+v.Why+retryText(v)))
		return out, nil
	case !o.Force:
		out.Left = append(out.Left, field("a lock that names no holder: --force frees it ("+v.Why+")"))
		return out, nil
	case o.DryRun:
		out.Changed = append(out.Changed, field("the lock would be freed: "+v.Why))
		return out, nil
	}
	u, err := free(ctx, env, rk, UnlockResult{Read: rd, Verdict: v})
	if err != nil {
		return out, err
	}
	switch u.Outcome {
	case UnlockFreed:
		out.Freed = true
		out.Changed = append(out.Changed, field("the lock is freed: "+v.Why))
	case UnlockAlreadyFree, UnlockReleased:
		out.Changed = append(out.Changed, field("the lock was freed meanwhile (a release): nothing to do"))
	case UnlockChanged:
		out.Left = append(out.Left, field(fmt.Sprintf("the lock changed meanwhile (%s holds it now): nothing was "+
			"changed; run repair again", cmp.Or(u.NowHeldBy, "no one named"))))
	default:
		out.Left = append(out.Left, field("left: "+u.Verdict.Why))
	}
	return out, nil
}

// retryText says when to try again, from a verdict's RetryIn.
func retryText(v Verdict) string {
	if v.RetryIn <= 0 {
		return ""
	}
	return fmt.Sprintf(" (try again in %s)", v.RetryIn.Round(time.Millisecond))
}

// Explain is a verdict in one line for an operator: the answer and why,
// with when to try again.
func Explain(v Verdict) string {
	var b strings.Builder
	b.WriteString(v.Why)
	b.WriteString(retryText(v))
	if v.Reading.Status == presencecore.Unknown && v.Reading.Err == nil && v.RetryIn > 0 {
		b.WriteString("; an unknown reading never counts as stopped")
	}
	return b.String()
}
