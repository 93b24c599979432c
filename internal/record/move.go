package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/rscript"
)

// The record's move fields (move.lua): the last move of the profile.
const (
	// FieldMoveID is the id of the last move that flipped the lock.
	FieldMoveID = "move.id"
	// FieldMoveState is its state (MoveCommitted: the flip is the commit).
	FieldMoveState = "move.state"
	// FieldMoveFrom and FieldMoveTo are the JobIDs it moved from and to.
	FieldMoveFrom = "move.from"
	FieldMoveTo   = "move.to"
	// FieldMoveAt is when it flipped, or was cancelled (ms, Redis clock).
	FieldMoveAt = "move.at"
	// FieldMoveWhy says why a cancelled move ended ("" for a commit).
	FieldMoveWhy = "move.why"
)

// The states of a move. The record holds the last move's COMMITTED (the
// flip writes it) or CANCELLED (movemark.lua); PREPARED and ACCEPTED are a
// move in flight, which only its source knows (datadriver answers a
// status query on the bus).
const (
	// MovePrepared: the source sent the prepare; no answer yet.
	MovePrepared = "PREPARED"
	// MoveAccepted: the target accepted; the flip is sent or about to be.
	MoveAccepted = "ACCEPTED"
	// MoveCommitted is the state the flip writes: the target holds the lock.
	MoveCommitted = "COMMITTED"
	// MoveCancelled: the move ended without a flip; the source kept the
	// lock (FieldMoveWhy says why).
	MoveCancelled = "CANCELLED"
)

// MoveArgs are the arguments of move.lua, the lease flip of a move.
type MoveArgs struct {
	// Token is the holder's (source's) lock token: the flip lands only
	// while the lock carries it.
	Token string
	// Expiry is the move's expiry on the Redis clock: after it the flip
	// never lands.
	Expiry time.Time
	// To, ToToken and ToPresence are the target's JobID, lock token and
	// presence flag: the lock as the flip leaves it.
	To, ToToken string
	ToPresence  bool
	// ID is the move's id; From the source's JobID.
	ID, From string
	// Data is the new data (nil: the stored data stays), with its Schema
	// and SchemaMin.
	Data              []byte
	Schema, SchemaMin int
	// Sum is the record's checksum after the flip, given with Data or Meta.
	Sum string
	// Meta is the new user ids and metadata (nil: the stored ones stay).
	Meta *Meta
	// Applied are the ids of inbox messages Data has applied: deleted from
	// the inbox by the flip.
	Applied []string
}

// MoveOutcome is what a flip did.
type MoveOutcome int

const (
	// Moved: the lock and the data are the target's now.
	Moved MoveOutcome = iota + 1
	// MoveLost: the lock is not the source's (MoveResult.Holder holds it).
	MoveLost
	// MoveTradeHeld: a trade is pending on the record (MoveResult.Trade).
	MoveTradeHeld
	// MoveCorrupt: a field is broken (MoveResult.Corrupt).
	MoveCorrupt
	// MoveGone: the record no longer exists.
	MoveGone
	// MoveExpired: the move's expiry passed on the Redis clock.
	MoveExpired
)

// MoveResult is move.lua's answer. Nothing was written unless Outcome is
// Moved.
type MoveResult struct {
	Outcome MoveOutcome
	// Ver and Epoch are the record's after the flip; At is the data's write
	// time and LockAt the flip's (Redis clock); InboxSeq how many messages
	// were ever sent to the profile.
	Ver, Epoch, InboxSeq int64
	At, LockAt           time.Time
	// Holder is the lock found instead (MoveLost); Trade the pending trade
	// (MoveTradeHeld); Corrupt the broken field (MoveCorrupt); Now the
	// Redis time of an expired flip.
	Holder  Lock
	Trade   string
	Corrupt CorruptField
	Now     time.Time
}

// Call is move.lua's call on the record at key, with the reader of its
// answer.
func (a MoveArgs) Call(key string) rscript.Pending[MoveResult] { return moveScript.Call(key, a) }

// keys are KEYS of move.lua for the record at key.
func (a MoveArgs) keys(key string) []string { return []string{key, InboxKey(key), TriesKey(key)} }

// argv is ARGV of move.lua.
func (a MoveArgs) argv() []any {
	argv := []any{a.Token, a.Expiry.UnixMilli(), a.To, a.ToToken, flag(a.ToPresence), a.ID, a.From, "", "", "", a.Sum,
		"0", "", ""}
	if a.Data != nil {
		argv[7], argv[8], argv[9] = a.Schema, a.SchemaMin, a.Data
	}
	if a.Meta != nil {
		argv[11], argv[12], argv[13] = "1", a.Meta.UserIDs, a.Meta.Meta
	}
	for _, id := range a.Applied {
		argv = append(argv, id)
	}
	return argv
}

// Move runs move.lua on the record at key: one round trip.
func Move(ctx context.Context, rdb redis.Scripter, key string, a MoveArgs) (MoveResult, error) {
	return moveScript.Run(ctx, rdb, key, a)
}

// ParseMove reads move.lua's answer.
func ParseMove(v any) (MoveResult, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return MoveResult{}, fmt.Errorf("%w: move answered %v", ErrUnexpectedAnswer, v)
	}
	switch num(arr[0]) {
	case 1:
		return MoveResult{Outcome: Moved, Ver: num(elem(arr, 1)), Epoch: num(elem(arr, 2)), At: msTime(elem(arr, 3)),
			LockAt: msTime(elem(arr, 4)), InboxSeq: num(elem(arr, 5))}, nil
	case 5:
		return MoveResult{Outcome: MoveLost, Holder: Lock{Job: str(elem(arr, 1)), Token: str(elem(arr, 2))}}, nil
	case 6:
		return MoveResult{Outcome: MoveTradeHeld, Trade: str(elem(arr, 1))}, nil
	case 7:
		return MoveResult{Outcome: MoveCorrupt, Corrupt: CorruptField{Field: str(elem(arr, 1)), Why: str(elem(arr, 2))}}, nil
	case 8:
		return MoveResult{Outcome: MoveGone}, nil
	case 9:
		return MoveResult{Outcome: MoveExpired, Now: msTime(elem(arr, 1))}, nil
	}
	return MoveResult{}, fmt.Errorf("%w: move answered %v", ErrUnexpectedAnswer, v)
}

// MoveState is what a move's target reads to learn whether the flip
// landed: the lock and the data's version as they are, and the Redis time
// of the read.
type MoveState struct {
	// Token and Job are the lock's token and holder ("" when free or when
	// there is no record).
	Token, Job string
	// Ver, Epoch and At are the record's ver, epoch and data write time.
	Ver, Epoch int64
	At         time.Time
	// ID is the last move's id; InboxSeq how many messages were ever sent
	// to the profile.
	ID       string
	InboxSeq int64
	// Now is the Redis time of the read.
	Now time.Time
}

// ReadMoveState reads the record at key for a move: one round trip
// (movestate.lua, so that the time is the record's node's).
func ReadMoveState(ctx context.Context, rdb redis.Scripter, key string) (MoveState, error) {
	return moveStateScript.Run(ctx, rdb, key, moveStateArgs{})
}

// moveStateArgs are movestate.lua's arguments: none but its record.
type moveStateArgs struct{}

func (moveStateArgs) keys(key string) []string { return []string{key} }
func (moveStateArgs) argv() []any              { return nil }

// parseMoveStateArgs reads the (empty) ARGV of an observed movestate.lua
// call.
func parseMoveStateArgs(argv []string) (moveStateArgs, error) {
	return moveStateArgs{}, wantArgs(ScriptMoveState, argv, 0)
}

// parseMoveState reads movestate.lua's answer.
func parseMoveState(v any) (MoveState, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 9 {
		return MoveState{}, fmt.Errorf("%w: movestate answered %v", ErrUnexpectedAnswer, v)
	}
	now := time.Unix(num(arr[0]), num(arr[1])*1000)
	return MoveState{Token: str(arr[2]), Ver: num(arr[3]), Epoch: num(arr[4]), At: msTime(arr[5]), ID: str(arr[6]),
		InboxSeq: num(arr[7]), Job: str(arr[8]), Now: now}, nil
}

// moveFixedArgs is how many arguments every move.lua call has; the applied
// message ids follow.
const moveFixedArgs = 14

// ParseMoveArgs reads the ARGV of an observed move.lua call.
func ParseMoveArgs(argv []string) (MoveArgs, error) {
	if len(argv) < moveFixedArgs {
		return MoveArgs{}, fmt.Errorf("record: %s call with %d arguments, want %d or more", ScriptFlip, len(argv), moveFixedArgs)
	}
	expiry, err := strconv.ParseInt(arg(argv, 2), 10, 64)
	if err != nil {
		return MoveArgs{}, fmt.Errorf("record: %s call with expiry %q", ScriptFlip, arg(argv, 2))
	}
	a := MoveArgs{Token: arg(argv, 1), Expiry: time.UnixMilli(expiry), To: arg(argv, 3), ToToken: arg(argv, 4),
		ToPresence: arg(argv, 5) == "1", ID: arg(argv, 6), From: arg(argv, 7), Sum: arg(argv, 11)}
	if arg(argv, 8) != "" {
		a.Schema, _ = strconv.Atoi(arg(argv, 8))
		a.SchemaMin, _ = strconv.Atoi(arg(argv, 9))
		a.Data = []byte(arg(argv, 10))
	}
	if arg(argv, 12) == "1" {
		a.Meta = &Meta{UserIDs: []byte(arg(argv, 13)), Meta: []byte(arg(argv, 14))}
	}
	if len(argv) > moveFixedArgs {
		a.Applied = append([]string(nil), argv[moveFixedArgs:]...)
	}
	return a, nil
}
