package messaging

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A handler that falls behind by more than the pending limit makes the NATS
// client drop what arrives: the backlog, and so the wait of a message behind
// a flood, stays bounded; the drops are counted and the first is logged at
// Warn. The application's own async error handler still runs.
func TestPendingLimitBoundsTheBacklog(t *testing.T) {
	const limit, sent = 10, 200
	s := startNATS(t)
	appSawSlow := make(chan struct{}, sent)
	ncA, err := nats.Connect(s.ClientURL(), nats.NoReconnect(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			appSawSlow <- struct{}{}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncA.Close)
	ncB := connect(t, s)
	logs := &syncBuffer{}
	busA := newBus(t, ncA, withPendingLimit(limit), withLogger(slog.New(slog.NewTextHandler(logs, nil))))
	release := make(chan struct{})
	var delivered atomic.Int64
	sub, err := busA.Subscribe("server-a", func(Message) {
		<-release // the handler is stuck until the flood is in
		delivered.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := ncA.Flush(); err != nil {
		t.Fatal(err)
	}
	busB := newBus(t, ncB)
	for range sent {
		if err := busB.Publish(context.Background(), "server-a", Message{Type: TypeReply, Driver: "D", Key: "K"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ncB.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for ncA.Stats().InMsgs < sent && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for busA.Stats().DroppedBacklog+uint64(delivered.Load()) < sent && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := busA.Stats()
	if got := delivered.Load(); got > limit+1 || got == 0 {
		t.Errorf("the handler got %d messages, want at most the pending limit %d and the one it held", got, limit)
	}
	if st.DroppedBacklog+uint64(delivered.Load()) != sent {
		t.Errorf("DroppedBacklog %d + delivered %d, want the %d sent", st.DroppedBacklog, delivered.Load(), sent)
	}
	// The connection reports the slow consumer asynchronously, to the bus's
	// handler and then the application's.
	select {
	case <-appSawSlow:
	case <-time.After(waitTimeout):
		t.Fatal("the application's async error handler did not see the slow consumer")
	}
	if c := strings.Count(logs.String(), "level=WARN msg=\"messaging: more messages wait for the handler"); c != 1 {
		t.Errorf("%d warnings, want 1:\n%s", c, logs)
	}
	// An unsubscribed subscription's drops stay counted.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if got := busA.Stats().DroppedBacklog; got != st.DroppedBacklog {
		t.Errorf("DroppedBacklog %d after Unsubscribe, want %d", got, st.DroppedBacklog)
	}
}

func TestWithPendingLimitRefusesNonPositive(t *testing.T) {
	s := startNATS(t)
	for _, n := range []int{0, -1} {
		if _, err := newNATSBus(connect(t, s), withPendingLimit(n)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("withPendingLimit(%d): %v, want ErrInvalidConfig", n, err)
		}
	}
}
