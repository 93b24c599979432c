package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
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
	// FloorEvalSHA is a trivial EVALSHA ("return 1"), FloorNATS a NATS
	// request/reply of 4 bytes each way: issue 36's floor.
	FloorEvalSHA Latency `json:"floor_evalsha"`
	FloorNATS    Latency `json:"floor_nats"`
	// FloorComposedP50MS is one NATS request/reply and one EVALSHA at their
	// medians, in series.
	FloorComposedP50MS float64 `json:"floor_composed_p50_ms"`
	// FloorSerial is the same floor measured as one operation (moveShape:
	// a NATS request/reply, then a trivial EVALSHA started as the reply
	// arrived): the wakeup between the two, which the medians of the parts
	// alone leave out, is in it.
	FloorSerial Latency `json:"floor_serial"`
	// FloorSized is the same floor carrying the move's own bytes, measured
	// beside it.
	FloorSized MoveSizedFloor `json:"floor_sized"`
}

// MoveSizedFloor is a move's floor over the bytes the move carries: a NATS
// request/reply whose request is as long as what the source publishes per
// move (the prepare and the commit) and whose reply as long as what the
// target publishes (the accept), and the floor script of a fenced write
// (floorScript: TIME, an HMGET, an HSET of the data) writing as many bytes
// of data as the flip writes.
type MoveSizedFloor struct {
	EvalSHA Latency `json:"evalsha"`
	NATS    Latency `json:"nats"`
	// ComposedP50MS is the two at their medians, in series.
	ComposedP50MS float64 `json:"composed_p50_ms"`
	// RequestBytes and ReplyBytes are the payloads of the request/reply
	// (the bytes each side published per move, NATS's own framing aside);
	// DataBytes the data the flip writes (the record's data field).
	RequestBytes int `json:"request_bytes"`
	ReplyBytes   int `json:"reply_bytes"`
	DataBytes    int `json:"data_bytes"`
}

// moveKey is the key of the profile the move measurement moves.
const moveKey = "moving"

// moveSizeEvery is how often (in rounds, after the warm-up's every
// round) the sized floor's sizes are read again.
const moveSizeEvery = 250

// moveCommitWait bounds the wait for a moved profile's commit to reach the
// target before its Join is timed.
const moveCommitWait = 5 * time.Second

// moveRun is what runMove collects, round by round.
type moveRun struct {
	moves, joins         []float64
	sizedEval, sizedNATS []float64
	moveCalls, joinCalls int64
	sized                MoveSizedFloor // the sizes, as of the last round
	reply                atomic.Int64   // the sized echo's reply length
}

// runMove times cfg.Handoffs moves of one profile back and forth between
// two servers, each followed by the target's Join, the sized floor (a
// request/reply and a fenced write of the move's bytes), one trivial
// EVALSHA and one NATS request/reply.
func (r *runner) runMove(ctx context.Context) error {
	return r.withPair(ctx, "move", func(servers [2]*handoffServer, echo string) error {
		const key = moveKey
		ns := r.ns("move")
		p, err := servers[0].drv.Join(ctx, key)
		if err != nil {
			return err
		}
		run := &moveRun{}
		sizedEcho := echo + "-sized"
		sub, err := servers[0].nc.Subscribe(sizedEcho, func(m *nats.Msg) { _ = m.Respond(make([]byte, run.reply.Load())) })
		if err != nil {
			return fmt.Errorf("subscribe the sized NATS echo: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := servers[0].nc.Flush(); err != nil {
			return fmt.Errorf("flush the sized NATS echo subscription: %w", err)
		}
		floorKey := ns + ":floor-sized"
		fs, err := r.pairRounds(ctx, echo, moveShape, func(i int) (*handoffServer, error) {
			src, dst := servers[(i+1)%2], servers[i%2]
			// The sized floors run before the move in odd rounds, after it in
			// even ones: each floor follows a move directly in half the
			// rounds (the other floors follow the round).
			sized := func() error {
				ev, nt, err := sizedFloors(ctx, src, floorKey, sizedEcho, run.sized)
				if err == nil && i > handoffWarmup {
					run.sizedEval, run.sizedNATS = append(run.sizedEval, msOf(ev)), append(run.sizedNATS, msOf(nt))
				}
				return err
			}
			if i%2 == 1 {
				if err := sized(); err != nil {
					return nil, err
				}
			}
			q, err := r.moveRound(ctx, run, i, src, dst, p, record.Key(ns, driverName, key))
			if err != nil {
				return nil, err
			}
			p = q
			if err := p.Update(func(d *profileData) { d.Coins++ }); err != nil {
				return nil, err
			}
			if i%2 == 0 {
				if err := sized(); err != nil {
					return nil, err
				}
			}
			return src, nil
		})
		if err != nil {
			return err
		}
		if err := p.Release(ctx); err != nil {
			return err
		}
		r.moveResult(run, fs)
		return nil
	})
}

// moveRound moves p from src to dst and times the MoveTo, then the
// target's Join (once the commit has arrived), counting both sides' Redis
// round trips and the bytes each side published; it returns the profile
// the Join gave.
func (r *runner) moveRound(ctx context.Context, run *moveRun, i int, src, dst *handoffServer,
	p *datadriver.Profile[profileData], recKey string) (*datadriver.Profile[profileData], error) {
	before := src.calls.RoundTrips()
	srcOut, dstOut := src.nc.Stats().OutBytes, dst.nc.Stats().OutBytes
	start := time.Now()
	if err := p.MoveTo(ctx, dst.node.JobID()); err != nil {
		return nil, fmt.Errorf("move %d: %w", i, err)
	}
	moved := time.Since(start)
	during := src.calls.RoundTrips() - before
	// The commit is one message behind the flip: wait for it (the Join
	// would otherwise read the record once), then time the Join.
	if err := waitHeld(ctx, dst, moveKey); err != nil {
		return nil, fmt.Errorf("move %d: %w", i, err)
	}
	before = dst.calls.RoundTrips()
	start = time.Now()
	q, err := dst.drv.Join(ctx, moveKey)
	joined := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("join after move %d: %w", i, err)
	}
	jc := dst.calls.RoundTrips() - before
	if i <= handoffWarmup || i%moveSizeEvery == 0 { // the sizes barely change: read them now and then
		run.sized.RequestBytes = int(src.nc.Stats().OutBytes - srcOut)
		run.sized.ReplyBytes = int(dst.nc.Stats().OutBytes - dstOut)
		run.reply.Store(int64(run.sized.ReplyBytes))
		n, err := r.admin.HStrLen(ctx, recKey, "data").Result()
		if err != nil {
			return nil, fmt.Errorf("the moved data's size: %w", err)
		}
		run.sized.DataBytes = int(n)
	}
	if i > handoffWarmup {
		run.moves, run.joins = append(run.moves, msOf(moved)), append(run.joins, msOf(joined))
		run.moveCalls, run.joinCalls = run.moveCalls+during, run.joinCalls+jc
	}
	return q, nil
}

// sizedFloors times, on s's connections, the floor script writing
// sized.DataBytes of data to key and a NATS request/reply of
// sized.RequestBytes to echo (which answers sized.ReplyBytes).
func sizedFloors(ctx context.Context, s *handoffServer, key, echo string, sized MoveSizedFloor) (evalRTT, natsRTT time.Duration,
	err error) {
	data, req := make([]byte, sized.DataBytes), make([]byte, sized.RequestBytes)
	start := time.Now()
	if err := floorScript.Run(ctx, s.rdb, []string{key}, data, 1).Err(); err != nil {
		return 0, 0, fmt.Errorf("sized EVALSHA floor: %w", err)
	}
	evalRTT = time.Since(start)
	start = time.Now()
	if _, err := s.nc.RequestWithContext(ctx, echo, req); err != nil {
		return 0, 0, fmt.Errorf("sized NATS floor: %w", err)
	}
	return evalRTT, time.Since(start), nil
}

// moveResult fills Result.Move from run and the floors.
func (r *runner) moveResult(run *moveRun, fs floorSamples) {
	n := r.cfg.Handoffs
	m := &r.res.Move
	m.Latency, m.Join = summarize(run.moves), summarize(run.joins)
	m.FloorEvalSHA, m.FloorNATS, m.FloorSerial = summarize(fs.evalsha), summarize(fs.nats), summarize(fs.serial)
	m.RedisCallsPerMove = round1(float64(run.moveCalls) / float64(n))
	m.RedisCallsPerJoin = round1(float64(run.joinCalls) / float64(n))
	m.FloorComposedP50MS = round3(m.FloorEvalSHA.P50MS + m.FloorNATS.P50MS)
	sz := run.sized
	sz.EvalSHA, sz.NATS = summarize(run.sizedEval), summarize(run.sizedNATS)
	sz.ComposedP50MS = round3(sz.EvalSHA.P50MS + sz.NATS.P50MS)
	m.FloorSized = sz
	r.progress("  %d moves: p50 %.3f ms, p99 %.3f (floor: NATS request %.3f + EVALSHA %.3f = %.3f ms, in series %.3f; "+
		"same bytes: %.3f + %.3f = %.3f ms); target's Join p50 %.3f ms with %.1f Redis round trips", m.N, m.P50MS, m.P99MS,
		m.FloorNATS.P50MS, m.FloorEvalSHA.P50MS, m.FloorComposedP50MS, m.FloorSerial.P50MS, sz.NATS.P50MS, sz.EvalSHA.P50MS,
		sz.ComposedP50MS, m.Join.P50MS, m.RedisCallsPerJoin)
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
