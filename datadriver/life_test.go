package datadriver_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
)

// TestALeaveAskedDuringAWriteKeepsEveryUpdate: another server asks for a
// key while the holder's write is in flight (held in Redis). The holder's
// executor takes the leave after that write, so the session stays live
// meanwhile: an Update it accepts then is in the release, and the joiner
// loads it. The driver is not held up by the one key: a join of another key
// on the holder goes through while the write hangs.
func TestALeaveAskedDuringAWriteKeepsEveryUpdate(t *testing.T) {
	pr := newPair(t)
	var ka kicks
	da := players(t, pr.a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
	db := players(t, pr.b)
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := pa.Update(func(d *player) { d.Coins = 1 }); err != nil {
		t.Fatal(err)
	}
	in, release := holdFirst(pr.a, func(cmd redis.Cmder) bool { return isWrite(cmd, "save") })
	var once sync.Once
	proceed := func() { once.Do(release) }
	defer proceed() // a failed check below must not leave the write held (the Node's close waits for it)
	saved := make(chan error, 1)
	go func() { saved <- pa.Save(ctx) }()
	<-in

	joined := joinAsync(t, ctx, db, "user:1")
	other, err := da.Join(ctx, "user:2")
	if err != nil {
		t.Fatalf("a join of another key while user:1's write hangs: %v", err)
	}
	defer other.Release(ctx)
	// Give B's request time to reach A (the assertions below hold whether
	// it did or not: the ask waits for the write either way).
	time.Sleep(200 * time.Millisecond)
	if err := pa.Update(func(d *player) { d.Coins += 10 }); err != nil {
		t.Fatalf("Update while the write is in flight and a leave is asked: %v (the session is live until its "+
			"executor takes the leave)", err)
	}
	proceed()
	if err := <-saved; err != nil {
		t.Fatalf("the held save: %v", err)
	}
	pb := <-joined
	if pb == nil {
		t.FailNow()
	}
	if got := coins(pb); got != 11 {
		t.Errorf("B loaded %d coins, want 11: an Update A accepted before its leave is lost", got)
	}
	awaitEnd(t, pa)
	if !errors.Is(pa.Err(), datadriver.ErrReleased) {
		t.Errorf("A's Err = %v, want ErrReleased", pa.Err())
	}
	if err := pa.Update(func(d *player) { d.Coins++ }); err == nil {
		t.Error("Update after A's session ended: nil, want an error")
	}
	if n := ka.joined.Load(); n != 1 {
		t.Errorf("A heard %d Kicks for a join elsewhere, want 1", n)
	}
}
