package datadriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// A session may change its data only while nobody else can take its lock.
// Two things can let another server take it without this one knowing:
//
//   - this server's presence expires (the lock carries the presence flag):
//     another server proves it stopped and steals the lock. The server's
//     presence lease (presence.Lease) ends FenceMargin before that can
//     happen; a session lives under the lease generation it was acquired in
//     and ends with it, even if a later beat starts a new generation.
//   - the lock ages past LockTTL + LockSkew without a write (a lock without
//     the presence flag, or one whose holder's presence a joiner cannot
//     read): another server takes it by age. A session's age deadline is the
//     send time of its last landed write plus LockTTL, LockSkew before that
//     can happen. A live session whose data does not change still refreshes
//     its lock (a write of nothing but lock.at) once half of LockTTL has
//     passed without a write.
//
// Both deadlines are on the local monotonic clock. Every change (Update,
// Save, Release, a trade) checks them first, so a process resumed after a
// pause accepts nothing more, and a per-profile timer ends the session when
// they pass, whatever its Redis calls are doing: ending a session never waits
// on I/O. The lock of a fenced session is given back in the background.

// The two causes of a fence, told apart by errors.Is (for metrics).
var (
	errLeaseLapsed = errors.New("this server's presence lease lapsed (no beat acknowledged for " +
		"PresenceTTL - FenceMargin), so another server may take the lock")
	errLockAged = errors.New("the lock was not refreshed for LockTTL, so another server may take it by age")
)

// errFenced says why a session ended or a change was refused: it matches
// ErrLockLost, ErrFenced and cause.
func errFenced(key string, cause error) error {
	return fmt.Errorf("%q: %w: %w: %w", key, ErrLockLost, ErrFenced, cause)
}

// leaseErrLocked is nil while p may change its data at now. d.mu held.
func (p *Profile[T]) leaseErrLocked(now time.Time) error {
	if p.leaseGen != 0 && !p.d.node.presence.Holds(p.leaseGen) {
		return errFenced(p.key, errLeaseLapsed)
	}
	if !now.Before(p.ageUntil) {
		return errFenced(p.key, errLockAged)
	}
	return nil
}

// checkLeaseLocked fences p when its lease has passed and returns why; nil
// while it holds or once p is closed (its own error says why). d.mu held.
func (p *Profile[T]) checkLeaseLocked() error {
	if p.state == stateClosed {
		return nil
	}
	err := p.leaseErrLocked(p.d.node.clock.Now())
	if err != nil {
		p.d.fenceLocked(p, err)
	}
	return err
}

// fenceLocked ends p with err and gives its lock back, without writing its
// data (progress since the last landed save is lost with the session). The
// game hears of it through Kick (ReasonFenced) and OnLockLost. d.mu held.
func (d *Driver[T]) fenceLocked(p *Profile[T], err error) {
	if p.state != stateClosed {
		d.log.Warn("session fenced off", "key", p.key, "err", err)
	}
	d.dropLocked(p, err, ReasonFenced)
}

// fenceLapsed ends every profile whose lease has passed (the Node's presence
// lease lapsed) and reports how many it ended.
func (d *Driver[T]) fenceLapsed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range d.profiles {
		if p.checkLeaseLocked() != nil {
			n++
		}
	}
	return n
}

// touchLocked records a write of p that landed, sent at sentAt: the lock's
// age deadline moves to sentAt + LockTTL, and the keeper timer is re-armed.
// d.mu held.
func (p *Profile[T]) touchLocked(sentAt time.Time) {
	if until := sentAt.Add(p.d.cfg.LockTTL); until.After(p.ageUntil) {
		p.ageUntil = until
	}
	p.armKeeperLocked()
}

// armKeeperLocked points the keeper timer at the next thing it must do:
// refresh the lock halfway through LockTTL, or end the session at its age
// deadline. The presence lease has a timer of its own (the Node's). d.mu
// held.
func (p *Profile[T]) armKeeperLocked() {
	if p.state == stateClosed {
		return
	}
	now := p.d.node.clock.Now()
	next := p.ageUntil.Sub(now)
	if !p.refreshing {
		refreshAt := p.ageUntil.Add(-p.d.cfg.LockTTL / 2)
		if p.refreshRetry.After(refreshAt) {
			refreshAt = p.refreshRetry
		}
		next = min(next, max(refreshAt.Sub(now), 0))
	}
	if p.keeper == nil {
		p.keeper = p.d.node.clock.AfterFunc(next, p.keep)
	} else {
		p.keeper.Reset(next)
	}
}

// keep runs on the keeper timer: it ends the session at its age deadline,
// and starts a lock refresh once half of LockTTL has passed without a write.
func (p *Profile[T]) keep() {
	d := p.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.state == stateClosed || p.checkLeaseLocked() != nil {
		return
	}
	now := d.node.clock.Now()
	if !p.refreshing && !now.Before(p.ageUntil.Add(-d.cfg.LockTTL/2)) && !now.Before(p.refreshRetry) {
		p.refreshing = d.goTracked(p.refresh)
	}
	p.armKeeperLocked()
}

// refresh writes nothing but the lock's timestamp (one save.lua call without
// data), after any save that is running (which refreshes it when it lands).
// A failed refresh is tried again after a sixteenth of LockTTL.
func (p *Profile[T]) refresh() {
	d := p.d
	ok := false
	defer func() {
		d.mu.Lock()
		p.refreshing = false
		if !ok {
			p.refreshRetry = d.node.clock.Now().Add(d.cfg.LockTTL / 16)
		}
		p.armKeeperLocked()
		d.mu.Unlock()
	}()
	if p.lockSave(p.ctx) != nil {
		return
	}
	defer p.unlockSave()
	d.mu.Lock()
	if p.state == stateClosed || p.state == stateLeaving ||
		d.node.clock.Now().Before(p.ageUntil.Add(-d.cfg.LockTTL/2)) { // a save refreshed it
		ok = true
		d.mu.Unlock()
		return
	}
	req := record.SaveArgs{Mode: record.ModeSave, Token: p.token, Earlier: p.earlier}
	d.mu.Unlock()
	wctx, span := d.tel.StartWrite(p.ctx, telemetry.WriteRefresh, p.key)
	started := d.node.clock.Now()
	res, err := d.write(wctx, p.key, req)
	span.End(writeOutcome(err), d.node.clock.Since(started), err)
	switch {
	case err == nil:
		ok = true
		d.mu.Lock()
		p.landedLocked(res)
		d.mu.Unlock()
	case errors.Is(err, ErrLockLost):
		p.finish(err)
	case p.ctx.Err() == nil:
		d.log.Warn("lock refresh failed", "key", p.key, "err", err)
		d.saveFailed(p.key, err)
	}
}

// landedLocked records a write of p that landed: its epoch, its age
// deadline, and that no earlier token can be on the lock any more. d.mu held.
func (p *Profile[T]) landedLocked(res writeRes) {
	p.earlier = nil
	p.epoch = res.Epoch
	p.touchLocked(res.sentAt)
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
	pres := d.node.presence
	for {
		renewed := pres.Renewed()
		now := d.node.clock.Now()
		if l := pres.Lease(); l.ValidAt(now) {
			return l.Gen, nil
		}
		left := deadline.Sub(now)
		const why = "this server has no presence lease (its beats are not acknowledged), so it starts no session"
		switch {
		case !wait:
			return 0, fmt.Errorf("load: %w: %s", ErrFenced, why)
		case left <= 0:
			return 0, fmt.Errorf("load: %w: %w: %s", ErrWaitTimeout, ErrFenced, why)
		}
		t := d.node.clock.Timer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-renewed:
		case <-t.C:
		}
		t.Stop()
	}
}
