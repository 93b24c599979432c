package record

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	// CorruptRecord: a field the write relies on is not what this library
	// writes (SaveResult.Corrupt); nothing was written, except that a
	// release under the profile's token freed the lock (SaveResult.Freed).
	CorruptRecord
	// Gone: the record no longer exists (deleted or evicted while held);
	// nothing was written.
	Gone
	// Superseded: a later write of the profile (a higher SaveArgs.Seq,
	// SaveResult.LandedSeq) landed first: this one is late, and nothing was
	// written.
	Superseded
)

// WriteHow says what an accepted save.lua call did.
type WriteHow string

// What an accepted write did.
const (
	HowSaved           WriteHow = "saved"
	HowReleased        WriteHow = "released"
	HowAlreadyReleased WriteHow = "already-released" // a retried release found its own release landed
	HowAlreadySettled  WriteHow = "already-settled"  // a settle found the trade's mark gone
	// HowAlreadyStored: a retried save found itself landed before its
	// profile let the lock go (the record holds its very data, released
	// under its token with nobody writing since): nothing was written.
	HowAlreadyStored WriteHow = "already-stored"
)

// SaveResult is save.lua's answer.
type SaveResult struct {
	Outcome SaveOutcome

	// When Written:
	Ver   int64
	Epoch int64
	Moved bool // the lock moved to the call's token (an adoption landed)
	How   WriteHow
	// HistAt is when this write kept a version (Redis clock; zero: it kept
	// none, and the record's last one stands); InboxSeq counts the messages
	// ever sent to the profile.
	HistAt   time.Time
	InboxSeq int64
	// HistoryUnusable: the history key is not a hash, so no version was
	// kept; InboxUnusable: the inbox key is not a stream, so the applied
	// messages could not be deleted (they are gone with it). DeadLettered
	// counts the refused messages this write moved to the dead letters.
	HistoryUnusable, InboxUnusable bool
	DeadLettered                   int
	// Tries, for a write that carried refusals: how many times each refused
	// message has been refused now, in the order of SaveArgs.Refused (one
	// refused MaxAttempts times was dead-lettered by this write).
	Tries []Tries
	// VersionSkipped: a version was due but not kept, the record's time or
	// schema not being what the write's Keep header says (KeepMeta).
	VersionSkipped bool
	// Planned: the version was kept as SaveArgs.KeepPlan says (the history
	// was as listed); else the script trimmed by count by itself.
	Planned bool
	// At is the write time this write stamped on the data it wrote (zero:
	// it wrote none).
	At time.Time

	// When LockLost: who holds the lock now (Job and Token; empty: nobody).
	Holder Lock
	// When TradeHeld: the pending trade.
	Trade string
	// When CorruptRecord: what is wrong, and whether the lock was freed.
	Corrupt CorruptField
	Freed   bool
	// When Superseded: the highest Seq that landed.
	LandedSeq int64
}

// Tries is how many times a holder's OnMessage has refused message ID.
type Tries struct {
	ID string
	N  int64
}

// Save runs save.lua on the record at key: one round trip.
func Save(ctx context.Context, rdb redis.Scripter, key string, a SaveArgs) (SaveResult, error) {
	return saveScript.Run(ctx, rdb, key, a)
}

// The codes of save.lua's answers.
const (
	saveSaved           = 1
	saveReleased        = 2
	saveAlreadyReleased = 3
	saveAlreadySettled  = 4
	saveLost            = 5
	saveTrade           = 6
	saveCorrupt         = 7
	saveGone            = 8
	saveAlreadyStored   = 9
	saveLate            = 10
)

// ParseSave reads save.lua's answer.
func ParseSave(v any) (SaveResult, error) {
	if s, ok := v.(string); ok {
		return parseSaveLine(s)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return SaveResult{}, fmt.Errorf("%w: save answered %T", ErrUnexpectedAnswer, v)
	}
	code, _ := arr[0].(int64)
	var how WriteHow
	switch code {
	case saveSaved:
		how = HowSaved
	case saveReleased:
		how = HowReleased
	case saveAlreadyReleased:
		how = HowAlreadyReleased
	case saveAlreadySettled:
		how = HowAlreadySettled
	case saveAlreadyStored:
		how = HowAlreadyStored
	case saveLost:
		return SaveResult{Outcome: LockLost, Holder: Lock{Job: str(elem(arr, 1)), Token: str(elem(arr, 2))}}, nil
	case saveTrade:
		return SaveResult{Outcome: TradeHeld, Trade: str(elem(arr, 1))}, nil
	case saveCorrupt:
		return SaveResult{Outcome: CorruptRecord, Corrupt: CorruptField{Field: str(elem(arr, 1)), Why: str(elem(arr, 2))},
			Freed: num(elem(arr, 3)) == 1}, nil
	case saveGone:
		return SaveResult{Outcome: Gone}, nil
	case saveLate:
		return SaveResult{Outcome: Superseded, LandedSeq: num(elem(arr, 1))}, nil
	default:
		return SaveResult{}, fmt.Errorf("%w: save answered %v", ErrUnexpectedAnswer, arr[0])
	}
	return SaveResult{
		Outcome:         Written,
		How:             how,
		Ver:             num(elem(arr, 1)),
		Epoch:           num(elem(arr, 2)),
		InboxSeq:        num(elem(arr, 3)),
		At:              msTime(elem(arr, 4)),
		Moved:           num(elem(arr, 5)) == 1,
		HistAt:          msTime(elem(arr, 6)),
		HistoryUnusable: num(elem(arr, 7))&1 != 0,
		InboxUnusable:   num(elem(arr, 7))&2 != 0,
		VersionSkipped:  num(elem(arr, 7))&4 != 0,
		Planned:         num(elem(arr, 7))&8 != 0,
		DeadLettered:    int(num(elem(arr, 8))),
		Tries:           triesOf(elem(arr, 9)),
	}, nil
}

// parseSaveLine reads save.lua's common answer, "code,ver,epoch,inboxSeq,at"
// (code 1: saved, 2: released).
func parseSaveLine(s string) (SaveResult, error) {
	var n [5]int64
	rest := s
	for i := range n {
		field, after, found := strings.Cut(rest, ",")
		if found == (i == len(n)-1) {
			return SaveResult{}, fmt.Errorf("%w: save answered %q", ErrUnexpectedAnswer, s)
		}
		v, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return SaveResult{}, fmt.Errorf("%w: save answered %q", ErrUnexpectedAnswer, s)
		}
		n[i], rest = v, after
	}
	res := SaveResult{Outcome: Written, Ver: n[1], Epoch: n[2], InboxSeq: n[3], At: msTime(n[4])}
	switch n[0] {
	case saveSaved:
		res.How = HowSaved
	case saveReleased:
		res.How = HowReleased
	default:
		return SaveResult{}, fmt.Errorf("%w: save answered %q", ErrUnexpectedAnswer, s)
	}
	return res, nil
}

// triesOf reads a flat {id, n, ...} answer (nil: none).
func triesOf(v any) []Tries {
	return pairsOf(v, func(id, n any) Tries { return Tries{ID: str(id), N: num(n)} })
}
