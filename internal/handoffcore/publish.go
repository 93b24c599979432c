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

// oncePublisher is a bus that can publish in one attempt that never waits
// (messaging.NATSBus): what a direct publish needs, on a goroutine that
// must not wait out the bus's retry.
type oncePublisher interface {
	PublishOnce(ctx context.Context, jobID string, m messaging.Message) error
}

// outgoing is one message waiting in the publish queue.
type outgoing struct {
	to      string
	m       messaging.Message
	ctx     context.Context // from Trace.PublishStart
	counter *atomic.Uint64  // counts it as it goes out (see publish)
}

// publish queues m for server to, under a producer span child of ctx's,
// whose trace context m carries. The first publish starts the workers;
// after Close nothing is queued. A full queue drops m and counts it in
// Stats.PublishDropped. It reports whether m was queued (or sent).
//
// With direct, when nothing is queued or being sent (the path is idle) and
// the bus can publish in one attempt that never waits, m is sent on the
// caller's goroutine instead, saving the hop to a worker; if that attempt
// fails, m is queued as any other (the worker retries it). A busy path
// (a flood) queues, so the queue's bound holds.
//
// m's counter is raised before the bus is called, and lowered again if the
// call fails: the reply m may bring can arrive (and wake whoever reads the
// Stats) before the bus call returns, and a Stats read after what a message
// caused must count the message.
func (h *Handoff) publish(ctx context.Context, to string, m messaging.Message, counter *atomic.Uint64, direct bool) bool {
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
	if once, ok := h.cfg.Bus.(oncePublisher); ok && direct && h.inFlight.Load() == 0 {
		h.inFlight.Add(1)
		h.wg.Add(1)
		h.mu.Unlock()
		counter.Add(1)
		err := once.PublishOnce(h.ctx, to, m)
		h.mu.Lock()
		h.inFlight.Add(-1)
		h.wg.Done()
		if err == nil {
			h.sent(sctx, to, m)
			return true
		}
		counter.Add(^uint64(0)) // not sent after all
		if h.closed {
			h.trace.publishDone(sctx, to, m, err)
			return false
		}
	}
	return h.enqueueLocked(sctx, to, m, counter)
}

// enqueueLocked queues m (h.mu held, h not closed), starting the workers
// on the first message.
func (h *Handoff) enqueueLocked(sctx context.Context, to string, m messaging.Message, counter *atomic.Uint64) bool {
	if !h.publishing {
		h.publishing = true
		for range publishWorkers {
			h.wg.Add(1)
			go h.publishLoop()
		}
	}
	h.inFlight.Add(1)
	select {
	case h.outbox <- outgoing{to: to, m: m, ctx: sctx, counter: counter}:
		h.queueFull = false
		return true
	default:
		h.inFlight.Add(-1)
		h.trace.publishDone(sctx, to, m, errQueueFull)
		h.publishDropped.Add(1)
		level := slog.LevelDebug
		if !h.queueFull { // the first drop of a run at Warn, the rest at Debug
			h.queueFull, level = true, slog.LevelWarn
		}
		h.log.Log(sctx, level, "handoff: publish queue full; messages are dropped until the bus takes them again",
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
		o.counter.Add(1) // before the call: see publish
		err := h.cfg.Bus.Publish(h.ctx, o.to, o.m)
		h.inFlight.Add(-1)
		if err != nil {
			o.counter.Add(^uint64(0))
			h.trace.publishDone(o.ctx, o.to, o.m, err)
			if h.ctx.Err() == nil {
				h.publishFailed.Add(1)
				h.log.Warn("handoff: publish failed", "to", o.to, "type", string(o.m.Type), "key", o.m.Key, "err", err)
			}
			continue
		}
		h.sent(o.ctx, o.to, o.m)
	}
}

// sent ends the span of m, published (its counter was raised before).
func (h *Handoff) sent(sctx context.Context, to string, m messaging.Message) {
	h.trace.publishDone(sctx, to, m, nil)
	h.log.Debug("handoff: message sent", "to", to, "type", string(m.Type), "driver", m.Driver, "key", m.Key)
}
