package bench

import (
	"context"
	"fmt"
	"time"
)

// Move is Profile.MoveTo between two servers, and the target's Join of the
// moved profile. MoveTo runs from its call to its return (the flip landed:
// the target holds the lock and the data); the Join from the target's call
// to its return, once the commit has arrived, and costs no Redis round trip.
// The floors were measured in the same run, interleaved with the moves, on
// the same connections: what a move cannot beat is one NATS request/reply
// (prepare → accept) and one EVALSHA (the flip).
type Move struct {
	Latency
	// Join is the target's Join of the moved profile.
	Join Latency `json:"join"`
	// RedisCallsPerMove is the source's Redis round trips per MoveTo on its
	// main client (the flip; a presence read of the target, made only when
	// its answer is late, goes through the presence client);
	// RedisCallsPerJoin the target's per Join (0: no command).
	RedisCallsPerMove float64 `json:"redis_calls_per_move"`
	RedisCallsPerJoin float64 `json:"redis_calls_per_join"`
	FloorEvalSHA      Latency `json:"floor_evalsha"`
	FloorNATS         Latency `json:"floor_nats"`
	// FloorComposedP50MS is one NATS request/reply and one EVALSHA at their
	// medians, in series.
	FloorComposedP50MS float64 `json:"floor_composed_p50_ms"`
}

// moveCommitWait bounds the wait for a moved profile's commit to reach the
// target before its Join is timed.
const moveCommitWait = 5 * time.Second

// runMove times cfg.Handoffs moves of one profile back and forth between
// two servers, each followed by the target's Join, one trivial EVALSHA and
// one NATS request/reply.
func (r *runner) runMove(ctx context.Context) error {
	return r.withPair(ctx, "move", func(servers [2]*handoffServer, echo string) error {
		const key = "moving"
		p, err := servers[0].drv.Join(ctx, key)
		if err != nil {
			return err
		}
		n := r.cfg.Handoffs
		moves, joins := make([]float64, 0, n), make([]float64, 0, n)
		var moveCalls, joinCalls int64
		evalsha, natsRTT, err := r.pairRounds(ctx, echo, func(i int) (*handoffServer, error) {
			src, dst := servers[(i+1)%2], servers[i%2]
			before := src.calls.RoundTrips()
			start := time.Now()
			if err := p.MoveTo(ctx, dst.node.JobID()); err != nil {
				return nil, fmt.Errorf("move %d: %w", i, err)
			}
			moved := time.Since(start)
			during := src.calls.RoundTrips() - before
			// The commit is one message behind the flip: wait for it (the
			// Join would otherwise read the record once), then time the Join.
			if err := waitHeld(ctx, dst, key); err != nil {
				return nil, fmt.Errorf("move %d: %w", i, err)
			}
			before = dst.calls.RoundTrips()
			start = time.Now()
			q, err := dst.drv.Join(ctx, key)
			joined := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("join after move %d: %w", i, err)
			}
			jc := dst.calls.RoundTrips() - before
			p = q
			if i > handoffWarmup {
				moves, joins = append(moves, msOf(moved)), append(joins, msOf(joined))
				moveCalls, joinCalls = moveCalls+during, joinCalls+jc
			}
			return src, p.Update(func(d *profileData) { d.Coins++ })
		})
		if err != nil {
			return err
		}
		if err := p.Release(ctx); err != nil {
			return err
		}
		m := &r.res.Move
		m.Latency, m.Join = summarize(moves), summarize(joins)
		m.FloorEvalSHA, m.FloorNATS = summarize(evalsha), summarize(natsRTT)
		m.RedisCallsPerMove = round1(float64(moveCalls) / float64(n))
		m.RedisCallsPerJoin = round1(float64(joinCalls) / float64(n))
		m.FloorComposedP50MS = round3(m.FloorEvalSHA.P50MS + m.FloorNATS.P50MS)
		r.progress("  %d moves: p50 %.3f ms, p99 %.3f (floor: NATS request %.3f + EVALSHA %.3f = %.3f ms); target's Join p50 %.3f ms "+
			"with %.1f Redis round trips", m.N, m.P50MS, m.P99MS, m.FloorNATS.P50MS, m.FloorEvalSHA.P50MS, m.FloorComposedP50MS,
			m.Join.P50MS, m.RedisCallsPerJoin)
		return nil
	})
}

// waitHeld waits until s holds the moved profile of key, ready for a Join
// without a Redis command (its commit arrived).
func waitHeld(ctx context.Context, s *handoffServer, key string) error {
	deadline := time.Now().Add(moveCommitWait)
	for !s.drv.MoveHeld(key) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the commit of %s did not reach %s within %s", key, s.node.JobID(), moveCommitWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Microsecond):
		}
	}
	return nil
}
