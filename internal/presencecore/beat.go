package presencecore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
)

// maxInflightBeats bounds the beat calls still running at once, counting
// those abandoned at their deadline: a Redis that hangs every call cannot
// make the loop pile them up.
const maxInflightBeats = 3

// beatResult is one beat script's answer.
type beatResult struct {
	ans     presencescript.BeatAnswer
	checked bool // the beat ran as a full check
	// sessions is the count the beat carried; -1: none.
	sessions int
	err      error
}

// Beat writes one beat as a full check: our field's expiry becomes Redis
// TIME + TTL, the run meta fields are compared with INFO server and
// refreshed if Redis restarted or failed over, and up to three expired
// fields are cleaned: one Lua script round trip. A second one then marks
// this server's shard count in use (see ErrShardMismatch). Start's loop
// beats through the same path, but most of its beats take the two-command
// fast path instead (see CheckEvery).
//
// A live beat of another instance of this JobID is never overwritten: Beat
// then returns an *InUseError (ErrJobIDInUse). When this instance had beaten
// the JobID before, that error has Fenced set: the lease lapsed at once, and
// every beat sent before now is kept from renewing it (see [Presence.Claim]
// for the rules); an error is logged naming both instances. A beat that
// finds this instance's field taken over and expired writes it again but
// fences all the same: the other process may have taken what this one held.
//
// The call has its own deadline, Config.Beat on the clock, whatever the
// client's ReadTimeout or ContextTimeoutEnabled: when no answer has come by
// then, Beat returns an error wrapping ErrBeatTimeout and leaves the call
// behind (it ends when the client gives up; at most a few run at once). An
// answer that comes at or after the deadline counts as a failure too. Only a
// beat acknowledged in time extends the lease, from the clock time it was
// sent at. Errors are wrapped "presence beat: ..."; after Close it answers
// ErrClosed. ctx can cut the wait short; Close cancels it too.
func (p *Presence) Beat(ctx context.Context) error {
	_, err := p.beat(ctx, false)
	return err
}

// beat sends one beat: a full check unless loop is true, when it takes the
// fast path except every CheckEvery-th beat and after a failure.
func (p *Presence) beat(ctx context.Context, loop bool) (presencescript.BeatAnswer, error) {
	sessions := -1
	if p.cfg.Sessions != nil {
		sessions = p.cfg.Sessions()
	}
	args, err := p.startBeat(loop, sessions)
	if err != nil {
		return presencescript.BeatAnswer{}, err
	}
	defer p.beatsDone.Add(1)

	sentAt := p.clock.Now()
	// The deadline on the call's context bounds it where the client honours
	// contexts; the timer below bounds the wait whatever the client does.
	// Returning cancels it: a call left behind is of no use any more.
	callCtx, cancel := p.clock.WithTimeout(ctx, p.cfg.Beat)
	defer cancel()
	stop := context.AfterFunc(p.base, cancel)
	defer stop()
	done := make(chan beatResult, 1)
	go func() {
		defer p.wg.Done()
		defer p.inflight.Add(-1)
		done <- p.runBeat(callCtx, args, sessions)
	}()

	deadline := p.clock.Timer(p.cfg.Beat)
	defer deadline.Stop()
	var r beatResult
	select {
	case r = <-done:
	case <-deadline.C:
		r.err = ErrBeatTimeout
	case <-callCtx.Done():
		r.err = callCtx.Err()
		if errors.Is(r.err, context.DeadlineExceeded) {
			r.err = ErrBeatTimeout
		}
	}
	ackAt := p.clock.Now()
	if r.err == nil && ackAt.Sub(sentAt) >= p.cfg.Beat {
		r.err = fmt.Errorf("%w: answered after %s", ErrBeatTimeout, ackAt.Sub(sentAt))
	}
	if r.err != nil {
		err := fmt.Errorf("presence beat: %w", r.err)
		p.beatFailed(err)
		return presencescript.BeatAnswer{}, err
	}
	p.watchClock(p.own.key, sentAt, ackAt, r.ans.At.UnixMilli())
	p.loadAnswered(r.sessions, r.ans)
	err = p.beatAnswered(sentAt, ackAt, r.checked, r.ans)
	if err == nil && r.checked {
		// A full check also marks this server's shard count in use (see
		// markShards): at once for Beat and Claim, on its own goroutine for
		// the loop, whose pace nothing may hold up.
		if loop {
			p.markShardsAsync()
		} else {
			p.markShards(ctx)
		}
	}
	return r.ans, err
}

// startBeat counts a beat in flight (its caller runs it) and makes its
// arguments; it refuses once the presence is closed, or while too many
// earlier beats still run.
func (p *Presence) startBeat(loop bool, sessions int) (presencescript.BeatArgs, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return presencescript.BeatArgs{}, fmt.Errorf("presence beat: %w", ErrClosed)
	}
	if n := p.inflight.Load(); n >= maxInflightBeats {
		p.mu.Unlock()
		err := fmt.Errorf("presence beat: %w: %d earlier beats are still running", ErrBeatTimeout, n)
		p.beatFailed(err)
		return presencescript.BeatArgs{}, err
	}
	args := presencescript.BeatArgs{JobID: p.cfg.JobID, TTL: p.cfg.TTL, Instance: p.cfg.Instance,
		Check: !loop || p.needCheck || p.sinceCheck+1 >= CheckEvery}
	if p.lastExpiry != 0 {
		args.Expected = time.UnixMilli(p.lastExpiry)
	}
	// The count rides along only when it changed or on a full check: a
	// steady server's fast-path beat stays two commands.
	if sessions >= 0 && (args.Check || sessions != p.lastSessions) {
		args.WriteSessions, args.Sessions = true, sessions
	}
	p.inflight.Add(1)
	p.wg.Add(1)
	p.mu.Unlock()
	return args, nil
}

// runBeat runs beat.lua: EVALSHA, then, when Redis does not know the script
// (NOSCRIPT: a restarted or failed-over Redis, or SCRIPT FLUSH), EVAL as a
// full check, since whatever forgot the script may have forgotten or
// rewound the hash too (the session count, when known, rides along then).
func (p *Presence) runBeat(ctx context.Context, args presencescript.BeatArgs, sessions int) beatResult {
	args.Owners, args.Load = p.own.owners, p.own.load
	ans, args, err := presencescript.Beat.RunOrReload(ctx, p.rdb, p.own.key, args, func(a *presencescript.BeatArgs) {
		a.Check = true
		if sessions >= 0 {
			a.WriteSessions, a.Sessions = true, sessions
		}
	})
	if err != nil {
		return beatResult{err: err}
	}
	carried := -1
	if args.WriteSessions {
		carried = args.Sessions
	}
	return beatResult{ans: ans, checked: args.Check, sessions: carried, err: err}
}

// beatFailed logs the first failure after a success; a cancelled beat says
// nothing about Redis and is neither logged nor counted. Any other failure
// makes the next beat a full check: Redis may have restarted or failed over
// while it could not be reached.
func (p *Presence) beatFailed(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	p.mu.Lock()
	p.needCheck = true
	p.lastSessions = -1 // the count may or may not have landed: send it again
	first := !p.failing
	p.failing = true
	p.failures++
	p.mu.Unlock()
	if first {
		p.log.Warn("presence beat failing; other servers may soon read this server as stopped",
			"key", p.own.key, "err", err)
	}
}

// beatSucceeded extends the lease from sentAt and logs a recovery, a new
// lease generation and a new Redis run.
func (p *Presence) beatSucceeded(sentAt, ackAt time.Time, reset bool) {
	key := p.own.key
	renewed := p.extend(sentAt, ackAt)
	p.mu.Lock()
	recovered, failures, first := p.failing, p.failures, p.lastSent.IsZero()
	p.failing, p.failures = false, 0
	if sentAt.After(p.lastSent) {
		p.lastSent = sentAt
	}
	if p.claimedAt.IsZero() {
		p.claimedAt = sentAt
	}
	p.mu.Unlock()

	gen := p.Lease().Gen
	if recovered {
		p.log.Info("presence beat recovered", "key", key, "failed_beats", failures)
	}
	if renewed && gen > 1 {
		p.log.Info("presence lease renewed under a new generation; what lived under the lapsed one stays ended",
			"key", key, "generation", gen)
	}
	switch {
	case reset && first:
		p.log.Debug("presence: first beat into this Redis run; a missing beat reads unknown for one TTL",
			"key", key, "ttl", p.cfg.TTL)
	case reset:
		p.log.Info("presence: new Redis run detected; a missing beat reads unknown for one TTL",
			"key", key, "ttl", p.cfg.TTL)
	}
}

// run is the beat loop: one beat now, then one per tick. Beat waits at most
// one Beat for its answer, so the loop never falls more than a tick behind;
// the lease's deadline lives on its own goroutine (fenceLoop).
func (p *Presence) run(ctx context.Context) {
	defer p.wg.Done()
	ticker := p.clock.Ticker(p.cfg.Beat)
	defer ticker.Stop()
	_, _ = p.beat(ctx, true) // logged inside
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_, _ = p.beat(ctx, true)
		}
	}
}
