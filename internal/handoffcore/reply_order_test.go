package handoffcore_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
)

// orderLog records, in order, the reply's log line and what the test
// appends: a handler that takes 100 ms of virtual time over "handoff: reply
// received" (less than the join's first park, 0.5 s), so that anything the
// reply woke before its line would run first.
type orderLog struct {
	mu     sync.Mutex
	events []string
}

func (o *orderLog) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *orderLog) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

type orderHandler struct{ o *orderLog }

func (h orderHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h orderHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h orderHandler) WithGroup(string) slog.Handler            { return h }
func (h orderHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "handoff: reply received" {
		time.Sleep(100 * time.Millisecond) // a slow log: a join woken before it would overtake it
		h.o.add("reply logged")
	}
	return nil
}

// TestAReplyIsLoggedBeforeItWakesTheJoin: the reply's log line comes before
// anything the reply wakes (a join's next attempt, and what the game does
// with the profile after it), however slow the log: an operator's log, or
// the demo's timeline, reads cause before effect. The demo's timeline once
// missed the line in CI, its case having ended before the bus's goroutine
// logged what had woken it.
func TestAReplyIsLoggedBeforeItWakesTheJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		pB := newFakePresence(wd.clk)
		pB.set(jobA, alive10s)
		o := &orderLog{}
		hB := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: pB,
			Logger: slog.New(orderHandler{o})})
		if err := hB.Register(driverName, handoffcore.Handlers{Release: (&fakeHolder{}).release}); err != nil {
			t.Fatal(err)
		}
		hB.Start()

		w := hB.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
		defer w.Close()
		wd.clk.AfterFunc(sec(0.2), func() { sendReply(wd, jobA, jobB, playerKey) })
		s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", true))
		o.add("join woken")
		synctest.Wait()
		if s.Err != nil || s.Attempt != (handoffcore.Attempt{}) || s.At != sec(0.3) {
			t.Fatalf("Next = %+v, %v at %v; want a wake at 0.3 s (the reply at 0.2, its line logged by 0.3)",
				s.Attempt, s.Err, s.At)
		}
		if got, want := o.list(), []string{"reply logged", "join woken"}; !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})
}
