package datadriver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// A restore ends the live session of the profile it restores as a join
// would (the release saves it), but tells the player the truth: Kick with
// ReasonRestored, not ReasonJoinedElsewhere; whether the restore runs on
// the holder's server (the same-server path) or on another (a request over
// NATS that says it is a restore's).
func TestRestoreTellsThePlayerWhy(t *testing.T) {
	tests := []struct {
		name       string
		sameServer bool
	}{
		{"on the holder's server", true},
		{"from another server", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := newPair(t)
			kicked := make(chan datadriver.KickReason, 4)
			da := players(t, pr.a, func(c *datadriver.Config[player]) {
				c.Kick = func(_ string, r datadriver.KickReason) { kicked <- r }
			})
			restorer := da
			if !tc.sameServer {
				restorer = players(t, pr.b)
			}
			ctx := ctxT(t)
			pa, err := da.Join(ctx, "user:1")
			if err != nil {
				t.Fatal(err)
			}
			_ = pa.Update(func(d *player) { d.Coins = 5 })
			if err := pa.Save(ctx); err != nil {
				t.Fatal(err)
			}
			// The data as of now is the current data: the restore loads it
			// under the lock, which the live session must give up.
			r, err := restorer.RestoreAt(ctx, "user:1", time.Now().Add(time.Second), datadriver.LoadOptions{HandoffWait: 5 * time.Second})
			if err != nil {
				t.Fatalf("RestoreAt: %v", err)
			}
			if coins(r) != 5 {
				t.Errorf("restored %d coins, want 5", coins(r))
			}
			if err := r.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-kicked:
				if got != datadriver.ReasonRestored {
					t.Errorf("the player heard Kick(%s: %q), want %s (%q)", got, got.Message(),
						datadriver.ReasonRestored, datadriver.ReasonRestored.Message())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the live session was not kicked")
			}
			awaitEnd(t, pa)
			if !errors.Is(pa.Err(), datadriver.ErrReleased) {
				t.Errorf("the session ended with %v, want ErrReleased (its release saved it)", pa.Err())
			}
		})
	}
}
