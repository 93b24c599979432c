//go:build linux

package faulttest

import (
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// TestPausedHolder: server A is paused (SIGSTOP) past its presence TTL,
// server B takes its profiles over, then A resumes (SIGCONT). Its sessions
// must end at once: no Update accepted after the resume (every Update checks
// the lease), no save of A acknowledged after it, and from B's view the
// records never go back (no write of A lands).
func TestPausedHolder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		keys       int
		tm         timings
		save       time.Duration
		takeWithin time.Duration // B's takeover, generously
	}{
		{"short", 100, shortTimings(), 500 * time.Millisecond, 30 * time.Second},
		// The library's defaults: B can take over 10 to 13 s after A's last
		// beat, so the pause lasts about that long and no longer.
		{"defaults", 20, timings{}, time.Second, 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testPausedHolder(t, tc.keys, tc.tm, tc.save, tc.takeWithin)
		})
	}
}

func testPausedHolder(t *testing.T, keys int, tm timings, save, takeWithin time.Duration) {
	rep := newReport(t, "SIGSTOP of a holder past its TTL, takeover, SIGCONT ("+tm.String()+")",
		"a resumed server accepts no Update and lands no write: its lease lapsed while it was stopped")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedis(t))
	nats := testsupport.StartNATSCluster(t, 1)
	o := gsOpts{job: "a", natsURL: nats.URLs[0], count: keys, update: 50 * time.Millisecond, save: save, tm: tm, logUpdates: true}
	a := c.start(o)
	c.mustWait(30*time.Second, "A joins every key and saves each once", func() bool {
		return a.keys(EvJoined) == keys && a.keys(EvSaved) == keys
	})

	stopped := time.Now()
	a.pause()
	// B starts only now: while A ran, B's requests would have been answered
	// by a clean handoff.
	btm := tm
	btm.lockWait = 2 * takeWithin
	b := c.start(gsOpts{job: "b", natsURL: nats.URLs[0], count: keys, update: 50 * time.Millisecond, save: save, tm: btm})
	c.mustWait(takeWithin, "B takes over every key of the paused A", func() bool { return b.keys(EvJoined) == keys })
	watch := c.watchRecords(o.keys(), "b")

	resumed := time.Now()
	a.resume()
	// Every session loop of A must have tried an Update after the resume
	// (and been refused) before the check means anything.
	ok := c.waitFor(30*time.Second, func() bool { return a.keysSince(EvRefused, resumed) == keys })
	// Let the watch see B's next save of every key after the resume.
	c.waitFor(10*time.Second, func() bool { return b.keysSince(EvSaved, resumed) == keys })
	samples, regress := watch.result()
	a.kill() // every event A printed is read

	var updatesAfter, savesAfter, endedAfter []Event
	var endDelay dist
	for _, e := range a.events(EvUpdate) {
		if e.Sent >= resumed.UnixNano() {
			updatesAfter = append(updatesAfter, e)
		}
	}
	for _, e := range a.events(EvSaved) {
		if e.Sent >= resumed.UnixNano() {
			savesAfter = append(savesAfter, e)
		}
	}
	for _, e := range a.events(EvEnded) {
		endedAfter = append(endedAfter, e)
		endDelay = append(endDelay, since(resumed, e.T))
	}
	var take dist
	for _, j := range b.events(EvJoined) {
		take = append(take, since(stopped, landing(j)))
	}
	// A session ends once, with one reason: one Kick per key (fenced: the
	// lease lapsed during the stop), and no leave cleanup after the resume
	// (the requests that queued during the stop find sessions that may not
	// save any more: a cleanup there would change data nothing saves).
	kicks := map[string][]string{}
	for _, e := range a.events(EvKicked) {
		kicks[e.Key] = append(kicks[e.Key], e.Reason)
	}
	var twice []string
	for k, rs := range kicks {
		if len(rs) != 1 || rs[0] != "fenced" {
			twice = append(twice, k+":"+strings.Join(rs, ","))
		}
	}
	var cleanupsAfter int
	for _, e := range a.events(EvOnRelease) {
		if e.T >= resumed.UnixNano() {
			cleanupsAfter++
		}
	}
	ac := checkAcks(a, b)
	rep.add("%d profiles, paused %s", keys, ms(resumed.Sub(stopped)))
	rep.add("B's takeover after SIGSTOP %v", take)
	rep.add("A's sessions ended after SIGCONT %v (%d of %d)", endDelay, len(endedAfter), keys)
	rep.add("Updates accepted after SIGCONT %d", len(updatesAfter))
	rep.add("saves acknowledged after SIGCONT %d", len(savesAfter))
	rep.add("record regressions %d in %d samples", len(regress), samples)
	rep.add("acknowledged saves lost %d", len(ac.lost))
	rep.add("sessions kicked other than once, fenced: %d; leave cleanups after SIGCONT %d", len(twice), cleanupsAfter)

	if !ok {
		t.Errorf("only %d of %d sessions of A refused an Update after SIGCONT", a.keysSince(EvRefused, resumed), keys)
	}
	if len(updatesAfter) > 0 {
		t.Errorf("%d Updates accepted by A after SIGCONT, on %d keys; first: %+v", len(updatesAfter), distinctKeys(updatesAfter), updatesAfter[0])
	}
	if len(savesAfter) > 0 {
		t.Errorf("%d saves of A acknowledged after SIGCONT; first: %+v", len(savesAfter), savesAfter[0])
	}
	if len(regress) > 0 {
		t.Errorf("records went back from B's view: %v", regress)
	}
	if len(ac.lost) > 0 {
		t.Errorf("acknowledged saves lost: %v", ac.lost)
	}
	if len(twice) > 0 || len(kicks) != keys {
		t.Errorf("%d of %d keys kicked, and %d not exactly once for fenced: %v", len(kicks), keys, len(twice), twice)
	}
	if cleanupsAfter > 0 {
		t.Errorf("%d leave cleanups ran after SIGCONT for sessions that could save nothing", cleanupsAfter)
	}
}

// distinctKeys counts the keys of evs.
func distinctKeys(evs []Event) int {
	m := make(map[string]bool)
	for _, e := range evs {
		m[e.Key] = true
	}
	return len(m)
}
