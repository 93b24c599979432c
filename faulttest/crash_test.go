//go:build linux

package faulttest

import (
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// TestCrashTakeover: server A holds 1,000 profiles and is killed with -9
// while server B joins all of them, 64 at a time. A crash is proven once
// (two stopped presence reads a beat apart) and every waiting join uses the
// proof, so every key must be taken over within TTL + beat + 1 s of the
// kill, and B must load at least A's last acknowledged save of every key.
func TestCrashTakeover(t *testing.T) {
	// Not parallel: it runs alone, before the parallel scenarios, so its
	// bound measures the library, not the neighbours' CPU.
	const keys = 1000
	tm := shortTimings()
	bound := tm.ttl + tm.beat + time.Second
	rep := newReport(t, "kill -9 of a server holding 1,000 profiles while another joins them 64 at a time ("+tm.String()+")",
		"a crashed server's locks move within TTL + beat (+1 s), proven once for all its keys; the next owner loads every acknowledged save")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedis(t))
	a := c.start(gsOpts{job: "a", count: keys, update: 200 * time.Millisecond, save: 2 * time.Second, tm: tm})
	c.mustWait(60*time.Second, "A joins every key and saves each once", func() bool {
		return a.keys(EvJoined) == keys && a.keys(EvSaved) == keys
	})

	btm := tm
	btm.lockWait = time.Minute // the figure is the takeover time, not a timeout
	b := c.start(gsOpts{job: "b", count: keys, concurrency: 64, update: 200 * time.Millisecond, save: 2 * time.Second, tm: btm})
	c.mustWait(10*time.Second, "B waiting on 64 of A's keys", func() bool { return b.count(EvJoinStart) >= 64 })

	killed := time.Now()
	a.kill()
	expiry := c.presenceExpiry("a") // A's last beat + TTL, Redis clock
	floor := time.Duration(0)
	if expiry > 0 {
		floor = since(killed, expiry*int64(time.Millisecond)) + tm.beat
	}

	done := c.waitFor(bound+30*time.Second, func() bool { return b.keys(EvJoined) == keys })
	var takeover dist
	for _, k := range keyRange(0, keys) {
		if j, ok := b.latest(EvJoined, k); ok {
			takeover = append(takeover, since(killed, landing(j)))
		}
	}
	ac := checkAcks(a, b)
	rep.add("%d/%d keys taken over", len(takeover), keys)
	rep.add("takeover after the kill %v", takeover)
	rep.add("floor (A's presence expiry + one beat) %s, bound %s", ms(floor), ms(bound))
	rep.add("acknowledged saves lost %d of %d keys checked", len(ac.lost), ac.joins)

	if !done {
		t.Errorf("B took over %d of %d keys within %v of the kill", len(takeover), keys, bound+30*time.Second)
	}
	if m := takeover.max(); m > bound {
		late := 0
		for _, d := range takeover {
			if d > bound {
				late++
			}
		}
		t.Errorf("%d keys taken over later than TTL + beat + 1 s = %s after the kill (max %s); a crash must be proven once for every waiting join",
			late, ms(bound), ms(m))
	}
	if ac.joins != keys || len(ac.lost) > 0 {
		t.Errorf("acknowledged saves: %d joins checked, want %d; lost: %v", ac.joins, keys, ac.lost)
	}
}
