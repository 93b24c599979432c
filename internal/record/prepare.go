package record

import (
	"fmt"
	"strconv"

	"github.com/ckernel/playerdata/internal/rscript"
)

// PrepareArgs are the arguments of prepare.lua: mark a record as held by a
// trade, fenced by the lock token.
type PrepareArgs struct {
	// Token is the coordinator's lock token of the profile.
	Token string
	// Trade is the trade id.
	Trade string
	// Ver is the record version the coordinator's data is based on.
	Ver int64
}

// Call is the prepare.lua call for the record at key, to run in a pipeline,
// with the reader of its answer.
func (a PrepareArgs) Call(key string) rscript.Pending[PrepareResult] {
	return prepareScript.Call(key, a)
}

// keys are KEYS of prepare.lua: the record.
func (a PrepareArgs) keys(key string) []string { return []string{key} }

// argv is ARGV of prepare.lua.
func (a PrepareArgs) argv() []any { return []any{a.Token, a.Trade, a.Ver} }

// ParsePrepareArgs reads the ARGV of an observed prepare.lua call.
func ParsePrepareArgs(argv []string) (PrepareArgs, error) {
	if err := wantArgs(ScriptPrepare, argv, 3); err != nil {
		return PrepareArgs{}, err
	}
	ver, _ := strconv.ParseInt(arg(argv, 3), 10, 64)
	return PrepareArgs{Token: arg(argv, 1), Trade: arg(argv, 2), Ver: ver}, nil
}

// PrepareOutcome is what a prepare did.
type PrepareOutcome int

const (
	// Prepared: the record is marked (or already was, with this trade).
	Prepared PrepareOutcome = iota + 1
	// PrepareLockLost: the lock is not the coordinator's (PrepareResult.Holder).
	PrepareLockLost
	// PrepareTradeHeld: another trade holds the record (PrepareResult.Trade).
	PrepareTradeHeld
	// PrepareBehind: the record is at a newer version than the coordinator's
	// data (PrepareResult.Ver): save first.
	PrepareBehind
)

// PrepareResult is prepare.lua's answer.
type PrepareResult struct {
	Outcome PrepareOutcome
	Holder  string // PrepareLockLost: the holder's JobID ("" for none)
	Trade   string // PrepareTradeHeld: the other trade
	Ver     int64  // PrepareBehind: the record's version
}

// ParsePrepare reads prepare.lua's answer.
func ParsePrepare(v any) (PrepareResult, error) {
	arr, tag, err := tagged(v)
	if err != nil {
		return PrepareResult{}, err
	}
	switch tag {
	case "OK":
		return PrepareResult{Outcome: Prepared}, nil
	case "LOST":
		return PrepareResult{Outcome: PrepareLockLost, Holder: str(elem(arr, 1))}, nil
	case "TRADE":
		return PrepareResult{Outcome: PrepareTradeHeld, Trade: str(elem(arr, 1))}, nil
	case "VER":
		return PrepareResult{Outcome: PrepareBehind, Ver: num(elem(arr, 1))}, nil
	}
	return PrepareResult{}, fmt.Errorf("%w: prepare answered %q", ErrUnexpectedAnswer, tag)
}
