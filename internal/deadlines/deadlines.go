// Package deadlines runs many one-shot deadlines on one clock timer.
//
// A driver holds thousands of resident profiles, each with two deadlines
// (the autosave/refresh tick and the lock's age fence). A clock timer each
// costs a runtime timer and a closure per profile; here each deadline is an
// Entry that lives inside its owner, the entries wait in one min-heap, and
// one clock timer is armed for the earliest. When it fires, the entries due
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

// Heap schedules Entries on one clock timer. Its methods are safe for
// concurrent use.
type Heap struct {
	clock clock.Clock
	base  time.Time // times are kept as offsets from base (monotonic where the clock is)

	mu      sync.Mutex
	entries []*Entry
	timer   *clock.Timer
	armed   int64 // the offset the timer is armed for; -1: not armed
	closed  bool
}

// Entry is one deadline: it fires once when due, unless Stopped or Reset
// first. An Entry belongs to one Heap while scheduled; its zero value with
// Fire set is ready to use.
type Entry struct {
	// Fire is fired when the deadline is due, on the Heap's timer
	// goroutine. An owner that is a pointer (or a Func) is stored without
	// an allocation, where a method value or a closure costs one per Entry.
	Fire Firer
	at   int64 // offset from the Heap's base
	idx  int   // position in the heap + 1; 0: not scheduled
}

// Firer is what an Entry fires when it is due.
type Firer interface{ Fire() }

// Func is a function as a Firer.
type Func func()

// Fire calls f.
func (f Func) Fire() { f() }

// New returns a Heap on c.
func New(c clock.Clock) *Heap {
	return &Heap{clock: c, base: c.Now(), armed: -1}
}

// Reset schedules e to run after d (at once when d <= 0), replacing its
// earlier deadline if it had one. It does nothing once the Heap is closed.
func (h *Heap) Reset(e *Entry, d time.Duration) { h.ResetAt(e, h.clock.Now().Add(max(d, 0))) }

// ResetAt schedules e to run at t (at once when t has passed), a time of
// the Heap's clock, replacing its earlier deadline if it had one: Reset for
// a caller that knows the deadline itself, without reading the clock. It
// does nothing once the Heap is closed.
func (h *Heap) ResetAt(e *Entry, t time.Time) {
	at := t.Sub(h.base)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	e.at = int64(at)
	if e.idx == 0 {
		h.entries = append(h.entries, e)
		e.idx = len(h.entries)
		h.up(e.idx - 1)
	} else if !h.up(e.idx - 1) {
		h.down(e.idx - 1)
	}
	h.armLocked()
}

// Stop unschedules e and reports whether it was scheduled.
func (h *Heap) Stop(e *Entry) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.idx == 0 {
		return false
	}
	h.remove(e.idx - 1)
	return true
}

// Len is how many entries are scheduled.
func (h *Heap) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}

// Close unschedules every entry and stops the timer: nothing runs after it
// returns but what was already running.
func (h *Heap) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, e := range h.entries {
		e.idx = 0
	}
	h.entries = nil
	if h.timer != nil {
		h.timer.Stop()
	}
}

// armLocked points the timer at the earliest entry. h.mu held.
func (h *Heap) armLocked() {
	if len(h.entries) == 0 {
		return // a timer armed for a later time fires and finds nothing due
	}
	first := h.entries[0].at
	if h.armed >= 0 && h.armed <= first {
		return
	}
	h.armed = first
	d := time.Duration(first) - h.clock.Now().Sub(h.base)
	if h.timer == nil {
		h.timer = h.clock.AfterFunc(d, h.fire)
	} else {
		h.timer.Reset(d)
	}
}

// fire runs the entries due, in deadline order, and arms the timer for the
// next.
func (h *Heap) fire() {
	for {
		h.mu.Lock()
		now := int64(h.clock.Now().Sub(h.base))
		if h.closed || len(h.entries) == 0 || h.entries[0].at > now {
			h.armed = -1
			if !h.closed {
				h.armLocked()
			}
			h.mu.Unlock()
			return
		}
		e := h.entries[0]
		h.remove(0)
		h.mu.Unlock()
		e.Fire.Fire()
	}
}

// The heap's order: a min-heap on at.

func (h *Heap) less(i, j int) bool { return h.entries[i].at < h.entries[j].at }

func (h *Heap) swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.entries[i].idx, h.entries[j].idx = i+1, j+1
}

// up moves entry i towards the root while it is earlier than its parent,
// and reports whether it moved.
func (h *Heap) up(i int) bool {
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
func (h *Heap) down(i int) {
	n := len(h.entries)
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

// remove takes entry i out of the heap.
func (h *Heap) remove(i int) {
	last := len(h.entries) - 1
	e := h.entries[i]
	if i != last {
		h.swap(i, last)
	}
	h.entries[last] = nil
	h.entries = h.entries[:last]
	e.idx = 0
	if i != last && i < len(h.entries) {
		if !h.up(i) {
			h.down(i)
		}
	}
}
