package lockrule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
)

// The operator's verbs that can move a lock (`playerdata unlock`,
// `playerdata repair`), here so that the CLI, the simulation's operator and
// the robustness suite run the very same code: read the lock, Judge it, and
// act only on a yes, through a script that acts on exactly the lock judged.

// Env is where an operator's verb acts.
type Env struct {
	// Records is a client of the node that serves the record (on a Redis
	// Cluster, the master of its slot): its TIME is the clock the record's
	// scripts read.
	Records redis.Cmdable
	// Presence reads the servers' presence as they do.
	Presence Presence
	// Clock times the proofs. default: clock.New()
	Clock clock.Clock
	Rules Rules
	// Ask, when set, asks servers over the bus to release the lock under
	// token if they hold it, and answers those that answered (a server that
	// answered holds no lock under it: lockhandoff.Handoff.AskAll). It is
	// how a lock that names no holder is freed while servers live.
	Ask AskFunc
}

// AskFunc asks jobs to release the lock under token and returns those that
// answered, bounded by its own deadline or ctx.
type AskFunc func(ctx context.Context, token string, jobs []string) []string

func (e Env) clock() clock.Clock {
	if e.Clock == nil {
		return clock.New()
	}
	return e.Clock
}

// Read is a record's lock as read, with the Redis time of the read.
type Read struct {
	Exists bool // the record key exists
	// NotHash: the record key is of another type (no lock is read from it;
	// repair renames it aside).
	NotHash bool
	Lock    Lock
	// Trade is a pending trade's id ("" for none): a free leaves it for the
	// next load to settle or abort.
	Trade string
	// Now is the Redis time of the read; At the local time its answer came.
	Now, At time.Time
}

// ReadLock reads the lock of the record rk and the Redis clock, in one
// pipeline on env.Records.
func ReadLock(ctx context.Context, env Env, rk string) (Read, error) {
	var (
		typ   *redis.StatusCmd
		hm    *redis.SliceCmd
		trade *redis.StringCmd
		now   *redis.TimeCmd
	)
	_, err := env.Records.Pipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, rk)
		hm = p.HMGet(ctx, rk, FieldNames...)
		trade = p.HGet(ctx, rk, record.FieldTrade)
		now = p.Time(ctx)
		return nil
	})
	at := env.clock().Now()
	if typ == nil || typ.Err() != nil || now.Err() != nil {
		return Read{}, fmt.Errorf("read the lock of %s: %w", rk, err)
	}
	rd := Read{Exists: typ.Val() != "none", NotHash: typ.Val() != "none" && typ.Val() != "hash", Now: now.Val(), At: at}
	if rd.NotHash {
		return rd, nil
	}
	if hm.Err() != nil && !errors.Is(hm.Err(), redis.Nil) {
		return Read{}, fmt.Errorf("read the lock of %s: %w", rk, hm.Err())
	}
	rd.Lock, rd.Trade = Parse(FieldsOf(hm.Val()), now.Val(), env.Rules.Skew), trade.Val()
	return rd, nil
}

// UnlockOutcome is what Unlock did.
type UnlockOutcome int

const (
	// UnlockNoRecord: there is no record: nothing to do.
	UnlockNoRecord UnlockOutcome = iota + 1
	// UnlockAlreadyFree: the lock is free (or was freed meanwhile).
	UnlockAlreadyFree
	// UnlockRefused: the authority said no (UnlockResult.Verdict says why).
	UnlockRefused
	// UnlockWouldFree: a dry run found that the lock may be freed.
	UnlockWouldFree
	// UnlockFreed: the lock judged is free now.
	UnlockFreed
	// UnlockChanged: the lock changed hands meanwhile (NowHeldBy); nothing
	// was done.
	UnlockChanged
	// UnlockReleased: its holder released the lock itself meanwhile.
	UnlockReleased
)

// UnlockResult is what Unlock read, judged and did.
type UnlockResult struct {
	Outcome UnlockOutcome
	Read    Read
	Verdict Verdict
	// NowHeldBy is the holder found instead of the one judged
	// (UnlockChanged).
	NowHeldBy string
}

// Unlock frees the lock of the record rk when the authority says it may
// change hands (Judge), in one fenced call (record.Free) that frees exactly
// the lock judged; a dry run judges (proof included) and changes nothing.
// The error is for a failed call only; a refusal is an outcome.
func Unlock(ctx context.Context, env Env, rk string, dryRun bool) (UnlockResult, error) {
	rd, err := ReadLock(ctx, env, rk)
	if err != nil {
		return UnlockResult{}, err
	}
	res := UnlockResult{Read: rd}
	switch {
	case !rd.Exists:
		res.Outcome = UnlockNoRecord
		return res, nil
	case rd.NotHash:
		return res, fmt.Errorf("the record key %s is not a hash (another tool wrote it): a repair (the CLI's repair verb) renames it aside", rk)
	case !rd.Lock.Held:
		res.Outcome = UnlockAlreadyFree
		return res, nil
	}
	if res.Verdict, err = Judge(ctx, env, rd.Lock, rd.At); err != nil {
		return res, err
	}
	switch {
	case !res.Verdict.Answer.May():
		res.Outcome = UnlockRefused
		return res, nil
	case dryRun:
		res.Outcome = UnlockWouldFree
		return res, nil
	}
	return free(ctx, env, rk, res)
}

// free frees the lock res judged.
func free(ctx context.Context, env Env, rk string, res UnlockResult) (UnlockResult, error) {
	l := res.Read.Lock
	a := record.FreeArgs{Token: l.Token, Job: l.Job}
	if res.Verdict.Answer == Aged || (res.Verdict.Answer == NoLiveHolder && l.Flag == FlagOff) {
		a.MaxAge = env.Rules.MaxAge
	}
	fr, err := record.Free(ctx, env.Records, rk, a)
	if err != nil {
		return res, fmt.Errorf("free the lock of %s (it may or may not have landed; read it again to see): %w", rk, err)
	}
	switch fr.Outcome {
	case record.Freed:
		res.Outcome = UnlockFreed
	case record.FreeAlready, record.FreeNoRecord:
		res.Outcome = UnlockAlreadyFree
		if fr.Released {
			res.Outcome = UnlockReleased
		}
	case record.FreeChanged:
		res.Outcome, res.NowHeldBy = UnlockChanged, fr.Holder.Job
	case record.FreeTooYoung:
		res.Outcome, res.Verdict.Answer = UnlockRefused, Young
		res.Verdict.Why = "the lock was written again since it was read (its holder saved): it is not stale"
	}
	return res, nil
}
