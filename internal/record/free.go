package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// FreeArgs are the arguments of free.lua: the lock the caller judged may
// change hands (internal/lockrule), as it read it.
type FreeArgs struct {
	// Token and Job are the lock's token and holder as read (Job "" for a
	// lock that names no holder).
	Token, Job string
	// MaxAge is LockTTL+LockSkew when the judgment was the age rule (a lock
	// without the presence flag): the script frees it only while that still
	// holds on the Redis clock. Zero otherwise.
	MaxAge time.Duration
}

// FreeOutcome is what a free did.
type FreeOutcome int

const (
	// Freed: the lock judged is free now.
	Freed FreeOutcome = iota + 1
	// FreeChanged: the lock is not the one judged (FreeResult.Holder holds
	// it now); nothing changed.
	FreeChanged
	// FreeAlready: the lock was free already; nothing changed.
	FreeAlready
	// FreeTooYoung: the age rule no longer holds (a save refreshed the
	// lock, or it carries the presence flag now); nothing changed.
	FreeTooYoung
	// FreeNoRecord: there is no record.
	FreeNoRecord
)

// FreeResult is free.lua's answer.
type FreeResult struct {
	Outcome FreeOutcome
	// Holder is the lock found instead, when FreeChanged.
	Holder Lock
	// Released says, when FreeAlready, that the lock's last release was
	// under the token judged: its holder released it itself.
	Released bool
	// Age is the lock's age when FreeTooYoung (negative: lock.at is not an
	// integer, or the lock carries the presence flag).
	Age time.Duration
}

// Free runs free.lua on the record at key: one round trip that frees
// exactly the lock a.Token names, or nothing.
func Free(ctx context.Context, rdb redis.Scripter, key string, a FreeArgs) (FreeResult, error) {
	if a.Token == "" {
		return FreeResult{}, fmt.Errorf("record: free %s: no token", key)
	}
	return freeScript.Run(ctx, rdb, key, a)
}

// keys are KEYS of free.lua: the record.
func (a FreeArgs) keys(key string) []string { return []string{key} }

// argv is ARGV of free.lua.
func (a FreeArgs) argv() []any { return []any{a.Token, a.Job, a.MaxAge.Milliseconds()} }

// ParseFreeArgs reads the ARGV of an observed free.lua call.
func ParseFreeArgs(argv []string) (FreeArgs, error) {
	if err := wantArgs(ScriptFree, argv, 3); err != nil {
		return FreeArgs{}, err
	}
	ms, _ := strconv.ParseInt(arg(argv, 3), 10, 64)
	return FreeArgs{Token: arg(argv, 1), Job: arg(argv, 2), MaxAge: time.Duration(ms) * time.Millisecond}, nil
}

// ParseFree reads free.lua's answer.
func ParseFree(v any) (FreeResult, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return FreeResult{}, fmt.Errorf("%w: free answered %v", ErrUnexpectedAnswer, v)
	}
	switch num(arr[0]) {
	case 1:
		return FreeResult{Outcome: Freed}, nil
	case 2:
		return FreeResult{Outcome: FreeChanged, Holder: Lock{Job: str(elem(arr, 1)), Token: str(elem(arr, 2))}}, nil
	case 3:
		return FreeResult{Outcome: FreeAlready, Released: num(elem(arr, 1)) == 1}, nil
	case 4:
		return FreeResult{Outcome: FreeTooYoung, Age: time.Duration(num(elem(arr, 1))) * time.Millisecond}, nil
	case 5:
		return FreeResult{Outcome: FreeNoRecord}, nil
	}
	return FreeResult{}, fmt.Errorf("%w: free answered %v", ErrUnexpectedAnswer, v)
}
