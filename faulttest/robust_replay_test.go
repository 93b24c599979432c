//go:build linux

package faulttest

import (
	"fmt"
	"testing"
	"time"
)

// Replays of what the robustness suite found, as etcd keeps
// test-robustness-issueNNNN: each names the fault schedule and the seed of
// the run that found it, and asserts what that run broke; each runs in CI:
//
//	go test ./faulttest/ -run TestRobustnessReplay -v

// replayPlan is the CI-sized schedule the findings came from.
func replayPlan(fault string, seed int64) plan {
	return plan{fault: fault, seed: seed, warmup: 4 * time.Second, hold: 3 * time.Second,
		recover: 5 * time.Second, limit: time.Minute}
}

// TestRobustnessReplayAdoptFenced: found under partition-redis (seed 1,
// two keys), oneway-to-redis and sentinel-promotion (seeds 1 and 3). A
// server whose Redis calls fail releases a profile (the release fails: the
// profile is retained), a worker of the same server joins the key again and
// the rejoin adopts it; its adoption save fails too, and while it is in
// flight the server's presence lease lapses and the fence ends the
// profile ("session fenced off"). adopt() then reports the adoption good
// ("rejoin adopted the retained profile but its save failed; autosave
// keeps retrying": setState leaves a closed profile closed, and adopt
// returns true regardless), so Join returns nil error and a Profile whose
// Done is already closed with ErrFenced, holding data no write landed.
// The history stays linearizable (it is the same session going on), but
// Join's word is broken: the fix is for adopt to load the record normally
// (or fail) when the profile closed during its save. This replay runs the
// partition-redis schedule three times and asserts no Join adopted an
// ended profile.
func TestRobustnessReplayAdoptFenced(t *testing.T) {
	t.Parallel()
	for _, seed := range []int64{1, 2, 3} {
		res := runRobustness(t, replayPlan(faultCutRedis, seed))
		for _, e := range res.endedAdoptions {
			t.Errorf("seed %d: Join adopted a profile that had ended: %s", seed, e)
		}
	}
}

// TestRobustnessReplayUpdateErrorSaved: found by the long runs under
// partition-nats (seeds 3 and 6) and oneway-from-redis (seed 6), though
// the fault plays no part: an Update runs its function while another
// server's join asks for the key; the handoff ends the session between
// Update's two liveness checks, so Update returns ErrReleased, yet the
// change its function made stays in the data, the release (after
// OnRelease, which sees it) saves it, and the next server loads it. In the
// partition-nats seed-6 history: update c-17606-3193 on r:0 made 686 from
// 685 and returned "profile released"; librelease c-17606-3194 wrote 686;
// a's acquire a-17571-2879 loaded it. Porcupine finds the key illegal: no
// order explains a load of a value no successful operation made. This
// replay runs those schedules and asserts no failed Update's change is
// loaded or saved, and the histories check.
func TestRobustnessReplayUpdateErrorSaved(t *testing.T) {
	t.Parallel()
	long := func(fault string, seed int64) plan {
		return plan{fault: fault, seed: seed, warmup: 8 * time.Second, hold: 5 * time.Second,
			recover: 20 * time.Second, limit: 5 * time.Minute}
	}
	for _, p := range []plan{long(faultCutNATS, 3), long(faultCutNATS, 6), long(faultDropFromRedis, 6)} {
		t.Run(fmt.Sprintf("%s/seed-%d", p.fault, p.seed), func(t *testing.T) {
			t.Parallel()
			for _, e := range runRobustness(t, p).failedUpdatesKept {
				t.Error(e)
			}
		})
	}
}

// TestRobustnessReplayPromotionLostAcquire: found under sentinel-promotion
// (seed 1 of a CI-sized run, once in about twenty runs of the fault). With
// MinReplicas 1, releases and saves wait for a replica, acquisitions do
// not (issue 20). Server a's join of r:0 (epoch 137, loading 121 that b
// had released) was acknowledged by the primary just before it was killed
// and never reached the promoted replica, which still held the key as c
// had released it (118, released under c's token: c's release had landed
// but its answer was lost, so c kept the profile retained). On the new
// primary c's rejoin adopted that retained profile (its save found the
// record free and last released under one of its own earlier tokens), and
// b's join loaded 118, while a, never told, kept accepting Updates of its
// session (122 to 132): one profile live on two servers. Porcupine finds
// r:0 illegal: no order lets c own the key again after a's acquire. This
// replay runs the promotion schedule for seeds 1 to 3 and asserts every
// history checks. Since MinReplicas covers acquisitions (an unreplicated
// lock is given back and the join fails closed) it passes, so it runs by
// default.
func TestRobustnessReplayPromotionLostAcquire(t *testing.T) {
	t.Parallel()
	for seed := int64(1); seed <= 3; seed++ {
		runRobustness(t, replayPlan(faultPromotion, seed))
	}
}

// TestRobustnessReplayReleaseLostAnswer: found by a long run under
// redis-restart-aof (seed 8, after merging main at c7ab495). Redis is slow
// while it restarts from its AOF: b's release of r:2 (81/b-11684-399)
// lands but its answer misses the 300 ms read timeout; a's join acquires
// the freed lock and loads 81; go-redis retries the release, which now
// finds a's lock and is refused, so Release returns ErrLockLost ("profile
// lock lost (the lock is held by a)") for a release that landed. save.lua
// recognises its own landed release only while the record is still free
// (released == token and released.ver == ver); once another server has
// acquired, the retry is answered lost. Porcupine finds the key illegal
// because a refused write is held to having written nothing. This replay
// runs that schedule (seeds 8 to 10) and asserts the histories check.
func TestRobustnessReplayReleaseLostAnswer(t *testing.T) {
	t.Parallel()
	for seed := int64(8); seed <= 10; seed++ {
		runRobustness(t, plan{fault: faultRedisRestart, seed: seed, warmup: 8 * time.Second, hold: 5 * time.Second,
			recover: 20 * time.Second, limit: 5 * time.Minute})
	}
}
