package datadriver

import (
	"encoding/binary"
	"errors"
	"time"
)

// autosave is the profile's background loop: every Autosave period (the
// first one offset by a random phase, so profiles loaded together do not
// save together) it saves a live profile and retries the release of a
// retained one. Saves run concurrently across profiles, at most
// MaxConcurrentSaves at once, each bounded by SaveTimeout: one stuck save
// holds one slot, never the others. The loop ends with the profile.
func (p *Profile[T]) autosave() {
	d := p.d
	period := d.cfg.Autosave
	if period < 0 {
		period = DefaultAutosave // retained profiles still retry their release
	}
	t := d.node.clock.Timer(d.jitter(period))
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.autosaveOnce()
		t.Reset(period)
	}
}

// autosaveOnce runs one background save or release retry, unless one is
// already running for this profile.
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
	p.unlockSave()

	var err error
	if state == stateRetained {
		err = p.release(p.ctx)
	} else {
		err = p.Save(p.ctx)
	}
	if err != nil && p.ctx.Err() == nil && !errors.Is(err, ErrLockLost) {
		d.log.Warn("autosave failed", "key", p.key, "state", state.String(), "err", err)
	}
}

// jitter returns a random duration in [0, period).
func (d *Driver[T]) jitter(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	var b [8]byte
	d.node.entropyMu.Lock()
	_, err := d.node.cfg.Entropy.Read(b[:])
	d.node.entropyMu.Unlock()
	if err != nil {
		return period / 2
	}
	return time.Duration(binary.LittleEndian.Uint64(b[:]) % uint64(period))
}
