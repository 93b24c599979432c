package presence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
)

// Beat writes one beat: our field's expiry becomes Redis TIME + TTL, the run
// meta fields are refreshed if Redis restarted or failed over, and up to three
// expired fields are cleaned. One Lua script round trip. The clock time it was
// sent at becomes LastBeat when it succeeds. Errors are wrapped
// "presence beat: ..."; after Close it answers ErrClosed. Beat is what Start's
// loop calls; call it directly for an extra beat (e.g. when handoff starts).
// ctx bounds the round trip; Close also cancels it.
func (p *Presence) Beat(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("presence beat: %w", ErrClosed)
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.base, cancel)
	defer stop()

	sentAt := p.clock.Now()
	res, err := p.beatScript.Run(ctx, p.rdb, []string{p.cfg.Key}, p.cfg.JobID, p.ttlMS).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("%w: %v", ErrUnexpectedReply, res)
	}
	if err != nil {
		err = fmt.Errorf("presence beat: %w", err)
		p.beatFailed(err)
		return err
	}
	p.beatSucceeded(sentAt, res[1] == 1)
	return nil
}

// beatFailed logs the first failure after a success; a cancelled beat says
// nothing about Redis and is neither logged nor counted.
func (p *Presence) beatFailed(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	p.mu.Lock()
	first := !p.failing
	p.failing = true
	p.failures++
	p.mu.Unlock()
	if first {
		p.log.Warn("presence beat failing; other servers may soon read this server as stopped",
			"key", p.cfg.Key, "err", err)
	}
}

// beatSucceeded records sentAt, ends a stale episode and wakes the loop to
// re-arm the stale timer.
func (p *Presence) beatSucceeded(sentAt time.Time, reset bool) {
	now := p.clock.Now()
	p.mu.Lock()
	recovered, failures := p.failing, p.failures
	p.failing, p.failures = false, 0
	if sentAt.After(p.lastSent) {
		p.lastSent = sentAt
	}
	if now.Before(p.lastSent.Add(p.fenceAfter)) {
		p.staleFired = false
	}
	p.mu.Unlock()

	select {
	case p.rearm <- struct{}{}:
	default:
	}
	if recovered {
		p.log.Info("presence beat recovered", "key", p.cfg.Key, "failed_beats", failures)
	}
	if reset {
		p.log.Info("presence: new Redis run detected; a missing beat reads unknown for one TTL",
			"key", p.cfg.Key, "ttl", p.cfg.TTL)
	}
}

// run is the beat loop: one beat now, then one per tick; it also owns the
// stale timer so that OnStale runs on this goroutine and stops with it.
func (p *Presence) run(ctx context.Context) {
	defer p.wg.Done()
	ticker := p.clock.Ticker(p.cfg.Beat)
	defer ticker.Stop()

	var fence *clock.Timer
	var fenceC <-chan time.Time
	defer func() {
		if fence != nil {
			fence.Stop()
		}
	}()
	disarm := func() {
		if fence != nil && !fence.Stop() {
			select {
			case <-fence.C:
			default:
			}
		}
	}
	// arm points the stale timer at the current deadline, fires it at once if
	// the deadline has passed, or leaves it off (already fired this episode).
	arm := func() {
		for {
			d, ok := p.staleIn()
			disarm()
			if !ok {
				return
			}
			if d > 0 {
				if fence == nil {
					fence = p.clock.Timer(d)
					fenceC = fence.C
				} else {
					fence.Reset(d)
				}
				return
			}
			p.fireStale()
		}
	}

	arm()
	_ = p.Beat(ctx) // logged inside
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_ = p.Beat(ctx)
		case <-p.rearm:
			arm()
		case <-fenceC:
			arm() // fires OnStale if the deadline really passed, else re-arms
		}
	}
}

// staleRef returns the time the stale deadline counts from: the last
// successful beat's send time, or Start's time while none succeeded. p.mu held.
func (p *Presence) staleRef() time.Time {
	if p.lastSent.IsZero() {
		return p.startedAt
	}
	return p.lastSent
}

// staleIn returns the time left before this server goes stale, and false when
// no stale timer should run (OnStale already ran this episode).
func (p *Presence) staleIn() (time.Duration, bool) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.staleFired {
		return 0, false
	}
	return p.staleRef().Add(p.fenceAfter).Sub(now), true
}

// fireStale opens a stale episode: warns and calls OnStale once.
func (p *Presence) fireStale() {
	p.mu.Lock()
	if p.staleFired {
		p.mu.Unlock()
		return
	}
	p.staleFired = true
	ref, never := p.staleRef(), p.lastSent.IsZero()
	p.mu.Unlock()

	p.log.Warn("presence stale: no successful beat for TTL-FenceMargin; this server may read as stopped",
		"key", p.cfg.Key, "since", p.clock.Since(ref), "never_beat", never, "ttl", p.cfg.TTL)
	if p.cfg.OnStale != nil {
		p.cfg.OnStale()
	}
}
