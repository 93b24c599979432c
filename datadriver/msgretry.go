package datadriver

import (
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// Refused messages are tried again on their own. A message OnMessage
// refused stays in the inbox; while it waits (refused fewer than
// MaxMessageAttempts times) a live holder tries it again at an autosave
// tick of its owner, about one autosave period after the refusal, then
// after 2, 4 and at most 8 periods while it keeps being refused, so that
// MaxMessageAttempts and the dead letters work without another message
// arriving, and a poison message costs a profile one pull and one write per
// 8 periods at most. Any pull (a new message's notification, a save that
// sees unread messages, an operator's replay) tries it too. It costs an
// idle profile no timer and no goroutine: the autosave timer every live
// profile has carries it.

// inboxRetry is the owner's state of the retries (writer.retry).
type inboxRetry struct {
	// at is when refused messages that still wait are next tried (the
	// Node's clock, Unix ns; 0: none waits).
	at int64
	// n counts the retries in a row that found a message refused again:
	// the back-off's exponent, at most maxRetryBackoff.
	n uint8
	// logged is when a refusal was last logged at warning level (Unix ns).
	logged int64
}

// maxRetryBackoff bounds the back-off: a retry at most every 2^3 = 8
// autosave periods.
const maxRetryBackoff = 3

// refusalLogEvery is how often a profile logs its refusals at warning
// level (the others go to DEBUG): a message refused forever must not flood
// the log.
const refusalLogEvery = time.Minute

// retryDelay is how long after a refusal the refused messages are tried
// again: one autosave period, doubling with each retry refused again, at
// most 8 periods. A tick comes every period, so the retry runs at the
// first tick at least 7/8 of the delay after the refusal.
func (p *Profile[T]) retryDelay() time.Duration {
	var n uint8
	if r := p.w.retryState(); r != nil {
		n = r.n
	}
	return p.autosavePeriod() << min(n, maxRetryBackoff)
}

// retryRefused runs at each autosave tick, on the owner: when a retry is
// due, the whole inbox is pulled again, and every message not applied yet
// (the refused ones too) is tried. A retry that finds nothing refused again
// ends the back-off; one that could not read or write the inbox comes
// again after the same delay.
func (p *Profile[T]) retryRefused() {
	r := p.w.retryState()
	if r == nil { // nothing was ever refused
		return
	}
	now := p.d.node.clock.Now()
	if r.at == 0 || now.UnixNano() < r.at || p.phaseNow() != phaseLive {
		return
	}
	r.at = 0
	r.n = min(r.n+1, maxRetryBackoff)
	complete := p.pullInbox("")
	switch {
	case r.at != 0: // refused again: noteTries scheduled the next retry
	case complete:
		r.n = 0 // nothing refused waits any more
	default:
		r.at = now.Add(p.retryDelay()).UnixNano()
	}
}

// noteTries runs when a write that counted refusals landed, on the owner:
// refused is what it sent, tries how often each message has been refused
// now. A message refused fewer than MaxMessageAttempts times still waits:
// a retry is scheduled unless one is. Refusals are logged at warning level
// at most once per refusalLogEvery per profile, naming the message, its
// refusals and the last reason; a message moved to the dead letters is
// logged so too.
func (p *Profile[T]) noteTries(refused []record.Refusal, tries []record.Tries) {
	if len(tries) == 0 {
		return
	}
	d, r := p.d, &p.w.made().retry
	most := d.cfg.MaxMessageAttempts
	var waiting, dead []record.Tries
	for _, t := range tries {
		if most > 0 && t.N >= int64(most) {
			dead = append(dead, t)
		} else {
			waiting = append(waiting, t)
		}
	}
	now := d.node.clock.Now()
	if len(waiting) > 0 && r.at == 0 {
		r.at = now.Add(p.retryDelay()).UnixNano()
	}
	why := func(id string) string {
		for _, rf := range refused {
			if rf.ID == id {
				return rf.Err
			}
		}
		return ""
	}
	for _, t := range dead {
		d.log.Warn("OnMessage refused a message MaxMessageAttempts times: it moved to the dead letters "+
			"(playerdata inspect shows them, playerdata replay puts them back once OnMessage is mended)",
			"key", p.key, "id", t.ID, "attempts", t.N, "err", why(t.ID))
	}
	if len(waiting) == 0 {
		return
	}
	t := waiting[0]
	if now.UnixNano()-r.logged < int64(refusalLogEvery) {
		d.log.Debug("OnMessage refused messages; they stay in the inbox", "key", p.key, "id", t.ID, "attempts", t.N,
			"err", why(t.ID), "others", len(waiting)-1)
		return
	}
	r.logged = now.UnixNano()
	args := []any{"key", p.key, "id", t.ID, "attempts", t.N, "err", why(t.ID), "retry_in", time.Duration(r.at - now.UnixNano())}
	if most > 0 {
		args = append(args, "max_attempts", most)
	}
	if len(waiting) > 1 {
		args = append(args, "others", len(waiting)-1)
	}
	d.log.Warn("OnMessage refused a message; it stays in the inbox and is tried again", args...)
}
