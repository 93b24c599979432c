package handoffcore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// A handoff's release request, and the holder's reply once its driver let
// the key go, go out on their own goroutines when the path is idle: no
// worker carries either (each hop to a worker cost a handoff its wakeup).
// The reply to a request whose lock is already let go, sent from the bus's
// own goroutine, still goes through the queue.
func TestRequestAndReplyAreDirectWhenThePathIsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		var onMessage messaging.Handler
		bus := newOnceBus(nil)
		bus.SubscribeFn = func(_ string, h messaging.Handler) (messaging.Subscription, error) {
			onMessage = h
			return nil, nil
		}
		h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: bus, Presence: newFakePresence(wd.clk)})
		holder := &fakeHolder{}
		if err := h.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
			t.Fatal(err)
		}
		h.Start()
		if onMessage == nil {
			t.Fatal("the handoff did not subscribe")
		}

		// The joiner's side: a wait asks the holder.
		w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
		defer w.Close()
		ctx, cancel := context.WithCancel(t.Context())
		go func() { _, _ = w.Next(ctx, handoffcore.Lock{Job: jobB, Token: "tok-1", Presence: true}) }()
		synctest.Wait()
		cancel()
		if once, queued := bus.ways(); !slices.Equal(once, []messaging.Type{messaging.TypeRequest}) || len(queued) != 0 {
			t.Fatalf("request sent directly %v, through the queue %v; want it sent directly", once, queued)
		}

		// The holder's side: the reply goes once the driver let the key go.
		onMessage(messaging.Message{Type: messaging.TypeRequest, Driver: driverName, Key: playerKey, Requester: jobB,
			Token: "tok-9"})
		synctest.Wait()
		holder.let(playerKey)
		synctest.Wait()
		once, queued := bus.ways()
		if !slices.Equal(once, []messaging.Type{messaging.TypeRequest, messaging.TypeReply}) || len(queued) != 0 {
			t.Fatalf("sent directly %v, through the queue %v; want the request and the reply sent directly", once, queued)
		}

		// Already let go: answered from the bus's goroutine, through the queue.
		holder.AtOnce = true
		onMessage(messaging.Message{Type: messaging.TypeRequest, Driver: driverName, Key: "user:43", Requester: "server-c",
			Token: "tok-2"})
		synctest.Wait()
		if _, queued := bus.ways(); !slices.Equal(queued, []messaging.Type{messaging.TypeReply}) {
			t.Fatalf("through the queue %v; want the immediate reply queued", queued)
		}
	})
}

// A message is counted before the bus call returns: what it causes (a reply
// that wakes a wait, here the bus delivering it) can be seen before the call
// returns, and a Stats read then must count the message. A send that fails
// is not counted, whichever way it went.
func TestAMessageIsCountedBeforeWhatItCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		var h *handoffcore.Handoff
		var seenOnce, seenQueued []uint64
		fail := true
		bus := newOnceBus(func(context.Context) error {
			seenQueued = append(seenQueued, h.Stats().MovesSent)
			return nil
		})
		bus.OnceFn = func(string, messaging.Message) error {
			seenOnce = append(seenOnce, h.Stats().MovesSent)
			if fail {
				return errors.New("refused")
			}
			return nil
		}
		h = wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: bus, Presence: newFakePresence(wd.clk)})
		h.Start()
		h.SendMove(t.Context(), jobB, messaging.Message{Key: playerKey}) // refused directly, then queued
		synctest.Wait()
		fail = false
		h.SendMove(t.Context(), jobB, messaging.Message{Key: playerKey}) // direct
		synctest.Wait()
		// The direct attempt that failed saw its own count, taken back
		// before the worker's send counted it again; the worker's send saw
		// 1; the direct send after saw 2.
		if !slices.Equal(seenOnce, []uint64{1, 2}) || !slices.Equal(seenQueued, []uint64{1}) {
			t.Fatalf("MovesSent seen during the bus calls: direct %v, queued %v; want [1 2] and [1]", seenOnce, seenQueued)
		}
		if s := h.Stats(); s.MovesSent != 2 {
			t.Fatalf("MovesSent = %d after two moves sent, want 2", s.MovesSent)
		}
	})
}
