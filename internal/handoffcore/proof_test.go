package handoffcore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// stoppedAt is a Stopped reading made at Redis time at (the fake's start is
// the Unix epoch plus at).
func stoppedAt(at time.Duration) presencecore.Reading {
	return presencecore.Reading{Status: presencecore.Stopped, At: time.UnixMilli(0).Add(at)}
}

// stoppedFrom answers Alive until end (the holder's last beat expires then)
// and Stopped from then on, each stopped reading stamped with the Redis time
// of the read.
func stoppedFrom(end time.Duration) func(context.Context, string, int, time.Duration) presencecore.Reading {
	return func(_ context.Context, _ string, _ int, at time.Duration) presencecore.Reading {
		if at < end {
			return presencecore.Reading{Status: presencecore.Alive, ExpiresIn: end - at}
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
		h := wd.handoff(t, handoffcore.Config{JobID: jobB, Presence: p})
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
		want := sec(1.205) + presencecore.DefaultBeat
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
		if s.Attempt.StealToken != "tok-late" {
			t.Errorf("StealToken = %q, want the token of the lock this join saw", s.Attempt.StealToken)
		}
		if n := len(p.readTimes(jobA)); n != reads {
			t.Errorf("a fresh proof was read again (%d reads, want %d)", n, reads)
		}
	})
}

// lockAged is job's presence-flagged lock under token, last written age ago.
func lockAged(job, token string, age time.Duration) handoffcore.Lock {
	return handoffcore.Lock{Job: job, Token: token, Presence: true, Age: age}
}

// A proof covers the locks written before it, however old it is; a lock
// written after it is stolen only once a later read finds the holder still
// stopped.
func TestProofCoversOlderLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		p := newFakePresence(wd.clk)
		p.ReadFn = stoppedFrom(0)
		h := wd.handoff(t, handoffcore.Config{JobID: jobB, Presence: p})
		h.Start()
		deadline := wd.clk.Now().Add(time.Minute)
		w := h.NewWait(driverName, playerKey, deadline, true)
		defer w.Close()
		for {
			if s := next(t.Context(), wd, w, lockAged(jobA, "tok-1", time.Minute)); s.Attempt.StealJob != "" {
				break
			}
		}
		proven := wd.elapsed() // the proving read went out then (the fake answers at once)
		time.Sleep(10 * time.Second)

		// A lock A wrote before the proof: stolen at once, with no read.
		reads := len(p.readTimes(jobA))
		old := h.NewWait(driverName, "user:7", deadline, true)
		defer old.Close()
		start := wd.elapsed()
		s := next(t.Context(), wd, old, lockAged(jobA, "tok-7", wd.elapsed()-proven+time.Second))
		if s.At != start || s.Attempt != (handoffcore.Attempt{StealJob: jobA, StealToken: "tok-7"}) {
			t.Errorf("a lock older than the proof: %+v, want its steal at once", s)
		}
		if n := len(p.readTimes(jobA)); n != reads {
			t.Errorf("%d reads for a lock the proof covers, want none", n-reads)
		}

		// A lock A wrote after the proof (it came back and went again): not
		// stolen on the old proof, only after a park and a read sent after
		// the lock was written that still finds A stopped.
		young := h.NewWait(driverName, "user:8", deadline, true)
		defer young.Close()
		reads = len(p.readTimes(jobA))
		start = wd.elapsed()
		s = next(t.Context(), wd, young, lockAged(jobA, "tok-8", time.Second))
		if s.Attempt != (handoffcore.Attempt{StealJob: jobA, StealToken: "tok-8"}) {
			t.Fatalf("a lock written after the proof, A still stopped: %+v, want its steal", s)
		}
		if s.At <= start {
			t.Errorf("the young lock was stolen at once (%v), on the old proof; want a park and a read first", s.At)
		}
		if n := len(p.readTimes(jobA)); n == reads {
			t.Errorf("the young lock was stolen with no read after it was written")
		}
	})
}

// A read that finds the holder alive again breaks the proof.
func TestProofBrokenByAnAliveRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		p := newFakePresence(wd.clk)
		p.ReadFn = stoppedFrom(0)
		h := wd.handoff(t, handoffcore.Config{JobID: jobB, Presence: p})
		h.Start()
		deadline := wd.clk.Now().Add(time.Minute)
		w := h.NewWait(driverName, playerKey, deadline, true)
		defer w.Close()
		for {
			if s := next(t.Context(), wd, w, lockAged(jobA, "tok-1", time.Minute)); s.Attempt.StealJob != "" {
				break
			}
		}
		p.ReadFn = nil
		p.set(jobA, alive10s)
		w2 := h.NewWait(driverName, "user:9", deadline, true)
		defer w2.Close()
		// A lock written just now: not covered; the wait reads, finds A alive.
		if s := next(t.Context(), wd, w2, lockAged(jobA, "tok-9", 0)); s.Attempt.StealJob != "" {
			t.Fatalf("a young lock: %+v, want no steal", s)
		}
		// Now even an old lock is not stolen: the proof is gone.
		w3 := h.NewWait(driverName, "user:10", deadline, true)
		defer w3.Close()
		if s := next(t.Context(), wd, w3, lockAged(jobA, "tok-10", time.Hour)); s.Attempt.StealJob != "" {
			t.Errorf("after A read alive: %+v, want no steal", s)
		}
	})
}

// The log line that says a holder stopped gives its real silence: the time
// since its last beat, from the reading that proved it, not the Beat the
// proof took; and, when the reading cannot tell, says it is a lower bound.
func TestProofLogsTheRealSilence(t *testing.T) {
	tests := []struct {
		name     string
		lastBeat bool // the stopped readings carry LastBeat
		want     string
	}{
		// A's last beat landed at 0.2 s (its expiry at 1.2 s, TTL 1 s); the
		// proving read is answered at 1.205 s + Beat (3 s): silent 4.005 s.
		{"last beat known", true, "silent_for=4.005s"},
		// Only this reader's own run of stopped reads is known: one Beat.
		{"last beat unknown", false, "silent_for_at_least=3s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				log, logs := newLogger()
				p := newFakePresence(wd.clk)
				start := time.UnixMilli(0)
				p.ReadFn = func(ctx context.Context, job string, n int, at time.Duration) presencecore.Reading {
					r := stoppedFrom(sec(1.2))(ctx, job, n, at)
					if r.Status == presencecore.Stopped && tc.lastBeat {
						r.LastBeat = start.Add(sec(0.2))
					}
					return r
				}
				h := wd.handoff(t, handoffcore.Config{JobID: jobB, Presence: p, Logger: log})
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
				defer w.Close()
				for {
					s := next(t.Context(), wd, w, lockOf(jobA, "tok", true))
					if s.Err != nil {
						t.Fatal(s.Err)
					}
					if s.Attempt.StealJob == jobA {
						break
					}
				}
				out := logs.String()
				if !strings.Contains(out, "stopped beating presence") || !strings.Contains(out, tc.want) {
					t.Errorf("log = %q, want the stop logged with %s", out, tc.want)
				}
			})
		})
	}
}
