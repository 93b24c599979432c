package handoffcore_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
)

// AskAll asks every server to release a lock by its token: the holder
// releases it and then answers, a server that does not hold it answers at
// once, and one that never answers (cut off, paused, or without the
// driver) is asked again every RequestRepeat and left out of the answer.
func TestAskAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld(t)
		op := wd.handoff(t, handoffcore.Config{JobID: "op", Bus: wd.bus.Endpoint("op"), Presence: newFakePresence(wd.clk)})
		op.Start()
		holder, other := &fakeHolder{}, &fakeHolder{AtOnce: true}
		for job, f := range map[string]*fakeHolder{"b": holder, "c": other} {
			h := wd.handoff(t, handoffcore.Config{JobID: job, Bus: wd.bus.Endpoint(job), Presence: newFakePresence(wd.clk)})
			if err := h.Register(driverName, handoffcore.Handlers{Release: f.release}); err != nil {
				t.Fatal(err)
			}
			h.Start()
		}
		silent := wd.record(t, "d")
		time.AfterFunc(time.Second, func() { holder.let("user:1") })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got := op.AskAll(ctx, driverName, "user:1", "tok-1", []string{"b", "c", "d"})
		if !slices.Equal(got, []string{"b", "c"}) {
			t.Fatalf("answered %v, want b and c", got)
		}
		for _, f := range []*fakeHolder{holder, other} {
			if rs := f.requests(); len(rs) == 0 || rs[0] != (request{"user:1", "tok-1", ""}) {
				t.Errorf("requests routed %v, want one naming user:1 and tok-1", rs)
			}
		}
		asked := silent.messages()
		if len(asked) < 2 || asked[1].At-asked[0].At < handoffcore.DefaultRequestRepeat {
			t.Errorf("the silent server was asked %d times (%v); want again every RequestRepeat", len(asked), asked)
		}
		// Everyone answers: it returns at once.
		start := wd.elapsed()
		if got := op.AskAll(context.Background(), driverName, "user:1", "tok-1", []string{"c"}); !slices.Equal(got, []string{"c"}) ||
			wd.elapsed()-start > time.Second {
			t.Fatalf("answered %v after %v, want c at once", got, wd.elapsed()-start)
		}
	})
}
