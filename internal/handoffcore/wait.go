package handoffcore

import (
	"context"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// expiryMargin is added when a wait wakes for the moment a holder's presence
// can first expire, so that the read falls after it on the Redis clock.
const expiryMargin = 5 * time.Millisecond

// Lock is the lock an acquire found held by another server. (The record's
// own lock type has the same fields: a caller converts one to the other.)
type Lock struct {
	// Job is the holder's JobID.
	Job string
	// Token is its lock token.
	Token string
	// Presence is true when the lock carries the presence flag: its holder
	// beats presence, so the lock moves when the holder is proven stopped.
	Presence bool
	// Age is the time since the holder took the lock or last wrote under it
	// (Redis clock; 0 for a lock stamped ahead of it).
	Age time.Duration
}

// Attempt is what the next acquire may claim about the holder.
type Attempt struct {
	// StealJob and StealToken name a lock of a holder proven stopped after
	// the lock was written: it may be taken if it still names that token
	// and carries the presence flag (see prover).
	StealJob, StealToken string
}

// Wait is one load waiting on another server's lock. It is not safe for
// concurrent use; Close it when the load ends.
type Wait struct {
	h        *Handoff
	wk       waitKey
	deadline time.Time
	active   bool          // ask the holder and prove it stopped
	purpose  string        // what the requests say they are for ("" a join)
	wake     chan struct{} // a reply arrived (one pending wake: they coalesce)

	job, token string    // the holder being waited on
	requested  time.Time // when the last request went out (zero: none yet)
	// attempted is when Next was last called, just after an acquire
	// attempt failed; freeWake says the next wake may end a park at once
	// (the first reply for this lock: the handoff), else a wake ends it
	// no sooner than ParkMin after attempted.
	attempted time.Time
	freeWake  bool
	park      time.Duration
	// writtenBy is when the lock being waited on was last written at the
	// latest, on this server's clock: when Next first saw it, less its age.
	writtenBy time.Time
}

// NewWait starts waiting on key of driver until deadline. An active wait
// sends release requests and may prove the holder stopped; a passive one
// (a driver or server with handoff off) only polls.
func (h *Handoff) NewWait(driver, key string, deadline time.Time, active bool) *Wait {
	return h.NewWaitFor(driver, key, deadline, active, "")
}

// NewWaitFor is NewWait for a load made for purpose (see ReleaseFunc:
// messaging.PurposeRestore for a restore), which its requests carry so that
// the holder can tell its player why the session ends.
func (h *Handoff) NewWaitFor(driver, key string, deadline time.Time, active bool, purpose string) *Wait {
	w := &Wait{
		purpose:  purpose,
		h:        h,
		wk:       waitKey{driver, key},
		deadline: deadline,
		active:   active,
		wake:     make(chan struct{}, 1),
		park:     h.cfg.ParkMin,
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.waits[w.wk]
	if ws == nil {
		ws = make(map[*Wait]struct{})
		h.waits[w.wk] = ws
	}
	ws[w] = struct{}{}
	return w
}

// Close stops the wait.
func (w *Wait) Close() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if ws := h.waits[w.wk]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(h.waits, w.wk)
		}
	}
}

// Next is called with the lock each failed acquire found. It asks the holder
// to release it (at once for a new holder or token, then every
// RequestRepeat), parks until a reply, its park time, the moment the
// holder's presence can change the answer, or a proof that the holder
// stopped (made by any wait of this Node), and returns what the next acquire
// may claim. The first reply for a lock ends the park at once; a later one
// ends it no sooner than ParkMin after the attempt before this call, so
// whatever arrives on the bus, a join makes at most one attempt per ParkMin
// beyond its own schedule. A holder already proven stopped is stolen from
// at once. It returns ErrDeadline once the deadline has passed and
// ctx.Err() when ctx ends.
func (w *Wait) Next(ctx context.Context, l Lock) (Attempt, error) {
	if err := ctx.Err(); err != nil {
		return Attempt{}, err
	}
	if !w.h.cfg.Clock.Now().Before(w.deadline) {
		return Attempt{}, ErrDeadline
	}
	return w.next(ctx, l)
}

// next is Next once the deadline is checked. Its parks end at the deadline
// on their own timer; its presence reads get a context that ends then
// (readBounded).
func (w *Wait) next(ctx context.Context, l Lock) (Attempt, error) {
	h := w.h
	clk := h.cfg.Clock
	now := clk.Now()
	w.attempted = now
	w.track(ctx, l, now)
	proving := w.active && l.Presence
	d, proven, stolen := w.parkFor(l, proving, now)
	if stolen {
		return w.steal(l), nil
	}

	t := clk.Timer(d)
	defer t.Stop()
	// The request repeats on its own schedule, every RequestRepeat, whatever
	// the park; a repeat does not end the park.
	var repeat <-chan time.Time
	if w.active {
		rt := clk.Timer(max(w.requested.Add(h.cfg.RequestRepeat).Sub(now), 0))
		defer rt.Stop()
		repeat = rt.C
	}
	wake := w.wake             // nil once a wake is deferred
	var woken <-chan time.Time // a deferred wake comes due
parked:
	for {
		select {
		case <-ctx.Done():
			return Attempt{}, ctx.Err()
		case <-wake:
			// The holder replied: try again, at once for the first reply,
			// else no sooner than ParkMin after the last attempt.
			due, at := w.attempted.Add(h.cfg.ParkMin), clk.Now()
			if w.freeWake || !at.Before(due) {
				w.freeWake = false
				return Attempt{}, nil
			}
			wt := clk.Timer(due.Sub(at))
			defer wt.Stop()
			wake, woken = nil, wt.C
		case <-woken:
			return Attempt{}, nil
		case <-proven:
			if sent, ok, _, _, _ := h.prover.proof(l.Job); ok && w.writtenBy.Before(sent) {
				return w.steal(l), nil
			}
			proven = nil
		case <-repeat:
			h.request(ctx, w.wk.driver, w.wk.key, l.Job, l.Token, w.purpose)
			w.requested = clk.Now()
			repeat = nil // at most one repeat per park: parks are shorter than RequestRepeat
		case <-t.C:
			break parked
		}
	}
	if !proving || !clk.Now().Before(w.deadline) {
		return Attempt{}, nil // at the deadline: one last try, no read
	}
	return w.readPresence(ctx, l, now)
}

// track follows l: a new holder or a new lock starts the wait over with
// it, and a request goes out when one is due (a new lock, or the repeat
// came due while the wait was not parked).
func (w *Wait) track(ctx context.Context, l Lock, now time.Time) {
	h := w.h
	if l.Job != w.job || l.Token != w.token {
		w.job, w.token = l.Job, l.Token
		w.requested = time.Time{}
		w.park = h.cfg.ParkMin
		w.writtenBy = now.Add(-l.Age)
		w.freeWake = true
	}
	if w.active && (w.requested.IsZero() || now.Sub(w.requested) >= h.cfg.RequestRepeat) {
		h.request(ctx, w.wk.driver, w.wk.key, l.Job, l.Token, w.purpose)
		w.requested = now
	}
}

// parkFor is how long this attempt parks: the doubling park, cut short by
// the deadline and, while proving the holder stopped, by when its beat can
// expire and when a proof can complete (proven closes then). stolen is true
// when the holder is proven stopped already, after the lock was written.
func (w *Wait) parkFor(l Lock, proving bool, now time.Time) (d time.Duration, proven <-chan struct{}, stolen bool) {
	d = min(w.park, w.deadline.Sub(now))
	if proving {
		sent, ok, expiresAt, provesAt, ch := w.h.prover.proof(l.Job)
		if ok && w.writtenBy.Before(sent) {
			return 0, nil, true
		}
		if !expiresAt.IsZero() {
			d = min(d, max(expiresAt.Sub(now)+expiryMargin, 0))
		}
		if !provesAt.IsZero() {
			d = min(d, max(provesAt.Sub(now), 0))
		}
		proven = ch
	}
	w.park = min(w.park*2, w.h.cfg.ParkMax)
	return d, proven, false
}

// readPresence reads the holder's presence after a park that began at since
// (sharing a read in flight for it, or one sent since) and says whether it
// is now proven stopped after the lock was written.
func (w *Wait) readPresence(ctx context.Context, l Lock, since time.Time) (Attempt, error) {
	_, sent, ok, err := w.readBounded(ctx, l, since)
	switch {
	case err != nil:
		return Attempt{}, err
	case ok && w.writtenBy.Before(sent):
		return w.steal(l), nil
	}
	return Attempt{}, nil
}

// steal is the Attempt that takes lock l of a holder proven stopped.
func (w *Wait) steal(l Lock) Attempt {
	return Attempt{StealJob: l.Job, StealToken: l.Token}
}

// readBounded is prover.read of l's holder under a context that ends at the
// wait's deadline: a read that hangs ends then, with ErrDeadline.
func (w *Wait) readBounded(ctx context.Context, l Lock, since time.Time) (presencecore.Reading, time.Time, bool, error) {
	rctx, cancel := w.h.cfg.Clock.WithDeadline(ctx, w.deadline)
	defer cancel()
	r, sent, ok, err := w.h.prover.read(rctx, l.Job, w.wk.key, since)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return r, sent, ok, ErrDeadline
	}
	return r, sent, ok, err
}
