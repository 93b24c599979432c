package messaging

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
)

// PublishOnce delivers as Publish does, and a refused attempt answers at
// once: no timer, no retry, nothing counted but the delivery.
func TestPublishOnce(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	busA := newBus(t, ncA)
	ch, _ := subscribe(t, busA, ncA, "server-a")
	clk := newTimerClock() // a timer started on it would never fire
	busB := newBus(t, ncB, withClock(clk))

	m := Message{Type: TypeMove, Driver: "PlayerData", Key: "user:42", Sender: "server-b", Body: "prepare"}
	if err := busB.PublishOnce(context.Background(), "server-a", m); err != nil {
		t.Fatalf("PublishOnce: %v", err)
	}
	if got := receive(t, ch); got.Key != m.Key || got.Body != "prepare" || got.Type != TypeMove {
		t.Fatalf("delivered %+v, want %+v", got, m)
	}
	if st := busB.Stats(); st != (Stats{Published: 1}) {
		t.Fatalf("stats %+v", st)
	}

	ncB.Close()
	if err := busB.PublishOnce(context.Background(), "server-a", m); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("PublishOnce on a closed connection: %v, want nats.ErrConnectionClosed at once", err)
	}
	if st := traffic(busB.Stats()); st != (Stats{Published: 1}) {
		t.Fatalf("stats after a refused attempt %+v, want no retry counted", st)
	}
}
