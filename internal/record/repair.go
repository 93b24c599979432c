package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RepairArgs say what Repair may do.
type RepairArgs struct {
	// DryRun only says what would change.
	DryRun bool
	// Force also starts over a record that is missing while keys beside it
	// remain: a human decided. No lock changes hands in a repair, forced or
	// not (a lock that names no holder is freed by Free, once
	// internal/lockrule judged that no live server can hold its token).
	Force bool
	// Skew is LockSkew: a lock without the presence flag stamped further
	// ahead of the Redis clock is broken.
	Skew time.Duration
	// FlagToken is the lock token whose broken lock.presence may be set to
	// 1, the lock kept (internal/lockrule judged it: the holder's presence
	// was read); "" for none.
	FlagToken string
	// Aside is the suffix a key of the wrong type is renamed aside with.
	// default: ":corrupt:<unix ms>"
	Aside string
}

// RepairResult is what Repair changed (or, in a dry run, would change) and
// what it left for a human, each a field (or key) and a sentence.
type RepairResult struct {
	Changed, Left []CorruptField
}

// Repair puts right the fields and keys of the record at key that another
// tool broke, so that it loads and saves again: one round trip
// (repair.lua). Nothing stored is deleted: a key of the wrong type is
// renamed aside; a broken integer is replaced by a value that keeps the
// record's promises (the epoch never goes back); fmt and schema fields are
// left to a human. A broken lock is mended in place, never freed: its stamp
// is set to the Redis time and, when a.FlagToken names it, its presence flag
// to 1, the holder keeping its token.
func Repair(ctx context.Context, rdb redis.Scripter, key string, a RepairArgs) (RepairResult, error) {
	if a.Aside == "" {
		a.Aside = fmt.Sprintf(":corrupt:%d", time.Now().UnixMilli())
	}
	return repairScript.Run(ctx, rdb, key, a)
}

// keys are KEYS of repair.lua for the record at key.
func (a RepairArgs) keys(key string) []string {
	return []string{key, InboxKey(key), HistoryKey(key), TriesKey(key), DeadKey(key)}
}

// argv is ARGV of repair.lua.
func (a RepairArgs) argv() []any {
	return []any{flag(!a.DryRun), flag(a.Force), a.Aside, Format, a.Skew.Milliseconds(), a.FlagToken}
}

// ParseRepairArgs reads the ARGV of an observed repair.lua call.
func ParseRepairArgs(argv []string) (RepairArgs, error) {
	if err := wantArgs(ScriptRepair, argv, 6); err != nil {
		return RepairArgs{}, err
	}
	ms, _ := strconv.ParseInt(arg(argv, 5), 10, 64)
	return RepairArgs{DryRun: arg(argv, 1) != "1", Force: arg(argv, 2) == "1", Aside: arg(argv, 3),
		Skew: time.Duration(ms) * time.Millisecond, FlagToken: arg(argv, 6)}, nil
}

// ParseRepair reads repair.lua's answer.
func ParseRepair(v any) (RepairResult, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return RepairResult{}, fmt.Errorf("%w: repair answered %v", ErrUnexpectedAnswer, v)
	}
	return RepairResult{Changed: pairs(arr[0]), Left: pairs(arr[1])}, nil
}

// pairs reads {{field, text}, ...}.
func pairs(v any) []CorruptField {
	arr, _ := v.([]any)
	out := make([]CorruptField, 0, len(arr))
	for _, p := range arr {
		e, _ := p.([]any)
		out = append(out, CorruptField{Field: str(elem(e, 0)), Why: str(elem(e, 1))})
	}
	return out
}
