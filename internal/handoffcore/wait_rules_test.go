package handoffcore_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// A lock with the presence flag changes hands only with the proof of a
// crash (two stopped reads a beat apart), however old it looks: a step of
// the Redis clock changes every lock's age, so the age says nothing about
// its holder. An old lock goes through exactly the steps and reads a young
// one does, whatever the holder's presence reads.
func TestWaitAgeGivesNothing(t *testing.T) {
	restarted := presencecore.Reading{Status: presencecore.Unknown, ExpiresIn: 5 * time.Second}
	readings := []struct {
		name    string
		reading presencecore.Reading
	}{
		{"holder stopped", stopped}, {"read failed", unknown}, {"Redis restarted", restarted}, {"holder alive", alive10s},
	}
	run := func(t *testing.T, r presencecore.Reading, active bool, age time.Duration) ([]step, []time.Duration) {
		var got []step
		var reads []time.Duration
		synctest.Test(t, func(t *testing.T) {
			wd := newWorld(t)
			p := newFakePresence(wd.clk)
			p.set(jobA, r)
			h := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: p})
			h.Start()
			w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), active)
			defer w.Close()
			l := handoffcore.Lock{Job: jobA, Token: "tok-1", Presence: true, Age: age}
			for range 6 {
				s := next(t.Context(), wd, w, l)
				got = append(got, s)
				if s.Attempt.StealJob != "" || s.Err != nil {
					break
				}
			}
			reads = p.readTimes(jobA)
		})
		return got, reads
	}
	for _, rd := range readings {
		for _, active := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, active %t", rd.name, active), func(t *testing.T) {
				young, youngReads := run(t, rd.reading, active, time.Second)
				old, oldReads := run(t, rd.reading, active, 10*maxAge)
				checkSteps(t, old, young)
				if !slices.Equal(oldReads, youngReads) {
					t.Errorf("an old lock's holder read at %v, a young one's at %v", oldReads, youngReads)
				}
				for _, s := range old {
					if s.Attempt.StealJob != "" && rd.reading.Status != presencecore.Stopped {
						t.Errorf("an old lock taken at %v with its holder reading %v", s.At, rd.reading.Status)
					}
				}
			})
		}
	}
}

func TestWaitDeadline(t *testing.T) {
	tests := []struct {
		name         string
		cfg          handoffcore.Config // timings
		deadline     time.Duration      // after the start
		flagged      bool
		want         []step
		wantRequests int
	}{
		{
			name:     "deadline already passed: no request",
			deadline: 0,
			want:     []step{{At: 0, Err: handoffcore.ErrDeadline}},
		},
		{
			name:     "deadline ends a park",
			deadline: sec(1),
			want: []step{
				{At: sec(0.5)}, {At: sec(1)},
				{At: sec(1), Err: handoffcore.ErrDeadline}, {At: sec(1), Err: handoffcore.ErrDeadline},
			},
			wantRequests: 1,
		},
		{
			name:         "deadline shorter than the first park",
			cfg:          handoffcore.Config{ParkMin: 10 * time.Second, ParkMax: 10 * time.Second},
			deadline:     sec(2),
			want:         []step{{At: sec(2)}, {At: sec(2), Err: handoffcore.ErrDeadline}},
			wantRequests: 1,
		},
		{
			// Stopped at 0.5, 1.5 and 3.0: 2.5 s of silence, less than a beat.
			name:         "deadline before the proof",
			deadline:     sec(3),
			flagged:      true,
			want:         []step{{At: sec(0.5)}, {At: sec(1.5)}, {At: sec(3)}, {At: sec(3), Err: handoffcore.ErrDeadline}},
			wantRequests: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				rec := wd.record(t, jobA)
				p := newFakePresence(wd.clk)
				p.set(jobA, stopped)
				cfg := tc.cfg
				cfg.JobID, cfg.Bus, cfg.Presence = jobB, wd.bus.Endpoint(jobB), p
				h := wd.handoff(t, cfg)
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(tc.deadline), true)
				defer w.Close()

				var got []step
				for range tc.want {
					got = append(got, next(t.Context(), wd, w, lockOf(jobA, "tok-1", tc.flagged)))
				}
				synctest.Wait()
				checkSteps(t, got, tc.want)
				if sent := len(rec.messages()); sent != tc.wantRequests {
					t.Errorf("%d requests sent, want %d", sent, tc.wantRequests)
				}
			})
		})
	}
}
