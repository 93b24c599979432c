package lockhandoff_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/lockhandoff"
	"github.com/ckernel/playerdata/presence"
)

func TestWaitAgeRule(t *testing.T) {
	notAlive := lockhandoff.Attempt{NotAliveToken: "tok-1"}
	restarted := presence.Reading{Status: presence.Unknown, ExpiresIn: 5 * time.Second}
	tests := []struct {
		name      string
		cfg       lockhandoff.Config // (unused)
		reading   presence.Reading
		flagged   bool
		age       time.Duration
		active    bool
		want      []step
		wantReads []time.Duration
	}{
		{
			name: "old, holder stopped: NotAliveToken at once", reading: stopped,
			flagged: true, age: maxAge + time.Millisecond, active: true,
			want: []step{{At: 0, Attempt: notAlive}}, wantReads: []time.Duration{0},
		},
		{
			name: "old, read failed: NotAliveToken at once", reading: unknown,
			flagged: true, age: 10 * time.Minute, active: true,
			want: []step{{At: 0, Attempt: notAlive}}, wantReads: []time.Duration{0},
		},
		{
			name: "old, Redis restarted: NotAliveToken at once", reading: restarted,
			flagged: true, age: 10 * time.Minute, active: true,
			want: []step{{At: 0, Attempt: notAlive}}, wantReads: []time.Duration{0},
		},
		{
			name: "old, holder alive: keeps its lock", reading: alive10s,
			flagged: true, age: time.Hour, active: true,
			want: quietSteps(4),
			// One read before each park (age rule) and one after (proof),
			// shared when they fall at one instant.
			wantReads: []time.Duration{0, sec(0.5), sec(1.5), sec(3.5), sec(5.5)},
		},
		{
			name: "old, holder alive, passive wait: keeps its lock", reading: alive10s,
			flagged: true, age: time.Hour,
			want:      quietSteps(3),
			wantReads: []time.Duration{0, sec(0.5), sec(1.5)},
		},
		{
			name: "old, holder stopped, passive wait: NotAliveToken at once", reading: stopped,
			flagged: true, age: time.Hour,
			want: []step{{At: 0, Attempt: notAlive}}, wantReads: []time.Duration{0},
		},
		{
			name: "at the age limit, holder stopped: parks", reading: stopped,
			flagged: true, age: maxAge, active: true,
			want: []step{{At: sec(0.5)}}, wantReads: []time.Duration{sec(0.5)},
		},
		{
			name: "old, no presence flag: lockhandoff says nothing, reads nothing", reading: stopped,
			age: time.Hour, active: true,
			want: []step{{At: sec(0.5)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				p := newFakePresence(wd.clk)
				p.set(jobA, tc.reading)
				cfg := tc.cfg
				cfg.JobID, cfg.Bus, cfg.Presence = jobB, wd.bus.Endpoint(jobB), p
				h := wd.handoff(t, cfg)
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), tc.active)
				defer w.Close()

				// acquire.lua calls a presence-flagged lock past the age limit stale.
				l := lockhandoff.Lock{Job: jobA, Token: "tok-1", Presence: tc.flagged, Age: tc.age, Stale: tc.flagged && tc.age > maxAge}
				var got []step
				for range tc.want {
					got = append(got, next(t.Context(), wd, w, l))
				}
				checkSteps(t, got, tc.want)
				if reads := p.readTimes(jobA); !slices.Equal(reads, tc.wantReads) {
					t.Errorf("presence read at %v, want %v", reads, tc.wantReads)
				}
			})
		})
	}
}

func TestWaitDeadline(t *testing.T) {
	tests := []struct {
		name         string
		cfg          lockhandoff.Config // timings
		deadline     time.Duration      // after the start
		flagged      bool
		want         []step
		wantRequests int
	}{
		{
			name:     "deadline already passed: no request",
			deadline: 0,
			want:     []step{{At: 0, Err: lockhandoff.ErrDeadline}},
		},
		{
			name:     "deadline ends a park",
			deadline: sec(1),
			want: []step{
				{At: sec(0.5)}, {At: sec(1)},
				{At: sec(1), Err: lockhandoff.ErrDeadline}, {At: sec(1), Err: lockhandoff.ErrDeadline},
			},
			wantRequests: 1,
		},
		{
			name:         "deadline shorter than the first park",
			cfg:          lockhandoff.Config{ParkMin: 10 * time.Second, ParkMax: 10 * time.Second},
			deadline:     sec(2),
			want:         []step{{At: sec(2)}, {At: sec(2), Err: lockhandoff.ErrDeadline}},
			wantRequests: 1,
		},
		{
			// Stopped at 0.5, 1.5 and 3.0: 2.5 s of silence, less than a beat.
			name:         "deadline before the proof",
			deadline:     sec(3),
			flagged:      true,
			want:         []step{{At: sec(0.5)}, {At: sec(1.5)}, {At: sec(3)}, {At: sec(3), Err: lockhandoff.ErrDeadline}},
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
