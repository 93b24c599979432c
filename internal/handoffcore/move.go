package handoffcore

import (
	"context"

	"github.com/ckernel/playerdata/messaging"
)

// A move (datadriver's Profile.MoveTo) travels on the same subjects, under
// the same signing, as the release requests: its steps are messages of type
// messaging.TypeMove whose Body the datadriver writes and reads. The
// Handoff only carries them: it hands every one that arrives to the one
// move handler, and publishes the ones a driver sends (directly when the
// publish path is idle, else through its queue).

// HandleMoves sets f as the receiver of every move message that arrives on
// this server's subject (a verified one, when the bus has a key). f runs on
// the bus's delivery goroutine and must not block. Without a handler, move
// messages are dropped and counted as for an unknown driver.
func (h *Handoff) HandleMoves(f func(messaging.Message)) {
	h.moves.Store(&f)
}

// onMove hands a move message to the handler.
func (h *Handoff) onMove(m messaging.Message) {
	f := h.moves.Load()
	if f == nil || *f == nil {
		h.unknownDriver.Add(1)
		return
	}
	h.movesReceived.Add(1)
	(*f)(m)
}

// SendMove sends a move message to server to (m.Type is set to
// messaging.TypeMove and m.Sender to this server) and reports whether it
// was sent or queued: nothing is sent without a bus, after Close, or to a
// full queue. When nothing is queued or being sent, it is published on the
// caller's goroutine in one attempt that never waits (a move's prepare and
// accept are each on its path); else, or when that attempt fails, it is
// queued as a release request is.
func (h *Handoff) SendMove(ctx context.Context, to string, m messaging.Message) bool {
	m.Type = messaging.TypeMove
	return h.publish(ctx, to, m, &h.movesSent, true)
}
