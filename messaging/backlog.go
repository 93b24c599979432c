package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
)

// defaultPendingLimit is how many received messages may wait for a
// subscription's handler. The handler runs one message at a time, so the
// backlog is also the longest wait a genuine message can have behind a
// flood: at the tens of thousands of messages a second a server's handoff
// handles, 8,192 is under half a second, and far above any genuine burst.
// NATS's own default (524,288) would let a flood the handler cannot keep up
// with hold every request for many seconds, past the joins' LockWait.
const defaultPendingLimit = 8192

// withPendingLimit sets how many received messages may wait for the
// handler of a subscription; beyond it the NATS client drops what arrives,
// counted in Stats.DroppedBacklog. Default defaultPendingLimit; n must be
// positive. A genuine request dropped so is repeated after the handoff's
// RequestRepeat; a lost reply leaves its join to its park.
func withPendingLimit(n int) option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: pending limit %d, must be positive", ErrInvalidConfig, n)
		}
		o.pendingLimit = n
		return nil
	}
}

// backlog follows the subscriptions of a bus, to count the messages the
// NATS client dropped for them.
type backlog struct {
	mu   sync.Mutex
	subs map[*nats.Subscription]struct{}
	gone uint64 // dropped by subscriptions since unsubscribed
	warn warnEvery
}

// add bounds ns's backlog at limit messages (and limit messages of
// maxBytes) and follows it.
func (bl *backlog) add(ns *nats.Subscription, limit, maxBytes int) error {
	if err := ns.SetPendingLimits(limit, limit*maxBytes); err != nil {
		return err
	}
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if bl.subs == nil {
		bl.subs = make(map[*nats.Subscription]struct{})
	}
	bl.subs[ns] = struct{}{}
	return nil
}

// remove stops following ns, keeping its count; call it before
// unsubscribing.
func (bl *backlog) remove(ns *nats.Subscription) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if _, ok := bl.subs[ns]; !ok {
		return
	}
	if n, err := ns.Dropped(); err == nil {
		bl.gone += uint64(n)
	}
	delete(bl.subs, ns)
}

// dropped is how many messages the client dropped for the bus's
// subscriptions.
func (bl *backlog) dropped() uint64 {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	total := bl.gone
	for ns := range bl.subs {
		if n, err := ns.Dropped(); err == nil {
			total += uint64(n)
		}
	}
	return total
}

// onAsyncError logs a subscription of the bus falling behind: at Warn once a
// minute (a flood, or a handler too slow for the traffic), else at Debug.
func (b *NATSBus) onAsyncError(sub *nats.Subscription, err error) {
	if sub == nil || !errors.Is(err, nats.ErrSlowConsumer) {
		return
	}
	b.backlog.mu.Lock()
	_, ours := b.backlog.subs[sub]
	b.backlog.mu.Unlock()
	if !ours {
		return
	}
	level := slog.LevelDebug
	if b.backlog.warn.due(b.opts.clock.Now()) {
		level = slog.LevelWarn
	}
	b.opts.logger.Log(context.Background(), level, "messaging: more messages wait for the handler than the pending limit; NATS drops what arrives until it catches up (more are logged at Debug for a minute)",
		"subject", sub.Subject, "pending_limit", b.opts.pendingLimit, "dropped_backlog", b.backlog.dropped())
}
