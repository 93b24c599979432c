package lockhandoff_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ckernel/playerdata/lockhandoff"
	"github.com/ckernel/playerdata/presence"
	"github.com/ckernel/playerdata/testsupport"
)

// alive is a presence where every server beats.
type alive struct{}

func (alive) Read(context.Context, string) presence.Reading {
	return presence.Reading{Status: presence.Alive, ExpiresIn: 10 * time.Second, At: time.Now()}
}

// Server B waits on the lock server A holds on user:42. B's Wait asks A to
// release it; A's ReleaseFunc lets the profile go, A's Handoff replies, and
// the reply wakes B's Next, which tells B to acquire again. (An in-process
// bus and a presence where everyone lives stand in for NATS and Redis; a
// server would give a *presence.Presence.)
func Example() {
	ctx := context.Background()
	bus := testsupport.NewMemBus(nil)
	defer bus.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	newHandoff := func(job string) *lockhandoff.Handoff {
		h, err := lockhandoff.New(lockhandoff.Config{JobID: job, Bus: bus.Endpoint(job), Presence: alive{}, Logger: quiet})
		if err != nil {
			panic(err)
		}
		h.Start()
		return h
	}
	a, b := newHandoff("server-a"), newHandoff("server-b")
	defer a.Close(ctx)
	defer b.Close(ctx)

	// Server A lets the profile go (here at once: the channel it returns is
	// closed), and its Handoff replies to whoever asked.
	asked := make(chan string, 1)
	err := a.Register("PlayerData", func(key, token, _ string) <-chan struct{} {
		asked <- key + " under " + token
		released := make(chan struct{})
		close(released)
		return released
	})
	if err != nil {
		panic(err)
	}

	// Server B found user:42 locked by server-a under token tok-1.
	w := b.NewWait("PlayerData", "user:42", time.Now().Add(10*time.Second))
	defer w.Close()
	at, err := w.Next(ctx, lockhandoff.Lock{Job: "server-a", Token: "tok-1", Presence: true})

	fmt.Println("server-a asked to release", <-asked)
	fmt.Printf("server-b acquires again: err=%v, steal=%t\n", err, at.StealJob != "")
	fmt.Println("requests sent by b:", b.Stats().RequestsSent, "replies sent by a:", a.Stats().RepliesSent)
	// Output:
	// server-a asked to release user:42 under tok-1
	// server-b acquires again: err=<nil>, steal=false
	// requests sent by b: 1 replies sent by a: 1
}
