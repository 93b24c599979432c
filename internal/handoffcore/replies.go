package handoffcore

import (
	"context"

	"github.com/ckernel/playerdata/messaging"
)

// The bounds on what the requests arriving on this server's subject can make
// it do. Anyone who can publish there chooses the driver, key, requester
// name and token of a request; without a request key (messaging.NATSConfig.Key),
// anyone on the NATS server can.
const (
	// maxPendingReplies bounds the requests whose reply waits for a release
	// under way, one goroutine each (waiting for the driver's channel). A
	// request beyond it still reaches the driver, so the release happens,
	// but gets no reply: its joiner retries after its park. Only a request
	// naming the lock the driver holds now makes a release wait.
	maxPendingReplies = 1024
	// maxRepliedRequesters bounds the requesters that get an immediate reply
	// (see admitImmediate) in one reply window.
	maxRepliedRequesters = 256
)

// onRequest hands a release request to its driver and replies when the
// driver lets the key go.
func (h *Handoff) onRequest(m messaging.Message) {
	h.mu.Lock()
	release := h.drivers[m.Driver].Release
	h.mu.Unlock()
	if release == nil {
		h.unknownDriver.Add(1)
		h.log.Debug("handoff: request for an unknown driver dropped", "driver", m.Driver, "from", m.Requester)
		return
	}
	h.requestsReceived.Add(1)
	h.log.Debug("handoff: release requested", "driver", m.Driver, "key", m.Key, "from", m.Requester)
	pctx := h.trace.processStart(h.ctx, m)
	h.replyWhenReleased(pctx, askKey{m.Driver, m.Key, m.Requester}, release(m.Key, m.Token, m.Purpose))
}

// replyWhenReleased replies to a request once released is closed. Closed
// already (the driver holds no lock under that token: a late request, a
// forged one, or one that crossed the release), the reply goes at once if
// admitImmediate lets it. Otherwise a goroutine waits for it, one per
// requester and key however often the request repeats, at most
// maxPendingReplies at once, until Close. The request's processing (pctx,
// from Trace.ProcessStart) ends with the reply.
func (h *Handoff) replyWhenReleased(pctx context.Context, a askKey, released <-chan struct{}) {
	select {
	case <-released:
		if h.admitImmediate(a.from) {
			h.reply(pctx, a, false) // on the bus's goroutine: through the queue
		}
		h.trace.processDone(pctx)
		return
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.asked[a]; ok || h.closed {
		h.trace.processDone(pctx) // a repeat: the release under way answers it
		return
	}
	if len(h.asked) >= maxPendingReplies {
		h.trace.processDone(pctx)
		h.repliesDropped.Add(1)
		h.log.Debug("handoff: too many releases awaited; this request gets no reply", "driver", a.driver,
			"key", a.key, "from", a.from)
		return
	}
	h.asked[a] = struct{}{}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer h.trace.processDone(pctx)
		select {
		case <-released:
			h.reply(pctx, a, true)
		case <-h.releases.Done():
		}
		h.mu.Lock()
		delete(h.asked, a)
		h.mu.Unlock()
	}()
}

// admitImmediate says whether a request whose lock the driver does not hold
// is answered: once per requester per reply window (ParkMin, the least
// time between two attempts of a join, so a second reply could wake it no
// sooner), for at most maxRepliedRequesters requesters per window. The
// windows are fixed, not sliding. The reply lets a joiner whose request
// crossed the release retry at once; without the limit, a flood of forged
// requests naming one requester would make this server a reflector aimed
// at it. A reply not sent is counted in Stats.RepliesCoalesced.
func (h *Handoff) admitImmediate(requester string) bool {
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.repliedSince) >= h.cfg.ParkMin || now.Before(h.repliedSince) {
		clear(h.replied)
		h.repliedSince = now
	}
	if _, ok := h.replied[requester]; ok || len(h.replied) >= maxRepliedRequesters {
		h.repliesCoalesced.Add(1)
		return false
	}
	h.replied[requester] = struct{}{}
	return true
}

// onReply wakes the waits on the key a reply names. A reply naming a key
// nothing here waits on costs one map lookup and is dropped and counted
// (Stats.DroppedUnwaited, or DroppedUnknownDriver for a driver this server
// does not have). The reply is traced and logged before anything wakes, so
// that what a woken join does next (take the lock, return) always comes
// after it in the log: the wakes are gathered under h.mu and sent after
// (each a non-blocking send on a channel of one, harmless to a wait that
// ended meanwhile).
func (h *Handoff) onReply(m messaging.Message) {
	var buf [4]chan struct{}
	wake := buf[:0]
	h.mu.Lock()
	for w := range h.waits[waitKey{m.Driver, m.Key}] {
		wake = append(wake, w.wake)
	}
	wake = h.answeredLocked(m, wake)
	_, known := h.drivers[m.Driver]
	h.mu.Unlock()
	if len(wake) == 0 {
		if known {
			h.droppedUnwaited.Add(1)
		} else {
			h.unknownDriver.Add(1)
		}
		return
	}
	h.trace.processDone(h.trace.processStart(h.ctx, m))
	h.repliesReceived.Add(1)
	h.log.Debug("handoff: reply received", "driver", m.Driver, "key", m.Key, "waiting", len(wake))
	for _, c := range wake {
		select {
		case c <- struct{}{}:
		default: // one pending wake is enough
		}
	}
}

// reply tells the requester of a that this server no longer holds the key.
// With direct it is sent on the caller's goroutine when the publish path is
// idle (see publish), else in the background; a failure is logged.
func (h *Handoff) reply(ctx context.Context, a askKey, direct bool) {
	h.publish(ctx, a.from, messaging.Message{Type: messaging.TypeReply, Driver: a.driver, Key: a.key},
		&h.repliesSent, direct)
}
