package datadriver_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// calls records the callbacks a game heard, in order.
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, s)
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// A handoff's Kick is heard before the leave cleanup (OnRelease) runs, even
// when the Kick takes a while (here it waits up to 100 ms for the cleanup:
// a cleanup run beside it would come between its start and end).
func TestKickBeforeOnRelease(t *testing.T) {
	pr := newPair(t)
	var c calls
	released := make(chan struct{})
	da := players(t, pr.a, func(cfg *datadriver.Config[player]) {
		cfg.Kick = func(key string, reason datadriver.KickReason) {
			c.add("kick " + reason.String())
			select {
			case <-released:
			case <-time.After(100 * time.Millisecond):
			}
			c.add("kick returned")
		}
	})
	db := players(t, pr.b)
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	pa.OnRelease(func(*player) { c.add("OnRelease"); close(released) })
	if _, err := db.Join(ctx, "user:1"); err != nil {
		t.Fatal(err)
	}
	awaitEnd(t, pa)
	want := []string{"kick " + datadriver.ReasonJoinedElsewhere.String(), "kick returned", "OnRelease"}
	if got := c.list(); !slices.Equal(got, want) {
		t.Fatalf("callbacks %q, want %q", got, want)
	}
}

// A Kick that blocks holds up its own key's callbacks, not another key's.
func TestBlockedCallbackHoldsUpOnlyItsKey(t *testing.T) {
	pr := newPair(t)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) }) // before the servers close (cleanups run last first)
	slowKicked := make(chan struct{})
	fastKicked := make(chan struct{}, 1)
	da := players(t, pr.a, func(cfg *datadriver.Config[player]) {
		cfg.Kick = func(key string, reason datadriver.KickReason) {
			if key == "user:slow" {
				close(slowKicked)
				<-unblock
				return
			}
			fastKicked <- struct{}{}
		}
	})
	db := players(t, pr.b)
	ctx := ctxT(t)
	for _, k := range []string{"user:slow", "user:fast"} {
		if _, err := da.Join(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Join(ctx, "user:slow"); err != nil {
		t.Fatal(err)
	}
	<-slowKicked
	if _, err := db.Join(ctx, "user:fast"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fastKicked:
	case <-time.After(10 * time.Second):
		t.Fatal("the Kick of user:fast waited for the blocked Kick of user:slow")
	}
}

// Loaded profiles that nothing is asked of hold no goroutine: their
// executors run on demand (a drain per burst of work) and end when idle.
func TestIdleProfilesHoldNoGoroutine(t *testing.T) {
	pr := newPair(t)
	d, ctx := players(t, pr.a), ctxT(t)
	const n = 200
	before := runtime.NumGoroutine()
	for i := range n {
		p, err := d.Join(ctx, fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Save(ctx); err != nil { // work on its executor
			t.Fatal(err)
		}
	}
	// A drain ends when its mailbox is empty; a goroutine of its own per
	// profile would keep n more for good.
	eventually(t, 10*time.Second, "the executors' goroutines end", func() bool {
		return runtime.NumGoroutine()-before < n/10
	})
}
