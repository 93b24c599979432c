package presencecore

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// Lease is this server's proof of life as the server itself can know it: the
// deadline, on the local monotonic clock, before which no other server can
// read it as stopped.
//
// A beat that Redis acknowledges within its deadline was written at or after
// the moment it was sent, so it keeps this server alive on the Redis clock
// until at least sent + TTL. The lease ends FenceMargin earlier, at
// sent + TTL - FenceMargin: the margin covers the difference in rate between
// the two clocks and the time the server needs to end its sessions.
//
// A lease that has lapsed stays lapsed. A beat acknowledged after the
// deadline starts a new lease with the next generation (Gen + 1); whatever
// lived under the old generation (a session, a lock) may have been taken by
// another server during the gap and must end. Only the monotonic clock
// counts: Go's time.Time from the real clock carries a monotonic reading,
// and every comparison here uses it, so a jump of the wall clock never moves
// a lease.
type Lease struct {
	// Gen is the generation: 0 before the first acknowledged beat, then one
	// more each time a lease starts after a lapse.
	Gen uint64
	// Until is the deadline on the local clock (zero when Gen is 0).
	Until time.Time
}

// ValidAt reports whether the lease holds at now.
func (l Lease) ValidAt(now time.Time) bool {
	return l.Gen != 0 && now.Before(l.Until)
}

// Lease returns the current lease (cheap: one atomic load).
func (p *Presence) Lease() Lease {
	if l := p.lease.Load(); l != nil {
		return *l
	}
	return Lease{}
}

// Holds reports whether the lease of generation gen still holds now: gen is
// the current generation and its deadline has not passed. This is the check
// a server makes before every change to a profile it holds (cheap: one
// atomic load and one clock read).
func (p *Presence) Holds(gen uint64) bool { return p.HoldsAt(gen, p.clock.Now()) }

// HoldsAt is Holds at now, a reading of the Presence's clock the caller
// has just taken (for a check that reads the clock once for several
// deadlines; now must not be older than the change it guards).
func (p *Presence) HoldsAt(gen uint64, now time.Time) bool {
	l := p.lease.Load()
	return l != nil && gen != 0 && l.Gen == gen && now.Before(l.Until)
}

// Renewed returns a channel that is closed when the next lease generation
// starts (the first acknowledged beat after a lapse, or the very first beat).
// A server whose lease has lapsed waits on it before it starts new sessions.
func (p *Presence) Renewed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.renewed
}

// extend records a beat sent at sentAt and acknowledged at ackAt within its
// deadline: the lease is pushed to sentAt + TTL - FenceMargin, or, when it
// had lapsed by ackAt (or never existed), a new generation starts there. A
// beat sent before a conflict fenced this server (see conflict) does
// neither. It reports whether a new generation started.
func (p *Presence) extend(sentAt, ackAt time.Time) bool {
	until := sentAt.Add(p.fenceAfter)
	p.mu.Lock()
	defer p.mu.Unlock()
	if sentAt.Before(p.noRenewBefore) {
		return false // sent before another instance was seen beating our JobID
	}
	cur := p.Lease()
	if cur.ValidAt(ackAt) {
		if until.After(cur.Until) {
			p.lease.Store(&Lease{Gen: cur.Gen, Until: until})
			p.signalLocked()
		}
		return false
	}
	if !ackAt.Before(until) {
		return false // acknowledged, but too late to prove anything now
	}
	p.lease.Store(&Lease{Gen: cur.Gen + 1, Until: until})
	close(p.renewed)
	p.renewed = make(chan struct{})
	p.signalLocked()
	return true
}

// signalLocked wakes the fence goroutine to look at the lease again. p.mu
// held.
func (p *Presence) signalLocked() {
	select {
	case p.leaseChanged <- struct{}{}:
	default:
	}
}

// lapsedGen returns the newest generation that has lapsed at now: every
// generation older than the current one, and the current one once its
// deadline has passed.
func lapsedGen(l Lease, now time.Time) uint64 {
	switch {
	case l.Gen == 0:
		return 0
	case l.ValidAt(now):
		return l.Gen - 1
	}
	return l.Gen
}

// fenceLoop is the lease's own goroutine: it sleeps until the current
// deadline and reports each lapse (Config.OnLapse) once. It never makes a
// network call, so no Redis or NATS call, however stuck, can delay it; and
// since a new generation only starts after a lapse, a lapse is reported even
// when a late beat renewed the lease before this goroutine ran (as after a
// SIGSTOP, when the beat and the deadline are due at once).
func (p *Presence) fenceLoop(ctx context.Context) {
	defer p.wg.Done()
	var reported uint64
	var t *clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		now := p.clock.Now()
		l := p.Lease()
		if g := lapsedGen(l, now); g > reported {
			reported = g
			p.reportLapse(g, l, now)
		}
		var fire <-chan time.Time
		if l.ValidAt(now) {
			if t == nil {
				t = p.clock.Timer(l.Until.Sub(now))
			} else {
				t.Reset(l.Until.Sub(now))
			}
			fire = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-p.leaseChanged:
		case <-fire:
		}
		if t != nil && !t.Stop() {
			select { // drain a tick that fired while we woke for another reason
			case <-t.C:
			default:
			}
		}
	}
}

// reportLapse logs the lapse of generation gen and calls OnLapse.
func (p *Presence) reportLapse(gen uint64, l Lease, now time.Time) {
	attrs := []any{"key", p.own.key, "generation", gen, "renewed", l.Gen > gen}
	if l.Gen == gen {
		attrs = append(attrs, "late_by", now.Sub(l.Until).Round(time.Millisecond))
	}
	p.log.Warn("presence lease lapsed: no beat acknowledged for TTL-FenceMargin; "+
		"other servers may read this server as stopped, so what it held under the lease must end", attrs...)
	if p.cfg.OnLapse != nil {
		p.cfg.OnLapse(gen)
	}
}
