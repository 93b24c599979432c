package simulation

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/ckernel/playerdata/internal/enum"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradescript"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// The faults: what the servers' Redis calls suffer (before and after they
// reach Redis), the fault drawn at a step, and the end of the faults that
// last (partitions and pauses end at the first step after their time).
//
// A call that hangs waits, unsent (or landed, its answer held), until its
// own context ends: the Node's deadlines (a beat's, SaveTimeout) or the
// caller's context (a join's: the game gives up after joinGiveUp; a
// send's: sendTimeout). Nothing else ends it but the death of its server.

// callKind is a kind of Redis call a hang fault picks.
type callKind int

const (
	callBeat    callKind = iota // the server's own presence beat
	callSave                    // save.lua: saves, releases, give-backs, lock refreshes, adoptions
	callRead                    // presence.lua's read: a joiner reading a holder's presence
	callAcquire                 // acquire.lua
	callSend                    // send.lua: Driver.Send
	callTrade                   // a trade's journal moves: its commit, and the abort that decides a lost commit answer
	numCallKinds
)

func (k callKind) String() string {
	if name, ok := enum.Name(k, "presence beats", "saves", "presence reads", "acquires", "sends", "trade commits and aborts"); ok {
		return name
	}
	return fmt.Sprintf("callKind(%d)", int(k))
}

// kindOf tells which kind of call cmd is, for srv; false for a call of no
// kind a fault picks (another server's beat never comes from srv).
func kindOf(srv *server, cmd redis.Cmder) (callKind, bool) {
	in, ok := testsupport.Identify(cmd)
	if !ok {
		return 0, false
	}
	return kindOfCall(srv, in)
}

func kindOfCall(srv *server, in testsupport.Invocation) (callKind, bool) {
	switch in.Script {
	case presencescript.NameBeat:
		a, err := presencescript.ParseBeatArgs(in.Args)
		return callBeat, err == nil && a.JobID == srv.s.JobID
	case record.ScriptSave:
		return callSave, true
	case presencescript.NameRead:
		return callRead, true
	case record.ScriptAcquire:
		return callAcquire, true
	case record.ScriptSend:
		return callSend, true
	case tradescript.NameMove:
		return callTrade, true
	}
	return 0, false
}

// before injects the faults that act before a command reaches Redis.
func (s *sim) before(srv *server, ctx context.Context, cmd redis.Cmder) error {
	now := time.Now()
	kind, known := kindOf(srv, cmd)
	s.mu.Lock()
	failTo, stallTo, deafTo := srv.failTo, srv.stallTo, srv.deafTo
	hang := known && now.Before(srv.hangTo[kind]) && !srv.hangLanded[kind]
	lateAt := srv.hangLateAt[kind]
	late := known && !lateAt.IsZero()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return testsupport.ErrInjected
	}
	isSave, isBeat := known && kind == callSave, known && kind == callBeat
	switch {
	case isSave && now.Before(failTo):
		return testsupport.ErrInjected
	case isSave && now.Before(stallTo):
		// Stalled saves come out in the order they went in, a microsecond
		// apart, rather than all at one instant in the scheduler's order;
		// saves that went in at one instant (on goroutines of their own, in
		// the scheduler's order) in the order of what they send.
		s.mu.Lock()
		srv.stalled++
		me := stalledSave{to: stallTo, Arrival: testsupport.Arrival{At: now, Label: fmt.Sprint(cmd.Args()...), Seq: srv.stalled}}
		srv.stalls = append(slices.DeleteFunc(srv.stalls, func(o stalledSave) bool { return o.to.Before(now) }), me)
		s.mu.Unlock()
		if err := sleepCtx(ctx, stallTo.Sub(now)); err != nil {
			return err
		}
		// Every save of this stall is in by now: none goes in at stallTo.
		s.mu.Lock()
		rank := 0
		for _, o := range srv.stalls {
			if o.to.Equal(stallTo) && o.Before(me.Arrival) {
				rank++
			}
		}
		s.mu.Unlock()
		if err := sleepCtx(ctx, time.Duration(rank+1)*time.Microsecond); err != nil {
			return err
		}
	case isBeat && now.Before(deafTo):
		return testsupport.ErrInjected
	case hang:
		err := s.hang(srv, ctx, cmd)
		if late && ctx.Err() != nil {
			s.deliverLate(srv, cmd, lateAt)
		}
		return err
	}
	return nil
}

// deliverLate sends cmd, a call whose caller gave up while it hung unsent,
// to Redis at at, after its hang ended: as the network delivers what it held
// of a connection that timed out (closed, the kernel still sends what it
// holds), behind the writes sent since. It goes through srv's client, so that the observers see it land or
// be refused; not if srv crashed or the run ended first.
// Saves due at one instant reach Redis in the order of what they send, a
// microsecond apart (as stalled saves do), so that a replay delivers them
// alike.
func (s *sim) deliverLate(srv *server, cmd redis.Cmder, at time.Time) {
	args := slices.Clone(cmd.Args())
	me := lateSave{at: at, label: fmt.Sprint(args...)}
	s.mu.Lock()
	srv.lates = append(slices.DeleteFunc(srv.lates, func(o lateSave) bool { return o.at.Before(time.Now()) }), me)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-srv.dead:
			return
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		rank := 0
		for _, o := range srv.lates {
			if o.at.Equal(at) && o.label < me.label {
				rank++
			}
		}
		s.mu.Unlock()
		if err := sleepCtx(s.ctx, time.Duration(rank+1)*time.Microsecond); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, time.Second)
		defer cancel()
		v, err := srv.s.Redis.Do(ctx, args...).Result()
		res, perr := record.ParseSave(v)
		s.mu.Lock()
		s.result.LateSaves++
		if err == nil && perr == nil && res.Outcome == record.Superseded {
			s.result.LateRefused++
		}
		s.mu.Unlock()
		s.logf("FAULT a save of %s that hung unsent reaches Redis late: %+v %v", srv.s.JobID, res, err)
	}()
}

// lateSave is a save deliverLate holds until at, and what it sends.
type lateSave struct {
	at    time.Time
	label string
}

// stalledSave is a save a stall holds until to, in the replayable order of
// its arrival.
type stalledSave struct {
	to time.Time
	testsupport.Arrival
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// after loses answers of saves that landed, and holds the answers of calls
// that hang after landing.
func (s *sim) after(srv *server, ctx context.Context, cmd redis.Cmder, err error) error {
	if err != nil {
		return nil
	}
	in, ok := testsupport.Identify(cmd)
	if !ok {
		return nil
	}
	kind, known := kindOfCall(srv, in)
	if !known {
		return nil
	}
	s.mu.Lock()
	hang := time.Now().Before(srv.hangTo[kind]) && srv.hangLanded[kind]
	s.mu.Unlock()
	if hang {
		return s.hang(srv, ctx, cmd)
	}
	if kind != callSave {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv.lose > 0 {
		srv.lose--
		return testsupport.ErrInjected
	}
	return nil
}

// unboundedCallEnd is how long a call that hangs with no deadline at all
// hangs: go-redis's default ReadTimeout, which would end it on a real
// connection.
const unboundedCallEnd = 3 * time.Second

// hang blocks a call of srv until its context ends (its deadline) and
// answers the context's error; a call of a server that crashes dies with
// it. A call with no deadline, a failure of the run, would hang for good,
// and the run with it: it fails with ErrInjected after unboundedCallEnd.
func (s *sim) hang(srv *server, ctx context.Context, cmd redis.Cmder) error {
	var unbounded <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		what := fmt.Sprintf("a call of %s that hangs (%s) has no deadline", srv.s.JobID, cmd.Name())
		if in, ok := testsupport.Identify(cmd); ok {
			what = fmt.Sprintf("a %s call of %s that hangs has no deadline", in.Script, srv.s.JobID)
		}
		s.fail("%s: it would hang for good", what)
		t := time.NewTimer(unboundedCallEnd)
		defer t.Stop()
		unbounded = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-srv.dead:
		return testsupport.ErrInjected
	case <-unbounded:
		return testsupport.ErrInjected
	}
}

// fault injects one fault, chosen from the seed.
func (s *sim) fault(alive []*server) {
	s.mu.Lock()
	s.result.Faults++
	s.mu.Unlock()
	srv := alive[s.rng.IntN(len(alive))]
	now := time.Now()
	dur := time.Duration(1+s.rng.IntN(20)) * time.Second
	switch k := s.drawFault(); k {
	case 0:
		s.logf("FAULT saves of %s fail for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.failTo = now.Add(dur)
		s.mu.Unlock()
	case 1:
		s.logf("FAULT saves of %s stall for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.stallTo = now.Add(dur)
		s.mu.Unlock()
	case 2:
		n := 1 + s.rng.IntN(3)
		s.logf("FAULT the answers of the next %d saves of %s are lost", n, srv.s.JobID)
		s.mu.Lock()
		srv.lose += n
		s.mu.Unlock()
	case 3:
		s.logf("FAULT presence writes of %s fail for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.deafTo = now.Add(dur)
		s.mu.Unlock()
	case 4:
		s.lossyBus(now, dur)
	case 5:
		if len(alive) < 2 {
			return
		}
		s.logf("FAULT crash %s", srv.s.JobID)
		s.mu.Lock()
		s.result.Crashes++
		s.mu.Unlock()
		s.crash(srv)
		s.startServer()
	case 6:
		s.logf("FAULT Redis restarts: the presence hash and the script cache are gone")
		s.mu.Lock()
		s.redisRestart = now
		s.mu.Unlock()
		if err := s.c.RedisRestart(context.Background()); err != nil {
			s.fail("redis restart: %v", err)
		}
	case 10, 11, 12, 13, 14, 15:
		s.hangCalls(srv, callKind(k-10), now, dur)
	case 16:
		s.logf("FAULT %s is cut from Redis for %s: every call of it hangs", srv.s.JobID, dur)
		s.mu.Lock()
		s.result.Hangs++
		srv.cut, srv.cutTo = true, maxTime(srv.cutTo, now.Add(dur))
		s.mu.Unlock()
		srv.s.Faults.Hold()
	case 17:
		s.logf("FAULT %s is cut from the bus for %s", srv.s.JobID, dur)
		s.mu.Lock()
		s.result.Hangs++
		srv.busCut, srv.busCutTo = true, maxTime(srv.busCutTo, now.Add(dur))
		s.mu.Unlock()
		s.c.Bus.Disconnect(srv.s.JobID)
	case 18:
		s.pause(srv, now.Add(dur))
	case 19, 20, 21, 22:
		s.tamper(tamperKind(k - 19))
	default:
		s.forgeRequest(srv)
	}
}

// drawFault draws the kind of a fault from the seed: 0 to 9 the classic
// faults, 10 to 18 those that hang (Config.Hangs), 19 to 22 the tampers
// and the operator's unlock (Config.Tampers). A seed with Hangs on and Tampers off draws what it drew
// before the tampers existed; so does one with both off.
func (s *sim) drawFault() int {
	kinds := 10
	if s.cfg.Hangs {
		kinds += 9
	}
	if s.cfg.Tampers {
		kinds += int(numTamperKinds)
	}
	k := s.rng.IntN(kinds)
	if !s.cfg.Hangs && k >= 10 {
		k += 9 // a tamper
	}
	return k
}

// lossyBus makes the bus drop, delay and duplicate messages from now for
// dur.
func (s *sim) lossyBus(now time.Time, dur time.Duration) {
	s.logf("FAULT the bus drops, delays and duplicates messages for %s", dur)
	until, salt := now.Add(dur), s.rng.Uint64()
	s.c.Bus.SetFault(func(to string, m messaging.Message) testsupport.Fault {
		now := time.Now()
		if now.After(until) {
			return testsupport.Fault{}
		}
		// What happens to a message is a function of the message and the
		// moment, not of the order messages are sent in: a replay repeats it.
		h := fnv.New64a()
		fmt.Fprintf(h, "%d|%s|%s|%s|%s|%s|%d", salt, to, m.Type, m.Key, m.Requester, m.Token, now.UnixNano())
		r := h.Sum64()
		switch r % 4 {
		case 0:
			return testsupport.Fault{Drop: true}
		case 1:
			return testsupport.Fault{Delay: time.Duration(r>>8%3000) * time.Millisecond}
		case 2:
			return testsupport.Fault{Echo: time.Duration(1+r>>8%30) * time.Second}
		}
		return testsupport.Fault{}
	})
}

// hangCalls makes srv's calls of kind hang until their deadline from now
// for dur: unsent, or landed with the answer held.
func (s *sim) hangCalls(srv *server, kind callKind, now time.Time, dur time.Duration) {
	landed := s.rng.IntN(2) == 0
	// Half of the saves that hang unsent reach Redis as long again after the
	// hang ends, behind the saves sent since (by the hang's length, drawn
	// already: no draw of the seed moves).
	late := !landed && kind == callSave && (dur/time.Second)%2 == 0
	how := "unsent"
	switch {
	case landed:
		how = "landed, answer held"
	case late:
		how = "unsent, delivered as long again after the hang"
	}
	s.logf("FAULT %s of %s hang until their deadline (%s) for %s", kind, srv.s.JobID, how, dur)
	s.mu.Lock()
	s.result.Hangs++
	srv.hangTo[kind], srv.hangLanded[kind], srv.hangLateAt[kind] = now.Add(dur), landed, time.Time{}
	if late {
		srv.hangLateAt[kind] = now.Add(2 * dur)
	}
	s.mu.Unlock()
}

// forgeRequest sends srv a forged release request (a random token) for a
// random key.
func (s *sim) forgeRequest(srv *server) {
	pl := s.players[s.rng.IntN(len(s.players))]
	token := fmt.Sprintf("%016x", s.rng.Uint64())
	s.logf("FAULT a forged request for %s to %s", pl.key, srv.s.JobID)
	bus := s.c.Bus.Endpoint("forger")
	_ = bus.Publish(context.Background(), srv.s.JobID, messaging.Message{
		Type: messaging.TypeRequest, Driver: driverName, Key: pl.key, Requester: "forger", Token: token,
	})
}

// crash kills srv: its hanging calls die with it, and its pause and
// partitions end with it.
func (s *sim) crash(srv *server) {
	s.mu.Lock()
	close(srv.dead)
	if srv.paused {
		srv.pauses[len(srv.pauses)-1].to = time.Now()
	}
	srv.paused, srv.believed, srv.cut, srv.busCut = false, nil, false, false
	s.mu.Unlock()
	srv.s.Crash()
}

// pause stops srv answering until (at least) until: its Redis calls and bus
// messages are held (testsupport.Server.Pause) and its game makes no moves.
// What its game holds now is what it will believe live when it resumes.
func (s *sim) pause(srv *server, until time.Time) {
	now := time.Now()
	s.mu.Lock()
	s.result.Pauses++
	again := srv.paused
	srv.pausedTo = maxTime(srv.pausedTo, until)
	if !again {
		srv.paused = true
		srv.pauses = append(srv.pauses, span{from: now})
		srv.believed = nil
		for _, pl := range s.players {
			if pl.srv == srv && pl.p != nil {
				srv.believed = append(srv.believed, session{pl, pl.p})
			}
		}
	}
	n := len(srv.believed)
	s.mu.Unlock()
	s.logf("FAULT %s pauses for %s (%d sessions live in its game)", srv.s.JobID, until.Sub(now), n)
	if !again {
		// The Redis half of testsupport.Server.Pause: a partition holds the
		// same hook, and whichever ends first must not release the other.
		srv.s.Faults.Hold()
		s.c.Bus.Pause(srv.s.JobID)
	}
}

// endFaults ends the partitions and pauses whose time has come (all of them
// when all is true). A server that resumes has its game try Update at once
// on every profile it believed live when it paused: each must be refused if
// another server took the profile meanwhile (invariant 9).
func (s *sim) endFaults(all bool) {
	now := time.Now()
	for _, srv := range s.aliveServers() {
		s.mu.Lock()
		heal := srv.cut && (all || !now.Before(srv.cutTo))
		rejoin := srv.busCut && (all || !now.Before(srv.busCutTo))
		resume := srv.paused && (all || !now.Before(srv.pausedTo))
		var believed []session
		if heal {
			srv.cut = false
		}
		if rejoin {
			srv.busCut = false
		}
		if resume {
			srv.paused = false
			srv.pauses[len(srv.pauses)-1].to = now
			believed, srv.believed = srv.believed, nil
		}
		release := (heal || resume) && !srv.cut && !srv.paused
		s.mu.Unlock()
		if resume {
			// The game runs first, before any answer held during the pause
			// comes in: what a resumed process does before it hears anything.
			s.logf("RESUME %s: its game tries Update on the %d sessions it believes live", srv.s.JobID, len(believed))
			for _, ss := range believed {
				s.spawn(func() { s.resumeUpdate(srv, ss) })
			}
			s.c.Bus.Resume(srv.s.JobID)
		}
		if heal {
			s.logf("HEAL %s reaches Redis again", srv.s.JobID)
		}
		if release {
			srv.s.Faults.Release()
		}
		if rejoin {
			s.logf("HEAL %s is back on the bus", srv.s.JobID)
			s.c.Bus.Reconnect(srv.s.JobID)
		}
	}
}
