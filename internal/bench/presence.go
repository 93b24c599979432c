package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/rediscount"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/presence"
	"github.com/redis/go-redis/v9"
)

// PresenceCost is what presence costs Redis: PresenceServers real
// presence.Presence instances (each its beat loop, as a Node runs it) beat
// one hash for a window, every PresenceBeat; the figures are per beat of one
// server, over the window (fast-path beats and the full check every
// presence.CheckEvery beats in their real proportion).
type PresenceCost struct {
	Servers int     `json:"servers"`
	BeatMS  float64 `json:"beat_ms"`
	WindowS float64 `json:"window_s"`
	// Beats is how many beats were sent in the window, FullChecks how many
	// of them were full checks.
	Beats      int64 `json:"beats"`
	FullChecks int64 `json:"full_checks"`
	// CountWrites is how many beats carried the server's session count
	// (presence.Config.Sessions: a changed count, or a full check); each
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
	// take at the default beat (presence.DefaultBeat).
	RedisCPUPctAtDefaultBeat float64 `json:"redis_cpu_pct_at_default_beat"`
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

// runPresence fills Result.Presence.
func (r *runner) runPresence(ctx context.Context) error {
	ns := r.ns("presence")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	rdb := r.client(presencePool)
	defer func() { _ = rdb.Close() }()
	beatsSent, checksSent, countsSent := beatCounters()
	rdb.AddHook(beatsSent)
	rdb.AddHook(checksSent)
	rdb.AddHook(countsSent)

	beat := r.cfg.PresenceBeat
	if r.env.EmbeddedRedis {
		// An embedded Redis cannot answer hundreds of beats a second in
		// time; the figures per beat do not depend on the period.
		beat = max(beat, embeddedPresenceBeat)
	}
	servers := make([]*presence.Presence, r.cfg.PresenceServers)
	for i := range servers {
		p, err := presence.New(rdb, presence.Config{Key: presence.KeyFor(ns), JobID: fmt.Sprintf("bench-s%03d", i),
			Beat: beat, TTL: beat * 10 / 3, Logger: r.log, Sessions: benchSessions(i)})
		if err != nil {
			return err
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
			return fmt.Errorf("claim: %w", err)
		}
	}
	for _, p := range servers {
		p.Start()
	}
	// Past the first beat of each loop, then measure.
	if err := sleep(ctx, 2*beat); err != nil {
		return err
	}
	before := r.snapIf(ctx)
	beats0, checks0, counts0 := beatsSent.RoundTrips(), checksSent.RoundTrips(), countsSent.RoundTrips()
	start := time.Now()
	if err := sleep(ctx, r.cfg.PresenceWindow); err != nil {
		return err
	}
	work := r.snapIf(ctx).since(before)
	window := time.Since(start)
	beats, checks := beatsSent.RoundTrips()-beats0, checksSent.RoundTrips()-checks0
	counts := countsSent.RoundTrips() - counts0
	if beats == 0 {
		return fmt.Errorf("no beat sent in %s", window)
	}
	n := float64(beats)
	sc, in := work.scriptCalls(), work.innerCalls()
	pc := PresenceCost{Servers: len(servers), BeatMS: ms(beat), WindowS: round3(window.Seconds()), Beats: beats,
		FullChecks: checks, CountWrites: counts, SessionsChangeEvery: sessionsChangeEvery, CmdsPerBeat: round3(float64(in.Calls) / n), RoundTripsPerBeat: round3(float64(sc.Calls) / n),
		ScriptUSPerBeat: round3(float64(sc.Usec) / n), RedisCPUUSPerBeat: round3(work.cpuUS / n)}
	beatsPerSec := float64(len(servers)) / presence.DefaultBeat.Seconds()
	pc.RedisCPUPctAtDefaultBeat = round3(pc.RedisCPUUSPerBeat * beatsPerSec / 1e6 * 100)
	r.res.Presence = pc
	r.progress("  %d servers, %d beats (%d full checks): %.2f commands, %.2f round trips, %.1f µs script, %.1f µs Redis CPU per beat",
		pc.Servers, pc.Beats, pc.FullChecks, pc.CmdsPerBeat, pc.RoundTripsPerBeat, pc.ScriptUSPerBeat, pc.RedisCPUUSPerBeat)
	return nil
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
