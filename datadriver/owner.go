package datadriver

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/benbjohnson/clock"
)

// Every write of a profile runs on its owner goroutine, one at a time, so
// the write state (Profile.w) has one owner and needs no lock: a game's Save
// and Release, autosaves, lock refreshes, the release a handoff asks for
// and its retries, adoption, inbox pulls and restores. A trade borrows the
// owner: the owner runs the trade's entry, then waits while the trade's
// coordinator uses the write state, until the trade leaves. The owner ends
// with the profile.
// Timers that guard safety (the presence lease, the age deadline) are not
// the owner's: they end the session whatever its writes are doing.

// request is work for a profile's owner, whose caller waits for its
// answer.
type request struct {
	ctx  context.Context
	run  func(ctx context.Context) error
	done chan error // buffered 1
}

// do runs f on the owner goroutine, after what runs there now, and returns
// its error. ctx bounds the wait and is f's context. A profile that has
// ended answers its end error.
func (p *Profile[T]) do(ctx context.Context, f func(context.Context) error) error {
	r := request{ctx: ctx, run: f, done: make(chan error, 1)}
	select {
	case p.reqs <- r:
	case <-p.done:
		return p.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err() // f sees ctx end too, and returns soon
	}
}

// start starts the owner of a profile that was just handed out, and its age
// deadline. d.mu held.
func (p *Profile[T]) startLocked() {
	p.armAgeFenceLocked()
	p.d.wg.Add(1)
	go p.own()
}

// own is the owner goroutine.
func (p *Profile[T]) own() {
	d := p.d
	defer d.wg.Done()
	autosave := d.node.clock.Timer(p.phase0(p.autosavePeriod()))
	defer autosave.Stop()
	refresh := d.node.clock.Timer(p.refreshIn())
	defer refresh.Stop()
	p.catchUpInbox()
	for p.ctx.Err() == nil {
		if !p.runReady(autosave, refresh) {
			select {
			case <-p.ctx.Done():
				return
			case r := <-p.reqs:
				r.done <- r.run(r.ctx)
			case <-p.leave:
				p.releaseInBackground()
			case <-p.pullC:
				p.pullInbox("")
			case <-autosave.C:
				p.onAutosave(autosave)
			case <-refresh.C:
				p.refresh()
			}
		}
		refresh.Reset(p.refreshIn())
	}
}

// runReady runs one event that is waiting already, if any, and reports
// whether it ran one. Events that came in while the owner was busy run in
// a fixed order (a release asked for, a message waiting, the game's
// request, the timers), not in the order a select would pick at random:
// a replay of the same events runs them the same way (a message that
// waited behind a long write is applied before a MoveTo that waited too,
// and travels with it).
func (p *Profile[T]) runReady(autosave, refresh *clock.Timer) bool {
	select {
	case <-p.leave:
		p.releaseInBackground()
		return true
	default:
	}
	select {
	case <-p.pullC:
		p.pullInbox("")
		return true
	default:
	}
	select {
	case r := <-p.reqs:
		r.done <- r.run(r.ctx)
		return true
	default:
	}
	select {
	case <-autosave.C:
		p.onAutosave(autosave)
		return true
	default:
	}
	select {
	case <-refresh.C:
		p.refresh()
		return true
	default:
	}
	return false
}

// onAutosave is the autosave timer's event: a refused message due for a
// retry is tried, then the profile saved (autosave), and the timer set again.
func (p *Profile[T]) onAutosave(autosave *clock.Timer) {
	p.retryRefused()
	autosave.Reset(p.autosave())
}

// autosavePeriod is the autosave period; a retained profile retries its
// release at this period even when autosave is off.
func (p *Profile[T]) autosavePeriod() time.Duration {
	if p.d.cfg.Autosave < 0 {
		return DefaultAutosave
	}
	return p.d.cfg.Autosave
}

// autosave saves a live profile or retries the release of a retained one,
// and returns when to come again. At most MaxConcurrentSaves autosaves of a
// Node run at once: a tick that finds none free comes again soon.
func (p *Profile[T]) autosave() time.Duration {
	d := p.d
	period := p.autosavePeriod()
	ph := p.phaseNow()
	if (ph == phaseLive && d.cfg.Autosave < 0) || (ph != phaseLive && ph != phaseRetained) {
		return period
	}
	select {
	case d.node.saveSem <- struct{}{}:
		defer func() { <-d.node.saveSem }()
	default:
		return max(period/16, 10*time.Millisecond)
	}
	var err error
	if ph == phaseRetained {
		err = p.release(p.ctx)
	} else {
		err = p.write(p.ctx, writeAutosave)
	}
	if err != nil && p.ctx.Err() == nil && causeOf(err) == causeNone {
		d.log.Warn("autosave failed", "key", p.key, "phase", ph.String(), "err", err)
		d.saveFailed(p.key, err)
	}
	return period
}

// phase0 is the profile's offset in [0, period) for its first autosave,
// spread by a hash of its key, server and epoch: profiles loaded together
// save at different times, and a replayed run saves at the same ones.
func (p *Profile[T]) phase0(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", p.key, p.d.node.jobID, p.epoch.Load())
	return time.Duration(h.Sum64() % uint64(period))
}

// refreshIn is how long until the lock needs a refresh: LockTTL/2 after the
// last landed write (or after a failed refresh's retry time).
func (p *Profile[T]) refreshIn() time.Duration {
	at := p.w.lastWrite.Add(p.d.cfg.LockTTL / 2)
	if p.w.refreshRetry.After(at) {
		at = p.w.refreshRetry
	}
	return max(at.Sub(p.d.node.clock.Now()), 0)
}

// refresh writes nothing but the lock's timestamp (one save.lua call
// without data) when no write landed for LockTTL/2, so that an idle session
// never nears its age deadline. A failed refresh is tried again after a
// sixteenth of LockTTL.
func (p *Profile[T]) refresh() {
	d := p.d
	if ph := p.phaseNow(); (ph != phaseLive && ph != phaseRetained) || p.refreshIn() > 0 {
		return
	}
	err := p.write(p.ctx, writeRefresh)
	if err != nil && p.ctx.Err() == nil && causeOf(err) == causeNone {
		p.w.refreshRetry = d.node.clock.Now().Add(d.cfg.LockTTL / 16)
		d.log.Warn("lock refresh failed", "key", p.key, "err", err)
		d.saveFailed(p.key, err)
	}
}

// releaseInBackground runs the release a handoff or a leave asked for.
func (p *Profile[T]) releaseInBackground() {
	if ph := p.phaseNow(); ph != phaseLeaving && ph != phaseRetained {
		return
	}
	if err := p.release(p.ctx); err != nil && p.ctx.Err() == nil && causeOf(err) == causeNone {
		p.d.saveFailed(p.key, err)
	}
}
