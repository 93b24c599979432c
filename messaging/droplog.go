package messaging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// How a bus logs the messages it drops for authentication: the first of a
// kind at Warn (a wrong key, a clock off, someone replaying captured
// messages: it must be seen), the rest of that minute at Debug, so that a
// flood costs no log volume.

// warnEvery says when a kind of dropped message may next be logged at Warn:
// once per unauthenticatedWarnEvery.
type warnEvery struct {
	mu     sync.Mutex
	next   time.Time
	warned bool
}

// due reports whether a line may go at Warn now, and if so takes the turn.
func (w *warnEvery) due(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.warned && now.Before(w.next) {
		return false
	}
	w.warned, w.next = true, now.Add(unauthenticatedWarnEvery)
	return true
}

var _ Bus = (*NATSBus)(nil)

// logUnauthenticated logs a dropped unauthenticated message: at Warn when
// none was logged at Warn in the last minute (a wrong key or a clock off by
// more than the window stops the handoff, so it must be seen), else at
// Debug (a flood costs no log volume).
func (b *NATSBus) logUnauthenticated(subject string, data []byte, err error) {
	level, msg := slog.LevelDebug, "messaging: dropped message"
	if b.unauthWarn.due(b.opts.clock.Now()) {
		level = slog.LevelWarn
		msg = "messaging: dropped an unauthenticated message (a server with another key or none, a clock off by more than the replay window, or a forgery); more are logged at Debug for a minute"
	}
	b.opts.logger.Log(context.Background(), level, msg, "subject", subject, "bytes", len(data),
		"dropped_unauthenticated", b.droppedUnauthenticated.Load(), "err", err)
}

// dropReplayed counts and logs a signed message delivered once already: at
// Warn once a minute (someone on the bus replays captured messages), else at
// Debug.
func (b *NATSBus) dropReplayed(subject string, m Message) {
	n := b.droppedReplayed.Add(1)
	level, msg := slog.LevelDebug, "messaging: dropped a replayed message"
	if b.replayWarn.due(b.opts.clock.Now()) {
		level = slog.LevelWarn
		msg = "messaging: dropped a replayed message (a signed message received a second time within the replay window: someone on the bus replays captured messages); more are logged at Debug for a minute"
	}
	b.opts.logger.Log(context.Background(), level, msg, "subject", subject, "type", string(m.Type), "sender", m.Sender,
		"dropped_replayed", n)
}
