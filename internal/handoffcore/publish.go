package handoffcore

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/ckernel/playerdata/messaging"
)

const (
	// publishQueueLen bounds the messages waiting to go out. What arrives on
	// the bus makes replies no faster than the reply limits allow (see
	// replies.go), so a full queue means the bus itself is stuck; a message
	// beyond it is dropped and counted (a waiting join repeats its request,
	// and a join whose reply is lost retries after its park).
	publishQueueLen = 1024
	// publishWorkers send the queued messages: more than one, so that one
	// publish waiting out the bus's retry delay does not hold up the rest,
	// and a fixed number, so that no message costs a goroutine.
	publishWorkers = 2
)

// errQueueFull ends the send span of a message dropped at a full queue.
var errQueueFull = errors.New("handoff: publish queue full")

// outgoing is one message waiting in the publish queue.
type outgoing struct {
	to      string
	m       messaging.Message
	ctx     context.Context // from Trace.PublishStart
	counter *atomic.Uint64  // counts it once it is out
}

// publish queues m for server to, under a producer span child of ctx's,
// whose trace context m carries. The first publish starts the workers;
// after Close nothing is queued. A full queue drops m and counts it in
// Stats.PublishDropped. It reports whether m was queued.
func (h *Handoff) publish(ctx context.Context, to string, m messaging.Message, counter *atomic.Uint64) bool {
	if h.cfg.Bus == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	m.Sender = h.cfg.JobID
	sctx := h.trace.publishStart(ctx, to, &m)
	if !h.publishing {
		h.publishing = true
		for range publishWorkers {
			h.wg.Add(1)
			go h.publishLoop()
		}
	}
	select {
	case h.outbox <- outgoing{to: to, m: m, ctx: sctx, counter: counter}:
		h.queueFull = false
		return true
	default:
		h.trace.publishDone(sctx, to, m, errQueueFull)
		h.publishDropped.Add(1)
		level := slog.LevelDebug
		if !h.queueFull { // the first drop of a run at Warn, the rest at Debug
			h.queueFull, level = true, slog.LevelWarn
		}
		h.log.Log(ctx, level, "handoff: publish queue full; messages are dropped until the bus takes them again",
			"to", to, "type", string(m.Type), "queue", publishQueueLen)
	}
	return false
}

// publishLoop sends queued messages until Close closes the queue. After
// Close's deadline h.ctx is cancelled and what is left fails at once,
// uncounted.
func (h *Handoff) publishLoop() {
	defer h.wg.Done()
	for o := range h.outbox {
		err := h.cfg.Bus.Publish(h.ctx, o.to, o.m)
		h.trace.publishDone(o.ctx, o.to, o.m, err)
		if err != nil {
			if h.ctx.Err() == nil {
				h.publishFailed.Add(1)
				h.log.Warn("handoff: publish failed", "to", o.to, "type", string(o.m.Type), "key", o.m.Key, "err", err)
			}
			continue
		}
		o.counter.Add(1)
		h.log.Debug("handoff: message sent", "to", o.to, "type", string(o.m.Type), "driver", o.m.Driver, "key", o.m.Key)
	}
}
