package deadlines_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/deadlines"
)

// owner is a deadline's owner in these tests: it fires its function.
type owner struct {
	e    deadlines.Entry
	fire func()
}

// newHeap is a Heap of owners on c.
func newHeap(c clock.Clock) *deadlines.Heap[owner] {
	return deadlines.New(c, func(o *owner) *deadlines.Entry { return &o.e }, func(o *owner) { o.fire() })
}

// ran collects the names of the entries that ran, in order.
type ran chan string

func (r ran) entry(name string) *owner { return &owner{fire: func() { r <- name }} }

// next is the next entry to run, or "" when none runs within a second.
func (r ran) next() string {
	select {
	case n := <-r:
		return n
	case <-time.After(time.Second):
		return ""
	}
}

// none reports whether nothing runs for a while.
func (r ran) none() bool {
	select {
	case <-r:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func TestEntriesRunInDeadlineOrder(t *testing.T) {
	c := clock.NewMock()
	h := newHeap(c)
	r := make(ran, 10)
	a, b, d := r.entry("a"), r.entry("b"), r.entry("d")
	h.Reset(a, 30*time.Millisecond)
	h.Reset(b, 10*time.Millisecond)
	h.Reset(d, 20*time.Millisecond)
	c.Add(9 * time.Millisecond)
	if !r.none() {
		t.Fatal("an entry ran before its deadline")
	}
	c.Add(31 * time.Millisecond)
	for _, want := range []string{"b", "d", "a"} {
		if got := r.next(); got != want {
			t.Fatalf("ran %q, want %q", got, want)
		}
	}
	if h.Len() != 0 {
		t.Errorf("%d entries still scheduled after all ran", h.Len())
	}
}

func TestResetAndStop(t *testing.T) {
	c := clock.NewMock()
	h := newHeap(c)
	r := make(ran, 10)
	a, b := r.entry("a"), r.entry("b")
	h.Reset(a, 10*time.Millisecond)
	h.Reset(b, 20*time.Millisecond)
	h.Reset(a, 30*time.Millisecond) // later: b first now
	if !h.Stop(b) || h.Stop(b) {
		t.Fatal("Stop of a scheduled entry: want true once, then false")
	}
	c.Add(25 * time.Millisecond)
	if !r.none() {
		t.Fatal("a stopped or moved entry ran")
	}
	h.Reset(b, 0) // at once (a mock clock runs what is due when it moves)
	c.Add(0)
	if got := r.next(); got != "b" {
		t.Fatalf("ran %q, want b (reset to now)", got)
	}
	c.Add(5 * time.Millisecond)
	if got := r.next(); got != "a" {
		t.Fatalf("ran %q, want a at its moved deadline", got)
	}
	h.Reset(a, time.Millisecond)
	h.Close()
	c.Add(time.Second)
	if !r.none() {
		t.Error("an entry ran after Close")
	}
	h.Reset(a, 0)
	if !r.none() || h.Len() != 0 {
		t.Error("Reset after Close scheduled an entry")
	}
}

// TestManyEntries: a thousand entries moved and stopped at random each run
// once, none before its last deadline, in deadline order, and stopped ones
// never, whether Reset or ResetAt scheduled them.
func TestManyEntries(t *testing.T) {
	c := clock.NewMock()
	h := newHeap(c)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1000
	type run struct {
		i  int
		at time.Time
	}
	runs := make(chan run, 2*n)
	entries := make([]*owner, n)
	due := make([]time.Duration, n)
	for i := range entries {
		entries[i] = &owner{fire: func() { runs <- run{i, c.Now()} }}
	}
	for range 3 * n {
		i := rng.IntN(n)
		if rng.IntN(4) == 0 {
			h.Stop(entries[i])
			due[i] = -1
			continue
		}
		due[i] = time.Duration(1+rng.IntN(1000)) * time.Millisecond
		if rng.IntN(2) == 0 {
			h.Reset(entries[i], due[i])
		} else {
			h.ResetAt(entries[i], c.Now().Add(due[i])) // the clock stands still: the same deadline
		}
	}
	want := 0
	for _, d := range due {
		if d > 0 {
			want++
		}
	}
	start := c.Now()
	for range 1100 {
		c.Add(time.Millisecond)
	}
	seen := map[int]bool{}
	for range want {
		select {
		case r := <-runs:
			if seen[r.i] {
				t.Fatalf("entry %d ran twice", r.i)
			}
			seen[r.i] = true
			if due[r.i] <= 0 {
				t.Fatalf("stopped entry %d ran", r.i)
			}
			if r.at.Sub(start) < due[r.i] {
				t.Fatalf("entry %d ran at %s, before its deadline %s", r.i, r.at.Sub(start), due[r.i])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d entries ran", len(seen), want)
		}
	}
	select {
	case r := <-runs:
		t.Fatalf("entry %d ran beyond the %d scheduled", r.i, want)
	case <-time.After(50 * time.Millisecond):
	}
}

// ResetAt schedules at a time the caller knows (no clock read of its own):
// the entry runs once that time comes, in order with the Reset ones, and at
// once for a time that has passed.
func TestResetAt(t *testing.T) {
	c := clock.NewMock()
	h := newHeap(c)
	r := make(ran, 10)
	a, b, late := r.entry("a"), r.entry("b"), r.entry("late")
	start := c.Now()
	c.Add(5 * time.Millisecond)
	h.ResetAt(a, start.Add(30*time.Millisecond))
	h.Reset(b, 10*time.Millisecond) // at 15 ms
	c.Add(24 * time.Millisecond)    // 29 ms
	if got := r.next(); got != "b" {
		t.Fatalf("ran %q, want b", got)
	}
	if !r.none() {
		t.Fatal("the entry reset at 30 ms ran at 29")
	}
	c.Add(time.Millisecond)
	if got := r.next(); got != "a" {
		t.Fatalf("ran %q, want a at 30 ms", got)
	}
	h.ResetAt(late, start) // passed
	c.Add(0)               // the mock clock runs a timer due now when it moves
	if got := r.next(); got != "late" {
		t.Fatalf("an entry reset at a time passed: ran %q, want it at once", got)
	}
}
