package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/rediscount"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/redis/go-redis/v9"
)

// PresenceCost is what presence costs Redis: PresenceServers real
// presencecore.Presence instances (each its beat loop, as a Node runs it) beat
// one hash for a window, every PresenceBeat; the figures are per beat of one
// server, over the window (fast-path beats and the full check every
// presencecore.CheckEvery beats in their real proportion).
type PresenceCost struct {
	Servers int     `json:"servers"`
	BeatMS  float64 `json:"beat_ms"`
	WindowS float64 `json:"window_s"`
	// Beats is how many beats were sent in the window, FullChecks how many
	// of them were full checks.
	Beats      int64 `json:"beats"`
	FullChecks int64 `json:"full_checks"`
	// CountWrites is how many beats carried the server's session count
	// (presencecore.Config.Sessions: a changed count, or a full check); each
	// server's count changes every SessionsChangeEvery beats, as a busy
	// game server's would.
	CountWrites         int64 `json:"count_writes"`
	SessionsChangeEvery int   `json:"sessions_change_every"`
	// CmdsPerBeat is the Redis commands a beat runs (inside its script:
	// INFO commandstats calls of every command but EVALSHA / EVAL);
	// RoundTripsPerBeat the script calls (a full check also marks the shard
	// count).
	CmdsPerBeat       float64 `json:"cmds_per_beat"`
	RoundTripsPerBeat float64 `json:"round_trips_per_beat"`
	// ScriptUSPerBeat is the script time per beat (commandstats usec),
	// RedisCPUUSPerBeat Redis's CPU time per beat (INFO cpu).
	ScriptUSPerBeat   float64 `json:"script_us_per_beat"`
	RedisCPUUSPerBeat float64 `json:"redis_cpu_us_per_beat"`
	// RedisCPUPctAtDefaultBeat is the share of one Redis core these servers
	// take at the default beat (presencecore.DefaultBeat).
	RedisCPUPctAtDefaultBeat float64 `json:"redis_cpu_pct_at_default_beat"`
	// TargetUSPerBeat is issue 35's target for ScriptUSPerBeat
	// (PresenceTargetUS); MeetsTarget says whether this run met it (false
	// when this Redis reports no script times).
	TargetUSPerBeat float64 `json:"target_us_per_beat"`
	MeetsTarget     bool    `json:"meets_target"`
	// Floor is the least beat on the Redis clock (TIME and one HSET in a
	// script) at the same pace, measured in the same run.
	Floor PresenceFloor `json:"floor"`
}

// presenceCatalog tells the presence scripts on the wire.
var presenceCatalog = rscript.NewCatalog(presencescript.All()...)

// beatCounters count the beats sent, the full checks among them, and those
// that carried a session count.
func beatCounters() (beats, checks, counts *rediscount.Counter) {
	beat := func(cmd redis.Cmder) (presencescript.BeatArgs, bool) {
		in, ok := presenceCatalog.Identify(cmd)
		if !ok || in.Name() != presencescript.NameBeat {
			return presencescript.BeatArgs{}, false
		}
		a, err := presencescript.ParseBeatArgs(in.Args)
		return a, err == nil
	}
	beats = &rediscount.Counter{NoNames: true, Only: func(cmd redis.Cmder) bool {
		_, ok := beat(cmd)
		return ok
	}}
	checks = &rediscount.Counter{NoNames: true, Only: func(cmd redis.Cmder) bool {
		a, ok := beat(cmd)
		return ok && a.Check
	}}
	counts = &rediscount.Counter{NoNames: true, Only: func(cmd redis.Cmder) bool {
		a, ok := beat(cmd)
		return ok && a.WriteSessions
	}}
	return beats, checks, counts
}

// sessionsChangeEvery is how often a bench server's session count changes:
// on one beat in four, as for a server of 100 players whose sessions last
// 20 minutes, at the default 3 s beat.
const sessionsChangeEvery = 4

// benchSessions is server i's Config.Sessions: a count that changes on
// every sessionsChangeEvery-th call (one call per beat), staggered by i.
func benchSessions(i int) func() int {
	var calls atomic.Int64
	return func() int {
		k := calls.Add(1) + int64(i)
		return 50 + int(k/sessionsChangeEvery%2)
	}
}

// embeddedPresenceBeat is the least beat period on an embedded Redis.
const embeddedPresenceBeat = time.Second

// presencePool is the pool of the one client every beating server shares.
const presencePool = 32

// runPresence fills Result.Presence: the beats of PresenceServers real
// Presences over the window, then the floor beat at the same pace, and the
// target.
func (r *runner) runPresence(ctx context.Context) error {
	ns := r.ns("presence")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	rdb := r.client(presencePool)
	defer func() { _ = rdb.Close() }()
	beat := r.cfg.PresenceBeat
	if r.env.EmbeddedRedis {
		// An embedded Redis cannot answer hundreds of beats a second in
		// time; the figures per beat do not depend on the period.
		beat = max(beat, embeddedPresenceBeat)
	}
	pc, err := r.beatPresence(ctx, rdb, ns, beat)
	if err != nil {
		return err
	}
	// The servers are closed: the floor runs alone, at their pace.
	pc.Floor, err = r.runPresenceFloor(ctx, rdb, ns+":floor", pc.Servers, beat, r.cfg.PresenceWindow)
	if err != nil {
		return err
	}
	pc.TargetUSPerBeat = PresenceTargetUS
	pc.MeetsTarget = r.stats && pc.ScriptUSPerBeat <= PresenceTargetUS
	r.res.Presence = pc
	r.progress("  %d servers, %d beats (%d full checks, %d with a session count): %.2f commands, %.2f round trips, "+
		"%.1f µs script, %.1f µs Redis CPU per beat; the floor beat %.1f µs script, %.1f µs Redis CPU",
		pc.Servers, pc.Beats, pc.FullChecks, pc.CountWrites, pc.CmdsPerBeat, pc.RoundTripsPerBeat, pc.ScriptUSPerBeat,
		pc.RedisCPUUSPerBeat, pc.Floor.ScriptUSPerBeat, pc.Floor.RedisCPUUSPerBeat)
	return nil
}

// beatPresence starts PresenceServers Presences beating every beat, each
// publishing a session count (benchSessions), measures a window of their
// loops and closes them.
func (r *runner) beatPresence(ctx context.Context, rdb *redis.Client, ns string, beat time.Duration) (PresenceCost, error) {
	beatsSent, checksSent, countsSent := beatCounters()
	rdb.AddHook(beatsSent)
	rdb.AddHook(checksSent)
	rdb.AddHook(countsSent)
	servers := make([]*presencecore.Presence, r.cfg.PresenceServers)
	for i := range servers {
		p, err := presencecore.New(rdb, presencecore.Config{Key: presencecore.KeyFor(ns), JobID: fmt.Sprintf("bench-s%03d", i),
			Beat: beat, TTL: beat * 10 / 3, Logger: r.log, Sessions: benchSessions(i)})
		if err != nil {
			return PresenceCost{}, err
		}
		servers[i] = p
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range servers {
			wg.Go(func() {
				if p.Close(cctx) == nil {
					_ = p.Remove(cctx)
				}
			})
		}
		wg.Wait()
	}()
	// One claim at a time: a claim's beat must answer within one Beat.
	for _, p := range servers {
		if err := p.Claim(ctx); err != nil {
			return PresenceCost{}, fmt.Errorf("claim: %w", err)
		}
	}
	for _, p := range servers {
		p.Start()
	}
	// Past the first beat of each loop, then measure.
	if err := sleep(ctx, 2*beat); err != nil {
		return PresenceCost{}, err
	}
	before := r.snapIf(ctx)
	beats0, checks0, counts0 := beatsSent.RoundTrips(), checksSent.RoundTrips(), countsSent.RoundTrips()
	start := time.Now()
	if err := sleep(ctx, r.cfg.PresenceWindow); err != nil {
		return PresenceCost{}, err
	}
	work := r.snapIf(ctx).since(before)
	window := time.Since(start)
	beats := beatsSent.RoundTrips() - beats0
	if beats == 0 {
		return PresenceCost{}, fmt.Errorf("no beat sent in %s", window)
	}
	n := float64(beats)
	sc, in := work.scriptCalls(), work.innerCalls()
	pc := PresenceCost{Servers: len(servers), BeatMS: ms(beat), WindowS: round3(window.Seconds()), Beats: beats,
		FullChecks: checksSent.RoundTrips() - checks0, CountWrites: countsSent.RoundTrips() - counts0,
		SessionsChangeEvery: sessionsChangeEvery, CmdsPerBeat: round3(float64(in.Calls) / n),
		RoundTripsPerBeat: round3(float64(sc.Calls) / n), ScriptUSPerBeat: round3(float64(sc.Usec) / n),
		RedisCPUUSPerBeat: round3(work.cpuUS / n)}
	beatsPerSec := float64(len(servers)) / presencecore.DefaultBeat.Seconds()
	pc.RedisCPUPctAtDefaultBeat = round3(pc.RedisCPUUSPerBeat * beatsPerSec / 1e6 * 100)
	return pc, nil
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
