package datadriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// A profile's life is a phase and, at its end, a cause. These transitions
// are the only writers of both. They run under the driver's mutex (held
// briefly: no I/O, no game callback runs under it; callbacks are queued to
// the driver's dispatcher), and none of them waits on I/O, so the fence can
// end a session whatever its Redis calls are doing.
//
//	live ──leave──▶ leaving ──release lands──▶ ended (released)
//	                   │  ▲
//	       release fails  │ a rejoin adopts it (adopting ─▶ live)
//	                   ▼  │
//	                retained ──retry lands──▶ ended (released)
//
// and from any phase: ended by a lost lock, the fence, a wipe, a broken
// record, a panic, or the Node closing.

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

// phaseNow is the profile's phase (lock-free).
func (p *Profile[T]) phaseNow() phase { return phase(p.phase.Load()) }

// setPhaseLocked moves a profile that has not ended to ph and wakes the
// loads waiting on its key. d.mu held.
func (p *Profile[T]) setPhaseLocked(ph phase) {
	if p.phaseNow() == phaseEnded {
		return
	}
	p.phase.Store(int32(ph))
	p.d.notify(p.key)
}

// setPhase is setPhaseLocked under d.mu.
func (p *Profile[T]) setPhase(ph phase) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.setPhaseLocked(ph)
}

// leaveLocked asks a live session to go for c: it takes no more changes,
// the game hears Kick (none when the game itself released it), and, when
// now is set, its owner runs the release at once. A session whose lease has
// passed is fenced instead: it ends without a release (and no leave cleanup
// runs). It reports whether the session was live and now leaves. d.mu held.
func (p *Profile[T]) leaveLocked(c cause, now bool) bool {
	if p.phaseNow() != phaseLive {
		return false
	}
	if err := p.leaseErr(p.d.node.clock.Now()); err != nil {
		p.endLocked(causeOf(err), err)
		return false
	}
	p.leaveBy = c
	p.setPhaseLocked(phaseLeaving)
	p.kickLocked(c)
	if now {
		p.releaseNow()
	}
	return true
}

// releaseNow asks the executor to run the release (non-blocking: one
// pending ask is enough).
func (p *Profile[T]) releaseNow() { p.post(sigLeave) }

// kickLocked tells the game, once in the session's life, that it stopped
// for c. d.mu held.
func (p *Profile[T]) kickLocked(c cause) {
	if p.kicked || c.kick() == 0 {
		return
	}
	p.kicked = true
	p.d.kick(p.key, c.kick())
}

// retainLocked keeps a leaving profile whose release failed (with err)
// under its lock: a rejoin here adopts it, a request from elsewhere retries
// it at once, the owner retries it every autosave period. d.mu held.
func (p *Profile[T]) retainLocked(err error) {
	if p.phaseNow() != phaseLeaving {
		return
	}
	p.setPhaseLocked(phaseRetained)
	level := slog.LevelWarn
	if p.d.loads.Err() != nil || errors.Is(err, context.Canceled) {
		level = slog.LevelInfo // the Node is closing: Close reports what it could not release
	}
	p.d.log.Log(p.d.ctx, level, "release failed; profile retained under its lock and retried", "key", p.key,
		"err", err)
}

// endWith ends the profile for c with err (see endLocked).
func (p *Profile[T]) endWith(c cause, err error) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.endLocked(c, err)
}

// endLocked ends the profile for c, once: Done closes, Err answers err,
// nothing more of it is written, its owner stops, its lock is given back in
// the background when it may still be this server's, and the game hears of it: Kick (unless it heard one
// at the leave, or released the profile itself), then OnLockLost for a lost
// lock. It reports whether this call ended it. d.mu held.
func (p *Profile[T]) endLocked(c cause, err error) bool {
	if !p.ended.CompareAndSwap(nil, &ending{cause: c, err: err}) {
		return false
	}
	p.stopped.Store(true)
	p.phase.Store(int32(phaseEnded))
	d := p.d
	if d.profiles[p.key] == p {
		delete(d.profiles, p.key)
	}
	d.notify(p.key)
	if p.ageFence != nil {
		p.ageFence.Stop()
	}
	p.cancel()
	p.stopExecutorLocked()
	close(p.done)
	if c.holdsLock() && d.ctx.Err() == nil {
		// In the background: the end never waits on I/O. A write of the
		// owner still in flight can land only under the token, never over
		// another server's lock, and a save under a released token is refused.
		key, token, earlier := p.key, p.token, slices.Clone(p.earlier)
		d.goTracked(func() { d.giveBack(key, token, earlier) })
	}
	if c.lost() {
		d.log.Warn("session ended without saving its progress since the last landed save", "key", p.key,
			"cause", c.String(), "err", err)
		d.tel.LockLost(d.ctx, c.loss())
	}
	if p.leaveBy != causeGameRelease {
		p.kickLocked(c)
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
