package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// failSettles makes every trade settle of server a fail (as a pause or a
// partition during it would), leaving each participant's image to its
// next write or load; it counts the settles failed.
func failSettles(a *server) *atomic.Int32 {
	var settles atomic.Int32
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if in, ok := testsupport.Identify(cmd); ok && in.Script == record.ScriptSave && len(in.Args) > 0 &&
			in.Args[0] == string(record.ModeSettle) {
			settles.Add(1)
			return testsupport.ErrInjected
		}
		return nil
	})
	return &settles
}

// A trade whose settle failed is written by the profile's next write, even a
// lock refresh: the write that clears the trade's mark carries the data
// with the committed image. A refresh that cleared the mark with no data
// left the record with the data from before the trade and no mark to say
// so: the buyer's sword gone, the seller's coins kept (found by the
// simulation once its faults reached pipelined calls).
func TestATradeWhoseSettleFailedIsWrittenByTheNextRefresh(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a, idleRefreshing)
	ctx := ctxT(t)
	s, b := tradePair(t, d, "seller", "buyer")
	settles := failSettles(a)
	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err != nil {
		t.Fatalf("Trade: %v (a failed settle is the next write's to finish)", err)
	}
	a.faults.Clear()
	if settles.Load() == 0 {
		t.Fatal("no settle was failed: the test tests nothing")
	}
	// No Update, no Save, no autosave: the next write of each is its lock
	// refresh (LockTTL/2 after its last write).
	for _, k := range []string{"seller", "buyer"} {
		eventually(t, 10*time.Second, k+"'s trade mark cleared by its next write", func() bool {
			return recordFields(t, r, "PlayerData", k)["trade"] == ""
		})
	}
	if got := stored(t, r, "buyer"); got.Items["sword"] != 1 || got.Coins != 50 {
		t.Fatalf("buyer's record %+v after the refresh, want the sword and 50 coins", got)
	}
	if got := stored(t, r, "seller"); got.Items["sword"] != 0 || got.Coins != 50 {
		t.Fatalf("seller's record %+v after the refresh, want no sword and 50 coins", got)
	}
}

// A release of data over MaxDataBytes frees the lock with the last data
// that fit; with a trade pending on the record (its settle failed), that
// data is from before the trade, so the release leaves the trade's mark and
// the next load settles the committed image from the journal. A release
// that cleared the mark left the buyer without the sword it paid for.
func TestATooLargeReleaseLeavesAPendingTradeToTheNextLoad(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a, idleRefreshing, func(c *datadriver.Config[player]) { c.MaxDataBytes = 256 })
	ctx := ctxT(t)
	s, b := tradePair(t, d, "seller", "buyer")
	failSettles(a)
	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err != nil {
		t.Fatalf("Trade: %v", err)
	}
	if recordFields(t, r, "PlayerData", "buyer")["trade"] == "" {
		t.Fatal("the buyer's settle landed: the test tests nothing")
	}
	_ = b.Update(func(d *player) { d.Name = strings.Repeat("x", 300) })
	err := b.Release(ctx)
	a.faults.Clear()
	if !errors.Is(err, datadriver.ErrTooLarge) {
		t.Fatalf("Release over MaxDataBytes = %v, want ErrTooLarge", err)
	}
	if recordFields(t, r, "PlayerData", "buyer")["trade"] == "" {
		t.Fatal("the release cleared the trade's mark without the trade's image")
	}
	q, err := d.Join(ctx, "buyer")
	if err != nil {
		t.Fatalf("Join after the release: %v", err)
	}
	var got player
	q.View(func(d *player) { got = *d })
	if got.Items["sword"] != 1 || got.Coins != 50 {
		t.Fatalf("buyer loaded %+v, want the sword and 50 coins", got)
	}
	if rec := recordFields(t, r, "PlayerData", "buyer"); rec["trade"] != "" {
		t.Fatalf("the load left the mark %q", rec["trade"])
	}
}
