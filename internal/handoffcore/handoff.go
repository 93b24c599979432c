package handoffcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckernel/playerdata/messaging"
)

// ReleaseFunc is how a driver lets a key go when another server asks for
// it, naming the lock token it saw, and why when not for a player's join
// (purpose: "" or messaging.PurposeRestore; a purpose the driver does not
// know counts as ""). It must not block: it starts the release and returns
// a channel that is closed once the driver no longer holds that lock,
// already closed when it does not hold it now (a late or forged request).
// The Handoff replies to the requester when the channel closes; the driver
// never learns who asked.
type ReleaseFunc func(key, token, purpose string) <-chan struct{}

// Handlers are what a driver registers under its name.
type Handlers struct {
	// Release lets a key go when another server asks (required).
	Release ReleaseFunc
	// Notify is called when a message for key was stored in its inbox (the
	// sender saw this server holding the key): pull the inbox. It must not
	// block. nil: notifications are dropped (and counted as for an unknown
	// driver).
	Notify func(key string)
}

// Stats counts what a Handoff did.
type Stats struct {
	RequestsSent, RequestsReceived uint64
	RepliesSent, RepliesReceived   uint64 // RepliesReceived: replies that woke a waiting join
	PublishFailed                  uint64
	// PublishDropped counts messages dropped at a full publish queue (the
	// bus took none for a while).
	PublishDropped       uint64
	DroppedUnknownDriver uint64 // messages for a driver this server does not have
	// DroppedUnwaited counts replies naming a key no join of this server
	// waits on (late, duplicated or forged).
	DroppedUnwaited uint64
	// RepliesCoalesced counts replies not sent to a request naming no lock
	// held here, because its requester had one in the same reply window.
	RepliesCoalesced uint64
	// RepliesDropped counts requests whose release was started but that get
	// no reply, because maxPendingReplies releases were awaited already.
	RepliesDropped                 uint64
	ProvenStopped                  uint64 // holders proven stopped by two presence reads
	NotifiesSent, NotifiesReceived uint64 // "a message is in the inbox of this key"
	MovesSent, MovesReceived       uint64 // the steps of moves (move.go)
}

// Handoff is one server's lock handoff. Create it with New, Start it, and
// Close it after the server's locks are released.
type Handoff struct {
	cfg   Config
	log   *slog.Logger
	trace *Trace // nil: nothing observed

	ctx    context.Context // cancelled by Close: stops the publishes left
	cancel context.CancelFunc
	wg     sync.WaitGroup

	prover *prover // what this Node knows of the holders its joins wait on

	// releases ends the goroutines that wait for a driver to let a key go;
	// Close cancels it first.
	releases       context.Context
	cancelReleases context.CancelFunc

	mu      sync.Mutex
	drivers map[string]Handlers
	waits   map[waitKey]map[*Wait]struct{}
	// asks are the AskAlls in progress, by key (ask.go).
	asks map[waitKey]map[*asking]struct{}
	// asked holds the requests whose reply waits for a release, so that a
	// repeated request waits once (at most maxPendingReplies).
	asked map[askKey]struct{}
	// replied holds the requesters answered at once in the reply window
	// that began at repliedSince (see admitImmediate).
	replied      map[string]struct{}
	repliedSince time.Time
	// outbox is the publish queue; publishing says its workers run;
	// queueFull that the last message offered found it full.
	outbox     chan outgoing
	publishing bool
	// inFlight counts the messages queued or being sent: a direct publish
	// runs only at zero (publish.go).
	inFlight  atomic.Int64
	queueFull bool
	sub       messaging.Subscription
	started   bool
	closed    bool

	requestsSent, requestsReceived   atomic.Uint64
	repliesSent, repliesReceived     atomic.Uint64
	publishFailed, publishDropped    atomic.Uint64
	unknownDriver, droppedUnwaited   atomic.Uint64
	repliesCoalesced, repliesDropped atomic.Uint64
	provenStopped                    atomic.Uint64
	notifiesSent, notifiesReceived   atomic.Uint64
	// moves receives the move messages (move.go); nil: they are dropped.
	moves                    atomic.Pointer[func(messaging.Message)]
	movesSent, movesReceived atomic.Uint64
}

type waitKey struct{ driver, key string }

// askKey is one requester's request for one key.
type askKey struct{ driver, key, from string }

// New creates a Handoff; it does nothing until Start.
func New(cfg Config) (*Handoff, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Handoff{
		cfg:     cfg,
		trace:   cfg.Trace,
		log:     cfg.Logger,
		drivers: make(map[string]Handlers),
		waits:   make(map[waitKey]map[*Wait]struct{}),
		asked:   make(map[askKey]struct{}),
		replied: make(map[string]struct{}),
		outbox:  make(chan outgoing, publishQueueLen),
	}
	h.releases, h.cancelReleases = context.WithCancel(context.Background())
	h.prover = newProver(h)
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

// Start subscribes to this server's subject. A failed subscribe is logged
// and the handoff falls back to polling: joiners elsewhere still wait on
// their own schedule. Without a Bus it starts nothing. Start is idempotent.
func (h *Handoff) Start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.closed {
		return
	}
	h.started = true
	if h.cfg.Bus != nil {
		sub, err := h.cfg.Bus.Subscribe(h.cfg.JobID, h.onMessage)
		if err != nil {
			h.log.Warn("handoff subscribe failed; release requests will go unanswered and joins fall back to polling", "err", err)
		} else {
			h.sub = sub
		}
	}
}

// Close unsubscribes and waits for messages in flight (bounded by ctx).
func (h *Handoff) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.outbox) // publish queues nothing once closed is set
	sub := h.sub
	h.sub = nil
	h.mu.Unlock()

	var errs []error
	if sub != nil {
		if err := sub.Unsubscribe(); err != nil {
			errs = append(errs, fmt.Errorf("handoff unsubscribe: %w", err))
		}
	}
	// Releases not done by now (the Node let go of every lock it could)
	// get no reply: their joiners wait or prove this server stopped.
	h.cancelReleases()
	// Let replies already sent reach the bus, then stop what is left.
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("handoff close: %w", ctx.Err()))
	}
	h.cancel()
	<-done
	return errors.Join(errs...)
}

// Register routes requests and notifications for driver to hs. A second
// driver of the same name is refused with ErrDuplicateDriver, one without
// Release with ErrInvalidConfig.
func (h *Handoff) Register(driver string, hs Handlers) error {
	if hs.Release == nil {
		return fmt.Errorf("%w: driver %q registers no Release", ErrInvalidConfig, driver)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.drivers[driver]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateDriver, driver)
	}
	h.drivers[driver] = hs
	return nil
}

// Unregister stops routing requests to driver.
func (h *Handoff) Unregister(driver string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.drivers, driver)
}

// Stats returns the handoff's counters.
func (h *Handoff) Stats() Stats {
	return Stats{
		RequestsSent:         h.requestsSent.Load(),
		RequestsReceived:     h.requestsReceived.Load(),
		RepliesSent:          h.repliesSent.Load(),
		RepliesReceived:      h.repliesReceived.Load(),
		PublishFailed:        h.publishFailed.Load(),
		PublishDropped:       h.publishDropped.Load(),
		DroppedUnknownDriver: h.unknownDriver.Load(),
		DroppedUnwaited:      h.droppedUnwaited.Load(),
		RepliesCoalesced:     h.repliesCoalesced.Load(),
		RepliesDropped:       h.repliesDropped.Load(),
		ProvenStopped:        h.provenStopped.Load(),
		NotifiesSent:         h.notifiesSent.Load(),
		NotifiesReceived:     h.notifiesReceived.Load(),
		MovesSent:            h.movesSent.Load(),
		MovesReceived:        h.movesReceived.Load(),
	}
}

// onMessage routes one message from the bus. It runs on the bus's delivery
// goroutine, one message at a time: whatever arrives, it does a bounded
// amount of work and starts no goroutine of its own, except the bounded
// ones of replyWhenReleased and the publish workers.
func (h *Handoff) onMessage(m messaging.Message) {
	switch m.Type {
	case messaging.TypeRequest:
		h.onRequest(m)
	case messaging.TypeNotify:
		h.mu.Lock()
		notify := h.drivers[m.Driver].Notify
		h.mu.Unlock()
		if notify == nil {
			h.unknownDriver.Add(1)
			return
		}
		h.notifiesReceived.Add(1)
		pctx := h.trace.processStart(h.ctx, m)
		notify(m.Key)
		h.trace.processDone(pctx)
	case messaging.TypeReply:
		h.onReply(m)
	case messaging.TypeMove:
		h.onMove(m)
	}
}

// Notify tells server to, fire and forget, that a message for key of driver
// is in its inbox (to holds the key), and reports whether the notification
// was queued for the bus. Nothing is sent without a bus, or to this server
// itself.
func (h *Handoff) Notify(ctx context.Context, driver, key, to string) bool {
	if to == h.cfg.JobID {
		return false
	}
	return h.publish(ctx, to, messaging.Message{Type: messaging.TypeNotify, Driver: driver, Key: key}, &h.notifiesSent, true)
}

// request asks holder to release key of driver, naming the lock token seen
// and the purpose ("" for a join).
func (h *Handoff) request(ctx context.Context, driver, key, holder, token, purpose string) {
	h.publish(ctx, holder, messaging.Message{
		Type: messaging.TypeRequest, Driver: driver, Key: key, Requester: h.cfg.JobID, Token: token, Purpose: purpose,
	}, &h.requestsSent, true)
}
