package record

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/rscript"
)

// AcquireArgs are the arguments of acquire.lua.
type AcquireArgs struct {
	// Job is the caller's JobID; Token the new lock token.
	Job, Token string
	// Presence is the flag the lock gets: the caller beats presence.
	Presence bool
	// MaxAge is LockTTL + LockSkew: the age past which a lock without the
	// presence flag is stale.
	MaxAge time.Duration
	// Skew is LockSkew: a lock stamped further ahead of the Redis clock was
	// not written by this library (a lock with the presence flag counts as
	// fresh instead).
	Skew time.Duration
	// StealJob and StealToken name a lock that may be taken: of a holder
	// proven stopped (the lock carries the presence flag and was written
	// before the proof), or of an earlier instance of the caller's own JobID
	// (proven stopped by the caller's presence claim).
	StealJob, StealToken string
	// Format is the highest record format the caller reads.
	Format int
	// Schema is the caller's schema version: a record whose min-reader is
	// higher is refused (SchemaTooNew) before the lock is looked at.
	Schema int
	// MaxMessages bounds the inbox messages returned with the record (0:
	// none), MaxMessageBytes the bytes of their bodies (more by at most one
	// read of MessagesPerRead messages).
	MaxMessages, MaxMessageBytes, MessagesPerRead int
}

// acquireFixedArgs is how many arguments every acquire.lua call has; the
// steal job and token follow when given.
const acquireFixedArgs = 10

// argv is ARGV of acquire.lua.
func (a AcquireArgs) argv() []any {
	argv := make([]any, acquireFixedArgs, acquireFixedArgs+2)
	argv[0], argv[1], argv[2], argv[3] = a.Job, a.Token, flag(a.Presence), a.MaxAge.Milliseconds()
	argv[4], argv[5], argv[6], argv[7] = a.Skew.Milliseconds(), a.Format, a.Schema, a.MaxMessages
	argv[8], argv[9] = a.MaxMessageBytes, max(a.MessagesPerRead, 1)
	if a.StealJob != "" || a.StealToken != "" {
		argv = append(argv, a.StealJob, a.StealToken)
	}
	return argv
}

// keys are KEYS of acquire.lua for the record at key.
func (a AcquireArgs) keys(key string) []string {
	return []string{key, InboxKey(key), HistoryKey(key)}
}

// Call is the acquire.lua call for the record at key, to run in a pipeline,
// with the reader of its answer.
func (a AcquireArgs) Call(key string) rscript.Pending[AcquireResult] {
	return acquireScript.Call(key, a)
}

// ParseAcquireArgs reads the ARGV of an observed acquire.lua call.
func ParseAcquireArgs(argv []string) (AcquireArgs, error) {
	if len(argv) != acquireFixedArgs && len(argv) != acquireFixedArgs+2 {
		return AcquireArgs{}, fmt.Errorf("record: %s call with %d arguments, want %d or %d", ScriptAcquire, len(argv),
			acquireFixedArgs, acquireFixedArgs+2)
	}
	a := AcquireArgs{Job: arg(argv, 1), Token: arg(argv, 2), Presence: arg(argv, 3) == "1",
		StealJob: arg(argv, 11), StealToken: arg(argv, 12)}
	ms, _ := strconv.ParseInt(arg(argv, 4), 10, 64)
	a.MaxAge = time.Duration(ms) * time.Millisecond
	ms, _ = strconv.ParseInt(arg(argv, 5), 10, 64)
	a.Skew = time.Duration(ms) * time.Millisecond
	a.Format, _ = strconv.Atoi(arg(argv, 6))
	a.Schema, _ = strconv.Atoi(arg(argv, 7))
	a.MaxMessages, _ = strconv.Atoi(arg(argv, 8))
	a.MaxMessageBytes, _ = strconv.Atoi(arg(argv, 9))
	a.MessagesPerRead, _ = strconv.Atoi(arg(argv, 10))
	return a, nil
}

// AcquireOutcome is what an acquire did.
type AcquireOutcome int

const (
	// Acquired: the lock is the caller's; the record's content came back.
	Acquired AcquireOutcome = iota + 1
	// Locked: another session holds the lock (AcquireResult.Lock).
	Locked
	// FormatTooNew: the record has a newer format than the caller reads;
	// nothing was changed.
	FormatTooNew
	// SchemaTooNew: the record may only be read at a higher schema version
	// than the caller's (AcquireResult.SchemaMin); nothing was changed.
	SchemaTooNew
	// Corrupt: a field or key the script relies on is not what this library
	// writes (AcquireResult.Corrupt); nothing was changed.
	Corrupt
)

// Taken says how an acquired lock was taken.
type Taken string

// How a lock was taken.
const (
	TakenNew     Taken = "new"     // no record existed
	TakenFree    Taken = "free"    // nobody held it
	TakenStolen  Taken = "stolen"  // from a holder proven stopped
	TakenOwn     Taken = "own"     // left by an earlier run of the caller's JobID
	TakenExpired Taken = "expired" // stale by age
)

// AcquireResult is acquire.lua's answer.
type AcquireResult struct {
	Outcome AcquireOutcome

	// When Acquired:
	How     Taken
	Epoch   int64
	Ver     int64
	Data    []byte    // nil for a record without data
	At      time.Time // when the data was written (Redis clock)
	Trade   string    // a pending trade's id, or ""
	UserIDs []byte
	Meta    []byte
	PrevJob string // the previous holder, when it was taken from one
	// Schema is the schema version the data was written at, SchemaMin the
	// lowest that may read it (0 for records written before schemas).
	Schema, SchemaMin int
	// HistAt is when a version was last kept (zero: never); Now is the
	// Redis time of the acquire.
	HistAt, Now time.Time
	// InboxSeq counts the messages ever sent; Messages are the oldest in
	// the inbox (at most AcquireArgs.MaxMessages), MoreMessages says more
	// wait behind them.
	InboxSeq     int64
	Messages     []Message
	MoreMessages bool
	// Sum is the record's checksum (and Format its format): Stored().Check
	// says whether its data is what was written.
	Sum string
	// atField is the record's at as stored (the checksum copies it).
	atField string

	// When Locked: who holds it.
	Lock Lock

	// The record's format (when FormatTooNew, newer than the caller's).
	Format string

	// When Corrupt: what is wrong.
	Corrupt CorruptField
}

// Stored is what the acquired record holds, for its checksum's Check.
func (r *AcquireResult) Stored() StoredRecord {
	return StoredRecord{Format: r.Format, Sum: r.Sum, Ver: strconv.FormatInt(r.Ver, 10), At: r.atField,
		Schema: strconv.Itoa(r.Schema), SchemaMin: strconv.Itoa(r.SchemaMin), Data: r.Data, UserIDs: r.UserIDs, Meta: r.Meta}
}

// Settled records that a settle (a trade recovery) wrote data, at ver and
// at, whose checksum is sum: the result now holds what the record does.
func (r *AcquireResult) Settled(data []byte, ver int64, at time.Time, schema, schemaMin int, sum string) {
	r.Data, r.Ver, r.At, r.Schema, r.SchemaMin = data, ver, at, schema, schemaMin
	r.atField = strconv.FormatInt(at.UnixMilli(), 10)
	r.Format, r.Sum = strconv.Itoa(Format), SumField(ver, at.UnixMilli(), sum)
}

// CorruptField names a field (or key) of a record that is not what this
// library writes, and what is wrong with it.
type CorruptField struct {
	// Field is the record field ("ver", "lock.at", ...), or "inbox",
	// "history" or "(record)" for a key.
	Field string
	// Why says what is wrong ("not an integer", ...).
	Why string
}

// Acquire runs acquire.lua on the record at key: one round trip.
func Acquire(ctx context.Context, rdb redis.Scripter, key string, a AcquireArgs) (AcquireResult, error) {
	return acquireScript.Run(ctx, rdb, key, a)
}

// acquireLineFields is how many comma-separated fields the line of
// acquire.lua's OK answer has: how, epoch, ver, at, schema, schemaMin,
// histAt, inboxSeq, now, fmt.
const acquireLineFields = 10

// ParseAcquire reads acquire.lua's answer.
func ParseAcquire(v any) (AcquireResult, error) {
	arr, tag, err := tagged(v)
	if err != nil {
		return AcquireResult{}, err
	}
	switch tag {
	case "OK":
		line, _ := elem(arr, 1).(string)
		var f [acquireLineFields]string // split in place: the cycle's every load reads one
		rest, ok := line, true
		for i := range acquireLineFields - 1 {
			f[i], rest, ok = strings.Cut(rest, ",")
			if !ok {
				break
			}
		}
		if !ok {
			return AcquireResult{}, fmt.Errorf("%w: acquire answered %q", ErrUnexpectedAnswer, line)
		}
		f[acquireLineFields-1] = rest
		return AcquireResult{
			Outcome:      Acquired,
			How:          Taken(f[0]),
			Epoch:        num(f[1]),
			Ver:          num(f[2]),
			At:           msTime(f[3]),
			Schema:       int(num(f[4])),
			SchemaMin:    int(num(f[5])),
			HistAt:       msTime(f[6]),
			InboxSeq:     num(f[7]),
			Now:          msTime(f[8]),
			Format:       f[9],
			Data:         blob(elem(arr, 2)),
			Sum:          str(elem(arr, 3)),
			Trade:        str(elem(arr, 4)),
			UserIDs:      blob(elem(arr, 5)),
			Meta:         blob(elem(arr, 6)),
			PrevJob:      str(elem(arr, 7)),
			Messages:     messages(elem(arr, 8)),
			MoreMessages: num(elem(arr, 9)) == 1,
			atField:      f[3],
		}, nil
	case "LOCKED":
		return AcquireResult{Outcome: Locked, Lock: Lock{
			Job:      str(elem(arr, 1)),
			Token:    str(elem(arr, 2)),
			Presence: str(elem(arr, 3)) == "1",
			Age:      time.Duration(num(elem(arr, 4))) * time.Millisecond,
		}}, nil
	case "FORMAT":
		return AcquireResult{Outcome: FormatTooNew, Format: str(elem(arr, 1))}, nil
	case "SCHEMA":
		return AcquireResult{Outcome: SchemaTooNew, SchemaMin: int(num(elem(arr, 1)))}, nil
	case "CORRUPT":
		return AcquireResult{Outcome: Corrupt, Corrupt: CorruptField{Field: str(elem(arr, 1)), Why: str(elem(arr, 2))}}, nil
	}
	return AcquireResult{}, fmt.Errorf("%w: acquire answered %q", ErrUnexpectedAnswer, tag)
}
