package datadriver

import (
	"context"
	"errors"
	"runtime/debug"
)

// The game's callbacks (Kick, OnLockLost, OnSaveError, Update's function,
// leave cleanups, trade functions, OnMessage, migrations) are the game's
// code: a panic in one is recovered here, logged with its stack and turned
// into an error matching ErrCallbackPanic, so the server and its other
// players go on.
//
// Kick, OnLockLost, OnSaveError and OnSaved run on the driver's dispatcher
// (dispatch.go): the callbacks of one key one at a time, in the order they
// were called (nats.go delivers a connection's events so), so a game hears
// Kick before OnLockLost for a key, never the other way; a leave's cleanups
// (OnRelease) wait for the Kick of the same key first (awaitCallbacks). Keys
// take turns on at most maxCallbackRunners goroutines, so a slow callback
// holds up the later callbacks of its own key, and other keys' only while
// maxCallbackRunners keys have a callback running at once.

// presenceFlag reports whether this driver's locks carry presence=1: the
// Node beats presence and the driver has handoff on.
func (d *Driver[T]) presenceFlag() bool {
	return d.node.handoffOn && !d.cfg.noHandoff
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

// callback queues fn, the game callback name for key, on the dispatcher.
func (d *Driver[T]) callback(key, name string, fn func()) {
	d.callbacks.push(key, func() {
		if err := protect(name, fn); err != nil {
			d.logPanic(key, err)
		}
	})
}

// kick tells the game the driver ended key's session itself.
func (d *Driver[T]) kick(key string, reason KickReason) {
	if kick := d.cfg.Kick; kick != nil {
		d.callback(key, "Kick", func() { kick(key, reason) })
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
	d.callback(key, "OnSaveError", func() { onErr(key, err) })
}
