package presencescript

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/rscript"
)

// ListArgs are list.lua's arguments; its KEYS[1] is the shard hash.
type ListArgs struct {
	Owners, Load string        // the shard's owners and load hashes (KEYS[2], KEYS[3])
	TTL          time.Duration // the deployment's TTL (ms precision)
}

// ListAnswer is list.lua's answer for one shard.
type ListAnswer struct {
	// Proof: a missing or expired beat proves its server stopped (this
	// Redis run is at least a TTL old); else such a server is unknown.
	Proof bool
	// Wait, without Proof, is the least time before it can come.
	Wait time.Duration
	// LoadErr is Redis's error reading the load hash ("" when it was read).
	LoadErr string
	// Rows are the shard's servers, as stored.
	Rows []ListRow
}

// ListRow is one server of a shard, as list.lua answers it.
type ListRow struct {
	JobID string
	// Left is the time until its beat expires on the Redis clock, negative
	// once it has expired.
	Left     time.Duration
	Instance string // the instance that wrote the beat ("" when none is recorded)
	Load     string // its entry of the load hash as stored ("" when none)
}

// List is list.lua, typed.
var List = rscript.NewTyped(NameList, listLua, rscript.Protocol[ListArgs, ListAnswer]{Keys: listKeys, Args: listArgv,
	Parse: ParseListArgs, Answer: ParseListAnswer})

func listKeys(a ListArgs, key string) []string { return []string{key, a.Owners, a.Load} }

func listArgv(a ListArgs) []any { return []any{a.TTL.Milliseconds()} }

// ParseListArgs reads the ARGV of an observed list.lua call (Owners and
// Load are KEYS, not read here).
func ParseListArgs(argv []string) (ListArgs, error) {
	if len(argv) != 1 {
		return ListArgs{}, argCount(NameList, len(argv), 1)
	}
	ms, err := strconv.ParseInt(argv[0], 10, 64)
	if err != nil {
		return ListArgs{}, fmt.Errorf("%w: %s argument 1 is %q", ErrUnexpectedReply, NameList, argv[0])
	}
	return ListArgs{TTL: time.Duration(ms) * time.Millisecond}, nil
}

// ParseListAnswer reads list.lua's answer {proof, wait, loadErr, job1,
// expiresIn1, instance1, load1, ...}.
func ParseListAnswer(v any) (ListAnswer, error) {
	res, ok := v.([]any)
	if !ok || len(res) < 3 || (len(res)-3)%4 != 0 {
		return ListAnswer{}, fmt.Errorf("%w: %s answered %v", ErrUnexpectedReply, NameList, v)
	}
	proof, ok1 := res[0].(int64)
	wait, ok2 := res[1].(int64)
	loadErr, ok3 := res[2].(string)
	if !ok1 || !ok2 || !ok3 || (proof != 0 && proof != 1) {
		return ListAnswer{}, fmt.Errorf("%w: %s answered proof %v, wait %v, load error %T", ErrUnexpectedReply, NameList,
			res[0], res[1], res[2])
	}
	a := ListAnswer{Proof: proof == 1, Wait: time.Duration(wait) * time.Millisecond, LoadErr: loadErr,
		Rows: make([]ListRow, 0, (len(res)-3)/4)}
	for i := 3; i < len(res); i += 4 {
		job, ok1 := res[i].(string)
		ms, ok2 := res[i+1].(int64)
		inst, ok3 := res[i+2].(string)
		load, ok4 := res[i+3].(string)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return ListAnswer{}, fmt.Errorf("%w: %s entry %T %T %T %T", ErrUnexpectedReply, NameList, res[i], res[i+1], res[i+2], res[i+3])
		}
		a.Rows = append(a.Rows, ListRow{JobID: job, Left: time.Duration(ms) * time.Millisecond, Instance: inst, Load: load})
	}
	return a, nil
}
