package presencecore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
)

// claimSlack is added to the wait for another instance's beat to expire, so
// that the next look comes just after it, not just before.
const claimSlack = 5 * time.Millisecond

// Claim makes this process the JobID's owner: it is the server's first beat
// (a full check, extending the lease like any beat), written only when the
// JobID's field is free, ours, or holds a beat that has expired.
//
// When another instance's beat is live, Claim waits and looks again, at most
// every Beat and just after that beat expires:
//
//   - the beat expires unrenewed (the process that wrote it is gone: a
//     restarted process that kept its JobID): Claim writes ours and returns
//     nil, at most one TTL after that process's last beat;
//   - the beat is renewed, or another instance writes one (a live process
//     uses this JobID): Claim returns that *InUseError (ErrJobIDInUse),
//     usually within one Beat.
//
// A JobID whose last process shut down cleanly (Remove deleted its field)
// is free at once, and so is one whose owner entry is missing (the owners
// hash evicted or deleted): only an entry naming another instance is an
// intruder.
//
// Any other failure is returned as Beat returns it; ctx bounds the whole
// wait (its error is returned wrapped), and Close ends it with ErrClosed.
// Redis time decides what is live, the clock only paces the looks.
func (p *Presence) Claim(ctx context.Context) error {
	var first presencescript.BeatAnswer
	for n := 0; ; n++ {
		ans, err := p.beat(ctx, false)
		var inUse *InUseError
		if !errors.As(err, &inUse) || inUse.Fenced {
			return err
		}
		if n == 0 {
			first = ans
			left := ans.OtherExpiresAt.Sub(ans.At)
			p.log.Info(fmt.Sprintf("presence: waiting at most %v for this JobID's beat under another instance "+
				"to lapse (a restarted process keeps its JobID; a live one renews it, and the claim fails "+
				"with ErrJobIDInUse)", left.Round(time.Millisecond)),
				"other_instance", ans.Other, "at_most", left)
		} else if ans.Other != first.Other || ans.OtherExpiresAt.After(first.OtherExpiresAt) {
			return fmt.Errorf("presence claim: %w", inUse)
		}
		wait := min(ans.OtherExpiresAt.Sub(ans.At)+claimSlack, p.cfg.Beat)
		t := p.clock.Timer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("presence claim: %w (%v)", ctx.Err(), inUse)
		case <-p.base.Done():
			t.Stop()
			return fmt.Errorf("presence claim: %w", ErrClosed)
		case <-t.C:
		}
	}
}

// beatAnswered acts on a beat acknowledged in time: a written beat extends
// the lease; a refused one, or one that took our field back from another
// instance, fences this server when it had beaten the JobID before.
func (p *Presence) beatAnswered(sentAt, ackAt time.Time, checked bool, ans presencescript.BeatAnswer) error {
	p.mu.Lock()
	claimed := p.claimed
	if ans.Outcome != presencescript.BeatRefused {
		p.claimed = true
		p.lastExpiry = ans.ExpiresAt.UnixMilli()
		if checked {
			p.needCheck, p.sinceCheck = false, 0
		} else {
			p.sinceCheck++
		}
	}
	p.mu.Unlock()

	inUse := &InUseError{JobID: p.cfg.JobID, Instance: p.cfg.Instance, Other: ans.Other,
		ExpiresAt: ans.OtherExpiresAt, Fenced: claimed}
	switch {
	case ans.Outcome == presencescript.BeatRefused && claimed:
		p.conflict(inUse, "another process beats this server's JobID; fencing: every session held under the lease ends, and this server beats again only once that beat expires")
		return fmt.Errorf("presence beat: %w", inUse)
	case ans.Outcome == presencescript.BeatRefused:
		return fmt.Errorf("presence beat: %w", inUse)
	case ans.Outcome == presencescript.BeatTakenOver && claimed:
		p.conflict(inUse, "another process beat this server's JobID (its beat has expired since); fencing: every session held under the lease ends, and the next beat starts a new lease")
		return fmt.Errorf("presence beat: %w", inUse)
	case ans.Outcome == presencescript.BeatTakenOver:
		p.log.Info("presence: took the JobID over from an earlier instance whose beat had expired",
			"other_instance", ans.Other)
	}
	p.mu.Lock()
	p.conflicted = false
	p.mu.Unlock()
	p.beatSucceeded(sentAt, ackAt, ans.Reset)
	return nil
}

// conflict fences this server: the lease lapses now (Holds answers false from
// here, and the fence goroutine reports the lapse to OnLapse), and no beat
// sent before now can extend or renew it. It logs an error naming both
// instances, once until a beat succeeds again.
func (p *Presence) conflict(e *InUseError, msg string) {
	now := p.clock.Now()
	p.mu.Lock()
	first := !p.conflicted
	p.conflicted = true
	if now.After(p.noRenewBefore) {
		p.noRenewBefore = now
	}
	if l := p.lease.Load(); l != nil && l.ValidAt(now) {
		p.lease.Store(&Lease{Gen: l.Gen, Until: now})
		p.signalLocked()
	}
	p.mu.Unlock()
	if !first {
		return
	}
	attrs := []any{"other_instance", e.Other, "key", p.own.key}
	if !e.ExpiresAt.IsZero() {
		attrs = append(attrs, "other_expires_at", e.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	p.log.Error("presence: "+msg, attrs...)
}
