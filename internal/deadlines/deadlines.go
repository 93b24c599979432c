// Package deadlines runs many one-shot deadlines on one clock timer.
//
// A driver holds thousands of resident profiles, each with a deadline (the
// autosave/refresh tick or the lock's age fence, whichever comes first). A
// clock timer each costs a runtime timer and a closure per profile; here
// each deadline is an Entry of 16 bytes that lives inside its owner, the
// owners wait in one min-heap, and one clock timer is armed for the
// earliest. The Heap knows its owners' type: it finds an owner's Entry and
// fires the owner through the two functions it was made with, so an Entry
// holds no pointer back to its owner. When it fires, the entries due
// run in deadline order on the timer's goroutine, whatever their owners are
// doing: a deadline that guards safety (a fence) never waits for its
// owner's work, only for the entries due before it, which must be quick and
// never wait on I/O.
package deadlines

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Heap schedules the deadlines of owners of type O on one clock timer.
// Its methods are safe for concurrent use.
type Heap[O any] struct {
	clock clock.Clock
	base  time.Time // times are kept as offsets from base (monotonic where the clock is)
	entry func(*O) *Entry
	fire  func(*O)

	mu     sync.Mutex
	owners []*O // a min-heap on their entries' at
	timer  *clock.Timer
	armed  int64 // the offset the timer is armed for; -1: not armed
	closed bool
}

// Entry is one owner's deadline: it fires once when due, unless Stopped or
// Reset first. An Entry belongs to one Heap while scheduled; its zero
// value is ready to use.
type Entry struct {
	at  int64 // offset from the Heap's base
	idx int   // position in the heap + 1; 0: not scheduled
}

// New returns a Heap on c for owners of type O: entry is an owner's Entry
// (a field of it), fire what runs when its deadline is due, on the Heap's
// timer goroutine (it must be quick and never wait on I/O: the entries due
// after it wait for it).
func New[O any](c clock.Clock, entry func(*O) *Entry, fire func(*O)) *Heap[O] {
	return &Heap[O]{clock: c, base: c.Now(), entry: entry, fire: fire, armed: -1}
}

// Reset schedules o to fire after d (at once when d <= 0), replacing its
// earlier deadline if it had one. It does nothing once the Heap is closed.
func (h *Heap[O]) Reset(o *O, d time.Duration) { h.ResetAt(o, h.clock.Now().Add(max(d, 0))) }

// ResetAt schedules o to fire at t (at once when t has passed), a time of
// the Heap's clock, replacing its earlier deadline if it had one: Reset for
// a caller that knows the deadline itself, without reading the clock. It
// does nothing once the Heap is closed.
func (h *Heap[O]) ResetAt(o *O, t time.Time) {
	at := t.Sub(h.base)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	e := h.entry(o)
	e.at = int64(at)
	if e.idx == 0 {
		h.owners = append(h.owners, o)
		e.idx = len(h.owners)
		h.up(e.idx - 1)
	} else if !h.up(e.idx - 1) {
		h.down(e.idx - 1)
	}
	h.armLocked()
}

// Stop unschedules o and reports whether it was scheduled.
func (h *Heap[O]) Stop(o *O) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entry(o)
	if e.idx == 0 {
		return false
	}
	h.remove(e.idx - 1)
	return true
}

// Len is how many owners are scheduled.
func (h *Heap[O]) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.owners)
}

// Close unschedules every entry and stops the timer: nothing runs after it
// returns but what was already running.
func (h *Heap[O]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, o := range h.owners {
		h.entry(o).idx = 0
	}
	h.owners = nil
	if h.timer != nil {
		h.timer.Stop()
	}
}

// armLocked points the timer at the earliest entry. h.mu held.
func (h *Heap[O]) armLocked() {
	if len(h.owners) == 0 {
		return // a timer armed for a later time fires and finds nothing due
	}
	first := h.entry(h.owners[0]).at
	if h.armed >= 0 && h.armed <= first {
		return
	}
	h.armed = first
	d := time.Duration(first) - h.clock.Now().Sub(h.base)
	if h.timer == nil {
		h.timer = h.clock.AfterFunc(d, h.fireDue)
	} else {
		h.timer.Reset(d)
	}
}

// fireDue fires the owners due, in deadline order, and arms the timer for
// the next.
func (h *Heap[O]) fireDue() {
	for {
		h.mu.Lock()
		now := int64(h.clock.Now().Sub(h.base))
		if h.closed || len(h.owners) == 0 || h.entry(h.owners[0]).at > now {
			h.armed = -1
			if !h.closed {
				h.armLocked()
			}
			h.mu.Unlock()
			return
		}
		o := h.owners[0]
		h.remove(0)
		h.mu.Unlock()
		h.fire(o)
	}
}

// The heap's order: a min-heap on at.

func (h *Heap[O]) less(i, j int) bool { return h.entry(h.owners[i]).at < h.entry(h.owners[j]).at }

func (h *Heap[O]) swap(i, j int) {
	h.owners[i], h.owners[j] = h.owners[j], h.owners[i]
	h.entry(h.owners[i]).idx, h.entry(h.owners[j]).idx = i+1, j+1
}

// up moves entry i towards the root while it is earlier than its parent,
// and reports whether it moved.
func (h *Heap[O]) up(i int) bool {
	moved := false
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.swap(i, parent)
		i, moved = parent, true
	}
	return moved
}

// down moves entry i towards the leaves while a child is earlier.
func (h *Heap[O]) down(i int) {
	n := len(h.owners)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		least := l
		if r := l + 1; r < n && h.less(r, l) {
			least = r
		}
		if !h.less(least, i) {
			return
		}
		h.swap(i, least)
		i = least
	}
}

// remove takes owner i out of the heap.
func (h *Heap[O]) remove(i int) {
	last := len(h.owners) - 1
	e := h.entry(h.owners[i])
	if i != last {
		h.swap(i, last)
	}
	h.owners[last] = nil
	h.owners = h.owners[:last]
	e.idx = 0
	if i != last && i < len(h.owners) {
		if !h.up(i) {
			h.down(i)
		}
	}
}
