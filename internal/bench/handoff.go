package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/rediscount"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// Handoff is the stale-connection handoff: the key is live on one server
// and the other joins it; the holder ends its session, releases (one save
// that writes and clears the lock) and replies over NATS; the joiner loads.
// The latency runs from the joiner's Join call to its return, holding the
// profile. The floors were measured in the same run, interleaved with the
// handoffs, on the same connections.
type Handoff struct {
	Latency
	// FloorEvalSHA is one trivial EVALSHA round trip ("return 1"),
	// FloorNATS one NATS request/reply round trip between the two servers'
	// connections.
	FloorEvalSHA Latency `json:"floor_evalsha"`
	FloorNATS    Latency `json:"floor_nats"`
	// RedisCallsPerHandoff is the round trips both servers sent to Redis
	// per handoff (scripts, presence reads; their background beats too,
	// a few in the whole run).
	RedisCallsPerHandoff float64 `json:"redis_calls_per_handoff"`
	// FloorComposedP50MS is what the handoff's round trips cost at least,
	// in series: RedisCallsPerHandoff EVALSHA round trips and one NATS
	// request/reply, at their medians (each script treated as trivial).
	FloorComposedP50MS float64 `json:"floor_composed_p50_ms"`
	// FloorSerial is the same round trips measured as one operation, in a
	// handoff's shape (handoffShape: a trivial EVALSHA, a NATS
	// request/reply whose responder runs a trivial EVALSHA before it
	// answers, a trivial EVALSHA), each started as the one before answered:
	// the wakeups between them, which the medians of the parts alone leave
	// out, are in it.
	FloorSerial Latency `json:"floor_serial"`
}

// handoffWarmup handoffs run before the timed ones.
const handoffWarmup = 50

// handoffServer is one server of a two-server measurement: a Node with its
// own Redis client and NATS connection, and the driver.
type handoffServer struct {
	rdb     *redis.Client
	prdb    *redis.Client // the presence beat's client (NodeConfig.PresenceRedis)
	nc      *nats.Conn
	node    *datadriver.Node
	drv     *datadriver.Driver[profileData]
	calls   *rediscount.Counter
	crashed bool
}

// startServer starts a server named job under ns; node tunes its config,
// drv its driver's.
func (r *runner) startServer(ctx context.Context, ns, job string, node func(*datadriver.NodeConfig),
	drv func(*datadriver.Config[profileData])) (*handoffServer, error) {
	s := &handoffServer{rdb: r.client(0), prdb: r.client(4), calls: &rediscount.Counter{NoNames: true}}
	s.rdb.AddHook(s.calls)
	nc, err := nats.Connect(r.env.NATSURL, nats.Name("playerdata bench "+job))
	if err != nil {
		_ = s.rdb.Close()
		_ = s.prdb.Close()
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	s.nc = nc
	cfg := datadriver.NodeConfig{JobID: job, Redis: s.rdb, PresenceRedis: s.prdb, NATS: nc, Namespace: ns, Logger: r.log}
	if node != nil {
		node(&cfg)
	}
	if s.node, err = datadriver.NewNode(ctx, cfg); err != nil {
		s.close(ctx)
		return nil, err
	}
	dc := datadriver.Config[profileData]{Name: driverName}
	if drv != nil {
		drv(&dc)
	}
	if s.drv, err = datadriver.NewDriver(s.node, dc); err != nil {
		s.close(ctx)
		return nil, err
	}
	return s, nil
}

// crash stops s as a crashed process stops: its Redis clients and NATS
// connection close, so it beats no more, answers nothing and releases
// nothing.
func (s *handoffServer) crash() {
	s.crashed = true
	_ = s.rdb.Close()
	_ = s.prdb.Close()
	s.nc.Close()
}

// close closes the Node (releasing what it holds, unless it crashed), then
// its connections.
func (s *handoffServer) close(ctx context.Context) {
	if s.node != nil {
		wait := cleanupTimeout
		if s.crashed {
			wait = time.Second // its releases cannot land
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		_ = s.node.Close(cctx)
		cancel()
	}
	if !s.crashed {
		_ = s.rdb.Close()
		_ = s.prdb.Close()
		s.nc.Close()
	}
}

// runHandoff times Handoffs stale-connection handoffs, alternating the
// joiner, each followed by one trivial EVALSHA and one NATS request/reply.
func (r *runner) runHandoff(ctx context.Context) error {
	return r.withPair(ctx, "handoff", func(servers [2]*handoffServer, echo string) error {
		const key = "hot"
		p, err := servers[0].drv.Join(ctx, key)
		if err != nil {
			return err
		}
		hand := make([]float64, 0, r.cfg.Handoffs)
		redisCalls := func() int64 { return servers[0].calls.RoundTrips() + servers[1].calls.RoundTrips() }
		var calls int64 // Redis round trips during the timed Joins
		fs, err := r.pairRounds(ctx, echo, handoffShape, func(i int) (*handoffServer, error) {
			joiner := servers[i%2]
			before := redisCalls()
			start := time.Now()
			q, err := joiner.drv.Join(ctx, key)
			took := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("handoff %d: %w", i, err)
			}
			during := redisCalls() - before
			p = q
			if i > handoffWarmup {
				hand, calls = append(hand, msOf(took)), calls+during
			}
			return servers[1], p.Update(func(d *profileData) { d.Coins++ })
		})
		if err != nil {
			return err
		}
		if err := p.Release(ctx); err != nil {
			return err
		}
		h := &r.res.Handoff
		h.Latency = summarize(hand)
		h.FloorEvalSHA = summarize(fs.evalsha)
		h.FloorNATS = summarize(fs.nats)
		h.FloorSerial = summarize(fs.serial)
		h.RedisCallsPerHandoff = round1(float64(calls) / float64(r.cfg.Handoffs))
		h.FloorComposedP50MS = round3(h.RedisCallsPerHandoff*h.FloorEvalSHA.P50MS + h.FloorNATS.P50MS)
		r.res.handoffSamples, r.res.evalshaSamples, r.res.natsSamples = hand, fs.evalsha, fs.nats
		r.progress("  %d handoffs: p50 %.2f ms, p90 %.2f, p99 %.2f, max %.2f; floors p50: EVALSHA %.3f ms, NATS request %.3f ms, composed %.3f ms, "+
			"as one %.3f ms", h.N, h.P50MS, h.P90MS, h.P99MS, h.MaxMS, h.FloorEvalSHA.P50MS, h.FloorNATS.P50MS, h.FloorComposedP50MS,
			h.FloorSerial.P50MS)
		return nil
	})
}

// withPair runs f with two servers under a fresh namespace named after
// what (deleted afterwards) and the subject of a NATS echo that the first
// server's connection answers (the floors' request/reply).
func (r *runner) withPair(ctx context.Context, what string, f func(servers [2]*handoffServer, echo string) error) error {
	ns := r.ns(what)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	var servers [2]*handoffServer
	for i, job := range []string{"bench-a-" + randomID(), "bench-b-" + randomID()} {
		s, err := r.startServer(ctx, ns, job, nil, nil)
		if err != nil {
			return err
		}
		defer s.close(ctx)
		servers[i] = s
	}
	echo := ns + ".echo"
	sub, err := servers[0].nc.Subscribe(echo, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		return fmt.Errorf("subscribe the NATS echo: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The echo whose responder runs a trivial EVALSHA before it answers:
	// the holder's side of a handoff with nothing of the library in it.
	evalSub, err := servers[0].nc.Subscribe(echo+evalEchoSuffix, func(m *nats.Msg) {
		if trivialScript.Run(ctx, servers[0].rdb, nil).Err() == nil {
			_ = m.Respond(m.Data)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe the NATS echo: %w", err)
	}
	defer func() { _ = evalSub.Unsubscribe() }()
	if err := servers[0].nc.Flush(); err != nil {
		return fmt.Errorf("flush the NATS echo subscription: %w", err)
	}
	return f(servers, echo)
}

// pairRounds runs handoffWarmup + Handoffs rounds: round i (from 1) runs
// step(i), which times its own operation (keeping it once i >
// handoffWarmup) and names the server whose connections time the floors
// that follow it. It answers the floors of the timed rounds, in ms: each
// part alone, and shape measured as one operation.
func (r *runner) pairRounds(ctx context.Context, echo string, shape serialShape,
	step func(i int) (*handoffServer, error)) (floorSamples, error) {
	n := r.cfg.Handoffs
	fs := floorSamples{make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)}
	for i := 1; i <= handoffWarmup+n; i++ {
		s, err := step(i)
		if err != nil {
			return floorSamples{}, err
		}
		evalRTT, natsTook, err := floors(ctx, s, echo)
		if err != nil {
			return floorSamples{}, err
		}
		serial, err := shape.time(ctx, s, echo)
		if err != nil {
			return floorSamples{}, err
		}
		if i > handoffWarmup {
			fs.evalsha, fs.nats = append(fs.evalsha, msOf(evalRTT)), append(fs.nats, msOf(natsTook))
			fs.serial = append(fs.serial, msOf(serial))
		}
	}
	return fs, nil
}

// floorSamples are the floors of the timed rounds, in ms.
type floorSamples struct{ evalsha, nats, serial []float64 }

// evalEchoSuffix names the NATS echo whose responder runs a trivial
// EVALSHA before it answers (withPair).
const evalEchoSuffix = ".eval"

// serialShape is a floor measured as one operation, in the shape of what it
// is the floor of, with nothing of the library in it: before trivial
// EVALSHAs, one NATS request/reply (whose responder runs a trivial EVALSHA
// first with remote), then after trivial EVALSHAs, each started as the one
// before it answered. Its parts alone (floors) are each measured after the
// bench was idle for a moment; in series, each one after the first
// follows a wakeup of the goroutine that waited on the one before, as in a
// handoff or a move.
type serialShape struct {
	before, after int
	remote        bool
}

// The serial floors: a handoff's (the joiner's acquire, the holder's release
// before it answers, the joiner's acquire) and a move's (the prepare and
// its accept, the flip).
var (
	handoffShape = serialShape{before: 1, after: 1, remote: true}
	moveShape    = serialShape{after: 1}
)

// time times the shape on s's connections.
func (sh serialShape) time(ctx context.Context, s *handoffServer, echo string) (time.Duration, error) {
	subject := echo
	if sh.remote {
		subject += evalEchoSuffix
	}
	start := time.Now()
	for range sh.before {
		if err := trivialScript.Run(ctx, s.rdb, nil).Err(); err != nil {
			return 0, fmt.Errorf("serial floor: %w", err)
		}
	}
	if _, err := s.nc.RequestWithContext(ctx, subject, []byte("ping")); err != nil {
		return 0, fmt.Errorf("serial floor: %w", err)
	}
	for range sh.after {
		if err := trivialScript.Run(ctx, s.rdb, nil).Err(); err != nil {
			return 0, fmt.Errorf("serial floor: %w", err)
		}
	}
	return time.Since(start), nil
}

// floors times, on s's connections, one trivial EVALSHA and one NATS
// request/reply to the echo subject: the floors a handoff is measured
// against.
func floors(ctx context.Context, s *handoffServer, echo string) (evalRTT, natsRTT time.Duration, err error) {
	start := time.Now()
	if err := trivialScript.Run(ctx, s.rdb, nil).Err(); err != nil {
		return 0, 0, fmt.Errorf("EVALSHA floor: %w", err)
	}
	evalRTT = time.Since(start)
	start = time.Now()
	if _, err := s.nc.RequestWithContext(ctx, echo, []byte("ping")); err != nil {
		return 0, 0, fmt.Errorf("NATS floor: %w", err)
	}
	return evalRTT, time.Since(start), nil
}
