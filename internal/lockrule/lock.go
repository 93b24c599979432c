package lockrule

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// Fields are a record's lock fields as stored, unparsed ("" when absent).
type Fields struct {
	Job, Token, At, Presence string
}

// FieldNames are the record fields Fields reads, in Fields' order (an HMGET
// of them fills it with FieldsOf).
var FieldNames = []string{record.FieldLockJob, record.FieldLockToken, record.FieldLockAt, record.FieldLockPresence}

// FieldsOf reads an HMGET answer of FieldNames.
func FieldsOf(vals []any) Fields {
	s := func(i int) string {
		if i < len(vals) {
			v, _ := vals[i].(string)
			return v
		}
		return ""
	}
	return Fields{Job: s(0), Token: s(1), At: s(2), Presence: s(3)}
}

// Flag is a lock's presence flag as stored.
type Flag int

const (
	// FlagOff: no flag ("0" or absent): the holder does not protect the lock
	// by presence, and it moves by age past LockTTL+LockSkew.
	FlagOff Flag = iota
	// FlagOn: "1": the lock moves only once its holder is proven stopped.
	FlagOn
	// FlagBroken: neither; the rule treats it as FlagOn (the stricter).
	FlagBroken
)

// Lock is a lock as the rule sees it, parsed from Fields against the Redis
// clock of the record's node.
type Lock struct {
	Fields
	// Held: the lock carries a token.
	Held bool
	Flag Flag
	// Age is the time since lock.at on the Redis clock (0 when ahead of it,
	// or when AtBroken).
	Age time.Duration
	// AtBroken: lock.at is not an integer, or, without the presence flag,
	// is ahead of the Redis clock by more than LockSkew (not a stamp this
	// library wrote).
	AtBroken bool
}

// Parse reads f against now, the Redis time of the read (the record's
// node), with skew the servers' LockSkew.
func Parse(f Fields, now time.Time, skew time.Duration) Lock {
	l := Lock{Fields: f, Held: f.Token != ""}
	switch f.Presence {
	case "1":
		l.Flag = FlagOn
	case "0", "":
		l.Flag = FlagOff
	default:
		l.Flag = FlagBroken
	}
	switch ms, ok := storedInt(f.At); {
	case !ok:
		l.AtBroken = l.Held
	default:
		age := now.Sub(time.UnixMilli(ms))
		if age < -skew && l.Flag != FlagOn {
			l.AtBroken = l.Held
		}
		l.Age = max(age, 0)
	}
	return l
}

// Broken names the first lock field that is not what the library writes,
// in the order acquire.lua checks them (lock.job, lock.presence, lock.at),
// and what is wrong with it; "" when none (or the lock is free).
func (l Lock) Broken() (field, why string) {
	switch {
	case !l.Held:
		return "", ""
	case l.Job == "":
		return record.FieldLockJob, "a lock without a holder"
	case l.Flag == FlagBroken:
		return record.FieldLockPresence, fmt.Sprintf("%q is neither 1 nor 0", l.Presence)
	case l.AtBroken:
		if _, ok := storedInt(l.At); !ok {
			return record.FieldLockAt, fmt.Sprintf("%q is not an integer", l.At)
		}
		return record.FieldLockAt, "stamped ahead of the Redis clock by more than LockSkew"
	}
	return "", ""
}

// storedInt reads a stored integer as the scripts accept one: decimal
// digits only, at most 15 of them (exact in a Lua number).
func storedInt(s string) (int64, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
