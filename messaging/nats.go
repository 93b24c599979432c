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

// DefaultPrefix is the first part of every handoff subject; one name for the
// whole fleet, so that any server can reach any other.
const DefaultPrefix = "CKHandoff"

// DefaultRetryDelay is how long a failed publish waits before its one retry:
// long enough for a NATS reconnect to get under way, short against the 4 s
// request repeat of the handoff.
const DefaultRetryDelay = 500 * time.Millisecond

// Handler receives every valid message that arrives on a subscription. Calls
// for one subscription come one at a time, in arrival order, on a goroutine
// of the NATS connection: a handler that blocks holds up the messages behind
// it, so it should hand slow work off.
type Handler func(Message)

// Bus is what the handoff layer needs (declared here because it is the
// contract of this package).
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

// Option configures a NATSBus.
type Option func(*options) error

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

// WithPrefix sets the subject prefix; default DefaultPrefix. It may be
// dotted ("mygame.CKHandoff") to put the handoff under a namespace; each
// token must be valid as ValidJobID defines it.
func WithPrefix(p string) Option {
	return func(o *options) error {
		for tok := range strings.SplitSeq(p, ".") {
			if reason := jobid.Problem(tok); reason != "" {
				return fmt.Errorf("%w: prefix %q: token %s", ErrInvalidOption, p, reason)
			}
		}
		o.prefix = p
		return nil
	}
}

// WithMaxBytes sets the size limit of a message, sent or received; default
// DefaultMaxBytes. n must be positive.
func WithMaxBytes(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: max bytes %d, must be positive", ErrInvalidOption, n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithClock sets the clock that times the retry delay, stamps signed
// messages and judges received stamps; default clock.New(). With a key, the
// servers' clocks must agree within the replay window.
func WithClock(c clock.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		o.clock = c
		return nil
	}
}

// WithRetryDelay sets the wait before the one retry of a failed publish;
// default DefaultRetryDelay. Zero retries at once; negative is refused.
func WithRetryDelay(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: retry delay %v, must not be negative", ErrInvalidOption, d)
		}
		o.retryDelay = d
		return nil
	}
}

// WithLogger sets the logger; default slog.Default(). Dropped messages are
// logged at Debug, except that an unauthenticated one, a replayed one and
// one dropped for the pending limit are each logged at Warn at most once a
// minute; a publish that fails after its retry at Warn when it
// is the first of a run of failures, at Debug after that; the connection's
// events as NewNATSBus says.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.logger = l
		return nil
	}
}

// Stats are the counters of a NATSBus since it was made.
type Stats struct {
	Published      uint64 // publishes that went out (possibly on the retry)
	PublishRetried uint64 // publishes whose first attempt failed
	PublishFailed  uint64 // publishes that failed on the connection twice
	// Received counts every message that arrived on a subscription, valid
	// or not; Received - Dropped reached a handler.
	Received           uint64
	Dropped            uint64 // sum of the five below
	DroppedMalformed   uint64 // ErrMalformed
	DroppedTooLarge    uint64 // ErrTooLarge
	DroppedUnknownType uint64 // ErrUnknownType
	// DroppedUnauthenticated counts the messages a bus with a key refused
	// (ErrUnauthenticated): no MAC, a MAC that does not verify, or a stamp
	// outside the replay window.
	DroppedUnauthenticated uint64
	// DroppedReplayed counts the signed messages a bus with a key refused
	// because it had delivered the same message (same MAC) already within
	// the replay window: a replay of a captured message.
	DroppedReplayed uint64
	// DroppedBacklog counts the messages the NATS client dropped, before the
	// bus saw them (they are not in Received), because the pending limit of
	// messages waited for the handler (WithPendingLimit).
	DroppedBacklog uint64
	// ReplayCacheEvicted counts the signed messages the bus forgot before
	// their stamp left the window, because it remembered as many as it may
	// (a replay of one of those would be delivered again).
	ReplayCacheEvicted uint64

	// The connection's events since the bus was made (see NewNATSBus).
	Disconnects uint64 // connection lost, reconnecting
	Reconnects  uint64 // connection back
	Closes      uint64 // connection closed for good
}

// NATSBus is the Bus over a NATS connection. It is safe for concurrent use.
// It never closes the connection, which stays the caller's.
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
// ErrInvalidOption for an option given an invalid value or options that need
// WithKey given without it.
//
// It chains handlers of its own in front of the disconnect, reconnect,
// closed and async error handlers set on nc (it reads them from nc and calls
// them after its own; a deprecated DisconnectedCB is called too when no
// DisconnectedErrCB is set), to count the events in Stats and log them (a
// subscription of the bus over its pending limit as WithPendingLimit says):
// a disconnect at Warn (until
// the connection is back, release requests to this server go unanswered and
// its players cannot be handed over), a reconnect at Info, and the close at
// Error while a subscription of the bus is live or the connection closed on
// an error (no request will be answered again), else at Info (the clean
// shutdown: the handoff unsubscribed first). The disconnect that is part of a
// close counts only as the close. Set nc's handlers before NewNATSBus, not
// concurrently with it; one set afterwards replaces the bus's (chain to
// nc.DisconnectErrHandler() and the like to keep both).
func NewNATSBus(nc *nats.Conn, opts ...Option) (*NATSBus, error) {
	if nc == nil {
		return nil, errors.New("messaging: new nats bus: nil *nats.Conn")
	}
	b := &NATSBus{
		nc: nc,
		opts: options{
			prefix:       DefaultPrefix,
			maxBytes:     DefaultMaxBytes,
			clock:        clock.New(),
			retryDelay:   DefaultRetryDelay,
			logger:       slog.Default(),
			replayWindow: DefaultReplayWindow,
			pendingLimit: DefaultPendingLimit,
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
// with ErrInvalidJobID for a jobID that is not a valid subject token.
func (b *NATSBus) Subject(jobID string) (string, error) {
	if err := ValidJobID(jobID); err != nil {
		return "", err
	}
	return b.opts.prefix + "." + jobID, nil
}

// Publish sends m to the subject of server jobID. If the connection refuses
// the message, Publish waits the retry delay on the bus clock and tries once
// more. A message is out once the connection has taken it; NATS core does not
// confirm delivery.
//
// The Stamp and MAC of m are the bus's: a bus with a key stamps m with its
// clock and signs it for jobID (the retry sends the same bytes), and a bus
// without one sends neither.
//
// It fails with ErrInvalidJobID for an invalid jobID, with the errors of
// Encode for an invalid m, with ErrMalformed when the bus has a key and m
// names no Sender, with ErrTooLarge when the encoding is over the bus's size
// limit (the receiver would drop it), with the connection's error when both
// attempts fail, and with ctx.Err() when ctx ends before the first attempt
// or during the wait. Only the connection failures are retried.
func (b *NATSBus) Publish(ctx context.Context, jobID string, m Message) error {
	subject, err := b.Subject(jobID)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	m.Stamp, m.MAC = 0, ""
	if b.opts.key != nil {
		if m.Sender == "" {
			return fmt.Errorf("publish to %s: %w: a signed message needs its sender (S)", subject, ErrMalformed)
		}
		m = sign(b.opts.key, b.opts.prefix, jobID, m, time.UnixMilli(b.stamps.next(jobID, b.opts.clock.Now())))
	}
	data, err := Encode(m)
	if err != nil {
		return fmt.Errorf("publish to %s: %w", subject, err)
	}
	if limit := LimitOf(m.Type, b.opts.maxBytes); len(data) > limit {
		return fmt.Errorf("publish to %s: %w: %d bytes, limit %d", subject, ErrTooLarge, len(data), limit)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish to %s: %w", subject, err)
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

// sent counts a good publish and logs the end of a run of failures.
func (b *NATSBus) sent() {
	b.published.Add(1)
	if b.failing.Swap(false) {
		b.opts.logger.Info("messaging: publishing again")
	}
}

// Subscribe makes one NATS subscription on the subject of jobID, our own
// JobID, and calls h with every valid message that arrives on it. Messages
// that Decode refuses (over the size limit, malformed, of an unknown type)
// are counted in Stats, logged at Debug and dropped. With a key, so are the
// messages that fail authentication (see WithKey; these are logged at Warn
// at most once a minute); without one, a message's Stamp and MAC are
// cleared before h sees it, since nothing checked them.
//
// The subscription is sent to the server with the connection's next flush;
// call nc.Flush to wait until the server has it. It fails with
// ErrInvalidJobID for an invalid jobID, with a plain error for a nil h, and
// with the connection's error (for example nats.ErrConnectionClosed).
func (b *NATSBus) Subscribe(jobID string, h Handler) (Subscription, error) {
	subject, err := b.Subject(jobID)
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
		if mv, merr := Decode(data, LimitOf(TypeMove, b.opts.maxBytes)); merr == nil && mv.Type == TypeMove {
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

// Stats returns the counters. Each is read atomically; together they are not
// one snapshot.
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
