package datadriver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// clusterMove moves profiles A→B on the Redis Cluster: one refused, one whose
// commit arrives, one whose commit is held until the target has read the
// record to learn the flip landed (movestate.lua); then drains a third.
func clusterMove(t *testing.T, sc *clusterScope) {
	a, b := sc.server(t, "server-a"), sc.server(t, "server-b")
	da := players(t, a)

	// A move refused (B runs no driver yet): its source writes it to the
	// record as CANCELLED (movemark.lua).
	p0 := joinWith(t, da, "user:m0", 70)
	if err := p0.MoveTo(ctxT(t), "server-b"); !errors.Is(err, datadriver.ErrMoveRefused) {
		t.Fatalf("MoveTo a server without the driver: %v, want ErrMoveRefused", err)
	}
	eventually(t, 5*time.Second, "the cancelled move in the record", func() bool {
		return sc.record(t, "user:m0")["move.state"] == "CANCELLED"
	})
	if err := p0.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	db := players(t, b)

	p := joinWith(t, da, "user:m1", 71)
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	if c := joinCoins(t, db, "user:m1"); c != 71 {
		t.Fatalf("B's coins after the move = %d, want 71", c)
	}

	q := joinWith(t, da, "user:m2", 72)
	flipped, release := make(chan struct{}), make(chan struct{})
	datadriver.SetMoveHook(da, func(point string) {
		if point == "flipped" {
			close(flipped)
			<-release
		}
	})
	moved := moveAsync(q, "server-b", time.Second)
	<-flipped
	if c := joinCoins(t, db, "user:m2"); c != 72 {
		t.Fatalf("B's coins after a move whose commit it never got = %d, want 72", c)
	}
	close(release)
	if err := <-moved; err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	if rec := sc.record(t, "user:m2"); rec["lock.job"] != "server-b" || rec["move.state"] != "COMMITTED" {
		t.Fatalf("record after the move: lock.job %q move.state %q", rec["lock.job"], rec["move.state"])
	}

	// A drain (its headroom reservation, drainhold.lua) of one more.
	datadriver.SetMoveHook(da, nil)
	joinWith(t, da, "user:m3", 73)
	res, err := a.node.Drain(ctxT(t), datadriver.DrainOptions{})
	if err != nil || res.Moved["server-b"] != 1 {
		t.Fatalf("drain: %+v, %v", res, err)
	}
}
