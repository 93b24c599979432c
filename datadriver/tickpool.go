package datadriver

import "sync"

// tickQueue runs the ticks of a Driver's profiles (the autosave and the
// lock refresh: background work nobody waits for) on at most
// MaxConcurrentSaves goroutines at once, taking them in the order they came
// due. Ticks that come due together (a slow Redis, an overloaded machine, a
// timer that fired late) wait here, where each started a goroutine of its
// own before, most of which found no autosave free and went (the runtime
// keeps each goroutine's descriptor, about 450 bytes, for good: the peak
// of goroutines alive is paid after it).
//
// A worker runs a queued profile's executor as any drain does: what is
// posted to it meanwhile runs on it too. A profile whose tick waits here is
// not running: a request or another signal posted to it starts a drain of
// its own at once (it never waits for the queue, so a trade borrowing
// executors cannot be stuck behind it), which runs the tick too; the
// worker then skips it. The safety deadlines are not the queue's: a tick
// points the profile's timer at its age deadline before it is posted.
type tickQueue[T any] struct {
	mu      sync.Mutex
	waiting []*Profile[T] // first to last; a profile may be here twice
	workers int           // running
}

// queueTick queues p's tick and starts a worker unless MaxConcurrentSaves
// run; false once the driver's executors are closed (no worker starts).
// p.mb.mu held.
func (d *Driver[T]) queueTick(p *Profile[T]) bool {
	q := &d.ticks
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	start := q.workers < max(1, d.node.cfg.MaxConcurrentSaves)
	if start {
		q.workers++
	}
	q.mu.Unlock()
	if start && !d.spawn(d.runTicks) {
		q.mu.Lock()
		q.workers--
		q.waiting = nil // nothing runs any more
		q.mu.Unlock()
		return false
	}
	return true
}

// runTicks is a tick worker: it runs the executors of queued profiles, one
// at a time, until none waits.
func (d *Driver[T]) runTicks() {
	for {
		p := d.ticks.next()
		if p == nil {
			return
		}
		if p.claimTick() {
			p.drain()
		}
	}
}

// next takes the first queued profile; nil (and the worker stops) when
// none waits.
func (q *tickQueue[T]) next() *Profile[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.workers--
		q.waiting = nil
		return nil
	}
	p := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	return p
}

// claimTick makes a tick worker p's executor when it is idle with work
// queued (its tick, and what came since), and reports whether it did.
func (p *Profile[T]) claimTick() bool {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running || (m.signals == 0 && !m.queued()) {
		return false // run by a drain of its own meanwhile
	}
	if p.stopping() {
		p.failQueuedLocked()
		return false
	}
	m.running = true
	return true
}
