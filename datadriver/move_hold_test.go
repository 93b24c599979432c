package datadriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

func TestMoveHoldReleasesAnUnclaimedProfile(t *testing.T) {
	mp := newMovePair(t, func(c *datadriver.Config[player]) { c.MoveHold = 300 * time.Millisecond })
	const key = "user:unclaimed"
	p := joinWith(t, mp.da, key, 12)
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	// Nobody joins on server-b: after MoveHold it saves and releases.
	eventually(t, 5*time.Second, "the unclaimed moved profile is released", func() bool {
		return recordFields(t, mp.r, "PlayerData", key)["lock.token"] == ""
	})
	if c := clusterFree(t, mp.r, key); c != 12 {
		t.Fatalf("stored coins = %d, want 12", c)
	}
	// The player shows up later anywhere: a plain load.
	if c := joinCoins(t, mp.da, key); c != 12 {
		t.Fatalf("coins on a later join = %d, want 12", c)
	}
}

func TestMoveThenJoinElsewhereIsAHandoffFromTheTarget(t *testing.T) {
	mp := newMovePair(t)
	c := newServer(t, mp.r, "server-c", fast, withNATS(t, mp.n))
	dc := players(t, c)
	const key = "user:third"
	p := joinWith(t, mp.da, key, 13)
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	// The player turns up on server-c instead: server-b hands it over.
	if got := joinCoins(t, dc, key); got != 13 {
		t.Fatalf("coins on the third server = %d, want 13", got)
	}
	if f := recordFields(t, mp.r, "PlayerData", key); f["lock.job"] != "server-c" {
		t.Fatalf("lock after the third server's join: %v", f)
	}
}

func TestMovedProfileJoinedBeforeTheCommit(t *testing.T) {
	// A join on the target while the move is pending waits for the move
	// to settle (the commit), then takes the profile with no acquire.
	mp := newMovePair(t)
	const key = "user:early"
	p := joinWith(t, mp.da, key, 14)
	accepted, release := make(chan struct{}), make(chan struct{})
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "accepted" {
			close(accepted)
			<-release
		}
	})
	moved := moveAsync(p, "server-b", 5*time.Second)
	<-accepted
	joined := make(chan *datadriver.Profile[player], 1)
	go func() {
		q, err := mp.db.Join(context.Background(), key)
		if err != nil {
			t.Errorf("join: %v", err)
		}
		joined <- q
	}()
	select {
	case <-joined:
		t.Fatal("the target's join returned before the flip")
	case <-time.After(100 * time.Millisecond):
	}
	acquires := make(chan string, 16)
	mp.b.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isScript(cmd, record.ScriptAcquire) {
			acquires <- cmd.String()
		}
		return nil
	})
	close(release)
	if err := <-moved; err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	q := <-joined
	if q == nil || coins(q) != 14 {
		t.Fatal("the target's join did not get the moved profile")
	}
	select {
	case c := <-acquires:
		t.Fatalf("the target's join of a moved profile took the lock itself: %s", c)
	default:
	}
}
