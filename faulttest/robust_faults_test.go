//go:build linux

package faulttest

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// The faults of the robustness suite, one per run, each applied to server
// "a" (or to Redis) after the warm-up.
const (
	faultKill          = "kill-9"             // kill -9 of a, restarted (same JobID) after the hold
	faultPause         = "sigstop"            // SIGSTOP of a past its presence TTL, then SIGCONT
	faultCutRedis      = "partition-redis"    // a cut from Redis both ways, NATS untouched
	faultCutNATS       = "partition-nats"     // a cut from NATS both ways, Redis untouched
	faultDropToRedis   = "oneway-to-redis"    // a's packets to Redis dropped, Redis's reach it
	faultDropFromRedis = "oneway-from-redis"  // Redis's packets to a dropped, a's reach Redis
	faultRedisRestart  = "redis-restart-aof"  // Redis killed -9 and restarted from its AOF (fsync always)
	faultClockForward  = "clock-step-forward" // Redis's wall clock steps +300 s (past LockTTL + LockSkew)
	faultClockBack     = "clock-step-back"    // Redis's wall clock steps -30 s
	faultPromotion     = "sentinel-promotion" // kill -9 of the primary, Sentinel promotes a replica; MinReplicas 1
	faultLostCommit    = "lost-commit"        // a's moves: every commit to the target dropped, every second flip's answer lost to a
)

// allFaults is every fault, in the order the suite and the report list them.
var allFaults = []string{faultKill, faultPause, faultCutRedis, faultCutNATS, faultDropToRedis, faultDropFromRedis,
	faultRedisRestart, faultClockForward, faultClockBack, faultPromotion, faultLostCommit}

// cuts are the network faults: which service, which direction.
var cuts = map[string]struct {
	service string
	dir     testsupport.Direction
}{
	faultCutRedis:      {toRedis, testsupport.BothWays},
	faultCutNATS:       {toNATS, testsupport.BothWays},
	faultDropToRedis:   {toRedis, testsupport.Outbound},
	faultDropFromRedis: {toRedis, testsupport.Inbound},
}

// faultInfra builds what the fault of p needs.
func faultInfra(t *testing.T, p plan) *infra {
	switch p.fault {
	case faultCutRedis, faultCutNATS, faultDropToRedis, faultDropFromRedis:
		return partitionInfra(t, robustJobs)
	case faultRedisRestart:
		r := testsupport.StartOwnRedisAOF(t)
		in := loopbackInfra(t, r.Addr)
		in.aof = r
		return in
	case faultClockForward, faultClockBack:
		r := testsupport.StartRedisSteppable(t)
		in := loopbackInfra(t, r.Addr)
		in.steppable = r
		return in
	case faultPromotion:
		s := testsupport.StartSentinel(t, testsupport.SentinelConfig{Replicas: 2})
		in := loopbackInfra(t, "")
		in.sentinel, in.sentinels, in.master, in.minReplicas = s, strings.Join(s.Addrs, ","), s.MasterName, 1
		in.operatorRedis = "redis://" + s.Addrs[0] + "?master_name=" + s.MasterName
		for _, a := range s.Addrs[1:] {
			in.operatorRedis += "&addr=" + a
		}
		return in
	case faultKill, faultPause, faultLostCommit:
		return loopbackInfra(t, testsupport.StartOwnRedis(t).Addr)
	}
	t.Fatalf("unknown fault %q", p.fault)
	return nil
}

// applyFault injects the run's fault and returns once it is over (healed,
// resumed, restarted).
func applyFault(r *robustRun) {
	t, a := r.t, r.servers["a"]
	switch f := r.p.fault; f {
	case faultKill:
		a.kill()
		time.Sleep(r.p.hold)
		r.servers["a"] = r.start("a", 2)
	case faultPause:
		a.signal(t, syscall.SIGSTOP)
		time.Sleep(r.p.hold)
		a.signal(t, syscall.SIGCONT)
	case faultCutRedis, faultCutNATS, faultDropToRedis, faultDropFromRedis:
		c := cuts[f]
		r.in.cut(t, "a", c.service, c.dir)
		time.Sleep(r.p.hold)
		r.in.heal(t, "a", c.service, c.dir)
	case faultRedisRestart:
		r.in.aof.Stop(t)
		time.Sleep(r.p.hold)
		r.in.aof.Start(t)
	case faultClockForward:
		r.in.steppable.Step(300 * time.Second)
	case faultClockBack:
		r.in.steppable.Step(-30 * time.Second)
	case faultPromotion:
		promoted := r.in.sentinel.KillPrimary(t)
		t.Logf("robustness: Sentinel promoted %s", promoted.Addr)
	case faultLostCommit:
		loseCommits(r, a)
	}
}

// loseCommits turns a's lost-commit fault on (SIGUSR2: the gameserver's
// -lost-commit-fault) for the hold, longer if needed until a's log shows a
// commit dropped (at most 30 s: a's workers move a session every few
// hundred ms), then off. The flips whose commit or answer was lost are in
// the history like every move: the model checks that the target owns the
// key after the flip and the source plays it no more.
func loseCommits(r *robustRun, a *trafficServer) {
	t := r.t
	count := func(what string) int {
		b, _ := os.ReadFile(a.log)
		return strings.Count(string(b), what)
	}
	a.signal(t, syscall.SIGUSR2)
	start := time.Now()
	for time.Since(start) < r.p.hold || count("fault: move commit dropped") == 0 {
		if time.Since(start) > 30*time.Second {
			t.Errorf("lost-commit: no move of a flipped while its commits were dropped (30 s)")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.signal(t, syscall.SIGUSR2)
	t.Logf("robustness: lost-commit: %d commits dropped, %d flip answers lost", count("fault: move commit dropped"),
		count("fault: a flip's answer lost"))
}
