//go:build linux

package faulttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// TestMoveKill9Source: server A plays 40 profiles and moves them all to B
// (Profile.MoveTo, the "move b" command), and is killed with -9 while the
// moves run. B then joins every key: a key whose move A reported lands on
// B with exactly the value the move carried (held by B, no acquire), and
// every other key (its move not flipped, or flipped without A knowing) is
// taken over from the dead A with at least A's last acknowledged save.
func TestMoveKill9Source(t *testing.T) {
	t.Parallel()
	const keys = 40
	tm := shortTimings()
	rep := newReport(t, "kill -9 of a server moving 40 profiles to another, mid-move ("+tm.String()+")",
		"a reported move is the target's with the value it carried; any other key is taken over with its last acknowledged save")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedis(t))
	nats := testsupport.StartNATSCluster(t, 1)
	a := c.start(gsOpts{job: "a", natsURL: nats.URLs[0], count: keys, update: 20 * time.Millisecond,
		save: 200 * time.Millisecond, tm: tm})
	c.mustWait(30*time.Second, "A joins and saves every key", func() bool { return a.keys(EvSaved) == keys })
	btm := tm
	btm.lockWait = 30 * time.Second
	b := c.start(gsOpts{job: "b", natsURL: nats.URLs[0], count: keys, update: 20 * time.Millisecond,
		save: 200 * time.Millisecond, tm: btm, waitStart: true})
	c.mustWait(10*time.Second, "B ready", func() bool { return b.count(EvReady) == 1 })

	a.send("move b")
	c.mustWait(20*time.Second, "A reports a few moves", func() bool { return a.count(EvMoved) >= 3 })
	a.kill()
	b.send("start")
	c.mustWait(30*time.Second, "B joins every key", func() bool { return b.keys(EvJoined) == keys })

	moved := map[string]int{}
	for _, e := range a.events(EvMoved) {
		moved[e.Key] = e.Coins
	}
	var wrong []string
	var movedJoins dist
	for _, k := range keyRange(0, keys) {
		j, _ := b.latest(EvJoined, k)
		if c, ok := moved[k]; ok {
			if j.Coins != c {
				wrong = append(wrong, fmt.Sprintf("%s: moved with %d coins, B loaded %d", k, c, j.Coins))
			}
			movedJoins = append(movedJoins, time.Duration(j.JoinNS))
		}
	}
	ac := checkAcks(a, b)
	rep.add("%d of %d moves reported before the kill", len(moved), keys)
	// A commit still in A's publish queue dies with it: B then learns the
	// flip from the record once the move's window has passed.
	rep.add("B's joins of the moved keys %v", movedJoins)
	rep.add("acknowledged saves lost %d of %d keys checked", len(ac.lost), ac.joins)
	if len(wrong) > 0 {
		t.Errorf("moved values not what B loaded: %v", wrong)
	}
	if ac.joins != keys || len(ac.lost) > 0 {
		t.Errorf("acknowledged saves: %d joins checked, want %d; lost: %v", ac.joins, keys, ac.lost)
	}
}
