package handoffcore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/messaging"
)

// onceBus is a fakeBus that can also publish in one attempt (as
// messaging.NATSBus can), recording which way each message went.
type onceBus struct {
	fakeBus
	OnceFn func(to string, m messaging.Message) error // nil: succeeds

	mu     sync.Mutex
	once   []messaging.Type // sent by PublishOnce
	queued []messaging.Type // sent by Publish (a worker)
}

func (b *onceBus) PublishOnce(_ context.Context, to string, m messaging.Message) error {
	if b.OnceFn != nil {
		if err := b.OnceFn(to, m); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.once = append(b.once, m.Type)
	return nil
}

func (b *onceBus) ways() (once, queued []messaging.Type) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]messaging.Type(nil), b.once...), append([]messaging.Type(nil), b.queued...)
}

func newOnceBus(publish func(ctx context.Context) error) *onceBus {
	b := &onceBus{}
	b.PublishFn = func(ctx context.Context, _ string, m messaging.Message) error {
		if publish != nil {
			if err := publish(ctx); err != nil {
				return err
			}
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.queued = append(b.queued, m.Type)
		return nil
	}
	return b
}

// A move's message goes out on the caller's goroutine when nothing is
// queued or being sent: it is published before SendMove returns, and no
// worker carries it.
func TestSendMoveIsDirectWhenThePathIsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		bus := newOnceBus(nil)
		h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: bus, Presence: newFakePresence(wd.clk)})
		h.Start()
		if !h.SendMove(t.Context(), jobB, messaging.Message{Key: playerKey}) {
			t.Fatal("SendMove on an idle path = false")
		}
		once, queued := bus.ways()
		if len(once) != 1 || once[0] != messaging.TypeMove || len(queued) != 0 {
			t.Fatalf("sent directly %v, through the queue %v; want the move sent directly", once, queued)
		}
		if s := h.Stats(); s.MovesSent != 1 {
			t.Fatalf("MovesSent = %d, want 1", s.MovesSent)
		}
	})
}

// A direct attempt the bus refuses is queued as any message (the worker's
// Publish retries it); a busy path (a message queued or being sent) queues
// the move, so a flood stays under the queue's bound.
func TestSendMoveQueuesWhenRefusedOrBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		release := make(chan struct{})
		bus := newOnceBus(func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		bus.OnceFn = func(string, messaging.Message) error { return errors.New("nats: connection refused") }
		h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: bus, Presence: newFakePresence(wd.clk)})
		h.Start()
		if !h.SendMove(t.Context(), jobB, messaging.Message{Key: playerKey}) {
			t.Fatal("a refused direct attempt was not queued")
		}
		synctest.Wait() // the worker holds it, its Publish waits on release
		bus.OnceFn = nil
		if !h.SendMove(t.Context(), jobB, messaging.Message{Key: "user:43"}) {
			t.Fatal("SendMove on a busy path = false")
		}
		if once, _ := bus.ways(); len(once) != 0 {
			t.Fatalf("sent directly %v while a message was being sent; want it queued", once)
		}
		close(release)
		synctest.Wait()
		once, queued := bus.ways()
		if len(once) != 0 || len(queued) != 2 {
			t.Fatalf("sent directly %v, through the queue %v; want both through the queue", once, queued)
		}
		// Idle again: the next move goes out directly.
		h.SendMove(t.Context(), jobB, messaging.Message{Key: "user:44"})
		if once, _ := bus.ways(); len(once) != 1 {
			t.Fatalf("sent directly %v once the path was idle again; want 1", once)
		}
	})
}
