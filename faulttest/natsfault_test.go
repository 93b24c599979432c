//go:build linux

package faulttest

import (
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// TestNATSRestartMidHandoff: server B joins 200 profiles that a live server
// A holds and hands over on request (each leave takes 1 s), and
// nats-server is killed (-9) while handoffs are under way, then restarted
// once A has finished them (their replies went into the dead server). A
// stays alive, so only a request and a release can move a lock: every
// waiting join must still complete, within LockWait (the library's 15 s),
// with nothing acknowledged lost.
func TestNATSRestartMidHandoff(t *testing.T) {
	t.Parallel()
	const keys = 200
	tm := shortTimings()
	rep := newReport(t, "nats-server killed (-9) and restarted mid-handoff: 200 joins waiting on a live holder that hands over ("+tm.String()+")",
		"every waiting join completes after the bus returns (reconnect, request repeats, reply-less retries); nothing acknowledged is lost")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedis(t))
	nats := testsupport.StartNATSCluster(t, 1)
	a := c.start(gsOpts{job: "a", natsURL: nats.URLs[0], count: keys, update: 50 * time.Millisecond, save: 300 * time.Millisecond,
		releaseDelay: time.Second, tm: tm})
	c.mustWait(30*time.Second, "A joins and saves every key", func() bool { return a.keys(EvSaved) == keys })

	b := c.start(gsOpts{job: "b", natsURL: nats.URLs[0], count: keys, concurrency: 64, update: 50 * time.Millisecond,
		save: 300 * time.Millisecond, tm: tm})
	c.mustWait(10*time.Second, "A begins a handoff", func() bool { return a.count(EvOnRelease) > 0 })
	killed := time.Now()
	nats.Kill(t, 0)
	// Keep the bus down until A has finished every handoff it had begun:
	// their replies are published while no server runs.
	releasing := a.count(EvOnRelease)
	c.mustWait(10*time.Second, "A finishes the handoffs it began", func() bool { return a.count(EvEnded) >= releasing })
	restarted := time.Now()
	nats.Restart(t, 0)
	done := c.waitFor(30*time.Second, func() bool { return b.keys(EvJoined) == keys || b.count(EvJoinFailed) > 0 })

	var after, took dist
	for _, j := range b.events(EvJoined) {
		took = append(took, time.Duration(j.JoinNS))
		if j.T >= restarted.UnixNano() {
			after = append(after, since(restarted, j.T))
		}
	}
	// What was under way when the server died, by the events' own stamps.
	before := func(s *server, kind string) int {
		n := 0
		for _, e := range s.events(kind) {
			if e.T < killed.UnixNano() {
				n++
			}
		}
		return n
	}
	inFlight := before(a, EvOnRelease) - before(a, EvEnded)
	waiting := before(b, EvJoinStart) - before(b, EvJoined)
	ac := checkAcks(a, b)
	rep.add("handoffs under way at the kill %d, B's joins waiting %d", inFlight, waiting)
	rep.add("bus down %s", ms(restarted.Sub(killed)))
	rep.add("joins completed %d of %d, failed %d", b.keys(EvJoined), keys, b.count(EvJoinFailed))
	rep.add("joins completed after the restart %d, by %s", len(after), ms(after.max()))
	rep.add("join duration %v", took)
	rep.add("acknowledged saves lost %d of %d joins checked", len(ac.lost), ac.joins)

	if inFlight < 1 {
		t.Errorf("no handoff was under way when nats-server died (A began %d before it)", before(a, EvOnRelease))
	}
	if !done || b.keys(EvJoined) != keys || b.count(EvJoinFailed) > 0 {
		var first []Event
		if f := b.events(EvJoinFailed); len(f) > 0 {
			first = f[:1]
		}
		t.Errorf("%d of %d waiting joins completed; %d failed %v", b.keys(EvJoined), keys, b.count(EvJoinFailed), first)
	}
	if len(ac.lost) > 0 || ac.joins != keys {
		t.Errorf("acknowledged saves: %d joins checked, want %d; lost %v", ac.joins, keys, ac.lost)
	}
}
