package datadriver

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMailboxQueueKeepsOrder: requests pushed, popped and removed at
// random come off the ring in the order a plain slice keeps them, and a
// removed or popped request is never found again.
func TestMailboxQueueKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var m mailbox
	var want []*request
	for i := range 20000 {
		switch op := rng.IntN(10); {
		case op < 5:
			r := &request{}
			m.push(r)
			want = append(want, r)
		case op < 8:
			got := m.pop()
			if len(want) == 0 {
				if got != nil {
					t.Fatalf("step %d: pop of an empty queue gave a request", i)
				}
				continue
			}
			if got != want[0] {
				t.Fatalf("step %d: popped request %p, want %p (the first)", i, got, want[0])
			}
			want = want[1:]
			if m.remove(got) {
				t.Fatalf("step %d: a popped request was removed again", i)
			}
		default:
			if len(want) == 0 {
				if m.remove(&request{}) {
					t.Fatalf("step %d: removed a request never queued", i)
				}
				continue
			}
			j := rng.IntN(len(want))
			if !m.remove(want[j]) {
				t.Fatalf("step %d: request %d of %d was not found", i, j, len(want))
			}
			if m.remove(want[j]) {
				t.Fatalf("step %d: request removed twice", i)
			}
			want = slices.Delete(want, j, j+1)
		}
		if m.queued() != (len(want) > 0) {
			t.Fatalf("step %d: queued() = %v with %d queued", i, m.queued(), len(want))
		}
	}
	for _, r := range want {
		if got := m.pop(); got != r {
			t.Fatal("the queue's rest came off out of order")
		}
	}
	if m.pop() != nil || m.queued() {
		t.Fatal("the queue is not empty after all came off")
	}
}
