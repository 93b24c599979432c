package record

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
	// History is how many past versions the record keeps (ring slots).
	History int
	// Trade is the trade this write settles (its mark is cleared), or "".
	Trade string
}

// argv is ARGV of save.lua.
func (a SaveArgs) argv() []any {
	var uids, meta []byte
	if a.Meta != nil {
		uids, meta = a.Meta.UserIDs, a.Meta.Meta
	}
	return []any{string(a.Mode), a.Token, strings.Join(a.Earlier, " "), a.Job, flag(a.Presence),
		flag(a.Data != nil), a.Data, flag(a.Meta != nil), uids, meta, a.History, a.Trade, a.Schema, a.SchemaMin}
}

// Call is the save.lua call for the record at key, to run in a pipeline.
func (a SaveArgs) Call(key string) rscript.Call {
	return rscript.Call{Script: saveScript, Keys: []string{key}, Args: a.argv()}
}

// ParseSaveArgs reads the ARGV of an observed save.lua call.
func ParseSaveArgs(argv []string) (SaveArgs, error) {
	if err := wantArgs(ScriptSave, argv, 14); err != nil {
		return SaveArgs{}, err
	}
	a := SaveArgs{Mode: WriteMode(arg(argv, 1)), Token: arg(argv, 2), Earlier: strings.Fields(arg(argv, 3)),
		Job: arg(argv, 4), Presence: arg(argv, 5) == "1", Trade: arg(argv, 12)}
	if arg(argv, 6) == "1" {
		a.Data = []byte(arg(argv, 7))
	}
	if arg(argv, 8) == "1" {
		a.Meta = &Meta{UserIDs: []byte(arg(argv, 9)), Meta: []byte(arg(argv, 10))}
	}
	a.History, _ = strconv.Atoi(arg(argv, 11))
	a.Schema, _ = strconv.Atoi(arg(argv, 13))
	a.SchemaMin, _ = strconv.Atoi(arg(argv, 14))
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

	// When LockLost: who holds the lock now (Job and Token; empty: nobody).
	Holder Lock
	// When TradeHeld: the pending trade.
	Trade string
}

// Save runs save.lua on the record at key: one round trip.
func Save(ctx context.Context, rdb redis.Scripter, key string, a SaveArgs) (SaveResult, error) {
	v, err := saveScript.Run(ctx, rdb, []string{key}, a.argv()...).Result()
	if err != nil {
		return SaveResult{}, err
	}
	return ParseSave(v)
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
			Outcome: Written,
			Ver:     num(elem(arr, 1)),
			Epoch:   num(elem(arr, 2)),
			Moved:   str(elem(arr, 3)) == "1",
			How:     WriteHow(str(elem(arr, 4))),
		}, nil
	case "LOST":
		return SaveResult{Outcome: LockLost, Holder: Lock{Job: str(elem(arr, 1)), Token: str(elem(arr, 2))}}, nil
	case "TRADE":
		return SaveResult{Outcome: TradeHeld, Trade: str(elem(arr, 1))}, nil
	}
	return SaveResult{}, fmt.Errorf("%w: save answered %q", ErrUnexpectedAnswer, tag)
}
