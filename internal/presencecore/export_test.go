package presencecore

import (
	"context"
	"time"
)

// LoopBeat sends one beat as Start's loop does (the fast path, a full check
// every CheckEvery beats or after a failure), for benchmarks that drive many
// Presences without running their loops.
func LoopBeat(ctx context.Context, p *Presence) error {
	_, err := p.beat(ctx, true)
	return err
}

// stale reports whether this server may already read as stopped to others:
// its lease is not valid now (no beat was acknowledged yet, the lease lapsed,
// or Remove ran). A server that is stale must not start sessions and ends the
// ones it holds.
func (p *Presence) stale() bool {
	return !p.Lease().ValidAt(p.clock.Now())
}

// lastBeat returns the clock time at which the last acknowledged beat was
// sent (before its round trip: the lower bound of its expiry), or the zero
// time if none was acknowledged yet.
func (p *Presence) lastBeat() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSent
}
