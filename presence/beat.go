package presence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// maxInflightBeats bounds the beat calls still running at once, counting
// those abandoned at their deadline: a Redis that hangs every call cannot
// make the loop pile them up.
const maxInflightBeats = 3

// BeatArgs are the arguments of beat.lua.
type BeatArgs struct {
	// JobID is the beating server.
	JobID string
	// TTL is how long the beat keeps it alive (Redis clock).
	TTL time.Duration
}

// argv is ARGV of beat.lua.
func (a BeatArgs) argv() []any { return []any{a.JobID, a.TTL.Milliseconds()} }

// ParseBeatArgs reads the ARGV of an observed beat.lua call.
func ParseBeatArgs(argv []string) (BeatArgs, error) {
	if len(argv) != 2 {
		return BeatArgs{}, fmt.Errorf("%w: %s call with %d arguments, want 2", ErrUnexpectedReply, ScriptBeat, len(argv))
	}
	ms, err := strconv.ParseInt(argv[1], 10, 64)
	if err != nil {
		return BeatArgs{}, fmt.Errorf("%w: %s TTL %q", ErrUnexpectedReply, ScriptBeat, argv[1])
	}
	return BeatArgs{JobID: argv[0], TTL: time.Duration(ms) * time.Millisecond}, nil
}

// BeatAnswer is beat.lua's answer.
type BeatAnswer struct {
	// ExpiresAt is when this beat expires (Redis clock, ms precision).
	ExpiresAt time.Time
	// Reset is true when the beat found another Redis run (a restart or a
	// failover) and started the run's meta fields over.
	Reset bool
}

// ParseBeatAnswer reads beat.lua's answer.
func ParseBeatAnswer(v any) (BeatAnswer, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
	}
	exp, ok1 := arr[0].(int64)
	reset, ok2 := arr[1].(int64)
	if !ok1 || !ok2 {
		return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
	}
	return BeatAnswer{ExpiresAt: time.UnixMilli(exp), Reset: reset == 1}, nil
}

// beatResult is one beat script's answer.
type beatResult struct {
	ans BeatAnswer
	err error
}

// Beat writes one beat: our field's expiry becomes Redis TIME + TTL, the run
// meta fields are refreshed if Redis restarted or failed over, and up to three
// expired fields are cleaned. One Lua script round trip.
//
// The call has its own deadline, Config.Beat on the clock, whatever the
// client's ReadTimeout or ContextTimeoutEnabled: when no answer has come by
// then, Beat returns an error wrapping ErrBeatTimeout and leaves the call
// behind (it ends when the client gives up; at most a few run at once). An
// answer that comes at or after the deadline counts as a failure too. Only a
// beat acknowledged in time extends the lease, from the clock time it was
// sent at. Errors are wrapped "presence beat: ..."; after Close it answers
// ErrClosed. Beat is what Start's loop calls; call it directly for an extra
// beat. ctx can cut the wait short; Close cancels it too.
func (p *Presence) Beat(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("presence beat: %w", ErrClosed)
	}
	if n := p.inflight.Load(); n >= maxInflightBeats {
		p.mu.Unlock()
		err := fmt.Errorf("presence beat: %w: %d earlier beats are still running", ErrBeatTimeout, n)
		p.beatFailed(err)
		return err
	}
	p.inflight.Add(1)
	p.wg.Add(1)
	p.mu.Unlock()
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
		v, err := beatScript.Run(callCtx, p.rdb, []string{p.cfg.Key}, BeatArgs{JobID: p.cfg.JobID, TTL: p.cfg.TTL}.argv()...).Result()
		var ans BeatAnswer
		if err == nil {
			ans, err = ParseBeatAnswer(v)
		}
		done <- beatResult{ans, err}
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
		return err
	}
	p.beatSucceeded(sentAt, ackAt, r.ans.Reset)
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

// beatSucceeded extends the lease from sentAt and logs a recovery, a new
// lease generation and a new Redis run.
func (p *Presence) beatSucceeded(sentAt, ackAt time.Time, reset bool) {
	renewed := p.extend(sentAt, ackAt)
	p.mu.Lock()
	recovered, failures, first := p.failing, p.failures, p.lastSent.IsZero()
	p.failing, p.failures = false, 0
	if sentAt.After(p.lastSent) {
		p.lastSent = sentAt
	}
	p.mu.Unlock()

	gen := p.Lease().Gen
	if recovered {
		p.log.Info("presence beat recovered", "key", p.cfg.Key, "failed_beats", failures)
	}
	if renewed && gen > 1 {
		p.log.Info("presence lease renewed under a new generation; what lived under the lapsed one stays ended",
			"key", p.cfg.Key, "generation", gen)
	}
	switch {
	case reset && first:
		p.log.Debug("presence: first beat into this Redis run; a missing beat reads unknown for one TTL",
			"key", p.cfg.Key, "ttl", p.cfg.TTL)
	case reset:
		p.log.Info("presence: new Redis run detected; a missing beat reads unknown for one TTL",
			"key", p.cfg.Key, "ttl", p.cfg.TTL)
	}
}

// run is the beat loop: one beat now, then one per tick. Beat waits at most
// one Beat for its answer, so the loop never falls more than a tick behind;
// the lease's deadline lives on its own goroutine (fenceLoop).
func (p *Presence) run(ctx context.Context) {
	defer p.wg.Done()
	ticker := p.clock.Ticker(p.cfg.Beat)
	defer ticker.Stop()
	_ = p.Beat(ctx) // logged inside
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_ = p.Beat(ctx)
		}
	}
}
