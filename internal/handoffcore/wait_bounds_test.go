package handoffcore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// A presence read that hangs ends at the wait's deadline: Next answers
// ErrDeadline then, not when the read's caller gives up.
func TestWaitReadThatHangsEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		p := newFakePresence(wd.clk)
		p.ReadFn = func(ctx context.Context, _ string, _ int, _ time.Duration) presencecore.Reading {
			<-ctx.Done() // the call hangs until its context ends
			return presencecore.Reading{Status: presencecore.Unknown, Err: ctx.Err()}
		}
		h := wd.handoff(t, handoffcore.Config{JobID: jobB, Presence: p})
		h.Start()
		w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(5*time.Second), true)
		defer w.Close()
		var s step
		for range 10 {
			if s = next(t.Context(), wd, w, lockOf(jobA, "tok-1", true)); s.Err != nil {
				break
			}
		}
		if !errors.Is(s.Err, handoffcore.ErrDeadline) || s.At != 5*time.Second {
			t.Errorf("last Next = {at %v, err %v}, want ErrDeadline at 5s", s.At, s.Err)
		}
		if n := len(p.readTimes(jobA)); n == 0 {
			t.Error("no presence read was made")
		}
	})
}

// A wait timed to an alive reading's expiry reads again once it passes,
// even within the time a reading is shared: served the old reading again, it
// would park for nothing and try again at once, forever.
func TestWaitReadsAgainAfterAnExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		p := newFakePresence(wd.clk)
		// A's last beat expires 4 ms after the first read (at 0.5 s), less
		// than the time a reading is shared.
		p.ReadFn = until(presencecore.Alive, 504*time.Millisecond)
		h := wd.handoff(t, handoffcore.Config{JobID: jobB, Presence: p})
		h.Start()
		w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
		defer w.Close()
		same := 0 // Next calls in a row returning at one instant
		var last step
		for i := range 50 {
			s := next(t.Context(), wd, w, lockAged(jobA, "tok-1", time.Minute))
			if s.Err != nil {
				t.Fatalf("Next #%d: %v", i+1, s.Err)
			}
			if s.Attempt.StealJob != "" {
				if s.At < 3*time.Second {
					t.Errorf("stolen at %v, before a beat of stopped reads", s.At)
				}
				return
			}
			if i > 0 && s.At == last.At {
				if same++; same > 2 {
					t.Fatalf("Next returned %d times at %v: the wait spins without parking", same+1, s.At)
				}
			} else {
				same = 0
			}
			last = s
		}
		t.Fatalf("no steal after 50 attempts (last at %v)", last.At)
	})
}
