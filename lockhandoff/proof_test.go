package lockhandoff_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"

	"github.com/ckernel/playerdata/lockhandoff"
	"github.com/ckernel/playerdata/presence"
)

// stoppedAt is a Stopped reading made at Redis time at (the fake's start is
// the Unix epoch plus at).
func stoppedAt(at time.Duration) presence.Reading {
	return presence.Reading{Status: presence.Stopped, At: time.UnixMilli(0).Add(at)}
}

// stoppedFrom answers Alive until end (the holder's last beat expires then)
// and Stopped from then on, each stopped reading stamped with the Redis time
// of the read.
func stoppedFrom(end time.Duration) func(context.Context, string, int, time.Duration) presence.Reading {
	return func(_ context.Context, _ string, _ int, at time.Duration) presence.Reading {
		if at < end {
			return presence.Reading{Status: presence.Alive, ExpiresIn: end - at}
		}
		return stoppedAt(at)
	}
}

// A crashed holder is proven stopped once per Node: many joins waiting on
// its locks share the reads, are all woken by the proof, and joins that start
// afterwards steal at once.
func TestProofSharedByEveryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		p := newFakePresence(wd.clk)
		p.ReadFn = stoppedFrom(sec(1.2)) // A's last beat expires at 1.2 s
		h := wd.handoff(t, lockhandoff.Config{JobID: jobB, Presence: p})
		h.Start()
		deadline := wd.clk.Now().Add(time.Minute)

		// 64 joins on 64 of A's keys, each looping on Next as a load does.
		const joins = 64
		var mu sync.Mutex
		stoleAt := make([]time.Duration, joins)
		var wg sync.WaitGroup
		for i := range joins {
			wg.Go(func() {
				w := h.NewWait(driverName, "user:"+string(rune('a'+i%26))+string(rune('0'+i/26)), deadline, true)
				defer w.Close()
				l := lockOf(jobA, "tok", true)
				for {
					s := next(t.Context(), wd, w, l)
					if s.Err != nil {
						t.Errorf("join %d: %v", i, s.Err)
						return
					}
					if s.Attempt.StealJob == jobA {
						mu.Lock()
						stoleAt[i] = s.At
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		// The beat expires at 1.2 s: every wait reads then (+5 ms), finds A
		// stopped, and the proof stands one Beat (3 s) later.
		want := sec(1.205) + presence.DefaultBeat
		for i, at := range stoleAt {
			if at != want {
				t.Errorf("join %d stole at %v, want %v (one proof for all)", i, at, want)
			}
		}
		// The reads were shared: a handful, not one per join per park.
		if n := len(p.readTimes(jobA)); n > 10 {
			t.Errorf("%d presence reads for %d joins; a read in flight must be shared", n, joins)
		}
		if got := h.Stats().ProvenStopped; got != 1 {
			t.Errorf("ProvenStopped = %d, want 1", got)
		}

		// A join that starts now steals at once, with no read.
		reads := len(p.readTimes(jobA))
		w := h.NewWait(driverName, "user:late", deadline, true)
		defer w.Close()
		s := next(t.Context(), wd, w, lockOf(jobA, "tok-late", true))
		if s.At != want || s.Attempt.StealJob != jobA {
			t.Errorf("a later join: %+v, want a steal at once at %v", s, want)
		}
		if got := s.Attempt.ProvenBefore; !got.Equal(time.UnixMilli(0).Add(want)) {
			t.Errorf("ProvenBefore = %v, want the Redis time of the proving read", got)
		}
		if n := len(p.readTimes(jobA)); n != reads {
			t.Errorf("a fresh proof was read again (%d reads, want %d)", n, reads)
		}
	})
}

// An old proof is refreshed by one stopped read, not proven over again.
func TestProofRefreshedByOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		p := newFakePresence(wd.clk)
		p.ReadFn = stoppedFrom(0)
		h := wd.handoff(t, lockhandoff.Config{JobID: jobB, Presence: p})
		h.Start()
		deadline := wd.clk.Now().Add(time.Minute)
		w := h.NewWait(driverName, playerKey, deadline, true)
		defer w.Close()
		for {
			if s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", true)); s.Attempt.StealJob != "" {
				break
			}
		}
		time.Sleep(10 * time.Second) // the proof is no longer fresh
		reads := len(p.readTimes(jobA))
		w2 := h.NewWait(driverName, "user:7", deadline, true)
		defer w2.Close()
		start := wd.elapsed()
		s := next(t.Context(), wd, w2, lockOf(jobA, "tok-7", true))
		if s.At != start || s.Attempt.StealJob != jobA || !s.Attempt.ProvenBefore.Equal(time.UnixMilli(0).Add(start)) {
			t.Errorf("after 10 s: %+v, want a steal at once bounded by a new read at %v", s, start)
		}
		if n := len(p.readTimes(jobA)); n != reads+1 {
			t.Errorf("%d reads to refresh the proof, want 1", n-reads)
		}
	})
}

// A proof is broken by a read that finds the holder alive again, and by a
// steal the acquire refused (the holder wrote after the proof: it came back).
func TestProofBroken(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(t *testing.T, wd *world, p *fakePresence, w *lockhandoff.Wait)
	}{
		{"the holder beats again", func(t *testing.T, wd *world, p *fakePresence, w *lockhandoff.Wait) {
			p.ReadFn = nil
			p.set(jobA, alive10s)
			time.Sleep(5 * time.Second) // stale proof: the next Next reads
		}},
		{"a refused steal", func(t *testing.T, wd *world, p *fakePresence, w *lockhandoff.Wait) {
			// The acquire found A's lock again after the steal: Next with the
			// same holder tells the prover.
			p.ReadFn = nil
			p.set(jobA, alive10s)
			_ = next(t.Context(), wd, w, lockOf(jobA, "tok-new", true))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				p := newFakePresence(wd.clk)
				p.ReadFn = stoppedFrom(0)
				h := wd.handoff(t, lockhandoff.Config{JobID: jobB, Presence: p})
				h.Start()
				deadline := wd.clk.Now().Add(time.Minute)
				w := h.NewWait(driverName, playerKey, deadline, true)
				defer w.Close()
				for {
					if s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", true)); s.Attempt.StealJob != "" {
						break
					}
				}
				tc.break_(t, wd, p, w)
				w2 := h.NewWait(driverName, "user:9", deadline, true)
				defer w2.Close()
				if s := next(t.Context(), wd, w2, lockOf(jobA, "tok-9", true)); s.Attempt.StealJob != "" {
					t.Errorf("after the proof broke: %+v, want no steal", s)
				}
			})
		})
	}
}

// telemetry.PresenceStatus is presence.Status, value for value (the
// prover converts one into the other).
func TestPresenceStatusMatchesTelemetry(t *testing.T) {
	for _, s := range []presence.Status{presence.Unknown, presence.Alive, presence.Stopped} {
		if got := telemetry.PresenceStatus(s).String(); got != s.String() {
			t.Errorf("presence %s is telemetry %s", s, got)
		}
	}
}
