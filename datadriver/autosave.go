package datadriver

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// startAutosave arms the profile's autosave timer: every Autosave period (the
// first one offset by a random phase, so profiles loaded together do not save
// together) it saves a live profile and retries the release of a retained
// one. A tick runs on the timer's own goroutine, counted by the driver so
// that shutdown waits for it; no goroutine waits between ticks. Saves run
// concurrently across profiles, at most MaxConcurrentSaves at once, each
// bounded by SaveTimeout: one stuck save holds one slot, never the others.
// d.mu must be held.
func (p *Profile[T]) startAutosaveLocked() {
	d := p.d
	p.autosaveTimer = d.node.clock.AfterFunc(p.phase(p.autosavePeriod()), p.autosaveTick)
}

// autosavePeriod is the tick period; retained profiles retry their release
// even when autosave is off.
func (p *Profile[T]) autosavePeriod() time.Duration {
	if p.d.cfg.Autosave < 0 {
		return DefaultAutosave
	}
	return p.d.cfg.Autosave
}

// autosaveTick runs one background save or release retry and re-arms the
// timer while the profile lives.
func (p *Profile[T]) autosaveTick() {
	d := p.d
	if !d.track() {
		return
	}
	defer d.wg.Done()
	p.autosaveOnce()
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.state != stateClosed && !d.closed {
		p.autosaveTimer.Reset(p.autosavePeriod())
	}
}

// stopAutosaveLocked stops the timer of a profile that ended. d.mu must be
// held.
func (p *Profile[T]) stopAutosaveLocked() {
	if p.autosaveTimer != nil {
		p.autosaveTimer.Stop()
	}
}

// autosaveOnce runs one save or release retry, unless one is already
// running for this profile.
func (p *Profile[T]) autosaveOnce() {
	d := p.d
	d.mu.Lock()
	state := p.state
	d.mu.Unlock()
	if state == stateActive && d.cfg.Autosave < 0 {
		return
	}
	if state != stateActive && state != stateRetained {
		return
	}
	if err := d.node.acquireSave(p.ctx); err != nil {
		return
	}
	defer d.node.releaseSave()
	select {
	case p.saveLock <- struct{}{}:
	default:
		return // a save is running; this tick is skipped, not queued
	}
	var err error
	if state == stateRetained {
		p.unlockSave()
		err = p.release(p.ctx)
	} else {
		err = p.saveLocked(p.ctx, record.ModeSave, false)
		p.unlockSave()
	}
	if err != nil && p.ctx.Err() == nil && !errors.Is(err, ErrLockLost) {
		d.log.Warn("autosave failed", "key", p.key, "state", state.String(), "err", err)
		d.saveFailed(p.key, err)
	}
}

// phase is the profile's offset in [0, period) for its first autosave,
// spread by a hash of its key, server and epoch: profiles loaded together
// save at different times, and a replayed run saves at the same ones.
func (p *Profile[T]) phase(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", p.key, p.d.node.jobID, p.epoch)
	return time.Duration(h.Sum64() % uint64(period))
}
