//go:build linux

package faulttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/testsupport"
)

// TestRedisRestartTakesNoLiveLock: Redis (AOF, appendfsync always) is
// restarted under two live holders A and B while a third server C keeps
// trying to join all their keys with no bus, so that only a presence proof
// could move a lock: by kill -9, by a graceful SHUTDOWN, and by deleting the
// presence hash. No key may change holder while its holder lives, and every
// acknowledged save must be in the restarted Redis (read from a copy of its
// data before any client could write again).
func TestRedisRestartTakesNoLiveLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, c *cluster) (*testsupport.Redis, time.Time)
	}{
		{"kill-9", func(t *testing.T, c *cluster) (*testsupport.Redis, time.Time) {
			c.redis.Stop(t)
			snap := c.redis.StartCopy(t)
			restart := time.Now()
			c.redis.Start(t)
			return snap, restart
		}},
		{"shutdown", func(t *testing.T, c *cluster) (*testsupport.Redis, time.Time) {
			c.redis.Shutdown(t)
			snap := c.redis.StartCopy(t)
			restart := time.Now()
			c.redis.Start(t)
			return snap, restart
		}},
		{"presence-deleted", func(t *testing.T, c *cluster) (*testsupport.Redis, time.Time) {
			if err := c.rdb.Del(context.Background(), presencecore.KeyFor(c.ns)).Err(); err != nil {
				t.Fatal(err)
			}
			return nil, time.Now()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRedisRestart(t, tc.name, tc.fault)
		})
	}
}

func testRedisRestart(t *testing.T, name string, fault func(*testing.T, *cluster) (*testsupport.Redis, time.Time)) {
	const perServer = 50
	// Fence after 3.5 s without a beat: a restart takes well under that, so
	// no holder ends a session and any change of holder is a live lock taken.
	tm := timings{beat: 500 * time.Millisecond, ttl: 4 * time.Second}
	rep := newReport(t, "Redis "+name+" under live holders, a third server contending for every key (AOF always, "+tm.String()+")",
		"a live holder keeps its locks across a Redis restart (restart detection); no acknowledged save is lost")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedisAOF(t))
	holders := []gsOpts{
		{job: "a", first: 0, count: perServer, update: 50 * time.Millisecond, save: 300 * time.Millisecond, tm: tm},
		{job: "b", first: perServer, count: perServer, update: 50 * time.Millisecond, save: 300 * time.Millisecond, tm: tm},
	}
	a, b := c.start(holders[0]), c.start(holders[1])
	c.mustWait(30*time.Second, "A and B join and save every key", func() bool {
		return a.keys(EvSaved) == perServer && b.keys(EvSaved) == perServer
	})
	ctm := tm
	ctm.lockWait = time.Second
	all := keyRange(0, 2*perServer)
	cc := c.start(gsOpts{job: "c", count: 2 * perServer, concurrency: 2 * perServer, rejoin: 50 * time.Millisecond, tm: ctm})
	c.mustWait(30*time.Second, "C refused on every key once", func() bool { return cc.keys(EvJoinFailed) == 2*perServer })

	faulted := time.Now()
	snap, restarted := fault(t, c)
	up := time.Now()
	// Until a stopped read can be proof again (one TTL of the new run, or of
	// the rewritten presence hash) and a beat more, a wrong proof could take
	// a live lock: wait until C has tried every key after that and failed.
	safe := up.Add(tm.ttl + tm.beat)
	settled := c.waitFor(60*time.Second, func() bool { return joinsFailedAfter(cc, all, safe) == len(all) || cc.count(EvJoined) > 0 })

	var lost []string
	acked := acksBefore(restarted, a, b)
	if snap != nil {
		recs := c.mustRecords(snap.Client(t), all)
		for _, k := range all {
			if r := recs[k]; r.Data.Coins < acked[k] {
				lost = append(lost, fmt.Sprintf("%s: %d coins in the AOF, %d acknowledged", k, r.Data.Coins, acked[k]))
			}
		}
	}
	recs := c.mustRecords(c.rdb, all)
	var moved []string
	for i, k := range all {
		if want := holders[i/perServer].job; recs[k].Job != want {
			moved = append(moved, fmt.Sprintf("%s: held by %q, not %s", k, recs[k].Job, want))
		}
		if recs[k].Data.Coins < acked[k] {
			lost = append(lost, fmt.Sprintf("%s: %d coins now, %d acknowledged", k, recs[k].Data.Coins, acked[k]))
		}
	}
	fenced := a.count(EvEnded) + b.count(EvEnded)
	rep.add("outage %s", ms(up.Sub(faulted)))
	rep.add("C's joins refused %d, succeeded %d", cc.count(EvJoinFailed), cc.count(EvJoined))
	rep.add("live locks taken %d", len(moved)+cc.count(EvJoined))
	rep.add("sessions ended %d", fenced)
	rep.add("acknowledged saves lost %d of %d keys", len(lost), len(acked))

	if cc.count(EvJoined) > 0 || len(moved) > 0 {
		t.Errorf("locks of live holders taken: C joined %d keys; %v", cc.count(EvJoined), moved)
	}
	if !settled {
		t.Errorf("C retried only %d of %d keys after the unsafe window", joinsFailedAfter(cc, all, safe), len(all))
	}
	if fenced > 0 {
		t.Errorf("%d sessions ended during a %s outage; the lease (%s) should have ridden it out", fenced, ms(up.Sub(faulted)), ms(tm.ttl-tm.beat))
	}
	if len(lost) > 0 {
		t.Errorf("acknowledged saves lost: %v", lost)
	}
}

// joinsFailedAfter counts keys whose last failed join began at or after t.
func joinsFailedAfter(s *server, keys []string, t time.Time) int {
	n := 0
	for _, k := range keys {
		if e, ok := s.latest(EvJoinFailed, k); ok && e.Sent >= t.UnixNano() {
			n++
		}
	}
	return n
}

// TestRedisOutage: Redis (AOF) is down for 5 s. Every server fences itself
// (every session ends) within its lease, every key is held again after
// Redis returns (the gameservers rejoin), and every join loads at least
// every save acknowledged before it.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	const perServer, outage = 100, 5 * time.Second
	tm := shortTimings()
	lease := tm.ttl - tm.beat
	rep := newReport(t, "Redis down 5 s (kill -9, restart on the same port, AOF always; "+tm.String()+")",
		"every server ends its sessions within its lease when Redis is gone; all keys are held again after; nothing acknowledged is lost")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedisAOF(t))
	nats := testsupport.StartNATSCluster(t, 1)
	var servers []*server
	for i, job := range []string{"a", "b"} {
		servers = append(servers, c.start(gsOpts{job: job, natsURL: nats.URLs[0], first: i * perServer, count: perServer,
			update: 50 * time.Millisecond, save: 300 * time.Millisecond, rejoin: 200 * time.Millisecond, tm: tm}))
	}
	a, b := servers[0], servers[1]
	c.mustWait(30*time.Second, "A and B join and save every key", func() bool {
		return a.keys(EvSaved) == perServer && b.keys(EvSaved) == perServer
	})

	down := time.Now()
	c.redis.Stop(t)
	fencedInTime := c.waitFor(outage, func() bool {
		return a.keysSince(EvEnded, down) == perServer && b.keysSince(EvEnded, down) == perServer
	})
	<-time.After(time.Until(down.Add(outage))) // the fault itself: Redis stays down 5 s
	c.redis.Start(t)
	up := time.Now()
	rejoined := c.waitFor(30*time.Second, func() bool {
		return a.keysSince(EvJoined, up) == perServer && b.keysSince(EvJoined, up) == perServer
	})

	var fence, back dist
	notFenced := 0
	for i, s := range servers {
		for _, k := range keyRange(i*perServer, perServer) {
			if e, ok := s.latestSince(EvEnded, k, down); ok && e.T < up.UnixNano() {
				fence = append(fence, since(down, e.T))
			} else {
				notFenced++
			}
			if j, ok := s.latestSince(EvJoined, k, up); ok {
				back = append(back, since(up, landing(j)))
			}
		}
	}
	ac := checkAcks(a, b)
	rep.add("sessions ended after Redis died %v (lease %s); %d not ended", fence, ms(lease), notFenced)
	rep.add("keys held again after Redis returned %v (%d of %d)", back, len(back), 2*perServer)
	rep.add("acknowledged saves lost %d of %d joins checked", len(ac.lost), ac.joins)

	if !fencedInTime || notFenced > 0 {
		t.Errorf("%d sessions did not end while Redis was down", notFenced)
	}
	// The last acknowledged beat was sent before Redis died, so every session
	// must end within the lease of the kill; FenceMargin (a beat) of slack
	// for scheduling still ends it before its presence can expire.
	if m := fence.max(); m > tm.ttl {
		t.Errorf("a session ended %s after Redis died: later than the lease %s + one beat, when its presence could expire", ms(m), ms(lease))
	}
	if !rejoined {
		t.Errorf("only %d of %d keys held again within 30 s of Redis returning", len(back), 2*perServer)
	}
	if len(ac.lost) > 0 || ac.joins < 2*perServer {
		t.Errorf("acknowledged saves: %d joins checked (want at least %d), lost %v", ac.joins, 2*perServer, ac.lost)
	}
}
