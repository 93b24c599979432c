package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/ckernel/playerdata/internal/jobid"
	"github.com/nats-io/nats.go"
)

// DefaultPrefix is the first part of every subject, one for the whole fleet.
const DefaultPrefix = "CKHandoff"

// defaultRetryDelay is how long a failed publish waits before its one retry:
// long enough for a NATS reconnect to get under way, short against the 4 s
// request repeat of the handoff.
const defaultRetryDelay = 500 * time.Millisecond

// Handler receives the valid messages of a subscription, one at a time in
// arrival order; one that blocks holds up those behind it.
type Handler func(Message)

// Bus is what the handoff needs of a message bus.
type Bus interface {
	// Publish sends m to the subject of server jobID. ctx bounds the wait
	// before a retry.
	Publish(ctx context.Context, jobID string, m Message) error
	// Subscribe calls h for every valid message sent to server jobID, which
	// is our own JobID.
	Subscribe(jobID string, h Handler) (Subscription, error)
}

// Subscription is a live subscription of a Bus.
type Subscription interface {
	// Unsubscribe stops the deliveries. It is idempotent.
	Unsubscribe() error
}

// option configures a NATSBus.
type option func(*options) error

type options struct {
	prefix     string
	maxBytes   int
	clock      clock.Clock
	retryDelay time.Duration
	logger     *slog.Logger
	// pendingLimit bounds what waits for a handler (backlog.go).
	pendingLimit int

	// Authentication (auth.go): key signs, key and acceptedKeys verify.
	key                   []byte
	acceptedKeys          [][]byte
	acceptUnauthenticated bool
	replayWindow          time.Duration
	replayWindowSet       bool
}

// withPrefix sets the subject prefix; default DefaultPrefix. It may be
// dotted ("mygame.CKHandoff") to put the handoff under a namespace; each
// token must be valid as validJobID defines it.
func withPrefix(p string) option {
	return func(o *options) error {
		for tok := range strings.SplitSeq(p, ".") {
			if reason := jobid.Problem(tok); reason != "" {
				return fmt.Errorf("%w: prefix %q: token %s", ErrInvalidConfig, p, reason)
			}
		}
		o.prefix = p
		return nil
	}
}

// withMaxBytes sets the size limit of a message, sent or received; default
// DefaultMaxBytes. n must be positive.
func withMaxBytes(n int) option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: max bytes %d, must be positive", ErrInvalidConfig, n)
		}
		o.maxBytes = n
		return nil
	}
}

// withClock sets the clock that times the retry delay, stamps signed
// messages and judges received stamps; default clock.New(). With a key, the
// servers' clocks must agree within the replay window.
func withClock(c clock.Clock) option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
		}
		o.clock = c
		return nil
	}
}

// withRetryDelay sets the wait before the one retry of a failed publish;
// default defaultRetryDelay. Zero retries at once; negative is refused.
func withRetryDelay(d time.Duration) option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: retry delay %v, must not be negative", ErrInvalidConfig, d)
		}
		o.retryDelay = d
		return nil
	}
}

// withLogger sets the logger; default slog.Default(). Dropped messages are
// logged at Debug, except that an unauthenticated one, a replayed one and
// one dropped for the pending limit are each logged at Warn at most once a
// minute; a publish that fails after its retry at Warn when it
// is the first of a run of failures, at Debug after that; the connection's
// events as NewNATSBus says.
func withLogger(l *slog.Logger) option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidConfig)
		}
		o.logger = l
		return nil
	}
}

// Stats are the counters of a NATSBus since it was made (docs/bus.md says
// when each drop happens).
type Stats struct {
	Published, PublishRetried, PublishFailed uint64 // failed: on the retry too
	Received                                 uint64 // valid or not; Received - Dropped reached a handler
	Dropped                                  uint64 // the sum of the five below
	DroppedMalformed, DroppedTooLarge        uint64
	DroppedUnknownType                       uint64
	DroppedUnauthenticated                   uint64 // refused by a bus with a key
	DroppedReplayed                          uint64 // a signed message delivered already
	DroppedBacklog                           uint64 // dropped by the NATS client over PendingLimit
	ReplayCacheEvicted                       uint64 // signed messages forgotten within their window
	Disconnects, Reconnects, Closes          uint64 // the connection's events
}

// NATSBus is the Bus over a NATS connection, safe for concurrent use.
type NATSBus struct {
	nc   *nats.Conn
	opts options
	// publish is nc.Publish; tests replace it to inject failures.
	publish func(subject string, data []byte) error

	// keys verify received MACs: opts.key first, then opts.acceptedKeys.
	keys [][]byte

	published, publishRetried, publishFailed                    atomic.Uint64
	received, droppedMalformed, droppedTooLarge, droppedUnknown atomic.Uint64
	droppedUnauthenticated                                      atomic.Uint64
	disconnects, reconnects, closes                             atomic.Uint64

	// liveSubs counts the subscriptions not yet unsubscribed; a close while
	// one is live is an error, a close after the last is a clean shutdown.
	liveSubs atomic.Int64

	// failing is set by a failed publish and cleared by a good one, so a
	// broken connection is logged once at Warn, not on every publish.
	failing atomic.Bool

	// unauthWarn and replayWarn space the Warn lines of dropped
	// unauthenticated and replayed messages.
	unauthWarn, replayWarn warnEvery

	// replays remembers the signed messages delivered (with a key only);
	// stamps stamps the messages signed.
	replays *replayCache
	stamps  stamper
	// backlog bounds and counts what waits for the handlers.
	backlog         backlog
	droppedReplayed atomic.Uint64
}

// NewNATSBus returns a bus over nc. It fails for a nil nc, and with
// ErrInvalidConfig for an option given an invalid value or options that need
// withKey given without it.
//
// It chains handlers of its own in front of the disconnect, reconnect,
// closed and async error handlers set on nc (it reads them from nc and calls
// them after its own; a deprecated DisconnectedCB is called too when no
// DisconnectedErrCB is set), to count the events in Stats and log them (a
// subscription of the bus over its pending limit as withPendingLimit says):
// a disconnect at Warn (until
// the connection is back, release requests to this server go unanswered and
// its players cannot be handed over), a reconnect at Info, and the close at
// Error while a subscription of the bus is live or the connection closed on
// an error (no request will be answered again), else at Info (the clean
// shutdown: the handoff unsubscribed first). The disconnect that is part of a
// close counts only as the close. Set nc's handlers before NewNATSBus, not
// concurrently with it; one set afterwards replaces the bus's (chain to
// nc.DisconnectErrHandler() and the like to keep both).
func newNATSBus(nc *nats.Conn, opts ...option) (*NATSBus, error) {
	if nc == nil {
		return nil, errors.New("messaging: new nats bus: nil *nats.Conn")
	}
	b := &NATSBus{
		nc: nc,
		opts: options{
			prefix:       DefaultPrefix,
			maxBytes:     DefaultMaxBytes,
			clock:        clock.New(),
			retryDelay:   defaultRetryDelay,
			logger:       slog.Default(),
			replayWindow: defaultReplayWindow,
			pendingLimit: defaultPendingLimit,
		},
		publish: nc.Publish,
	}
	for _, opt := range opts {
		if err := opt(&b.opts); err != nil {
			return nil, fmt.Errorf("new nats bus: %w", err)
		}
	}
	if err := b.opts.checkAuthOptions(); err != nil {
		return nil, fmt.Errorf("new nats bus: %w", err)
	}
	if b.opts.key != nil {
		b.keys = append([][]byte{b.opts.key}, b.opts.acceptedKeys...)
		b.replays = newReplayCache(b.opts.replayWindow)
	}
	b.watchConn(nc)
	return b, nil
}

// Subject returns the subject of server jobID, "<prefix>.<jobID>". It fails
// with errInvalidJobID for a jobID that is not a valid subject token.
func (b *NATSBus) subject(jobID string) (string, error) {
	if err := validJobID(jobID); err != nil {
		return "", err
	}
	return b.opts.prefix + "." + jobID, nil
}

// Publish sends m to server jobID, signed when the bus has a key, retrying
// once after RetryDelay if the connection refuses it.
func (b *NATSBus) Publish(ctx context.Context, jobID string, m Message) error {
	subject, data, err := b.encode(ctx, jobID, m)
	if err != nil {
		return err
	}
	first := b.publish(subject, data)
	if first == nil {
		b.sent()
		return nil
	}
	b.publishRetried.Add(1)
	t := b.opts.clock.Timer(b.opts.retryDelay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return fmt.Errorf("publish to %s: %w (first attempt: %v)", subject, ctx.Err(), first)
	}
	if err := b.publish(subject, data); err != nil {
		b.publishFailed.Add(1)
		level := slog.LevelDebug
		if !b.failing.Swap(true) {
			level = slog.LevelWarn
		}
		b.opts.logger.Log(ctx, level, "messaging: publish failed after a retry",
			"subject", subject, "type", string(m.Type), "first", first, "err", err)
		return fmt.Errorf("publish to %s: %w", subject, err)
	}
	b.sent()
	return nil
}

// PublishOnce sends m to server jobID as Publish does, in one attempt: a
// connection that refuses it answers the error at once, uncounted, without
// Publish's wait and retry (the caller falls back to Publish, off the
// goroutine that could not wait). It never waits on a timer; like
// nats.Conn.Publish, it writes to the socket itself only when the
// connection's buffer is full.
func (b *NATSBus) PublishOnce(ctx context.Context, jobID string, m Message) error {
	subject, data, err := b.encode(ctx, jobID, m)
	if err != nil {
		return err
	}
	if err := b.publish(subject, data); err != nil {
		return fmt.Errorf("publish to %s: %w", subject, err)
	}
	b.sent()
	return nil
}

// encode signs m for server jobID (when the bus has a key) and encodes it:
// the subject and the bytes to publish, within the type's size limit.
func (b *NATSBus) encode(ctx context.Context, jobID string, m Message) (string, []byte, error) {
	subject, err := b.subject(jobID)
	if err != nil {
		return "", nil, fmt.Errorf("publish: %w", err)
	}
	m.Stamp, m.MAC = 0, ""
	if b.opts.key != nil {
		if m.Sender == "" {
			return "", nil, fmt.Errorf("publish to %s: %w: a signed message needs its sender (S)", subject, ErrMalformed)
		}
		m = sign(b.opts.key, b.opts.prefix, jobID, m, time.UnixMilli(b.stamps.next(jobID, b.opts.clock.Now())))
	}
	data, err := Encode(m)
	if err != nil {
		return "", nil, fmt.Errorf("publish to %s: %w", subject, err)
	}
	if limit := limitOf(m.Type, b.opts.maxBytes); len(data) > limit {
		return "", nil, fmt.Errorf("publish to %s: %w: %d bytes, limit %d", subject, ErrTooLarge, len(data), limit)
	}
	if err := ctx.Err(); err != nil {
		return "", nil, fmt.Errorf("publish to %s: %w", subject, err)
	}
	return subject, data, nil
}

// sent counts a good publish and logs the end of a run of failures.
func (b *NATSBus) sent() {
	b.published.Add(1)
	if b.failing.Swap(false) {
		b.opts.logger.Info("messaging: publishing again")
	}
}

// Subscribe calls h with every valid message sent to jobID, our own JobID;
// others are counted in Stats and dropped.
func (b *NATSBus) Subscribe(jobID string, h Handler) (Subscription, error) {
	subject, err := b.subject(jobID)
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if h == nil {
		return nil, fmt.Errorf("subscribe %s: nil handler", subject)
	}
	s := &natsSubscription{bus: b}
	ns, err := b.nc.Subscribe(subject, func(msg *nats.Msg) {
		if s.stopped.Load() {
			return
		}
		if m, ok := b.receive(jobID, subject, msg.Data); ok {
			h(m)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := b.backlog.add(ns, b.opts.pendingLimit, b.opts.maxBytes); err != nil {
		_ = ns.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: pending limits: %w", subject, err)
	}
	s.sub = ns
	b.liveSubs.Add(1)
	return s, nil
}

// receive decodes and, with a key, authenticates one payload that arrived
// on subject, the subject of server jobID, counting it, and reports whether
// it is a message for the handler.
func (b *NATSBus) receive(jobID, subject string, data []byte) (Message, bool) {
	b.received.Add(1)
	m, err := Decode(data, b.opts.maxBytes)
	if len(data) > b.opts.maxBytes {
		// Only a move may be larger (it carries a profile).
		if mv, merr := Decode(data, limitOf(TypeMove, b.opts.maxBytes)); merr == nil && mv.Type == TypeMove {
			m, err = mv, nil
		}
	}
	if err == nil {
		switch {
		case b.keys == nil:
			m.Stamp, m.MAC = 0, ""
			return m, true
		case m.MAC == "" && b.opts.acceptUnauthenticated:
			return m, true
		}
		now := b.opts.clock.Now()
		err = verify(b.keys, b.opts.prefix, jobID, m, now, b.opts.replayWindow)
		if err == nil {
			if b.replays.seen(m.MAC, m.Stamp, now.UnixMilli()) {
				b.dropReplayed(subject, m)
				return Message{}, false
			}
			return m, true
		}
		b.droppedUnauthenticated.Add(1)
		b.logUnauthenticated(subject, data, err)
		return Message{}, false
	}
	switch {
	case errors.Is(err, ErrTooLarge):
		b.droppedTooLarge.Add(1)
	case errors.Is(err, ErrUnknownType):
		b.droppedUnknown.Add(1)
	default:
		b.droppedMalformed.Add(1)
	}
	b.opts.logger.Debug("messaging: dropped message", "subject", subject, "bytes", len(data), "err", err)
	return Message{}, false
}

// Stats returns the counters (each read atomically, not one snapshot).
func (b *NATSBus) Stats() Stats {
	s := Stats{
		Published:              b.published.Load(),
		PublishRetried:         b.publishRetried.Load(),
		PublishFailed:          b.publishFailed.Load(),
		Received:               b.received.Load(),
		DroppedMalformed:       b.droppedMalformed.Load(),
		DroppedTooLarge:        b.droppedTooLarge.Load(),
		DroppedUnknownType:     b.droppedUnknown.Load(),
		DroppedUnauthenticated: b.droppedUnauthenticated.Load(),
		DroppedReplayed:        b.droppedReplayed.Load(),
		DroppedBacklog:         b.backlog.dropped(),
		Disconnects:            b.disconnects.Load(),
		Reconnects:             b.reconnects.Load(),
		Closes:                 b.closes.Load(),
	}
	if b.replays != nil {
		s.ReplayCacheEvicted = b.replays.evictedCount()
	}
	s.Dropped = s.DroppedMalformed + s.DroppedTooLarge + s.DroppedUnknownType + s.DroppedUnauthenticated + s.DroppedReplayed
	return s
}

// natsSubscription is the Subscription of a NATSBus.
type natsSubscription struct {
	bus     *NATSBus
	sub     *nats.Subscription
	stopped atomic.Bool
	once    sync.Once
}

// Unsubscribe removes the NATS subscription. After it returns no new handler
// call starts (one already running may still be finishing, so a handler may
// call Unsubscribe itself). The first call does the work; later calls return
// nil. A closed connection has no subscription left, so it is no error.
func (s *natsSubscription) Unsubscribe() error {
	err := error(nil)
	s.once.Do(func() {
		s.stopped.Store(true)
		s.bus.liveSubs.Add(-1)
		s.bus.backlog.remove(s.sub)
		err = s.sub.Unsubscribe()
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("unsubscribe %s: %w", s.sub.Subject, err)
		}
	})
	return err
}
