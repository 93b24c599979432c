package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// PresenceTargetUS is issue 35's target for presence: at most this much
// script time (INFO commandstats usec of the script calls) per beat, with
// 200 servers beating one Redis.
const PresenceTargetUS = 20

// floorBeatLua is the least a beat stamped on the Redis clock can be: one
// script call that reads TIME and writes the server's field once.
const floorBeatLua = `local t = redis.call('TIME')
return redis.call('HSET', KEYS[1], ARGV[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2]))`

var floorBeat = redis.NewScript(floorBeatLua)

// PresenceFloor is that least beat, sent by as many servers at the same
// pace as the presence measurement, for the same window: what any beat on
// the Redis clock costs this Redis, beside what ours costs.
type PresenceFloor struct {
	Calls             int64   `json:"calls"`
	ScriptUSPerBeat   float64 `json:"script_us_per_beat"`
	RedisCPUUSPerBeat float64 `json:"redis_cpu_us_per_beat"`
}

// runPresenceFloor sends the floor beat from servers goroutines, each every
// beat, for window, and measures it.
func (r *runner) runPresenceFloor(ctx context.Context, rdb *redis.Client, key string, servers int, beat, window time.Duration) (PresenceFloor, error) {
	if err := floorBeat.Load(ctx, rdb).Err(); err != nil {
		return PresenceFloor{}, err
	}
	ttl := (beat * 10 / 3).Milliseconds()
	before := r.snapIf(ctx)
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, servers)
	for i := range servers {
		wg.Go(func() {
			t := time.NewTicker(beat)
			defer t.Stop()
			job := fmt.Sprintf("floor-s%03d", i)
			for {
				select {
				case <-wctx.Done():
					return
				case <-t.C:
				}
				if err := floorBeat.EvalSha(wctx, rdb, []string{key}, job, ttl).Err(); err != nil && wctx.Err() == nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	work := r.snapIf(ctx).since(before)
	for _, err := range errs {
		if err != nil {
			return PresenceFloor{}, fmt.Errorf("floor beat: %w", err)
		}
	}
	sc := work.scriptCalls()
	if sc.Calls == 0 {
		return PresenceFloor{}, nil // a Redis without INFO commandstats: nothing to divide by
	}
	n := float64(sc.Calls)
	return PresenceFloor{Calls: sc.Calls, ScriptUSPerBeat: round3(float64(sc.Usec) / n), RedisCPUUSPerBeat: round3(work.cpuUS / n)}, nil
}
