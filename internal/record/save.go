package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/redis/go-redis/v9"
)

// WriteMode is what a save.lua call does.
type WriteMode string

// The write modes.
const (
	// ModeSave writes under the lock and keeps it.
	ModeSave WriteMode = "save"
	// ModeRelease writes and clears the lock.
	ModeRelease WriteMode = "release"
	// ModeSettle writes a trade's image: it lands only while the record is
	// marked with that trade, and clears the mark.
	ModeSettle WriteMode = "settle"
)

// Meta is the user ids and metadata kept beside the data (opaque blobs).
type Meta struct {
	UserIDs, Meta []byte
}

// SaveArgs are the arguments of save.lua.
type SaveArgs struct {
	Mode WriteMode
	// Token is the profile's lock token; Earlier are tokens the lock may
	// still carry (adoptions that have not landed).
	Token   string
	Earlier []string
	// Job and Presence are written when the lock moves to Token.
	Job      string
	Presence bool
	// Data is the new data; nil keeps the stored data (a save of unchanged
	// data refreshes only the lock).
	Data []byte
	// Schema and SchemaMin are written with Data: the schema version it was
	// encoded at and the lowest that may read it.
	Schema, SchemaMin int
	// Meta is the new user ids and metadata; nil keeps the stored ones.
	Meta *Meta
	// History is how many versions the record's history keeps; HistoryEvery
	// how long after the last kept version a data write keeps the data it
	// replaces.
	History      int
	HistoryEvery time.Duration
	// Keep is the data this write replaces (version KeepVer), compressed,
	// sent when the caller reckons a version is due; KeepAlways keeps it
	// whatever HistoryEvery says (the data before a restore).
	Keep       []byte
	KeepVer    int64
	KeepAlways bool
	// Trade is the trade this write settles (its mark is cleared), or "".
	Trade string
	// Applied are the ids of inbox messages the new data has applied: the
	// write deletes them from the inbox, so each is applied exactly once.
	Applied []string
}

// argv is ARGV of save.lua.
func (a SaveArgs) argv() []any {
	var uids, meta []byte
	if a.Meta != nil {
		uids, meta = a.Meta.UserIDs, a.Meta.Meta
	}
	argv := make([]any, 0, 18+len(a.Earlier)+len(a.Applied))
	argv = append(argv, string(a.Mode), a.Token, a.Job, flag(a.Presence), a.Data, flag(a.Data != nil),
		flag(a.Meta != nil), uids, meta, a.Trade, a.Schema, a.SchemaMin,
		a.History, a.HistoryEvery.Milliseconds(), a.Keep, a.KeepVer, flag(a.KeepAlways), len(a.Earlier))
	for _, e := range a.Earlier {
		argv = append(argv, e)
	}
	for _, id := range a.Applied {
		argv = append(argv, id)
	}
	return argv
}

// keys are KEYS of save.lua for the record at key.
func keysOf(key string) []string { return []string{key, InboxKey(key), HistoryKey(key)} }

// Call is the save.lua call for the record at key, to run in a pipeline.
func (a SaveArgs) Call(key string) rscript.Call {
	return rscript.Call{Script: saveScript, Keys: keysOf(key), Args: a.argv()}
}

// ParseSaveArgs reads the ARGV of an observed save.lua call.
func ParseSaveArgs(argv []string) (SaveArgs, error) {
	if len(argv) < 18 {
		return SaveArgs{}, fmt.Errorf("record: %s call with %d arguments, want 18 or more", ScriptSave, len(argv))
	}
	n, err := strconv.Atoi(arg(argv, 18))
	if err != nil || n < 0 || 18+n > len(argv) {
		return SaveArgs{}, fmt.Errorf("record: %s call with %q earlier tokens in %d arguments", ScriptSave, arg(argv, 18), len(argv))
	}
	a := SaveArgs{Mode: WriteMode(arg(argv, 1)), Token: arg(argv, 2), Job: arg(argv, 3), Presence: arg(argv, 4) == "1",
		Trade: arg(argv, 10), Keep: []byte(arg(argv, 15)), KeepAlways: arg(argv, 17) == "1"}
	if arg(argv, 6) == "1" {
		a.Data = []byte(arg(argv, 5))
	}
	if arg(argv, 7) == "1" {
		a.Meta = &Meta{UserIDs: []byte(arg(argv, 8)), Meta: []byte(arg(argv, 9))}
	}
	if len(a.Keep) == 0 {
		a.Keep = nil
	}
	a.Schema, _ = strconv.Atoi(arg(argv, 11))
	a.SchemaMin, _ = strconv.Atoi(arg(argv, 12))
	a.History, _ = strconv.Atoi(arg(argv, 13))
	every, _ := strconv.ParseInt(arg(argv, 14), 10, 64)
	a.HistoryEvery = time.Duration(every) * time.Millisecond
	a.KeepVer, _ = strconv.ParseInt(arg(argv, 16), 10, 64)
	a.Earlier = append([]string(nil), argv[18:18+n]...)
	if rest := argv[18+n:]; len(rest) > 0 {
		a.Applied = append([]string(nil), rest...)
	}
	return a, nil
}

// SaveOutcome is what a save.lua call did.
type SaveOutcome int

const (
	// Written: the call was accepted (SaveResult.How says what it did).
	Written SaveOutcome = iota + 1
	// LockLost: the lock is not the profile's (SaveResult.Holder); nothing
	// was written.
	LockLost
	// TradeHeld: another trade is pending on the record (SaveResult.Trade);
	// nothing was written.
	TradeHeld
)

// WriteHow says what an accepted save.lua call did.
type WriteHow string

// What an accepted write did.
const (
	HowSaved           WriteHow = "saved"
	HowReleased        WriteHow = "released"
	HowAlreadyReleased WriteHow = "already-released" // a retried release found its own release landed
	HowAlreadySettled  WriteHow = "already-settled"  // a settle found the trade's mark gone
)

// SaveResult is save.lua's answer.
type SaveResult struct {
	Outcome SaveOutcome

	// When Written:
	Ver   int64
	Epoch int64
	Moved bool // the lock moved to the call's token (an adoption landed)
	How   WriteHow
	// HistAt is when a version was last kept (zero: never); InboxSeq counts
	// the messages ever sent to the profile.
	HistAt   time.Time
	InboxSeq int64

	// When LockLost: who holds the lock now (Job and Token; empty: nobody).
	Holder Lock
	// When TradeHeld: the pending trade.
	Trade string
}

// Save runs save.lua on the record at key: one round trip.
func Save(ctx context.Context, rdb redis.Scripter, key string, a SaveArgs) (SaveResult, error) {
	v, err := saveScript.Run(ctx, rdb, keysOf(key), a.argv()...).Result()
	if err != nil {
		return SaveResult{}, err
	}
	return ParseSave(v)
}

// SaveWait is Save, then WAIT for replicas replicas to acknowledge the write
// on the same connection, within timeout (one pipeline). It also returns how
// many did; the write stands either way.
func SaveWait(ctx context.Context, rdb redis.UniversalClient, key string, a SaveArgs, replicas int,
	timeout time.Duration) (SaveResult, int64, error) {
	v, acked, err := rscript.RunWait(ctx, rdb, a.Call(key), replicas, timeout)
	if err != nil {
		return SaveResult{}, 0, err
	}
	res, err := ParseSave(v)
	return res, acked, err
}

// ParseSave reads save.lua's answer.
func ParseSave(v any) (SaveResult, error) {
	arr, tag, err := tagged(v)
	if err != nil {
		return SaveResult{}, err
	}
	switch tag {
	case "OK":
		return SaveResult{
			Outcome:  Written,
			Ver:      num(elem(arr, 1)),
			Epoch:    num(elem(arr, 2)),
			Moved:    str(elem(arr, 3)) == "1",
			How:      WriteHow(str(elem(arr, 4))),
			HistAt:   msTime(elem(arr, 5)),
			InboxSeq: num(elem(arr, 6)),
		}, nil
	case "LOST":
		return SaveResult{Outcome: LockLost, Holder: Lock{Job: str(elem(arr, 1)), Token: str(elem(arr, 2))}}, nil
	case "TRADE":
		return SaveResult{Outcome: TradeHeld, Trade: str(elem(arr, 1))}, nil
	}
	return SaveResult{}, fmt.Errorf("%w: save answered %q", ErrUnexpectedAnswer, tag)
}
