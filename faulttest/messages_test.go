//go:build linux

package faulttest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// The message scenario's figures.
const (
	msgKeys     = 20
	msgEvery    = 30 * time.Millisecond  // the steady stream: one message to a random profile
	msgSave     = 500 * time.Millisecond // each profile's save period on the game servers
	msgBurst    = 100                    // messages in the mid-burst kill's burst (half before the kill)
	msgRetry    = 50                     // a burst that gives the holder messages to apply, not yet saved
	msgTries    = 5                      // pauses to find applied messages unsaved
	msgWarm     = 40                     // steady messages (about 1.2 s) a holder plays before its kill
	joinWithin  = 45 * time.Second       // a takeover, generously (it takes TTL + beat)
	applyWithin = 20 * time.Second       // a lost notification waits for the next save
	drainWithin = 30 * time.Second
)

// killPoint is when in the message stream a holder is killed.
type killPoint struct {
	name string
	// warm lets the holder play this many steady messages first, and see at
	// least one message it applied saved (gone from the inbox).
	warm bool
	// midBurst kills once half of a burst is sent, the rest still coming.
	midBurst bool
	// unsaved kills only once a message the holder applied is still in an
	// inbox (applied, not yet saved), sending bursts until one is.
	unsaved bool
}

// killFigures are what one kill found.
type killFigures struct {
	kp             killPoint
	killed, next   *server
	sent           int           // messages with an id when the holder died
	saved, unsaved int           // messages the holder applied: gone from the inboxes, and still there
	tries          int           // pauses it took to find unsaved messages
	takeover       time.Duration // kill → the next holder joined every key
}

// TestMessagesKillHolder: a game server holds 20 profiles and applies the
// Gift messages a sender (the test process, with a Node of its own) sends
// them, a steady stream to random profiles plus bursts. The holder is
// killed with -9 three times, each time taken over by a new server once
// presence proves the crash: in the middle of a burst, when messages it
// applied were not yet saved, and right after it took over (messages the
// load applied, unsaved). Messages keep flowing throughout. At the end the
// sender stops, the last holder drains the inboxes and exits on SIGTERM,
// and the sender loads every profile: every message Send answered an id
// for must be in the data of its profile exactly once (the data counts
// each id's applications), nothing else may be, and every inbox is empty.
func TestMessagesKillHolder(t *testing.T) {
	t.Parallel()
	tm := shortTimings()
	rep := newReport(t, fmt.Sprintf("kill -9 of the holder of %d profiles while messages flow to them, 3 times: mid-burst, "+
		"with applied messages unsaved, right after a takeover (%s, saves every %s)", msgKeys, tm, ms(msgSave)),
		"every message Send answered an id for is applied exactly once, none lost, none twice: a crash keeps both "+
			"the change and the message, or neither")
	defer rep.log()

	c := newCluster(t, testsupport.StartOwnRedis(t))
	bus := testsupport.StartNATSCluster(t, 1)
	m := &msgScenario{t: t, c: c, keys: keyRange(0, msgKeys), opts: func(job string) gsOpts {
		gtm := tm
		gtm.lockWait = time.Minute // a takeover waits for the crash proof, it does not time out
		return gsOpts{job: job, natsURL: bus.URLs[0], count: msgKeys, update: 50 * time.Millisecond, save: msgSave,
			tm: gtm, messages: true, applyDelay: 20 * time.Millisecond}
	}}
	a := c.start(m.opts("a"))
	m.servers = []*server{a}
	c.mustWait(30*time.Second, "a joins and saves every key", func() bool {
		return a.keys(EvJoined) == msgKeys && a.keys(EvSaved) == msgKeys
	})
	m.snd = newSender(t, c, bus, m.keys, tm)
	m.snd.steady(msgEvery)
	begun := time.Now()

	var kills []killFigures
	for i, kp := range []killPoint{
		{name: "mid-burst", warm: true, midBurst: true},
		{name: "applied, unsaved", warm: true, unsaved: true},
		{name: "right after a takeover", unsaved: true},
	} {
		kills = append(kills, m.kill(kp, string(rune('b'+i))))
	}
	end := m.finish()
	took := time.Since(begun)

	ledger := m.snd.ledger()
	oc := checkOnce(ledger, end.data)
	applications, twice := m.applications()
	reapplied := 0
	var killText, takeovers []string
	for _, kf := range kills {
		again := len(both(appliedBy(kf.killed), appliedBy(kf.next)))
		reapplied += again
		killText = append(killText, fmt.Sprintf("%s: after %d sent, %s had applied %d, saved %d, unsaved %d (%d applied again by %s)",
			kf.kp.name, kf.sent, kf.killed.job, kf.saved+kf.unsaved, kf.saved, kf.unsaved, again, kf.next.job))
		takeovers = append(takeovers, ms(kf.takeover))
	}
	rep.add("messages sent %d to %d profiles (one every %s plus bursts) in %s, send errors %d",
		len(ledger), msgKeys, ms(msgEvery), ms(took), len(m.snd.failures()))
	rep.add("kills: %s", strings.Join(killText, "; "))
	rep.add("takeover after each kill %s", strings.Join(takeovers, ", "))
	rep.add("applications on the game servers %d (= %d sent + %d applied again after a crash)", applications, len(ledger), reapplied)
	rep.add("inboxes drained %s after the last Send", ms(end.drainTook))
	rep.add("applied exactly once %d of %d, lost %d, duplicates %d (in one session %d), stray %d, inbox after the end %d",
		oc.applied, len(ledger), len(oc.lost), len(oc.dups), len(twice), len(oc.stray), end.leftAtEnd)

	if f := m.snd.failures(); len(f) > 0 {
		t.Errorf("%d sends failed (the ledger cannot be exact): %v", len(f), f)
	}
	for _, kf := range kills {
		if kf.kp.warm && kf.saved == 0 {
			t.Errorf("kill %q: %s had saved none of the messages it applied", kf.kp.name, kf.killed.job)
		}
		if kf.kp.unsaved && kf.unsaved == 0 {
			t.Errorf("kill %q: after %d tries no message %s had applied was unsaved; the kill tested nothing",
				kf.kp.name, kf.tries, kf.killed.job)
		}
	}
	if !end.drained {
		t.Errorf("%d messages still in the inboxes %v after the last Send; the holder applies and saves them within a save or two",
			end.waiting, drainWithin)
	}
	if end.exitCode != 0 {
		t.Errorf("the last holder exited %d on SIGTERM, want 0", end.exitCode)
	}
	if end.leftAtExit > 0 || end.leftAtEnd > 0 {
		t.Errorf("inboxes hold %d messages after the last holder exited and %d after the final loads; want none",
			end.leftAtExit, end.leftAtEnd)
	}
	if !oc.ok() || oc.applied != len(ledger) {
		t.Errorf("applied exactly once %d of %d messages\nlost: %v\napplied more than once: %v\nstray: %v\ngifts: %v",
			oc.applied, len(ledger), oc.lost, oc.dups, oc.stray, oc.gifts)
	}
	if len(twice) > 0 {
		t.Errorf("a session applied a message twice: %v", twice)
	}
}

// msgScenario is the state of TestMessagesKillHolder: the cluster, the
// sender, and the game servers in the order they held the profiles.
type msgScenario struct {
	t       *testing.T
	c       *cluster
	snd     *sender
	keys    []string
	opts    func(job string) gsOpts
	servers []*server // every holder so far; the last holds the profiles now
}

// holder is the server that holds the profiles now (or last did).
func (m *msgScenario) holder() *server { return m.servers[len(m.servers)-1] }

// split splits the messages s applied (as far as its events are read) into
// those gone from the inboxes (saved) and those still in inbox (unsaved).
func (m *msgScenario) split(s *server, inbox map[msgRef]bool) (saved, unsaved int) {
	applied := appliedBy(s)
	unsaved = len(both(applied, inbox))
	return len(applied) - unsaved, unsaved
}

// kill kills the holder at kp, starts job and waits until it holds every
// key.
func (m *msgScenario) kill(kp killPoint, job string) killFigures {
	m.t.Helper()
	h := m.holder()
	if kp.warm {
		n0 := m.snd.count()
		m.c.mustWait(30*time.Second, fmt.Sprintf("%d messages to %s, and one it applied saved", msgWarm, h.job), func() bool {
			if m.snd.count() < n0+msgWarm {
				return false
			}
			saved, _ := m.split(h, m.c.mustInboxes(m.keys))
			return saved > 0
		})
	}
	kf := killFigures{kp: kp, killed: h}
	var burst sync.WaitGroup
	defer burst.Wait()
	if kp.midBurst {
		half := make(chan struct{})
		burst.Go(func() { m.snd.burst(msgBurst, half) })
		<-half
	}
	// Freeze the holder, read the inboxes, and kill it; with kp.unsaved,
	// first give it bursts until a message it applied is unsaved. A pull
	// writes what it applied as soon as its page is applied, so the pause
	// comes while the holder is applying a burst (each message takes it
	// applyDelay), not after.
	var inbox map[msgRef]bool
	for {
		kf.tries++
		h.pause()
		inbox = m.c.mustInboxes(m.keys)
		_, unsaved := m.split(h, inbox)
		if !kp.unsaved || unsaved > 0 || kf.tries == msgTries {
			break
		}
		n0 := len(appliedBy(h))
		h.resume()
		burst.Go(func() { m.snd.burst(msgRetry, nil) })
		m.c.mustWait(applyWithin, fmt.Sprintf("%s applies a burst", h.job), func() bool {
			return len(appliedBy(h)) >= n0+msgRetry/5
		})
	}
	kf.sent = m.snd.count()
	killed := time.Now()
	h.kill()
	burst.Wait() // the rest of the burst went to a dead holder
	// Every event h printed is read now, and it applied nothing after the
	// pause: the split against the inboxes read at the pause is exact, but
	// for a save already on its way to Redis then (it lands after the read;
	// "applied again by" the next holder counts what was truly unsaved).
	kf.saved, kf.unsaved = m.split(h, inbox)

	next := m.c.start(m.opts(job))
	m.c.mustWait(joinWithin, job+" takes over every key", func() bool { return next.keys(EvJoined) == msgKeys })
	for _, k := range m.keys {
		j, _ := next.latest(EvJoined, k)
		kf.takeover = max(kf.takeover, since(killed, landing(j)))
	}
	kf.next = next
	m.servers = append(m.servers, next)
	return kf
}

// msgEnd is what the end of the scenario found.
type msgEnd struct {
	drained    bool
	drainTook  time.Duration
	waiting    int // messages in the inboxes when the drain ended
	exitCode   int // of the last holder, on SIGTERM
	leftAtExit int // messages in the inboxes after it exited
	leftAtEnd  int // and after the sender's loads
	data       map[string]Player
}

// finish lets the last holder play a while with messages flowing, stops
// the sender (every Send has returned: the ledger is final), waits until
// the holder has applied and saved every message (the inboxes empty),
// stops it with SIGTERM and loads every profile through the sender.
func (m *msgScenario) finish() msgEnd {
	m.t.Helper()
	h := m.holder()
	n0 := m.snd.count()
	m.c.mustWait(10*time.Second, "messages to "+h.job, func() bool { return m.snd.count() >= n0+msgWarm })
	m.snd.stop()
	var end msgEnd
	stopped := time.Now()
	end.drained = m.c.waitFor(drainWithin, func() bool {
		refs, err := m.c.inboxes(m.keys)
		return err == nil && len(refs) == 0
	})
	end.drainTook = time.Since(stopped)
	end.waiting = len(m.c.mustInboxes(m.keys))
	end.exitCode = h.terminate()
	end.leftAtExit = len(m.c.mustInboxes(m.keys))
	end.data = m.snd.load()
	end.leftAtEnd = len(m.c.mustInboxes(m.keys))
	return end
}

// applications counts the EvApplied events of every server, and lists the
// messages one server applied twice.
func (m *msgScenario) applications() (n int, twice []string) {
	for _, s := range m.servers {
		seen := make(map[msgRef]bool)
		for _, e := range s.events(EvApplied) {
			n++
			r := msgRef{e.Key, e.Msg}
			if seen[r] && len(twice) < 10 {
				twice = append(twice, fmt.Sprintf("%s applied %s (seq %d) twice", s.job, r, e.Seq))
			}
			seen[r] = true
		}
	}
	return n, twice
}

// both is the messages in a and in b.
func both(a, b map[msgRef]bool) map[msgRef]bool {
	out := make(map[msgRef]bool)
	for r := range a {
		if b[r] {
			out[r] = true
		}
	}
	return out
}
