package handoffcore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// proofForget is how long a holder nobody read is remembered.
const proofForget = time.Minute

// prover is a Handoff's memory of the holders its joins wait on, shared by
// every Wait: what their presence read last and since when they have read
// stopped. A server that stopped is therefore proven stopped once per Node,
// not once per key, and every join waiting on one of its locks takes it as
// soon as the proof stands, including joins that start later.
//
// What counts as a proof is lockrule.Stop's rule, the one every path that
// may move a lock follows (the operator's unlock and repair too): two
// stopped reads at least one Beat apart with nothing else in between,
// standing until a read finds the holder alive again or presence unknown (a
// Redis restart), covering the locks the holder wrote before the proving
// read was sent. The prover adds what a Node needs around it: one read in
// flight per holder, shared by every wait, and a channel closed when a
// proof stands. A wait knows when a lock it saw
// was last written on its own clock (when it saw it, less the lock's age,
// both differences on one clock each), so no two machines' clocks are ever
// compared; the steal then names that lock's token (Attempt.StealToken), so
// it takes exactly that lock, never one the holder wrote since.
type prover struct {
	h *Handoff

	mu      sync.Mutex
	holders map[string]*holderState
}

// holderState is what the Node knows of one holder's presence.
type holderState struct {
	// stop is the proof, folded from every reading (lockrule's rule).
	stop lockrule.Stop
	// expiresAt is when its presence can first read stopped (local time,
	// from an alive read or a Redis restart's grace); zero: unknown.
	expiresAt time.Time
	// proven is closed when the proof stands; a new one replaces it when a
	// read breaks the proof.
	proven     chan struct{}
	provenOpen bool // proven is not closed
	// reading is closed when the read in flight ends; nil when none is.
	reading chan struct{}
	// last is the latest reading, sent at lastSent and answered at lastRead.
	last               presencecore.Reading
	lastSent, lastRead time.Time
}

func newProver(h *Handoff) *prover {
	return &prover{h: h, holders: make(map[string]*holderState)}
}

// state returns job's state, creating it. pv.mu held.
func (pv *prover) stateLocked(job string) *holderState {
	s := pv.holders[job]
	if s == nil {
		s = &holderState{proven: make(chan struct{}), provenOpen: true}
		pv.holders[job] = s
	}
	return s
}

// proof returns when the read that proved job stopped was sent (ok when
// it is proven); else what a wait needs to park: when job's presence can
// first expire, when its silence will have lasted a beat, and a channel
// closed when a proof stands.
func (pv *prover) proof(job string) (sent time.Time, ok bool, expiresAt, provesAt time.Time, proven <-chan struct{}) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	s := pv.stateLocked(job)
	if sent, ok := s.stop.Proven(); ok {
		return sent, true, time.Time{}, time.Time{}, nil
	}
	return time.Time{}, false, s.expiresAt, s.stop.ProvesAt(pv.h.cfg.Beat), s.proven
}

// read reads job's presence, or waits for a read of it already in flight,
// and folds the answer into what the Node knows. A reading sent after since
// serves without a new read: the waits of many joins on one holder
// wake at the same moment (its beat's expiry), and the first one's read
// serves them all. A wait passes since as when it began to park, so a
// reading it already had never serves it again: served the same one, a wait
// whose park ended on it (an expiry, a beat of silence) would park for
// nothing and try again at once, forever. It returns the reading and, when
// the holder is proven stopped, when the proving read was sent. A cancelled
// ctx leaves the state as it was.
func (pv *prover) read(ctx context.Context, job, key string, since time.Time) (presencecore.Reading, time.Time, bool, error) {
	pv.mu.Lock()
	s := pv.stateLocked(job)
	if wait := s.reading; wait != nil {
		pv.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return presencecore.Reading{}, time.Time{}, false, ctx.Err()
		}
		pv.mu.Lock()
		defer pv.mu.Unlock()
		sent, ok := s.stop.Proven()
		return s.last, sent, ok, nil
	}
	if !s.lastRead.IsZero() && s.lastSent.After(since) {
		defer pv.mu.Unlock()
		sent, ok := s.stop.Proven()
		return s.last, sent, ok, nil
	}
	done := make(chan struct{})
	s.reading = done
	pv.forgetLocked(pv.h.cfg.Clock.Now())
	pv.mu.Unlock()

	sent := pv.h.cfg.Clock.Now()
	rctx := pv.h.trace.readStart(ctx, job)
	r := pv.h.cfg.Presence.Read(rctx, job)
	pv.h.trace.readDone(rctx, r)
	now := pv.h.cfg.Clock.Now()
	pv.mu.Lock()
	defer pv.mu.Unlock()
	s.reading = nil
	close(done)
	if err := ctx.Err(); err != nil {
		return presencecore.Reading{}, time.Time{}, false, err
	}
	pv.foldLocked(s, job, key, r, sent, now)
	proven, ok := s.stop.Proven()
	return r, proven, ok, nil
}

// foldLocked records reading r of job, sent at sent and answered at now.
// pv.mu held.
func (pv *prover) foldLocked(s *holderState, job, key string, r presencecore.Reading, sent, now time.Time) {
	h := pv.h
	s.last, s.lastSent, s.lastRead = r, sent, now
	h.log.Debug("handoff: presence read", "key", key, "holder", job, "presence", r.Status.String(),
		"expires_in", r.ExpiresIn)
	newly := s.stop.Fold(r, sent, now, h.cfg.Beat)
	if r.Status != presencecore.Stopped {
		if !s.provenOpen { // the proof is broken: the holder beats again, or Redis restarted
			s.proven, s.provenOpen = make(chan struct{}), true
		}
		s.expiresAt = time.Time{}
		if r.Status == presencecore.Alive || (r.Err == nil && r.ExpiresIn > 0) {
			s.expiresAt = now.Add(r.ExpiresIn)
		}
		return
	}
	s.expiresAt = time.Time{}
	if newly {
		close(s.proven)
		s.provenOpen = false
		h.provenStopped.Add(1)
		h.log.Info(fmt.Sprintf("handoff: server %s stopped beating presence", job), silence(key, job, r, now, s.stop)...)
	}
}

// forgetLocked drops holders nobody read for proofForget. pv.mu held.
func (pv *prover) forgetLocked(now time.Time) {
	for job, s := range pv.holders {
		if s.reading == nil && !s.lastRead.IsZero() && now.Sub(s.lastRead) > proofForget {
			delete(pv.holders, job)
		}
	}
}

// silence is the attributes of the log line that says job stopped beating
// presence: silent_for, the time since its last beat on the Redis clock
// (reading r proved the stop), or, when r cannot tell (no beat of it is left
// in the hash), silent_for_at_least, the time since this reader first found
// it stopped.
func silence(key, job string, r presencecore.Reading, now time.Time, stop lockrule.Stop) []any {
	attrs := []any{"key", key, "holder", job}
	if !r.LastBeat.IsZero() && !r.At.IsZero() {
		return append(attrs, "silent_for", r.At.Sub(r.LastBeat))
	}
	return append(attrs, "silent_for_at_least", now.Sub(stop.SilentSince()))
}
