package presencecore

import (
	"fmt"
	"time"
)

// A forward step of the Redis host's clock makes every beat of a shard look
// expired at once, until each server beats again (within one Beat): a
// reader that took those answers at their word could prove a live server
// stopped on two reads a beat apart whenever its beat ran late. A Presence
// therefore watches each shard's Redis clock against its own: every script
// answer carries the Redis time (TIME, read between the call's send and
// its answer), and from one answer to the next the Redis clock may advance
// no more than the local clock did, give or take clockTolerance. When it
// advanced more, a missing beat of that shard reads Unknown for one TTL of
// the local clock: every live server beats meanwhile under the stepped
// clock, and one that has not beaten for a whole TTL after the step has
// lost its lease whatever the clock says. A crash that falls together with
// a step is thus taken over at most one TTL later.
//
// The watch needs an earlier answer of the same shard within clockRefAge:
// a reader's own shard is fresh from its beats (with the default single
// shard, every shard is); a shard it has not read for longer is judged by
// the Redis clock alone on its first read.

// clockRefAge is how long an answer serves as the reference for the next.
const clockRefAge = 10 * time.Minute

// clockDriftPPM is the drift between the two clocks allowed per second
// elapsed (1,000 ppm: far more than NTP's slew).
const clockDriftPPM = 1000

// clockRef is one script answer's time on both clocks: sent and answered on
// the local clock, redisMS on the shard's.
type clockRef struct {
	sent, answered time.Time
	redisMS        int64
}

// shardClock is what a Presence knows of one shard's Redis clock.
type shardClock struct {
	ref clockRef
	// steppedAt is when a forward step was last seen (local clock); zero:
	// none.
	steppedAt time.Time
}

// clockTolerance is how far the two clocks may part between two answers
// elapsed apart before it counts as a step: half a Beat (a smaller step
// leaves a live beat more than TTL - 1.5 Beat to run) plus the drift.
func (p *Presence) clockTolerance(elapsed time.Duration) time.Duration {
	return p.cfg.Beat/2 + elapsed/(1_000_000/clockDriftPPM)
}

// watchClock folds one answer of the shard keyed key, sent and answered at
// local times, carrying Redis time redisMS, into what p knows of that
// shard's clock, and logs a step it shows.
func (p *Presence) watchClock(key string, sent, answered time.Time, redisMS int64) {
	if redisMS <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.clocks[key]
	if c == nil {
		c = &shardClock{}
		p.clocks[key] = c
	}
	ref := c.ref
	if ref.redisMS == 0 || answered.Sub(ref.answered) > clockRefAge {
		c.ref = clockRef{sent: sent, answered: answered, redisMS: redisMS}
		return
	}
	redis := time.Duration(redisMS-ref.redisMS) * time.Millisecond
	most, least := answered.Sub(ref.sent), sent.Sub(ref.answered)
	tol := p.clockTolerance(most) + time.Millisecond // TIME is read to the millisecond
	switch {
	case redis > most+tol:
		c.steppedAt = answered
		p.log.Warn(fmt.Sprintf("presence: the Redis clock of %s jumped ahead by about %s; a missing beat there reads unknown for one TTL",
			key, (redis-most).Round(time.Millisecond)), "key", key, "step", redis-most, "ttl", p.cfg.TTL)
	case redis < least-tol:
		p.log.Warn(fmt.Sprintf("presence: the Redis clock of %s went back by about %s; a beat stamped ahead counts as one TTL",
			key, (least-redis).Round(time.Millisecond)), "key", key, "step", redis-least)
	}
	if answered.After(ref.answered) {
		c.ref = clockRef{sent: sent, answered: answered, redisMS: redisMS}
	}
}

// afterStep turns a Stopped reading of the shard keyed key into Unknown
// while one TTL has not passed since that shard's clock was seen to jump
// ahead, with ExpiresIn the rest of that TTL.
func (p *Presence) afterStep(key string, r Reading) Reading {
	if r.Status != Stopped {
		return r
	}
	p.mu.Lock()
	c := p.clocks[key]
	var at time.Time
	if c != nil {
		at = c.steppedAt
	}
	p.mu.Unlock()
	if at.IsZero() {
		return r
	}
	if left := p.cfg.TTL - p.clock.Since(at); left > 0 {
		return Reading{Status: Unknown, ExpiresIn: left, At: r.At}
	}
	return r
}
