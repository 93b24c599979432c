package datadriver

import (
	"context"
	"errors"
	"runtime/debug"

	"github.com/ckernel/playerdata/internal/telemetry"
)

// The game's callbacks (Kick, OnLockLost, OnSaveError, Update's function,
// leave cleanups, trade functions) are the game's code: a panic in one is
// recovered here, logged with its stack and turned into an error matching
// ErrCallbackPanic, so the server and its other players go on.

// presenceFlag reports whether this driver's locks carry presence=1: the
// Node beats presence and the driver has handoff on.
func (d *Driver[T]) presenceFlag() bool {
	return d.node.handoffOn && !d.cfg.DisableHandoff
}

// protect runs fn, the game callback name, and returns a *PanicError when it
// panics; nil otherwise.
func protect(name string, fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Callback: name, Value: v, Stack: debug.Stack()}
		}
	}()
	fn()
	return nil
}

// logPanic logs a recovered callback panic with its stack.
func (d *Driver[T]) logPanic(key string, err error) {
	var pe *PanicError
	if errors.As(err, &pe) {
		d.log.Error("game callback panicked; recovered", "key", key, "callback", pe.Callback,
			"panic", pe.Value, "stack", string(pe.Stack))
	}
}

// callbackLocked runs fn, the game callback name, on a goroutine of its own
// that the driver waits for at shutdown; a panic is recovered and logged.
// d.mu held.
func (d *Driver[T]) callbackLocked(key, name string, fn func()) {
	d.goTracked(func() {
		if err := protect(name, fn); err != nil {
			d.logPanic(key, err)
		}
	})
}

// kickLocked tells the game the driver ended key's session itself. d.mu
// held.
func (d *Driver[T]) kickLocked(key string, reason KickReason) {
	if kick := d.cfg.Kick; kick != nil {
		d.callbackLocked(key, "Kick", func() { kick(key, reason) })
	}
}

// lockLost tells the game a profile lost its lock: to another server
// (ReasonLockLost), to its own fence (ReasonFenced) or to a wipe
// (ReasonWiped).
func (d *Driver[T]) lockLost(key string, err error) {
	reason := ReasonLockLost
	switch {
	case errors.Is(err, errWiped):
		reason = ReasonWiped
	case errors.Is(err, errLeaseLapsed), errors.Is(err, errLockAged):
		reason = ReasonFenced
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lockLostLocked(key, err, reason)
}

// lockLostLocked tells the game that a profile lost its lock: Kick with
// reason, then OnLockLost, each on a goroutine of its own. d.mu held.
func (d *Driver[T]) lockLostLocked(key string, err error, reason KickReason) {
	loss := telemetry.LossTaken
	switch {
	case errors.Is(err, errLeaseLapsed):
		loss = telemetry.LossLeaseLapsed
	case errors.Is(err, errLockAged):
		loss = telemetry.LossAged
	case errors.Is(err, errWiped):
		loss = telemetry.LossWiped
	}
	d.tel.LockLost(d.ctx, loss)
	d.kickLocked(key, reason)
	if lost := d.cfg.OnLockLost; lost != nil {
		d.callbackLocked(key, "OnLockLost", func() { lost(key, err) })
	}
}

// saveFailed tells the game, through OnSaveError, that a background write
// of key failed (an autosave, a retained profile's release retry, a lock
// refresh). A lost lock is OnLockLost's news, and a cancelled context
// (shutdown, a profile that ended) is no news at all.
func (d *Driver[T]) saveFailed(key string, err error) {
	if d.cfg.OnSaveError == nil || errors.Is(err, ErrLockLost) || errors.Is(err, context.Canceled) {
		return
	}
	onErr := d.cfg.OnSaveError
	d.mu.Lock()
	defer d.mu.Unlock()
	d.callbackLocked(key, "OnSaveError", func() { onErr(key, err) })
}

// dropLocked ends p with err without writing its data, and gives its lock
// back in the background: the record stays as its last landed save. The
// game hears of it through Kick (reason) and, for a lost lock, OnLockLost.
// It never waits on I/O. d.mu held.
func (d *Driver[T]) dropLocked(p *Profile[T], err error, reason KickReason) {
	if p.state == stateClosed {
		return
	}
	key, token, earlier := p.key, p.token, append([]string(nil), p.earlier...)
	if p.finishLocked(err) {
		d.lockLostLocked(key, err, reason)
	} else {
		d.kickLocked(key, reason)
	}
	d.goTracked(func() { d.giveBack(key, token, earlier) })
}
