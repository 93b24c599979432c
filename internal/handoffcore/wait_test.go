package handoffcore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
)

// Every test here runs on the virtual time of a synctest bubble, starting
// at elapsed 0; the default timings are Beat 3 s, RequestRepeat 4 s and
// parks of 0.5 s doubling to 2 s.

const maxAge = 4 * time.Minute // LockTTL + LockSkew of the defaults

// lockOf is the lock of job under token, carrying the presence flag when
// flagged, and younger than maxAge.
func lockOf(job, token string, flagged bool) handoffcore.Lock {
	return handoffcore.Lock{Job: job, Token: token, Presence: flagged, Age: time.Second}
}

// step is what one Next call answered, and when (elapsed virtual time).
type step struct {
	At      time.Duration
	Attempt handoffcore.Attempt
	Err     error
}

// next calls w.Next and records when it returned.
func next(ctx context.Context, wd *world, w *handoffcore.Wait, l handoffcore.Lock) step {
	at, err := w.Next(ctx, l)
	return step{At: wd.elapsed(), Attempt: at, Err: err}
}

// checkSteps compares steps by time, attempt and errors.Is.
func checkSteps(t *testing.T, got, want []step) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d steps %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.At != w.At || g.Attempt != w.Attempt || !errors.Is(g.Err, w.Err) || (w.Err == nil) != (g.Err == nil) {
			t.Errorf("Next #%d = {at %v, %+v, err %v}, want {at %v, %+v, err %v}",
				i+1, g.At, g.Attempt, g.Err, w.At, w.Attempt, w.Err)
		}
	}
}

// grid is the return times of n Next calls that nothing wakes early with
// the default parks: 0.5, 1.5, 3.5, then every 2 s.
func grid(n int) []time.Duration {
	var ts []time.Duration
	at, park := time.Duration(0), handoffcore.DefaultParkMin
	for range n {
		at += park
		park = min(park*2, handoffcore.DefaultParkMax)
		ts = append(ts, at)
	}
	return ts
}

// quietSteps is grid(n) as steps answering nothing.
func quietSteps(n int) []step {
	var s []step
	for _, at := range grid(n) {
		s = append(s, step{At: at})
	}
	return s
}

func requestMsg(at time.Duration, to, token string) received {
	return received{At: at, To: to, Msg: messaging.Message{
		Type: messaging.TypeRequest, Driver: driverName, Key: playerKey, Requester: jobB, Sender: jobB, Token: token,
	}}
}

func TestWaitSendsRequests(t *testing.T) {
	a1, a2, c9 := lockOf(jobA, "tok-1", false), lockOf(jobA, "tok-2", false), lockOf(jobC, "tok-9", false)
	tests := []struct {
		name        string
		cfg         handoffcore.Config // timings only
		locks       []handoffcore.Lock // one per Next call
		wantReturns []time.Duration
		want        []received
	}{
		{
			// The repeat runs on its own timer, every RequestRepeat, while
			// the park keeps its 0.5 s doubling to 2 s grid.
			name:        "same lock: at once, then every RequestRepeat",
			locks:       slices.Repeat([]handoffcore.Lock{a1}, 9),
			wantReturns: grid(9),
			want: []received{
				requestMsg(0, jobA, "tok-1"), requestMsg(sec(4), jobA, "tok-1"),
				requestMsg(sec(8), jobA, "tok-1"), requestMsg(sec(12), jobA, "tok-1"),
			},
		},
		{
			name:        "RequestRepeat 2 s on 1 s parks",
			cfg:         handoffcore.Config{RequestRepeat: 2 * time.Second, ParkMin: time.Second, ParkMax: time.Second},
			locks:       slices.Repeat([]handoffcore.Lock{a1}, 5),
			wantReturns: []time.Duration{sec(1), sec(2), sec(3), sec(4), sec(5)},
			want: []received{
				requestMsg(0, jobA, "tok-1"), requestMsg(sec(2), jobA, "tok-1"), requestMsg(sec(4), jobA, "tok-1"),
			},
		},
		{
			name:        "new token: at once, and the park starts over",
			locks:       []handoffcore.Lock{a1, a1, a2, a2},
			wantReturns: []time.Duration{sec(0.5), sec(1.5), sec(2), sec(3)},
			want:        []received{requestMsg(0, jobA, "tok-1"), requestMsg(sec(1.5), jobA, "tok-2")},
		},
		{
			name:        "new holder: at once, to the new holder",
			locks:       []handoffcore.Lock{a1, a1, c9, c9},
			wantReturns: []time.Duration{sec(0.5), sec(1.5), sec(2), sec(3)},
			want:        []received{requestMsg(0, jobA, "tok-1"), requestMsg(sec(1.5), jobC, "tok-9")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				rec := wd.record(t, jobA, jobC)
				cfg := tc.cfg
				cfg.JobID, cfg.Bus, cfg.Presence = jobB, wd.bus.Endpoint(jobB), newFakePresence(wd.clk)
				h := wd.handoff(t, cfg)
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
				defer w.Close()

				var returns []time.Duration
				for i, l := range tc.locks {
					s := next(t.Context(), wd, w, l)
					if s.Err != nil || s.Attempt != (handoffcore.Attempt{}) {
						t.Fatalf("Next #%d = %+v, %v; want nothing", i+1, s.Attempt, s.Err)
					}
					returns = append(returns, s.At)
				}
				synctest.Wait()

				if !slices.Equal(returns, tc.wantReturns) {
					t.Errorf("Next returned at %v, want %v", returns, tc.wantReturns)
				}
				if got := rec.messages(); !slices.Equal(got, tc.want) {
					t.Errorf("requests sent:\n got %+v\nwant %+v", got, tc.want)
				}
				if got := h.Stats().RequestsSent; got != uint64(len(tc.want)) {
					t.Errorf("Stats().RequestsSent = %d, want %d", got, len(tc.want))
				}
			})
		})
	}
}

func TestWaitParks(t *testing.T) {
	tests := []struct {
		name      string
		cfg       handoffcore.Config // timings
		flagged   bool               // the lock carries the presence flag
		reading   presencecore.Reading
		active    bool
		want      []time.Duration // when each Next returns
		wantReads []time.Duration
	}{
		{
			name:   "no presence flag: 0.5 s doubling to 2 s",
			active: true, reading: stopped,
			want: grid(7),
		},
		{
			name:    "holder alive: the same parks, a read after each",
			flagged: true, active: true, reading: alive10s,
			want:      grid(7),
			wantReads: grid(7),
		},
		{
			name:    "passive wait",
			flagged: true, reading: stopped,
			want: grid(7),
		},
		{
			name:   "ParkMin 100 ms, ParkMax 300 ms",
			cfg:    handoffcore.Config{ParkMin: 100 * time.Millisecond, ParkMax: 300 * time.Millisecond},
			active: true,
			want:   []time.Duration{sec(0.1), sec(0.3), sec(0.6), sec(0.9), sec(1.2)},
		},
		{
			name:   "ParkMin equals ParkMax",
			cfg:    handoffcore.Config{ParkMin: time.Second, ParkMax: time.Second},
			active: true,
			want:   []time.Duration{sec(1), sec(2), sec(3)},
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

				var got []time.Duration
				for range tc.want {
					s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", tc.flagged))
					if s.Err != nil || s.Attempt != (handoffcore.Attempt{}) {
						t.Fatalf("Next = %+v, %v; want nothing", s.Attempt, s.Err)
					}
					got = append(got, s.At)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("Next returned at %v, want %v", got, tc.want)
				}
				if reads := p.readTimes(jobA); !slices.Equal(reads, tc.wantReads) {
					t.Errorf("presence read at %v, want %v", reads, tc.wantReads)
				}
			})
		})
	}
}

func TestWaitWakesOnReply(t *testing.T) {
	tests := []struct {
		name          string
		holderReplies bool          // A's driver lets go at once
		replyBefore   bool          // A replies before the first Next
		replyAt       time.Duration // A replies at this time (0: never)
		replyKey      string        // the key of that reply
		want          []time.Duration
		wantReads     []time.Duration
	}{
		{
			name:          "holder replies at once: Next returns at once",
			holderReplies: true,
			want:          []time.Duration{0},
		},
		{
			name:      "reply in the middle of a park",
			replyAt:   sec(1.2),
			replyKey:  playerKey,
			want:      []time.Duration{sec(0.5), sec(1.2)},
			wantReads: []time.Duration{sec(0.5)},
		},
		{
			name:        "reply before Next parks",
			replyBefore: true,
			want:        []time.Duration{0},
		},
		{
			name:      "reply for another key does not wake",
			replyAt:   sec(0.2),
			replyKey:  "user:7",
			want:      []time.Duration{sec(0.5)},
			wantReads: []time.Duration{sec(0.5)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				holder := &fakeHolder{AtOnce: tc.holderReplies}
				hA := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				if err := hA.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
					t.Fatal(err)
				}
				hA.Start()

				pB := newFakePresence(wd.clk)
				pB.set(jobA, alive10s)
				hB := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: pB})
				if err := hB.Register(driverName, handoffcore.Handlers{Release: (&fakeHolder{}).release}); err != nil {
					t.Fatal(err)
				}
				hB.Start()

				w := hB.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
				defer w.Close()
				if tc.replyBefore {
					sendReply(wd, jobA, jobB, playerKey)
					synctest.Wait()
				}
				if tc.replyAt > 0 {
					wd.clk.AfterFunc(tc.replyAt, func() { sendReply(wd, jobA, jobB, tc.replyKey) })
				}

				var got []time.Duration
				for range tc.want {
					s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", true))
					if s.Err != nil || s.Attempt != (handoffcore.Attempt{}) {
						t.Fatalf("Next = %+v, %v; want nothing", s.Attempt, s.Err)
					}
					got = append(got, s.At)
				}
				synctest.Wait()

				if !slices.Equal(got, tc.want) {
					t.Errorf("Next returned at %v, want %v", got, tc.want)
				}
				if reads := pB.readTimes(jobA); !slices.Equal(reads, tc.wantReads) {
					t.Errorf("presence read at %v, want %v (a reply wakes without a read)", reads, tc.wantReads)
				}
				wantReq := []request{{Key: playerKey, Token: "tok-1"}}
				if got := holder.requests(); !slices.Equal(got, wantReq) {
					t.Errorf("holder got %+v, want %+v", got, wantReq)
				}
				// A reply for a key nothing waits on is dropped and counted.
				unwaited := uint64(0)
				if tc.replyKey != "" && tc.replyKey != playerKey {
					unwaited = 1
				}
				if s := hB.Stats(); s.RepliesReceived != 1-unwaited || s.DroppedUnwaited != unwaited {
					t.Errorf("B's Stats() = %+v, want RepliesReceived %d, DroppedUnwaited %d", s, 1-unwaited, unwaited)
				}
				// A's Handoff replies only when its driver lets go; the other
				// replies are sent straight on the bus.
				if got, want := hA.Stats().RepliesSent, map[bool]uint64{true: 1}[tc.holderReplies]; got != want {
					t.Errorf("A's Stats().RepliesSent = %d, want %d", got, want)
				}
			})
		})
	}
}

func TestWaitProvesStopped(t *testing.T) {
	steal := handoffcore.Attempt{StealJob: jobA, StealToken: "tok-1"}
	tests := []struct {
		name         string
		cfg          handoffcore.Config // timings
		read         func(context.Context, string, int, time.Duration) presencecore.Reading
		flagged      bool // the lock carries the presence flag
		active       bool
		want         []step
		wantReads    int
		wantRequests bool
	}{
		{
			name:    "stopped, then stopped a beat later: steal",
			read:    script(stopped),
			flagged: true, active: true,
			// 0.5 stopped; the next park is cut to stoppedAt+Beat = 3.5
			// only when that is shorter than the park: 1.5, 3.5.
			want:      []step{{At: sec(0.5)}, {At: sec(1.5)}, {At: sec(3.5), Attempt: steal}},
			wantReads: 3, wantRequests: true,
		},
		{
			name:    "Beat 1 s: steal one beat after the first stopped read",
			cfg:     handoffcore.Config{Beat: time.Second},
			read:    script(stopped),
			flagged: true, active: true,
			want:      []step{{At: sec(0.5)}, {At: sec(1.5), Attempt: steal}},
			wantReads: 2, wantRequests: true,
		},
		{
			name:    "stopped, alive, stopped: the silence starts over",
			read:    script(stopped, alive10s, stopped),
			flagged: true, active: true,
			// 3.5 is 3 s after the first stopped read, but alive came between.
			want:      []step{{At: sec(0.5)}, {At: sec(1.5)}, {At: sec(3.5)}, {At: sec(5.5)}, {At: sec(6.5), Attempt: steal}},
			wantReads: 5, wantRequests: true,
		},
		{
			name:    "stopped, unknown, stopped: unknown resets",
			read:    script(stopped, unknown, stopped),
			flagged: true, active: true,
			want:      []step{{At: sec(0.5)}, {At: sec(1.5)}, {At: sec(3.5)}, {At: sec(5.5)}, {At: sec(6.5), Attempt: steal}},
			wantReads: 5, wantRequests: true,
		},
		{
			name:    "always unknown: never proven",
			read:    script(unknown),
			flagged: true, active: true,
			want:      quietSteps(12),
			wantReads: 12, wantRequests: true,
		},
		{
			name:   "no presence flag: never proven, never read",
			read:   script(stopped),
			active: true,
			want:   quietSteps(12), wantRequests: true,
		},
		{
			name:    "passive wait: no request, never proven",
			read:    script(stopped),
			flagged: true,
			want:    quietSteps(12),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				rec := wd.record(t, jobA)
				p := newFakePresence(wd.clk)
				p.ReadFn = tc.read
				cfg := tc.cfg
				cfg.JobID, cfg.Bus, cfg.Presence = jobB, wd.bus.Endpoint(jobB), p
				h := wd.handoff(t, cfg)
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), tc.active)
				defer w.Close()

				var got []step
				for range tc.want {
					got = append(got, next(t.Context(), wd, w, lockOf(jobA, "tok-1", tc.flagged)))
				}
				synctest.Wait()
				checkSteps(t, got, tc.want)

				if reads := len(p.readTimes(jobA)); reads != tc.wantReads {
					t.Errorf("%d presence reads, want %d", reads, tc.wantReads)
				}
				wantProven := uint64(0)
				if tc.want[len(tc.want)-1].Attempt.StealJob != "" {
					wantProven = 1
				}
				if got := h.Stats().ProvenStopped; got != wantProven {
					t.Errorf("Stats().ProvenStopped = %d, want %d", got, wantProven)
				}
				if sent := len(rec.messages()); (sent > 0) != tc.wantRequests {
					t.Errorf("%d requests reached the holder; want some: %v", sent, tc.wantRequests)
				}
				if !tc.wantRequests && wd.bus.Stats().Published != 0 {
					t.Errorf("bus published %d messages, want none", wd.bus.Stats().Published)
				}
			})
		})
	}
}

func TestWaitWakesAtPresenceExpiry(t *testing.T) {
	steal := handoffcore.Attempt{StealJob: jobA, StealToken: "tok-1"}
	tests := []struct {
		name string
		read func(context.Context, string, int, time.Duration) presencecore.Reading
		// Next returns right after each read; the last read proves the
		// holder stopped.
		wantReads []time.Duration
	}{
		{
			// The first read (0.5 s) finds ExpiresIn 7.3 s: the beat expires
			// at 7.8 s. The 2 s grid would read at 9.5; the park after 7.5
			// is cut to 7.805 (expiry + 5 ms margin), and the proof lands
			// one Beat later.
			name:      "alive with ExpiresIn 7.3 s",
			read:      until(presencecore.Alive, sec(7.8)),
			wantReads: []time.Duration{sec(0.5), sec(1.5), sec(3.5), sec(5.5), sec(7.5), sec(7.805), sec(9.805), sec(10.805)},
		},
		{
			name:      "alive with ExpiresIn 0.3 s: the second park is cut",
			read:      until(presencecore.Alive, sec(0.8)),
			wantReads: []time.Duration{sec(0.5), sec(0.805), sec(2.805), sec(3.805)},
		},
		{
			// Unknown without an error: Redis restarted, no proof before the
			// grace ends at 2.7 s.
			name:      "unknown during a Redis restart's grace",
			read:      until(presencecore.Unknown, sec(2.7)),
			wantReads: []time.Duration{sec(0.5), sec(1.5), sec(2.705), sec(4.705), sec(5.705)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				p := newFakePresence(wd.clk)
				p.ReadFn = tc.read
				h := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: p})
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
				defer w.Close()

				var want, got []step
				for i, at := range tc.wantReads {
					s := step{At: at}
					if i == len(tc.wantReads)-1 {
						s.Attempt = steal
					}
					want = append(want, s)
					got = append(got, next(t.Context(), wd, w, lockOf(jobA, "tok-1", true)))
				}
				checkSteps(t, got, want)
				if reads := p.readTimes(jobA); !slices.Equal(reads, tc.wantReads) {
					t.Errorf("presence read at %v, want %v", reads, tc.wantReads)
				}
			})
		})
	}
}

func TestWaitContext(t *testing.T) {
	tests := []struct {
		name     string
		cancelAt time.Duration // cancel at this time (<0: never, 0: before Next)
		timeout  time.Duration // a ctx deadline (0: none)
		// cancelInRead: the presence read cancels ctx (as if cut short).
		cancelInRead bool
		want         []step
	}{
		{
			name: "cancelled while parked", cancelAt: sec(0.3),
			want: []step{{At: sec(0.3), Err: context.Canceled}},
		},
		{
			name: "cancelled before Next", cancelAt: 0,
			want: []step{{At: 0, Err: context.Canceled}},
		},
		{
			name: "ctx deadline before the wait's", cancelAt: -1, timeout: sec(0.7),
			want: []step{{At: sec(0.5)}, {At: sec(0.7), Err: context.DeadlineExceeded}},
		},
		{
			name: "cancelled during the read after a park: no steal", cancelAt: -1, cancelInRead: true,
			want: []step{{At: sec(0.5), Err: context.Canceled}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				p := newFakePresence(wd.clk)
				p.ReadFn = func(context.Context, string, int, time.Duration) presencecore.Reading {
					if tc.cancelInRead {
						cancel()
						return unknown
					}
					return alive10s
				}
				h := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: p})
				h.Start()
				w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
				defer w.Close()
				switch {
				case tc.cancelAt == 0:
					cancel()
				case tc.cancelAt > 0:
					wd.clk.AfterFunc(tc.cancelAt, cancel)
				}

				l := lockOf(jobA, "tok-1", true)
				var got []step
				for range tc.want {
					got = append(got, next(ctx, wd, w, l))
				}
				checkSteps(t, got, tc.want)
				for _, s := range got {
					if errors.Is(s.Err, handoffcore.ErrDeadline) {
						t.Errorf("a ctx end answered %v, want ctx.Err()", s.Err)
					}
				}
			})
		})
	}
}

// A wait made for a purpose (a restore's) sends it with every request, and
// the holder's driver gets it; a plain wait sends none.
func TestWaitRequestsCarryTheirPurpose(t *testing.T) {
	for _, purpose := range []string{"", messaging.PurposeRestore} {
		t.Run("purpose "+purpose, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				holder := &fakeHolder{AtOnce: true}
				hA := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				if err := hA.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
					t.Fatal(err)
				}
				hA.Start()
				pB := newFakePresence(wd.clk)
				pB.set(jobA, alive10s)
				hB := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: pB})
				hB.Start()

				w := hB.NewWaitFor(driverName, playerKey, wd.clk.Now().Add(time.Minute), true, purpose)
				defer w.Close()
				if s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", true)); s.Err != nil {
					t.Fatal(s.Err)
				}
				synctest.Wait()
				want := []request{{Key: playerKey, Token: "tok-1", Purpose: purpose}}
				if got := holder.requests(); !slices.Equal(got, want) {
					t.Errorf("holder got %+v, want %+v", got, want)
				}
			})
		})
	}
}
