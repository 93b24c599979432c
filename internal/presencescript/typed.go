package presencescript

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/enum"
	"github.com/ckernel/playerdata/internal/rscript"
)

// ReadArgs are read.lua's ARGV; its KEYS[1] is the JobID's shard hash.
type ReadArgs struct {
	JobID string
	TTL   time.Duration // the deployment's TTL (ms precision)
}

// ReadOutcome is read.lua's verdict.
type ReadOutcome int

// read.lua's verdicts, as it answers them.
const (
	ReadUnknown ReadOutcome = iota // no live beat, and no proof yet
	ReadAlive                      // a live beat
	ReadStopped                    // no live beat, in a Redis run a TTL old
)

// String names the outcome.
func (o ReadOutcome) String() string {
	if name, ok := enum.Name(o, "unknown", "alive", "stopped"); ok {
		return name
	}
	return "ReadOutcome(" + strconv.Itoa(int(o)) + ")"
}

// ReadAnswer is read.lua's answer.
type ReadAnswer struct {
	Outcome ReadOutcome
	// Left, when alive, is the time until the beat expires; when unknown,
	// the least time before the answer can become stopped. When stopped,
	// it is how long ago the last beat expired, or negative when no beat
	// of the server is left.
	Left time.Duration
	// Now is the Redis time of the read (ms precision).
	Now time.Time
}

// RemoveArgs are remove.lua's arguments; its KEYS[1] is the shard hash.
type RemoveArgs struct {
	Owners, Load string // the shard's owners and load hashes (KEYS[2], KEYS[3])
	JobID        string
	Instance     string // the removing process
}

// ShardsArgs are shards.lua's ARGV; its KEYS[1] is the layout hash.
type ShardsArgs struct {
	Count int           // the caller's shard count
	Mark  time.Duration // how long to mark it in use (ms precision); 0 only reads
}

// ShardsAnswer is shards.lua's answer.
type ShardsAnswer struct {
	Now    time.Time // the Redis time of the call
	Counts []int     // every shard count marked in use, the caller's included
}

// The typed presence scripts other than the beat.
var (
	Read   = rscript.NewTyped(NameRead, readLua, rscript.Protocol[ReadArgs, ReadAnswer]{Keys: oneKey[ReadArgs], Args: readArgv, Parse: ParseReadArgs, Answer: ParseReadAnswer})
	Remove = rscript.NewTyped(NameRemove, removeLua, rscript.Protocol[RemoveArgs, bool]{Keys: removeKeys, Args: removeArgv, Parse: ParseRemoveArgs, Answer: parseRemoved})
	Shards = rscript.NewTyped(NameShards, shardsLua, rscript.Protocol[ShardsArgs, ShardsAnswer]{Keys: oneKey[ShardsArgs], Args: shardsArgv, Parse: ParseShardsArgs, Answer: ParseShardsAnswer})
)

func oneKey[A any](_ A, key string) []string { return []string{key} }

func readArgv(a ReadArgs) []any { return []any{a.JobID, a.TTL.Milliseconds()} }

// ParseReadArgs reads the ARGV of an observed read.lua call.
func ParseReadArgs(argv []string) (ReadArgs, error) {
	if len(argv) != 2 {
		return ReadArgs{}, argCount(NameRead, len(argv), 2)
	}
	ttl, err := strconv.ParseInt(argv[1], 10, 64)
	if err != nil {
		return ReadArgs{}, fmt.Errorf("%w: %s argument 2 is %q", ErrUnexpectedReply, NameRead, argv[1])
	}
	return ReadArgs{JobID: argv[0], TTL: time.Duration(ttl) * time.Millisecond}, nil
}

// ParseReadAnswer reads read.lua's answer {code, ms, now}.
func ParseReadAnswer(v any) (ReadAnswer, error) {
	n, err := ints(NameRead, v)
	if err == nil && (len(n) != 3 || n[0] < 0 || n[0] > 2) {
		err = fmt.Errorf("%w: %s answered %v", ErrUnexpectedReply, NameRead, v)
	}
	if err != nil {
		return ReadAnswer{}, err
	}
	return ReadAnswer{Outcome: ReadOutcome(n[0]), Left: time.Duration(n[1]) * time.Millisecond, Now: time.UnixMilli(n[2])}, nil
}

func removeKeys(a RemoveArgs, key string) []string { return []string{key, a.Owners, a.Load} }

func removeArgv(a RemoveArgs) []any { return []any{a.JobID, a.Instance} }

// ParseRemoveArgs reads the ARGV of an observed remove.lua call (Owners and
// Load are KEYS, not read here).
func ParseRemoveArgs(argv []string) (RemoveArgs, error) {
	if len(argv) != 2 {
		return RemoveArgs{}, argCount(NameRemove, len(argv), 2)
	}
	return RemoveArgs{JobID: argv[0], Instance: argv[1]}, nil
}

// parseRemoved reads remove.lua's answer: whether the beat was ours to
// delete (1) or another instance's (0).
func parseRemoved(v any) (bool, error) {
	switch v {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	}
	return false, fmt.Errorf("%w: %s answered %v", ErrUnexpectedReply, NameRemove, v)
}

func shardsArgv(a ShardsArgs) []any { return []any{a.Count, a.Mark.Milliseconds()} }

// ParseShardsArgs reads the ARGV of an observed shards.lua call.
func ParseShardsArgs(argv []string) (ShardsArgs, error) {
	if len(argv) != 2 {
		return ShardsArgs{}, argCount(NameShards, len(argv), 2)
	}
	count, err1 := strconv.Atoi(argv[0])
	ms, err2 := strconv.ParseInt(argv[1], 10, 64)
	if err1 != nil || err2 != nil {
		return ShardsArgs{}, fmt.Errorf("%w: %s arguments %q", ErrUnexpectedReply, NameShards, argv)
	}
	return ShardsArgs{Count: count, Mark: time.Duration(ms) * time.Millisecond}, nil
}

// ParseShardsAnswer reads shards.lua's answer {now, count1, until1, ...}.
func ParseShardsAnswer(v any) (ShardsAnswer, error) {
	n, err := ints(NameShards, v)
	if err == nil && len(n)%2 != 1 {
		err = fmt.Errorf("%w: %s answered %v", ErrUnexpectedReply, NameShards, v)
	}
	if err != nil {
		return ShardsAnswer{}, err
	}
	a := ShardsAnswer{Now: time.UnixMilli(n[0])}
	for i := 1; i < len(n); i += 2 {
		a.Counts = append(a.Counts, int(n[i]))
	}
	return a, nil
}

// ints reads an array of integers answered by script name.
func ints(name string, v any) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s answered %T, want an array", ErrUnexpectedReply, name, v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: %s answered %v", ErrUnexpectedReply, name, v)
		}
		out[i] = n
	}
	return out, nil
}

func argCount(name string, got, want int) error {
	return fmt.Errorf("%w: %s call with %d arguments, want %d", ErrUnexpectedReply, name, got, want)
}
