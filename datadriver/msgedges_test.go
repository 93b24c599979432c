package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

// The edges of exactly-once messages (issue 33), each on real redis-server
// and nats-server: server A holds the profile, server B sends.

// fussyDriver is a gift driver whose OnMessage refuses every gift while
// refuse is set ("the shop is closed"); cfg adjusts its Config.
func fussyDriver(tb testing.TB, s *server, refuse *atomic.Bool, cfg func(*datadriver.Config[wallet])) *datadriver.Driver[wallet] {
	tb.Helper()
	return giftDriver(tb, s, func(c *datadriver.Config[wallet]) {
		next := c.OnMessage
		c.OnMessage = func(w *wallet, m datadriver.Message) error {
			if refuse.Load() {
				return errors.New("the shop is closed")
			}
			return next(w, m)
		}
		cfg(c)
	})
}

// fussyPair is a pair of servers whose drivers (cfg adjusts their Config)
// refuse every gift while the flag it returns is set, as it is at first.
func fussyPair(t *testing.T, cfg func(*datadriver.Config[wallet])) (*pair, *atomic.Bool, *datadriver.Driver[wallet],
	*datadriver.Driver[wallet]) {
	t.Helper()
	pr := newPair(t)
	refuse := new(atomic.Bool)
	refuse.Store(true)
	return pr, refuse, fussyDriver(t, pr.a, refuse, cfg), fussyDriver(t, pr.b, refuse, cfg)
}

// savedWallet saves p and returns its data.
func savedWallet(t *testing.T, ctx context.Context, p *datadriver.Profile[wallet]) wallet {
	t.Helper()
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	return walletOf(p)
}

// rejoinedWallet releases p and joins its key again on d: the data the
// next session loads.
func rejoinedWallet(t *testing.T, ctx context.Context, p *datadriver.Profile[wallet], d *datadriver.Driver[wallet]) wallet {
	t.Helper()
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := d.Join(ctx, p.Key())
	if err != nil {
		t.Fatal(err)
	}
	return walletOf(q)
}

// sendKeyed sends gift{coins} to user:1 from d under idempotency key k.
func sendKeyed(ctx context.Context, d *datadriver.Driver[wallet], k string, coins int) (string, datadriver.SendReceipt, error) {
	return sendTo(ctx, d, "user:1", k, coins)
}

// Row 1: a key reused with another body is refused with
// ErrIdempotencyConflict and stores nothing, whether the first message
// waits or was applied; the first body alone is applied.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da, db := giftDriver(t, pr.a), giftDriver(t, pr.b)
	first, _, err := sendKeyed(ctx, db, "order-1", 500) // the profile is offline: the message waits
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sendKeyed(ctx, db, "order-1", 5000); !errors.Is(err, datadriver.ErrIdempotencyConflict) ||
		!strings.Contains(err.Error(), first) {
		t.Fatalf("the key reused with another body while its message waits: %v; want ErrIdempotencyConflict naming %s", err, first)
	}
	if n := inboxLen(t, pr.r, "user:1"); n != 1 {
		t.Fatalf("inbox %d after the refused send, want 1", n)
	}
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the gift applied and saved", func() bool { return inboxLen(t, pr.r, "user:1") == 0 })
	if _, _, err := sendKeyed(ctx, db, "order-1", 5000); !errors.Is(err, datadriver.ErrIdempotencyConflict) {
		t.Fatalf("the key reused with another body after its message was applied: %v; want ErrIdempotencyConflict", err)
	}
	id, rc, err := sendKeyed(ctx, db, "order-1", 500)
	if err != nil || id != first || !rc.Duplicate || rc.Waiting {
		t.Fatalf("the same send again = %q, %+v, %v; want a duplicate of %s, applied", id, rc, err, first)
	}
	if w := savedWallet(t, ctx, p); w.Coins != 500 || w.Received != 1 {
		t.Fatalf("data %+v, want the first gift alone", w)
	}
}

// Row 2: with MaxIdempotencyKeys 10, keyed sends past the bound are
// refused (ErrTooManyIdempotencyKeys, nothing stored) instead of forgetting
// the oldest key inside its window: a retry of the first is a duplicate,
// never applied twice.
func TestIdempotencyKeysBoundNeverForgetsInsideTheWindow(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	bound := func(c *datadriver.Config[wallet]) { c.MaxIdempotencyKeys = 10 }
	da, db := giftDriver(t, pr.a, bound), giftDriver(t, pr.b, bound)
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := sendKeyed(ctx, db, "order-0", 1)
	if err != nil {
		t.Fatal(err)
	}
	stored := 1
	for i := 1; i <= 14; i++ {
		_, _, err := sendKeyed(ctx, db, fmt.Sprint("order-", i), 1)
		switch {
		case err == nil:
			stored++
		case !errors.Is(err, datadriver.ErrTooManyIdempotencyKeys):
			t.Fatalf("keyed send %d: %v", i, err)
		case !strings.Contains(err.Error(), "remembers 10") || !strings.Contains(err.Error(), "nothing stored"):
			t.Errorf("the bound's error does not say what to do: %v", err)
		}
	}
	if stored != 10 {
		t.Fatalf("%d keyed sends stored with MaxIdempotencyKeys 10, want 10", stored)
	}
	received(t, p, 10, "A")
	id, rc, err := sendKeyed(ctx, db, "order-0", 1)
	if err != nil || id != first || !rc.Duplicate {
		t.Fatalf("a retry of the first send after 14 newer ones = %q, %+v, %v; want a duplicate of %s", id, rc, err, first)
	}
	if w := savedWallet(t, ctx, p); w.Received != 10 || w.Coins != 10 {
		t.Fatalf("data %+v, want the 10 stored gifts once each", w)
	}
}

// Row 3: with MaxIdempotencyKeys 4, keyed gifts refused until they are dead
// letters keep their keys (a dead letter's key is never forgotten, and
// counts toward the bound: new keyed gifts are refused); the sender's
// retries are duplicates; once the handler is mended a replay applies each
// exactly once.
func TestDeadLetteredKeysSurviveTheBound(t *testing.T) {
	ctx := ctxT(t)
	pr, refuse, da, db := fussyPair(t, func(c *datadriver.Config[wallet]) {
		c.MaxIdempotencyKeys, c.MaxMessageAttempts, c.Autosave = 4, 2, 50*time.Millisecond
	})
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for i := range 6 {
		k := fmt.Sprint("order-", i)
		id, _, err := sendKeyed(ctx, db, k, 1)
		switch {
		case i < 4 && err != nil:
			t.Fatalf("keyed gift %d: %v", i, err)
		case i >= 4 && !errors.Is(err, datadriver.ErrTooManyIdempotencyKeys):
			t.Fatalf("keyed gift %d past the bound: %v, want ErrTooManyIdempotencyKeys", i, err)
		}
		if err == nil {
			ids[k] = id
		}
	}
	rk := record.Key(pr.r.Namespace, "PlayerData", "user:1")
	eventually(t, 10*time.Second, "the 4 refused gifts dead-lettered by the holder's own retries", func() bool {
		dead, _ := record.ReadDeadLetters(ctx, pr.r.Client(t), rk, 10)
		return len(dead) == 4
	})
	for i := 6; i < 9; i++ {
		if _, _, err := sendKeyed(ctx, db, fmt.Sprint("order-", i), 1); !errors.Is(err, datadriver.ErrTooManyIdempotencyKeys) {
			t.Fatalf("keyed gift %d while 4 dead letters hold their keys: %v, want ErrTooManyIdempotencyKeys", i, err)
		}
	}
	for k, first := range ids {
		id, rc, err := sendKeyed(ctx, db, k, 1)
		if err != nil || id != first || !rc.Duplicate || !rc.DeadLettered {
			t.Fatalf("the sender's retry of %s = %q, %+v, %v; want a duplicate of the dead letter %s", k, id, rc, err, first)
		}
	}
	refuse.Store(false) // the handler is mended
	if rep, err := record.Replay(ctx, pr.r.Client(t), rk, nil); err != nil || rep.Moved != 4 {
		t.Fatalf("replay = %+v, %v", rep, err)
	}
	received(t, p, 4, "A")
	for k := range ids { // retried again after the replay: still one message each
		if _, rc, err := sendKeyed(ctx, db, k, 1); err != nil || !rc.Duplicate {
			t.Fatalf("a retry of %s after the replay = %+v, %v; want a duplicate", k, rc, err)
		}
	}
	if w := rejoinedWallet(t, ctx, p, da); w.Received != 4 || w.Coins != 4 {
		t.Fatalf("after the replay and a rejoin: %+v, want each of the 4 gifts exactly once", w)
	}
}

// Row 4: past its window a key is forgotten by time alone. A retry of an
// applied message then is stored again (the documented limit of the
// window) whether or not an unrelated keyed send reached the profile in
// between: the two runs agree.
func TestRetryPastTheWindowDependsOnTimeAlone(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	window := func(c *datadriver.Config[wallet]) { c.IdempotencyWindow = 300 * time.Millisecond }
	da, db := giftDriver(t, pr.a, window), giftDriver(t, pr.b, window)
	var dup [2]bool
	for i, between := range []bool{false, true} {
		key, order := fmt.Sprint("user:", i), fmt.Sprint("order-", i) // a key names one message of the namespace
		p, err := da.Join(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		first, err := db.Send(ctx, key, gift{Coins: 1}, datadriver.SendOptions{IdempotencyKey: order})
		if err != nil {
			t.Fatal(err)
		}
		received(t, p, 1, "A")
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // past the window on the Redis clock
		if between {
			if _, err := db.Send(ctx, key, gift{Coins: 2}, datadriver.SendOptions{IdempotencyKey: "unrelated"}); err != nil {
				t.Fatal(err)
			}
		}
		var rc datadriver.SendReceipt
		id, err := db.Send(ctx, key, gift{Coins: 1}, datadriver.SendOptions{IdempotencyKey: order, Receipt: &rc})
		if err != nil {
			t.Fatal(err)
		}
		dup[i] = rc.Duplicate || id == first
	}
	if dup[0] || dup[1] {
		t.Fatalf("a retry past the window of an applied message: duplicate %v without and %v with an unrelated send "+
			"between; want it stored anew both times (forgotten by time alone)", dup[0], dup[1])
	}
}

// loseFirstSendAnswer has s's next send.lua call run in Redis and its
// answer lost (set tells it did).
func loseFirstSendAnswer(s *server, set *atomic.Bool) {
	failScriptOnce(s, record.ScriptSend, true, set)
}

// Row 5: a retried Send whose first attempt stored the message (its answer
// lost) tells the live holder, as the first send would have: the holder,
// whose autosave is off, applies it without any other send or save.
func TestRetriedSendWakesTheHolder(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da, db := giftDriver(t, pr.a), giftDriver(t, pr.b)
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	loseFirstSendAnswer(pr.b, &lost)
	if _, _, err := sendKeyed(ctx, db, "order-1", 500); err == nil {
		t.Fatal("a Send whose answer was lost reported success")
	}
	if !lost.Load() {
		t.Fatal("the fault never ran")
	}
	id, rc, err := sendKeyed(ctx, db, "order-1", 500)
	if err != nil || !rc.Duplicate || !rc.Waiting || rc.Holder != "server-a" || !rc.Notified {
		t.Fatalf("the retry = %q, %+v, %v; want a duplicate, waiting, server-a told", id, rc, err)
	}
	received(t, p, 1, "A") // autosave is off: only the retry's notification makes A pull
	if st := pr.b.node.HandoffStats(); st.NotifiesSent != 1 {
		t.Errorf("B sent %d notifications, want 1 (the retry's)", st.NotifiesSent)
	}
}
