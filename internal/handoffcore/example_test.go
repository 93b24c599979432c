package handoffcore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/testsupport"
)

// Server B waits on the lock server A holds on user:42. B's Wait asks A to
// release it; A's driver (its ReleaseFunc) lets the profile go, A's Handoff
// replies, and the reply wakes B's Next, which tells B to acquire again.
// (An in-process bus and a fake presence stand in for NATS and Redis.)
func Example() {
	ctx := context.Background()
	bus := testsupport.NewMemBus(nil)
	defer bus.Close()

	newHandoff := func(job string) *handoffcore.Handoff {
		p := newFakePresence(nil)
		p.set("server-a", alive10s)
		h, err := handoffcore.New(handoffcore.Config{JobID: job, Bus: bus.Endpoint(job), Presence: p, Logger: quiet})
		if err != nil {
			panic(err)
		}
		h.Start()
		return h
	}
	a, b := newHandoff("server-a"), newHandoff("server-b")
	defer a.Close(ctx)
	defer b.Close(ctx)

	// Server A's driver: let the profile go (here at once: the channel it
	// returns is closed), and the Handoff replies to whoever asked.
	asked := make(chan request, 1)
	err := a.Register("PlayerData", handoffcore.Handlers{Release: func(key, token, _ string) <-chan struct{} {
		asked <- request{Key: key, Token: token}
		released := make(chan struct{})
		close(released)
		return released
	}})
	if err != nil {
		panic(err)
	}

	// Server B found user:42 locked by server-a under token tok-1.
	w := b.NewWait("PlayerData", "user:42", time.Now().Add(10*time.Second), true)
	defer w.Close()
	at, err := w.Next(ctx, handoffcore.Lock{Job: "server-a", Token: "tok-1", Presence: true})

	r := <-asked
	fmt.Printf("server-a asked to release %s (lock %s)\n", r.Key, r.Token)
	fmt.Printf("server-b acquires again: err=%v, steal=%t\n", err, at.StealJob != "")
	// Output:
	// server-a asked to release user:42 (lock tok-1)
	// server-b acquires again: err=<nil>, steal=false
}
