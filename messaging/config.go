package messaging

import (
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
)

// NATSConfig configures a NATSBus. Zero values take the defaults; invalid
// values are refused by NewNATSBus with ErrInvalidConfig.
type NATSConfig struct {
	Prefix       string        // subjects are "<Prefix>.<jobID>"; may be dotted. default: DefaultPrefix
	MaxBytes     int           // size limit (a move's is at least DefaultMaxMoveBytes). default: DefaultMaxBytes
	PendingLimit int           // received messages that may wait for a handler. default: 8192
	RetryDelay   time.Duration // before the one retry of a failed publish. default: 500ms
	Clock        clock.Clock   // times retries, stamps and judges stamps. default: the real clock
	Logger       *slog.Logger  // drops, failed publishes, connection events. default: slog.Default()

	// Request authentication (docs/bus.md): Key (at least MinKeyBytes) signs
	// every message published, and one received is delivered once, only if
	// its MAC verifies under Key or AcceptedKeys with a stamp within
	// ReplayWindow (default 30s) of the clock. AcceptUnauthenticated also
	// delivers unsigned messages: the first step of a rollout.
	// default: no key (nothing signed, a MAC received is ignored)
	Key                   []byte
	AcceptedKeys          [][]byte
	AcceptUnauthenticated bool
	ReplayWindow          time.Duration
}

// NewNATSBus returns a bus over nc, which stays the caller's; it counts and
// logs nc's connection events before the handlers set on nc before it.
func NewNATSBus(nc *nats.Conn, cfg NATSConfig) (*NATSBus, error) {
	var opts []option
	set := func(ok bool, o option) {
		if ok {
			opts = append(opts, o)
		}
	}
	set(cfg.Prefix != "", withPrefix(cfg.Prefix))
	set(cfg.MaxBytes != 0, withMaxBytes(cfg.MaxBytes))
	set(cfg.PendingLimit != 0, withPendingLimit(cfg.PendingLimit))
	set(cfg.RetryDelay != 0, withRetryDelay(cfg.RetryDelay))
	set(cfg.Clock != nil, withClock(cfg.Clock))
	set(cfg.Logger != nil, withLogger(cfg.Logger))
	set(len(cfg.Key) > 0, withKey(cfg.Key))
	set(len(cfg.AcceptedKeys) > 0, withAcceptedKeys(cfg.AcceptedKeys...))
	set(cfg.AcceptUnauthenticated, withAcceptUnauthenticated())
	set(cfg.ReplayWindow != 0, withReplayWindow(cfg.ReplayWindow))
	return newNATSBus(nc, opts...)
}
