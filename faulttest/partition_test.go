//go:build linux

package faulttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// TestPartitionFencesFirst: server A reaches Redis through a proxy that
// then blackholes it (sockets open, nothing forwarded: A's calls hang) or
// refuses it (every connection reset), with go-redis's default options and
// with short timeouts. Server B, straight on Redis and with no bus (so only
// the presence proof can move a lock), joins A's profiles. Every session of
// A must end before any acquire of B on its keys lands, and A must accept no
// Update after that: A's lease lapses on its own timer, whatever its Redis
// calls are doing.
func TestPartitionFencesFirst(t *testing.T) {
	t.Parallel()
	const short = 250 * time.Millisecond
	for _, tc := range []struct {
		name         string
		refuse       bool
		redisTimeout time.Duration // 0: go-redis defaults (5 s read timeout, 3 retries)
		tm           timings
		takeWithin   time.Duration
	}{
		{"blackhole/go-redis-defaults", false, 0, shortTimings(), 20 * time.Second},
		{"blackhole/short-timeouts", false, short, shortTimings(), 20 * time.Second},
		{"refused/go-redis-defaults", true, 0, shortTimings(), 20 * time.Second},
		{"refused/short-timeouts", true, short, shortTimings(), 20 * time.Second},
		{"blackhole/go-redis-defaults/library-timings", false, 0, timings{}, 60 * time.Second},
		{"refused/go-redis-defaults/library-timings", true, 0, timings{}, 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testPartition(t, tc.name, tc.refuse, tc.redisTimeout, tc.tm, tc.takeWithin)
		})
	}
}

func testPartition(t *testing.T, name string, refuse bool, redisTimeout time.Duration, tm timings, takeWithin time.Duration) {
	const keys = 50
	rep := newReport(t, fmt.Sprintf("A cut from Redis (%s; %s), B joins its profiles with no bus", name, tm),
		"every session of A ends, and A accepts its last Update, before any acquire of B on its keys lands")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedis(t))
	px := testsupport.StartProxy(t, c.redis.Addr)
	o := gsOpts{job: "a", redisAddr: px.Addr, count: keys, update: 20 * time.Millisecond, save: 500 * time.Millisecond,
		redisTimeout: redisTimeout, tm: tm, logUpdates: true}
	a := c.start(o)
	c.mustWait(30*time.Second, "A joins and saves every key", func() bool { return a.keys(EvSaved) == keys })

	btm := tm
	btm.lockWait = 2 * takeWithin
	b := c.start(gsOpts{job: "b", count: keys, update: 100 * time.Millisecond, save: 500 * time.Millisecond, tm: btm})
	c.mustWait(10*time.Second, "B waiting on every key", func() bool { return b.count(EvJoinStart) == keys })

	cut := time.Now()
	if refuse {
		px.Refuse()
	} else {
		px.Blackhole()
	}
	taken := c.waitFor(takeWithin, func() bool { return b.keys(EvJoined) == keys })
	// A must have ended its sessions long before; if it has not, give it 10 s
	// more, to report when it did.
	c.waitFor(10*time.Second, func() bool { return a.keys(EvEnded) == keys })
	a.kill() // every event A printed is read

	var fence, take, gap dist
	var late []string
	updatesAfter, notEnded := 0, 0
	updates := make(map[string][]int64) // key → when each accepted Update returned
	for _, u := range a.events(EvUpdate) {
		updates[u.Key] = append(updates[u.Key], u.T)
	}
	for _, k := range o.keys() {
		j, joined := b.latest(EvJoined, k)
		e, ended := a.latest(EvEnded, k)
		if ended {
			fence = append(fence, since(cut, e.T))
		} else {
			notEnded++
		}
		if !joined {
			continue
		}
		land := landing(j)
		take = append(take, since(cut, land))
		switch {
		case !ended:
			late = append(late, k+": B's acquire landed, A's session never ended")
		case e.T >= land:
			late = append(late, fmt.Sprintf("%s: A's session ended %s after B's acquire landed", k, ms(time.Duration(e.T-land))))
		default:
			gap = append(gap, time.Duration(land-e.T))
		}
		var lastAfter int64
		for _, u := range updates[k] {
			if u >= land {
				updatesAfter++
				lastAfter = max(lastAfter, u)
			}
		}
		if lastAfter > 0 {
			late = append(late, fmt.Sprintf("%s: A's last Update returned %s after B's acquire landed", k, ms(time.Duration(lastAfter-land))))
		}
	}
	ac := checkAcks(a, b)
	rep.add("A's sessions ended after the cut %v (%d never)", fence, notEnded)
	rep.add("B's acquires landed after the cut %v (%d of %d)", take, len(take), keys)
	if len(gap) == len(take) && len(gap) > 0 {
		rep.add("margin (B's acquire − A's session end) min %s", ms(gap.min()))
	} else {
		rep.add("margin: %d of %d acquires landed before A's session ended", len(take)-len(gap), len(take))
	}
	rep.add("A's Updates accepted after B's acquire %d", updatesAfter)
	rep.add("acknowledged saves lost %d", len(ac.lost))

	if !taken {
		t.Errorf("B took over %d of %d keys within %v of the cut", b.keys(EvJoined), keys, takeWithin)
	}
	if len(late) > 0 {
		t.Errorf("%d ordering violations (A must end before B acquires); first: %v", len(late), late[:min(len(late), 5)])
	}
	if updatesAfter > 0 {
		t.Errorf("A accepted %d Updates after B's acquire of the key landed", updatesAfter)
	}
	if notEnded > 0 {
		t.Errorf("%d sessions of A never ended (waited 10 s after B's takeover)", notEnded)
	}
	if len(ac.lost) > 0 {
		t.Errorf("acknowledged saves lost: %v", ac.lost)
	}
}
