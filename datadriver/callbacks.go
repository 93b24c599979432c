package datadriver

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
)

// The game's callbacks (Kick, OnLockLost, OnSaveError, Update's function,
// leave cleanups, trade functions, OnMessage, migrations) are the game's
// code: a panic in one is recovered here, logged with its stack and turned
// into an error matching ErrCallbackPanic, so the server and its other
// players go on.
//
// Kick, OnLockLost, OnSaveError and OnSaved run on the driver's dispatcher, one
// goroutine that runs them one at a time in the order they were called
// (nats.go delivers a connection's events so): a game hears Kick before
// OnLockLost for a key, never the other way. They must not block for long:
// every later callback of the driver waits for them.

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

// callback queues fn, the game callback name for key, on the dispatcher.
func (d *Driver[T]) callback(key, name string, fn func()) {
	d.callbacks.push(func() {
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

// dispatcher runs callbacks one at a time, in the order they were pushed, on
// a goroutine of its own (run), until it is closed and drained.
type dispatcher struct {
	mu     sync.Mutex
	queue  []func()
	closed bool
	wake   chan struct{} // buffered 1
	done   chan struct{} // closed when run returns
}

func newDispatcher() *dispatcher {
	return &dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues f; after close it is dropped.
func (q *dispatcher) push(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.queue = append(q.queue, f)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run is the dispatcher's goroutine.
func (q *dispatcher) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		batch, closed := q.queue, q.closed
		q.queue = nil
		q.mu.Unlock()
		for _, f := range batch {
			f()
		}
		if len(batch) == 0 && closed {
			return
		}
		if len(batch) == 0 {
			<-q.wake
		}
	}
}

// close stops taking callbacks and waits until the queued ones ran.
func (q *dispatcher) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}
