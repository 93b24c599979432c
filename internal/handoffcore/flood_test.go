package handoffcore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/messaging"
)

// floodReplies sends a reply for key from A to B every 10 ms, from the
// elapsed time from until until or the end of the test.
func floodReplies(t *testing.T, wd *world, key string, from, until time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		next := from
		for next < until {
			select {
			case <-ctx.Done():
				return
			case <-wd.clk.After(next - wd.elapsed()):
			}
			sendReply(wd, jobA, jobB, key)
			next += 10 * time.Millisecond
		}
	}()
}

// waitOnLiveHolder starts B's Handoff, which reads A alive, and an active
// wait of B on A's lock of playerKey for d, closed at the end of the test.
func waitOnLiveHolder(t *testing.T, wd *world, d time.Duration) (*handoffcore.Handoff, *fakePresence, *handoffcore.Wait) {
	t.Helper()
	pB := newFakePresence(wd.clk)
	pB.set(jobA, alive10s)
	hB := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: pB})
	hB.Start()
	w := hB.NewWait(driverName, playerKey, wd.clk.Now().Add(d), true)
	t.Cleanup(w.Close)
	return hB, pB, w
}

// A reply ends a park at once the first time for a lock (the handoff);
// after that, whatever arrives, the wait returns no sooner than ParkMin
// after the attempt before it, and a reply that comes later than that still
// ends the park at once.
func TestWaitCoalescesWakes(t *testing.T) {
	tests := []struct {
		name    string
		replies []time.Duration // single replies, at these times
		flood   [2]time.Duration
		locks   int // Next calls on tok-1, then as many on tok-2
		want    []time.Duration
	}{
		{
			name:    "first reply at once, later ones no sooner than ParkMin after the attempt",
			replies: []time.Duration{sec(0.2), sec(1.4)},
			locks:   3,
			want:    []time.Duration{sec(0.2), sec(1.2), sec(1.7)}, // 1.2: the park of 1 s; 1.7 = 1.2 + ParkMin
		},
		{
			name:    "a reply ParkMin after the attempt ends the park at once",
			replies: []time.Duration{sec(0.2), sec(1.9)},
			locks:   3,
			want:    []time.Duration{sec(0.2), sec(1.2), sec(1.9)},
		},
		{
			name:  "a reply flood: one attempt per ParkMin",
			flood: [2]time.Duration{sec(0.1), sec(3)},
			locks: 7,
			want:  []time.Duration{sec(0.1), sec(0.6), sec(1.1), sec(1.6), sec(2.1), sec(2.6), sec(3.1)},
		},
		{
			name:  "a new lock gets its first reply at once",
			flood: [2]time.Duration{sec(0.1), sec(3)},
			locks: 2, // then two on tok-2
			want:  []time.Duration{sec(0.1), sec(0.6), sec(0.6), sec(1.1)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				_, _, w := waitOnLiveHolder(t, wd, time.Minute)
				for _, at := range tc.replies {
					wd.clk.AfterFunc(at, func() { sendReply(wd, jobA, jobB, playerKey) })
				}
				if tc.flood[1] > 0 {
					floodReplies(t, wd, playerKey, tc.flood[0], tc.flood[1])
				}
				var got []time.Duration
				for i := range len(tc.want) {
					l := lockOf(jobA, "tok-1", true)
					if i >= tc.locks {
						l = lockOf(jobA, "tok-2", true)
					}
					s := next(t.Context(), wd, w, l)
					if s.Err != nil || s.Attempt != (handoffcore.Attempt{}) {
						t.Fatalf("Next #%d = %+v, %v; want nothing", i+1, s.Attempt, s.Err)
					}
					got = append(got, s.At)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("Next returned at %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// A reply flood on a waiting join's subject makes it attempt at most once
// per ParkMin: within a 2× budget of the quiet wait's attempts (and
// presence reads) over the same 5 s.
func TestWaitReplyFloodBudget(t *testing.T) {
	const window = 5 * time.Second
	// calls is the number of attempts (Next returns) plus presence reads
	// in window, with a reply flood or without.
	calls := func(t *testing.T, flood bool) int {
		n := 0
		synctest.Test(t, func(t *testing.T) {
			wd := newWorld(t)
			hB, pB, w := waitOnLiveHolder(t, wd, window)
			if flood {
				floodReplies(t, wd, playerKey, 0, window)
			}
			for {
				if _, err := w.Next(t.Context(), lockOf(jobA, "tok-1", true)); err != nil {
					break
				}
				n++
			}
			n += len(pB.readTimes(jobA))
			if s := hB.Stats(); flood && s.RepliesReceived < 400 {
				t.Errorf("only %d replies arrived", s.RepliesReceived)
			}
		})
		return n
	}
	quiet, flooded := calls(t, false), calls(t, true)
	t.Logf("attempts and presence reads in %v: %d quiet, %d under a reply flood", window, quiet, flooded)
	if quiet == 0 || flooded > 2*quiet {
		t.Errorf("a wait of %v made %d attempts and reads under a reply flood, %d without: want at most 2×", window, flooded, quiet)
	}
	if max := int(window/handoffcore.DefaultParkMin) + 2; flooded > max+quiet {
		t.Errorf("%d attempts and reads under a flood, want at most %d", flooded, max+quiet)
	}
}

// A flood of forged requests naming keys the driver does not hold makes at
// most one reply per requester per reply window, for at most
// MaxRepliedRequesters requesters per window; the rest are counted.
func TestHandoffRepliesToARequesterOncePerWindow(t *testing.T) {
	tests := []struct {
		name       string
		requesters int // the flood cycles through this many requester names
		wantPerWin int // replies per window
	}{
		{name: "one forged requester, many keys: one reply per window", requesters: 1, wantPerWin: 1},
		{name: "many requesters: bounded per window", requesters: 5000, wantPerWin: handoffcore.MaxRepliedRequesters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				names := make([]string, tc.requesters)
				for i := range names {
					names[i] = fmt.Sprintf("victim-%d", i)
				}
				rec := wd.record(t, names...)
				h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				if err := h.Register(driverName, handoffcore.Handlers{Release: (&fakeHolder{AtOnce: true}).release}); err != nil {
					t.Fatal(err)
				}
				h.Start()
				const windows, perWindow = 4, 5000
				forger := wd.bus.Endpoint("forger")
				for i := range windows * perWindow {
					if i > 0 && i%perWindow == 0 {
						wd.clk.Sleep(handoffcore.DefaultParkMin)
					}
					_ = forger.Publish(t.Context(), jobA, messaging.Message{Type: messaging.TypeRequest, Driver: driverName,
						Key: fmt.Sprintf("user:%d", i), Requester: names[i%len(names)], Token: "forged"})
				}
				synctest.Wait()
				s := h.Stats()
				if want, replies := windows*tc.wantPerWin, len(rec.messages()); replies != want || int(s.RepliesSent) != want {
					t.Errorf("%d replies delivered, %d sent; want %d (%d per window)", replies, s.RepliesSent, want, tc.wantPerWin)
				}
				if want := uint64(windows*perWindow) - s.RepliesSent; s.RepliesCoalesced != want {
					t.Errorf("RepliesCoalesced = %d, want %d", s.RepliesCoalesced, want)
				}
			})
		})
	}
}

// A flood of requests whose releases never end (the driver holds the key,
// or answers later) waits on at most MaxPendingReplies of them: the
// goroutines stay bounded, the rest still reach the driver, and every
// awaited one is answered when the driver lets go.
func TestHandoffPendingRepliesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		rec := wd.record(t, jobB)
		holder := &fakeHolder{}
		h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
		if err := h.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
			t.Fatal(err)
		}
		h.Start()
		synctest.Wait()
		before := runtime.NumGoroutine()
		const n = 3 * handoffcore.MaxPendingReplies
		b := wd.bus.Endpoint(jobB)
		for i := range n {
			_ = b.Publish(t.Context(), jobA, messaging.Message{Type: messaging.TypeRequest, Driver: driverName,
				Key: fmt.Sprintf("user:%d", i), Requester: jobB, Token: "tok"})
		}
		synctest.Wait()
		if grew := runtime.NumGoroutine() - before; grew > handoffcore.MaxPendingReplies {
			t.Errorf("%d requests awaited: %d more goroutines, want at most %d", n, grew, handoffcore.MaxPendingReplies)
		}
		if got := len(holder.requests()); got != n {
			t.Errorf("the driver got %d requests, want all %d", got, n)
		}
		s := h.Stats()
		if s.RepliesDropped != n-handoffcore.MaxPendingReplies {
			t.Errorf("RepliesDropped = %d, want %d", s.RepliesDropped, n-handoffcore.MaxPendingReplies)
		}
		for i := range n {
			holder.let(fmt.Sprintf("user:%d", i))
		}
		synctest.Wait()
		if got := len(rec.messages()); got != handoffcore.MaxPendingReplies {
			t.Errorf("%d replies once the driver let go, want %d", got, handoffcore.MaxPendingReplies)
		}
		if got := runtime.NumGoroutine(); got > before+handoffcore.PublishWorkers {
			t.Errorf("%d goroutines after the releases, %d before (and %d publish workers since)", got, before,
				handoffcore.PublishWorkers)
		}
	})
}

// Messages to send wait in a bounded queue, sent by a fixed number of
// workers: a bus that takes nothing makes the Handoff drop and count what is
// beyond the queue, never start a goroutine per message.
func TestHandoffPublishQueueBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		bus := &fakeBus{PublishFn: func(ctx context.Context, _ string, _ messaging.Message) error {
			<-ctx.Done() // the bus takes nothing
			return ctx.Err()
		}}
		h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: bus, Presence: newFakePresence(wd.clk)})
		h.Start()
		synctest.Wait()
		before := handoffGoroutines()
		const n = 3 * handoffcore.PublishQueueLen
		for i := range n {
			h.Notify(t.Context(), driverName, fmt.Sprintf("user:%d", i), jobB)
			if i == 0 {
				synctest.Wait() // the workers take the first message
			}
		}
		synctest.Wait()
		switch grew := handoffGoroutines() - before; {
		case grew > handoffcore.PublishWorkers:
			t.Errorf("%d messages queued: %d more goroutines, want at most the %d workers", n, grew, handoffcore.PublishWorkers)
		case grew < 1:
			t.Errorf("%d messages queued and stuck: no more goroutines of the Handoff counted, want its busy workers", n)
		}
		s := h.Stats()
		lo, hi := uint64(n-handoffcore.PublishQueueLen-handoffcore.PublishWorkers), uint64(n-handoffcore.PublishQueueLen)
		if s.PublishDropped < lo || s.PublishDropped > hi {
			t.Errorf("PublishDropped = %d, want %d to %d", s.PublishDropped, lo, hi)
		}
		// Close is bounded by its context, and ends the workers.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := h.Close(ctx); err == nil {
			t.Error("Close with publishes stuck = nil, want its deadline")
		}
		synctest.Wait()
		if got := handoffGoroutines(); got > before {
			t.Errorf("%d goroutines of the Handoff after Close, %d before", got, before)
		}
	})
}

// handoffGoroutines counts the goroutines running a Handoff's code: the
// process's other goroutines (another test's, still ending; the runtime's)
// are none of this test's business.
func handoffGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "playerdata/internal/handoffcore.(*Handoff)") {
			count++
		}
	}
	return count
}
