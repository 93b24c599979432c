package datadriver

import (
	"context"
	"sync"
	"time"
)

// maxCallbackRunners bounds the goroutines that run a driver's callbacks
// at once: a key whose callback blocks holds one of them, so the callbacks
// of other keys wait only while this many keys have one running.
const maxCallbackRunners = 8

// callbackOrderWait bounds how long a leave's cleanups (OnRelease) wait
// for the callbacks of their key queued before them (its Kick): past it
// (a Kick that blocks, or that calls Release itself) they run anyway.
const callbackOrderWait = 500 * time.Millisecond

// dispatcher runs callbacks: those of one key one at a time in the order
// they were pushed, keys taking turns (one callback each, in the order they
// became ready) on at most maxCallbackRunners goroutines, started on
// demand and gone when nothing waits.
type dispatcher struct {
	mu      sync.Mutex
	idle    sync.Cond                // signalled when the last runner ends
	keys    map[string]*keyCallbacks // the keys with a callback queued or running
	ready   []*keyCallbacks          // keys whose next callback waits for a runner
	runners int
	closed  bool
}

// keyCallbacks are one key's queued callbacks.
type keyCallbacks struct {
	key string
	fns []func()
}

func newDispatcher() *dispatcher {
	q := &dispatcher{keys: make(map[string]*keyCallbacks)}
	q.idle.L = &q.mu
	return q
}

// push queues f, a callback of key; after close it is dropped.
func (q *dispatcher) push(key string, f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if kc := q.keys[key]; kc != nil {
		kc.fns = append(kc.fns, f) // a runner or the ready queue has it
		return
	}
	kc := &keyCallbacks{key: key, fns: []func(){f}}
	q.keys[key] = kc
	q.ready = append(q.ready, kc)
	if q.runners < maxCallbackRunners {
		q.runners++
		go q.run()
	}
}

// run is a runner: it runs the next callback of the first ready key, puts
// the key back at the end while it has more, and ends when no key is
// ready.
func (q *dispatcher) run() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) > 0 {
		kc := q.ready[0]
		q.ready[0] = nil
		q.ready = q.ready[1:]
		f := kc.fns[0]
		kc.fns[0] = nil
		kc.fns = kc.fns[1:]
		q.mu.Unlock()
		f()
		q.mu.Lock()
		if len(kc.fns) == 0 {
			delete(q.keys, kc.key)
		} else {
			q.ready = append(q.ready, kc)
		}
	}
	q.ready = nil
	q.runners--
	if q.runners == 0 {
		q.idle.Broadcast()
	}
}

// flushed returns a channel closed once the callbacks of key queued now
// have run; nil when none is queued or running.
func (q *dispatcher) flushed(key string) <-chan struct{} {
	q.mu.Lock()
	kc := q.keys[key]
	q.mu.Unlock()
	if kc == nil {
		return nil
	}
	ch := make(chan struct{})
	q.push(key, func() { close(ch) })
	return ch
}

// close stops taking callbacks and waits until the queued ones ran.
func (q *dispatcher) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for q.runners > 0 {
		q.idle.Wait()
	}
}

// awaitCallbacks waits until the game heard the callbacks of p's key
// queued so far (the Kick of its leave) before its leave cleanups run: at
// most callbackOrderWait, or until ctx ends.
func (p *Profile[T]) awaitCallbacks(ctx context.Context) {
	x := p.extras()
	p.dataMu.RLock()
	none := x == nil || len(x.cleanups) == 0
	p.dataMu.RUnlock()
	if none {
		return
	}
	ch := p.d.callbacks.flushed(p.key)
	if ch == nil {
		return
	}
	t := p.d.node.clock.Timer(callbackOrderWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}
