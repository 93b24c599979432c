package datadriver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/benbjohnson/clock"
)

// A session may change its data only while nobody else can take its lock.
// Two things can let another server take it without this one knowing:
//
//   - this server's presence expires (the lock carries the presence flag):
//     another server proves it stopped and steals the lock. The server's
//     presence lease (presencecore.Lease) ends FenceMargin before that can
//     happen; a session lives under the lease generation it was acquired in
//     and ends with it, even if a later beat starts a new generation.
//   - the lock ages past LockTTL + LockSkew without a write (a lock without
//     the presence flag): another server takes it by age. A session's age
//     deadline is the send time of its last landed write plus LockTTL,
//     LockSkew before that can happen. A live session whose data does not
//     change still refreshes its lock (a write of nothing but lock.at) once
//     half of LockTTL has passed without a write.
//
// Both deadlines are on the local monotonic clock. Every change (Update,
// every write, a trade) checks them first, so a process resumed after a
// pause accepts nothing more, and each has a timer of its own that ends the
// session when it passes (the Node's lease goroutine, the profile's age
// fence), whatever its Redis calls are doing: ending a session never waits
// on I/O. The owner then gives the lock back.

// The two causes of a fence, told apart by errors.Is.
var (
	errLeaseLapsed = errors.New("this server's presence lease lapsed (no beat acknowledged for " +
		"PresenceTTL - FenceMargin), so another server may take the lock")
	errLockAged = errors.New("the lock was not refreshed for LockTTL, so another server may take it by age")
)

// errFenced says why a session ended or a change was refused: it matches
// ErrLockLost, ErrFenced and cause, and ends the session for c.
func errFenced(key string, c cause, why error) error {
	return endsSession(c, fmt.Errorf("%q: %w: %w: %w", key, ErrLockLost, ErrFenced, why))
}

// leaseGenOf is a presence lease generation as a profile holds it: one
// past 32 bits (never reached) as the largest, which the lease, its
// generations only growing, never has again (0 would mean no lease).
func leaseGenOf(gen uint64) uint32 {
	if gen > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(gen)
}

// leaseErr is nil while p may change its data at now (lock-free).
func (p *Profile[T]) leaseErr(now time.Time) error {
	if p.leaseGen != 0 && !p.d.node.presence.HoldsAt(uint64(p.leaseGen), now) {
		return errFenced(p.key, causeLeaseLapsed, errLeaseLapsed)
	}
	if p.d.instantOf(now) >= p.ageUntil() {
		return errFenced(p.key, causeLockAged, errLockAged)
	}
	return nil
}

// updatable is nil while the session takes changes: it is live, nothing
// stopped it, and its lease holds.
func (p *Profile[T]) updatable() error {
	switch p.phaseNow() {
	case phaseLive:
	case phaseEnded:
		return p.Err()
	default:
		return releasedErr(p.key)
	}
	if p.state.stopped() {
		if err := p.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%q: %w: the session is ending", p.key, ErrLockLost)
	}
	return p.leaseErr(p.d.node.clock.Now())
}

// fenceLapsed ends every profile whose lease has passed (the Node's presence
// lease lapsed) and reports how many it ended.
func (d *Driver[T]) fenceLapsed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.node.clock.Now()
	n := 0
	for _, p := range d.profiles {
		if err := p.leaseErr(now); err != nil && p.endLocked(causeOf(err), err) {
			n++
		}
	}
	return n
}

// touch records a write of p that landed, sent at sentAt: the lock's age
// deadline moves to sentAt + LockTTL. On the executor only (the timer
// reads the deadline, never writes it). The timer, armed for the deadline
// before at the latest, moves with the executor's next rearm (its work
// ends with one): until then it can only fire early, and fire again.
func (p *Profile[T]) touch(sentAt time.Time) {
	if sent := int64(p.d.instantOf(sentAt)); sent > p.lastSent.Load() {
		p.lastSent.Store(sent)
	}
}

// ageUntil is the lock's age deadline as an instant: LockTTL after the
// last landed write was sent.
func (p *Profile[T]) ageUntil() instant {
	return instant(p.lastSent.Load()) + instant(p.d.cfg.LockTTL)
}

// ageDeadline is the lock's age deadline: when it could be taken by age.
func (p *Profile[T]) ageDeadline() time.Time { return p.d.timeAt(p.ageUntil()) }

// timerFired runs on the driver's timer goroutine when the profile's timer
// is due. At the age deadline it is the age fence: it ends the session,
// whatever its executor is doing. Before it (a write moved the deadline, or
// the tick comes first) it points the timer at the deadline, so that the
// fence stands whatever the executor does next, and posts the tick, whose
// work re-arms the timer for the next tick (a Reset racing the
// executor's only fires early, and fires again).
func (p *Profile[T]) timerFired() {
	if p.phaseNow() == phaseEnded {
		return
	}
	now := p.d.node.clock.Now()
	if until := p.ageDeadline(); until.After(now) {
		p.d.timers.ResetAt(p, until)
		p.post(sigTick) // (dropped once the profile stops)
		return
	}
	if err := p.leaseErr(now); err != nil {
		p.endWith(causeOf(err), err)
	}
}

// awaitLease returns the presence lease generation a new lock is taken
// under: the current one while it holds, else, when wait is true, the next
// one once a beat starts it; by deadline, else an error matching
// ErrWaitTimeout and ErrFenced (ErrFenced alone when wait is false). A Node
// whose locks carry no presence flag answers 0 at once.
func (d *Driver[T]) awaitLease(ctx context.Context, deadline time.Time, wait bool) (uint64, error) {
	if !d.presenceFlag() {
		return 0, nil
	}
	if !wait {
		deadline = d.node.clock.Now() // look once
	}
	gen, err := d.node.leaseBy(ctx, deadline, nil)
	if !errors.Is(err, errNoLease) {
		return gen, err
	}
	const why = "this server has no presence lease (its beats are not acknowledged), so it starts no session"
	if !wait {
		return 0, fmt.Errorf("load: %w: %s", ErrFenced, why)
	}
	return 0, fmt.Errorf("load: %w: %w: %s", ErrWaitTimeout, ErrFenced, why)
}

// errNoLease is leaseBy's answer when its deadline passed without a lease.
var errNoLease = errors.New("no presence lease by the deadline")

// AwaitLease waits until this Node holds its presence lease: a beat of its
// presence was acknowledged within the last PresenceTTL - FenceMargin, so a
// load made now can start a session. NewNode returns without waiting for
// its first beat, and a beat delayed by a loaded Redis or machine keeps the
// Node fenced until a later one lands (a load meanwhile waits within its
// LockWait, or, without a handoff wait, answers ErrFenced at once): call
// AwaitLease before serving, or before a one-shot tool's only load. It
// wakes on the acknowledging beat itself, not by polling. It answers nil at
// once on a Node with handoff off (its locks carry no presence flag),
// ErrClosing once Close has begun, and ctx's error when ctx ends first.
func (n *Node) AwaitLease(ctx context.Context) error {
	if !n.handoffOn {
		return nil
	}
	_, err := n.leaseBy(ctx, time.Time{}, n.closing)
	return err
}

// leaseBy returns the generation of the presence lease once it holds, on
// the Node's clock: at once while it holds, else on the beat that starts
// the next one. It answers errNoLease once deadline has passed without one
// (the zero deadline: no deadline), ErrClosing once stop is closed (nil:
// never), and ctx's error when ctx ends.
func (n *Node) leaseBy(ctx context.Context, deadline time.Time, stop <-chan struct{}) (uint64, error) {
	pres := n.presence
	for {
		select {
		case <-stop:
			return 0, ErrClosing
		default:
		}
		renewed := pres.Renewed()
		now := n.clock.Now()
		if l := pres.Lease(); l.ValidAt(now) {
			return l.Gen, nil
		}
		var timer *clock.Timer
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			left := deadline.Sub(now)
			if left <= 0 {
				return 0, errNoLease
			}
			timer = n.clock.Timer(left)
			timeout = timer.C
		}
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-stop:
			err = ErrClosing
		case <-renewed:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return 0, err
		}
	}
}
