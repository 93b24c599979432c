package record

import (
	"context"
	"fmt"
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

// DrainHold runs drainhold.lua: it places n profiles of drainer among
// peers, against their counts and the other drains' live holds, and holds
// the placement for ttl on the Redis clock (ttl 0 retires drainer's holds
// and places nothing). It answers how many go to each peer.
func DrainHold(ctx context.Context, rdb redis.Scripter, ns, drainer string, ttl time.Duration, n int,
	peers []PeerLoad) (map[string]int, error) {
	argv := []any{drainer, ttl.Milliseconds(), n}
	for _, p := range peers {
		argv = append(argv, p.JobID, p.Sessions)
	}
	v, err := drainHoldScript.Run(ctx, rdb, []string{DrainHoldsKey(ns)}, argv...).Result()
	if err != nil {
		return nil, err
	}
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
