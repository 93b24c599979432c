package datadriver

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// A release request may name a lock of this server that no session or load
// of the driver uses: an acquire that landed but whose answer was lost, one
// still in flight when its load gave up, or a lock left by an earlier run of
// this JobID. Such a lock is given back (a release fenced by its token that
// writes no data), or joiners elsewhere would wait for it while this server
// lives. A forged request looks the same, so the work one can cost is
// bounded: a request for a (key, token) whose give-back is pending waits for
// it (a map lookup); at most orphanPending give-backs are pending at once,
// made one at a time by one goroutine; and tokens this driver did not issue
// are given back at most orphanRate times a second. Beyond that a request is
// dropped (counted) and answered as for a lock this server does not hold:
// its joiner asks again at its next repeat.
const (
	orphanPending = 256
	orphanRate    = 50 // give-backs of unknown tokens per second
	// ownTokenMemory is how many tokens of failed acquires are remembered
	// as this driver's own.
	ownTokenMemory = 4096
)

// orphanKey is one lock a request named.
type orphanKey struct{ key, token string }

// orphans is a driver's queue of locks to give back for release requests.
type orphans struct {
	clock clock.Clock

	mu      sync.Mutex
	pending map[orphanKey]chan struct{}
	queue   []orphanKey
	wake    chan struct{} // buffered 1: the worker has work
	// own are tokens of this driver's acquires that failed without an answer
	// (they may have landed), in the order they failed.
	own      map[string]struct{}
	ownOrder []string
	// budget and refilled are the token bucket of unknown tokens.
	budget   float64
	refilled time.Time

	dropped atomic.Uint64
}

func newOrphans(clk clock.Clock) *orphans {
	return &orphans{clock: clk, pending: make(map[orphanKey]chan struct{}), wake: make(chan struct{}, 1),
		own: make(map[string]struct{}), budget: orphanRate, refilled: clk.Now()}
}

// remember records token as one of this driver's own that may be on a lock.
func (o *orphans) remember(token string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.own[token]; ok {
		return
	}
	o.own[token] = struct{}{}
	o.ownOrder = append(o.ownOrder, token)
	if len(o.ownOrder) > ownTokenMemory {
		delete(o.own, o.ownOrder[0])
		o.ownOrder = o.ownOrder[1:]
	}
}

// ask queues the give-back of (key, token) and returns a channel closed once
// it settled; a closed channel when the request is dropped.
func (o *orphans) ask(key, token string) <-chan struct{} {
	k := orphanKey{key, token}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.pending[k]; ok {
		return ch
	}
	_, own := o.own[token]
	if len(o.pending) >= orphanPending || (!own && !o.spendLocked()) {
		o.dropped.Add(1)
		return closed
	}
	ch := make(chan struct{})
	o.pending[k] = ch
	o.queue = append(o.queue, k)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return ch
}

// spendLocked takes one unit of the unknown-token budget. o.mu held.
func (o *orphans) spendLocked() bool {
	now := o.clock.Now()
	o.budget = min(orphanRate, o.budget+now.Sub(o.refilled).Seconds()*orphanRate)
	o.refilled = now
	if o.budget < 1 {
		return false
	}
	o.budget--
	return true
}

// next takes the oldest queued give-back; ok false when none is queued.
func (o *orphans) next() (orphanKey, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) == 0 {
		return orphanKey{}, false
	}
	k := o.queue[0]
	o.queue = o.queue[1:]
	return k, true
}

// settled closes k's channel.
func (o *orphans) settled(k orphanKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.pending[k]; ok {
		close(ch)
		delete(o.pending, k)
	}
}

// drain closes every pending channel (the driver shuts down).
func (o *orphans) drain() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, ch := range o.pending {
		close(ch)
		delete(o.pending, k)
	}
	o.queue = nil
}

// runOrphans is the driver's give-back worker: one attempt per queued lock,
// one at a time, until the driver shuts down.
func (d *Driver[T]) runOrphans() {
	defer d.orphans.drain()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.orphans.wake:
		}
		for {
			k, ok := d.orphans.next()
			if !ok {
				break
			}
			d.log.Info("a release request names a lock of this server no session uses; giving it back", "key", k.key)
			d.giveBackOnce(k.key, k.token, nil)
			d.orphans.settled(k)
			if d.ctx.Err() != nil {
				return
			}
		}
	}
}
