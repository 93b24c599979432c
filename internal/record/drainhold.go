package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DrainHoldsKey is the hash of the drains' headroom holds of namespace ns.
func DrainHoldsKey(ns string) string { return ns + ":drain.holds" }

// PeerLoad is a drain target and its session count.
type PeerLoad struct {
	JobID    string
	Sessions int
}

// DrainHoldArgs are drainhold.lua's arguments: the drain, how long its
// placement holds (0 retires its holds), how many profiles it places, and
// the peers with their session counts.
type DrainHoldArgs struct {
	Drainer string
	TTL     time.Duration
	N       int
	Peers   []PeerLoad
}

// keys are KEYS of drainhold.lua: the namespace's holds (DrainHoldsKey).
func (a DrainHoldArgs) keys(holds string) []string { return []string{holds} }

// argv is ARGV of drainhold.lua.
func (a DrainHoldArgs) argv() []any {
	argv := []any{a.Drainer, a.TTL.Milliseconds(), a.N}
	for _, p := range a.Peers {
		argv = append(argv, p.JobID, p.Sessions)
	}
	return argv
}

// ParseDrainHoldArgs reads the ARGV of an observed drainhold.lua call.
func ParseDrainHoldArgs(argv []string) (DrainHoldArgs, error) {
	if len(argv) < 3 || len(argv)%2 != 1 {
		return DrainHoldArgs{}, fmt.Errorf("record: %s call with %d arguments, want 3 and pairs", ScriptDrainHold, len(argv))
	}
	ms, err1 := strconv.ParseInt(arg(argv, 2), 10, 64)
	n, err2 := strconv.Atoi(arg(argv, 3))
	if err1 != nil || err2 != nil {
		return DrainHoldArgs{}, fmt.Errorf("record: %s call with ttl %q and count %q", ScriptDrainHold, arg(argv, 2), arg(argv, 3))
	}
	a := DrainHoldArgs{Drainer: arg(argv, 1), TTL: time.Duration(ms) * time.Millisecond, N: n}
	for i := 3; i+1 < len(argv); i += 2 {
		sessions, err := strconv.Atoi(argv[i+1])
		if err != nil {
			return DrainHoldArgs{}, fmt.Errorf("record: %s call with peer %q's count %q", ScriptDrainHold, argv[i], argv[i+1])
		}
		a.Peers = append(a.Peers, PeerLoad{JobID: argv[i], Sessions: sessions})
	}
	return a, nil
}

// parseDrainHold reads drainhold.lua's answer: peer, count pairs.
func parseDrainHold(v any) (map[string]int, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: drainhold answered %v", ErrUnexpectedAnswer, v)
	}
	out := make(map[string]int, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		out[str(arr[i])] = int(num(arr[i+1]))
	}
	return out, nil
}

// DrainHold runs drainhold.lua: it places a.N profiles of a.Drainer among
// a.Peers, against their counts and the other drains' live holds, and
// holds the placement for a.TTL on the Redis clock (TTL 0 retires the
// drainer's holds and places nothing). It answers how many go to each peer.
func DrainHold(ctx context.Context, rdb redis.Scripter, ns string, a DrainHoldArgs) (map[string]int, error) {
	return drainHoldScript.Run(ctx, rdb, DrainHoldsKey(ns), a)
}
