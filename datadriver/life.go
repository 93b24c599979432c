package datadriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// A profile's life is a phase and, at its end, a cause. The profile's
// executor (owner.go) is the one writer of its phase, lock token and leave
// state: every transition below but the end runs on it, one event at a
// time, and replaces the profile's lifeView whole, so anyone else reads one
// consistent view without a lock. What asks for a transition from outside
// (another server's release request, a join on this server, the Node
// closing, a moved profile nobody claimed) posts an event to the executor
// (askLeave, adopt) and waits on Done or on the key's next change. The end
// is the one transition anyone may make, at once and exactly once (a CAS):
// the fences end a session on their own timers whatever the executor is
// doing, and none of the transitions waits on I/O. The driver's mutex
// guards only its maps of keys (profiles, loads, waiters).
//
//	live ──leave──▶ leaving ──release lands──▶ ended (released)
//	                   │  ▲
//	       release fails  │ a rejoin adopts it (adopting ─▶ live)
//	                   ▼  │
//	                retained ──retry lands──▶ ended (released)
//
// and from any phase: ended by a lost lock, the fence, a wipe, a broken
// record, a panic, a move, or the Node closing.

// phase is where a profile is in its life on this Node.
type phase int32

const (
	phaseLive     phase = iota // a session: takes changes
	phaseLeaving               // asked to go (Release, a handoff, Close): its release runs
	phaseRetained              // its release failed: it still holds the lock, and retries
	phaseAdopting              // a rejoin is re-asserting the retained profile
	phaseEnded                 // released, lost, or closed
)

// String is the phase's name in logs.
func (ph phase) String() string {
	switch ph {
	case phaseLive:
		return "live"
	case phaseLeaving:
		return "leaving"
	case phaseRetained:
		return "retained"
	case phaseAdopting:
		return "adopting"
	}
	return "ended"
}

// ending is how a profile ended.
type ending struct {
	cause cause
	err   error
}

// sessionError is an error that ends the session it happens to: its cause
// says how. Its message and errors.Is are those of err.
type sessionError struct {
	cause cause
	err   error
}

func (e *sessionError) Error() string { return e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

// endsSession wraps err, which ends a session for c.
func endsSession(c cause, err error) error { return &sessionError{cause: c, err: err} }

// causeOf is the end cause err carries (causeNone for an error that does
// not end the session).
func causeOf(err error) cause {
	var se *sessionError
	if errors.As(err, &se) {
		return se.cause
	}
	return causeNone
}

// causeOr is the end cause err carries, or c when it carries none.
func causeOr(err error, c cause) cause {
	if ce := causeOf(err); ce != causeNone {
		return ce
	}
	return c
}

// lifeView is a profile's life as everyone reads it: the executor
// replaces it whole at each transition, never changes one in place. The end
// is not in it (Profile.ended is).
type lifeView struct {
	phase   phase
	leaveBy cause  // why the session was asked to go (causeNone: it was not)
	gen     uint32 // counts the lock tokens the profile has had (an adoption takes a new one)
	epoch   int64  // the lock's epoch (Epoch), as the last landed write answered it
	token   string // the lock token
	// earlier are tokens the lock may still carry while an adoption has not
	// landed (nil for none: most views never hold one, and a pointer takes
	// the view a size class down).
	earlier *[]string
}

// earlierTokens are the tokens the lock may still carry besides token.
func (v *lifeView) earlierTokens() []string {
	if v.earlier == nil {
		return nil
	}
	return *v.earlier
}

// initLife sets the life of a profile being built, live under token at
// epoch.
func (p *Profile[T]) initLife(token string, epoch int64) {
	p.life.Store(&lifeView{phase: phaseLive, token: token, epoch: epoch})
}

// setEpoch records the lock's epoch as a landed write answered it (a new
// view only when it changed). On the executor only.
func (p *Profile[T]) setEpoch(epoch int64) {
	if p.view().epoch != epoch {
		p.setLife(func(v *lifeView) { v.epoch = epoch })
	}
}

// view is the profile's life now (lock-free).
func (p *Profile[T]) view() *lifeView { return p.life.Load() }

// lockToken is the profile's lock token (lock-free).
func (p *Profile[T]) lockToken() string { return p.view().token }

// phaseNow is the profile's phase (lock-free).
func (p *Profile[T]) phaseNow() phase {
	if p.ended.Load() != nil {
		return phaseEnded
	}
	return p.view().phase
}

// setLife replaces the profile's life with f's change of it, and wakes the
// loads waiting on its key when the phase changed. On the executor only.
func (p *Profile[T]) setLife(f func(v *lifeView)) {
	old := p.view()
	v := *old
	f(&v)
	p.life.Store(&v)
	if v.phase != old.phase {
		d := p.d
		d.mu.Lock()
		d.notify(p.key)
		d.mu.Unlock()
	}
}

// leave makes a live session go for c: it takes no more changes and the
// game hears Kick (none when the game itself released it); the caller runs
// the release. A session whose lease has passed is fenced instead: it ends
// without a release (and no leave cleanup runs). It reports whether the
// session was live and now leaves. On the executor only.
func (p *Profile[T]) leave(c cause) bool {
	if p.phaseNow() != phaseLive {
		return false
	}
	if err := p.leaseErr(p.d.node.clock.Now()); err != nil {
		p.endWith(causeOf(err), err)
		return false
	}
	p.setLife(func(v *lifeView) { v.phase, v.leaveBy = phaseLeaving, c })
	p.kick(c)
	return true
}

// askLeave asks the executor to make the session of token generation gen
// leave for c and release (non-blocking; the first ask pending wins). An
// ask that finds the profile under another lock by then (an adoption
// landed first) changes nothing but a release retry.
func (p *Profile[T]) askLeave(c cause, gen uint32) {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.stopping() {
		return
	}
	if m.ask == causeNone {
		m.ask, m.askGen = c, gen
	}
	m.signals |= sigLeave
	p.wakeLocked()
}

// takeAsk takes the pending leave ask (causeNone: none).
func (p *Profile[T]) takeAsk() (cause, uint32) {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	c, gen := m.ask, m.askGen
	m.ask = causeNone
	return c, gen
}

// runLeave is the executor's leave event: the ask, if it still names the
// session, then the release of a leaving or retained profile.
func (p *Profile[T]) runLeave() {
	if c, gen := p.takeAsk(); c != causeNone && p.view().gen == gen && p.leave(c) {
		p.d.log.Info("session asked to leave; ending it", "key", p.key, "cause", c.String())
	}
	p.releaseInBackground()
}

// releaseNow asks the executor to run the release (non-blocking: one
// pending ask is enough).
func (p *Profile[T]) releaseNow() { p.post(sigLeave) }

// kick tells the game, once in the session's life, that it stopped for c.
func (p *Profile[T]) kick(c cause) {
	if c.kick() == 0 || !p.state.kickOnce() {
		return
	}
	p.d.kick(p.key, c.kick())
}

// retain keeps a leaving profile whose release failed (with err) under its
// lock: a rejoin here adopts it, a request from elsewhere retries it at
// once, the executor retries it every autosave period. On the executor
// only.
func (p *Profile[T]) retain(err error) {
	if p.phaseNow() != phaseLeaving {
		return
	}
	p.setLife(func(v *lifeView) { v.phase = phaseRetained })
	level := slog.LevelWarn
	if p.d.loads.Err() != nil || errors.Is(err, context.Canceled) {
		level = slog.LevelInfo // the Node is closing: Close reports what it could not release
	}
	p.d.log.Log(p.d.ctx, level, "release failed; profile retained under its lock and retried", "key", p.key,
		"err", err)
}

// beginAdopt marks a retained profile adopting under a fresh token:
// requests naming the old lock are late now, though the lock may still
// carry it (kept among the earlier tokens, the last few) until the
// adoption's write lands. It reports false when the profile is not
// retained. On the executor only.
func (p *Profile[T]) beginAdopt(token string) bool {
	if p.phaseNow() != phaseRetained {
		return false
	}
	p.setLife(func(v *lifeView) {
		earlier := append(slices.Clone(v.earlierTokens()), v.token)
		if len(earlier) > maxEarlierTokens {
			earlier = earlier[len(earlier)-maxEarlierTokens:]
		}
		v.phase, v.gen, v.token, v.earlier = phaseAdopting, v.gen+1, token, &earlier
	})
	return true
}

// adopted makes the adopted profile a new live session: no leave, no Kick
// heard yet, no leave cleanups. It reports false when the profile ended
// meanwhile (its lease lapsed while the adoption ran). On the executor
// only.
func (p *Profile[T]) adopted() bool {
	if x := p.extras(); x != nil {
		p.dataMu.Lock()
		x.cleanups = nil
		p.dataMu.Unlock()
	}
	if p.phaseNow() == phaseEnded {
		return false
	}
	p.state.unkick()
	p.setLife(func(v *lifeView) { v.phase, v.leaveBy = phaseLive, causeNone })
	return true
}

// unadopt puts a profile whose adoption failed back to retained. On the
// executor only.
func (p *Profile[T]) unadopt() {
	if p.phaseNow() == phaseAdopting {
		p.setLife(func(v *lifeView) { v.phase = phaseRetained })
	}
}

// landedAt records a write of p that landed, sent at sentAt: the lock
// carries the profile's token now (no earlier one), and its age deadline
// moves to sentAt + LockTTL. On the executor only.
func (p *Profile[T]) landedAt(sentAt time.Time) {
	if len(p.view().earlierTokens()) > 0 {
		p.setLife(func(v *lifeView) { v.earlier = nil })
	}
	p.touch(sentAt)
}

// endWith ends the profile for c with err (see endLocked).
func (p *Profile[T]) endWith(c cause, err error) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.endLocked(c, err)
}

// endLocked ends the profile for c, once: Done closes, Err answers err,
// nothing more of it is written, its executor stops, its lock is given
// back in the background when it may still be this server's, and the game
// hears of it: Kick (unless it heard one at the leave, or released the
// profile itself), then OnLockLost for a lost lock. It is the one
// transition any goroutine may make (a fence's timer, the executor, the
// Node closing); d.mu is held for the driver's map of keys. It reports
// whether this call ended it.
func (p *Profile[T]) endLocked(c cause, err error) bool {
	if !p.ended.CompareAndSwap(nil, &ending{cause: c, err: err}) {
		return false
	}
	p.state.stop()
	d := p.d
	if d.profiles[p.key] == p {
		delete(d.profiles, p.key)
	}
	d.notify(p.key)
	d.timers.Stop(p)
	p.stopExecutor()
	if c := p.done.Load(); c != nil {
		close(*c) // else Done answers a closed channel from now on
	}
	v := p.view()
	if c.holdsLock() && d.ctx.Err() == nil {
		// In the background: the end never waits on I/O. A write of the
		// executor still in flight can land only under the token, never
		// over another server's lock, and a save under a released token is
		// refused.
		key, token, earlier := p.key, v.token, v.earlierTokens()
		d.goTracked(func() { d.giveBack(key, token, earlier) })
	}
	if c.lost() {
		d.log.Warn("session ended without saving its progress since the last landed save", "key", p.key,
			"cause", c.String(), "err", err)
		d.tel.LockLost(d.ctx, c.loss())
	}
	if v.leaveBy != causeGameRelease {
		p.kick(c)
	}
	if lost := d.cfg.OnLockLost; lost != nil && c.lost() {
		key := p.key
		d.callback(key, "OnLockLost", func() { lost(key, err) })
	}
	return true
}

// fenceOn ends the session when err is one that ends it (a passed lease,
// a lost lock); other errors leave it as it is.
func (p *Profile[T]) fenceOn(err error) {
	if c := causeOf(err); c != causeNone {
		p.endWith(c, err)
	}
}

// releasedErr is what a change answers once the player has left.
func releasedErr(key string) error {
	return fmt.Errorf("%q: %w: the player has left", key, ErrReleased)
}

// stopping reports whether the profile's work is over: the profile ended,
// or its driver is shutting down.
func (p *Profile[T]) stopping() bool { return p.ended.Load() != nil || p.d.ctx.Err() != nil }

// bg is the context of the executor's own work (the autosave, the refresh,
// a background release, reads for the history): the driver's, which ends
// when it shuts down. The end of the profile does not cancel it: a write
// in flight is fenced by its token in Redis and bounded by SaveTimeout, and
// the end never waits for it. (A context of the profile's own, the parent
// of every such write, kept a map of its children and a Done channel once
// a write had run: about 400 bytes of every resident profile that had
// autosaved.)
// Its calls share their SaveTimeout deadlines (sharesBounds).
func (p *Profile[T]) bg() context.Context { return p.d.bg }
