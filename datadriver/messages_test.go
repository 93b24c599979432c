package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// gift is a message body.
type gift struct{ Coins int }

// wallet is a profile that counts the messages it applied.
type wallet struct {
	Coins    int
	Received int
}

// received waits until who's session p has applied n messages; a timeout
// says whether the session was still live.
func received(tb testing.TB, p *datadriver.Profile[wallet], n int, who string) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for walletOf(p).Received < n {
		if time.Now().After(deadline) {
			tb.Fatalf("%s applied %d of %d messages in 5 s; its session's error: %v", who, walletOf(p).Received, n, p.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// giftDriver is a driver whose OnMessage adds a gift's coins.
func giftDriver(tb testing.TB, s *server, opts ...func(*datadriver.Config[wallet])) *datadriver.Driver[wallet] {
	tb.Helper()
	cfg := datadriver.Config[wallet]{OnMessage: func(w *wallet, m datadriver.Message) error {
		var g gift
		if err := m.Decode(&g); err != nil {
			return err
		}
		w.Coins += g.Coins
		w.Received++
		return nil
	}}
	for _, o := range opts {
		o(&cfg)
	}
	return newDriver(tb, s, cfg)
}

func walletOf(p *datadriver.Profile[wallet]) wallet {
	var w wallet
	p.View(func(d *wallet) { w = *d })
	return w
}

// inboxLen is the number of messages waiting for key.
func inboxLen(tb testing.TB, r *testsupport.Redis, key string) int64 {
	tb.Helper()
	n, err := r.Client(tb).XLen(context.Background(),
		record.InboxKey(record.Key(r.Namespace, "PlayerData", key))).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestMessageToAnOfflineProfile(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := giftDriver(t, s)
	ctx := ctxT(t)
	id, err := d.Send(ctx, "user:1", gift{Coins: 25}, datadriver.SendOptions{}) // never loaded anywhere
	if err != nil || id == "" {
		t.Fatalf("Send = %q, %v", id, err)
	}
	if _, err := d.Send(ctx, "user:1", gift{Coins: 5}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(p); w.Coins != 30 || w.Received != 2 {
		t.Fatalf("after Join: %+v, want both gifts applied before Join returned", w)
	}
	// The join's messages leave the inbox with the write that saves their
	// change, right after the join: both at once, never one without the other.
	eventually(t, 5*time.Second, "the applied messages saved", func() bool {
		return inboxLen(t, r, "user:1") == 0
	})
	var saved wallet
	if err := msgpack.Unmarshal([]byte(recordFields(t, r, "PlayerData", "user:1")["data"]), &saved); err != nil ||
		saved.Coins != 30 || saved.Received != 2 {
		t.Fatalf("stored data %+v (%v) once the inbox is empty, want both gifts in it", saved, err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := inboxLen(t, r, "user:1"); n != 0 {
		t.Fatalf("inbox %d after the release, want 0", n)
	}
	q, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(q); w.Coins != 30 || w.Received != 2 {
		t.Fatalf("after rejoining: %+v, want the gifts exactly once", w)
	}
}

func TestMessageToALiveProfileOnAnotherServer(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da, db := giftDriver(t, pr.a), giftDriver(t, pr.b)
	p, err := db.Join(ctx, "user:2") // B holds the profile
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := da.Send(ctx, "user:2", gift{Coins: 7}, datadriver.SendOptions{}); err != nil { // sent from A
		t.Fatal(err)
	}
	received(t, p, 1, "B")
	t.Logf("applied on the holder %s after Send was called", time.Since(start))
	if s := pr.a.node.HandoffStats(); s.NotifiesSent != 1 {
		t.Errorf("A sent %d notifications, want 1", s.NotifiesSent)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if n := inboxLen(t, pr.r, "user:2"); n != 0 {
		t.Fatalf("inbox %d after B's save, want 0", n)
	}
	// The player moves to A: the gift is not applied again.
	q, err := da.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(q); w.Coins != 7 || w.Received != 1 {
		t.Fatalf("on A: %+v, want the gift exactly once", w)
	}
}

// A holder that crashes after applying a message it never saved: the next
// owner applies it to the last landed save, once.
func TestMessageExactlyOnceAcrossACrash(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da, db := giftDriver(t, pr.a), giftDriver(t, pr.b)
	p, err := da.Join(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(w *wallet) { w.Coins = 100 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Send(ctx, "user:3", gift{Coins: 1}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	received(t, p, 1, "A")
	crash(t, pr.a) // before any save wrote it
	q, err := db.Join(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(q); w.Coins != 101 || w.Received != 1 {
		t.Fatalf("on B after A crashed: %+v, want the last save (100) plus the gift once", w)
	}
}

// A lost notification costs at most one autosave: the save's answer says a
// message was sent, and the holder pulls.
func TestLostNotificationCaughtByTheNextSave(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a") // no bus: nobody can notify it
	b := newServer(t, r, "server-b")
	da := giftDriver(t, a, func(c *datadriver.Config[wallet]) { c.Autosave = 100 * time.Millisecond })
	db := giftDriver(t, b)
	ctx := ctxT(t)
	p, err := da.Join(ctx, "user:4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Send(ctx, "user:4", gift{Coins: 3}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the gift after an autosave", func() bool { return walletOf(p).Received == 1 })
	eventually(t, 5*time.Second, "the next autosave empties the inbox", func() bool { return inboxLen(t, r, "user:4") == 0 })
}

func TestSendLimits(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := giftDriver(t, s, func(c *datadriver.Config[wallet]) { c.MaxInbox, c.MaxMessageBytes = 2, 64 })
	ctx := ctxT(t)
	for range 2 {
		if _, err := d.Send(ctx, "user:5", gift{Coins: 1}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Send(ctx, "user:5", gift{Coins: 1}, datadriver.SendOptions{}); !errors.Is(err, datadriver.ErrInboxFull) {
		t.Fatalf("a third Send = %v, want ErrInboxFull", err)
	}
	if _, err := d.Send(ctx, "user:6", make([]byte, 100), datadriver.SendOptions{}); !errors.Is(err, datadriver.ErrTooLarge) {
		t.Fatalf("a 100-byte body = %v, want ErrTooLarge", err)
	}
	if n := inboxLen(t, r, "user:5"); n != 2 {
		t.Fatalf("inbox %d, want 2: a refused Send stores nothing", n)
	}
	if n := inboxLen(t, r, "user:6"); n != 0 {
		t.Fatalf("inbox of user:6 %d, want 0", n)
	}
	if _, err := d.Send(ctx, "", gift{}, datadriver.SendOptions{}); !errors.Is(err, datadriver.ErrInvalidKey) {
		t.Fatalf("Send to an empty key = %v, want ErrInvalidKey", err)
	}
}

// A message OnMessage refuses, or panics on, changes nothing and stays in the
// inbox; it is tried again at the next pull, once per pull (the write that
// counts a refusal does not make the holder pull again at once).
func TestRefusedMessageStays(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	var accept atomic.Bool
	var panics atomic.Int32
	d := newDriver(t, s, datadriver.Config[wallet]{OnMessage: func(w *wallet, m datadriver.Message) error {
		var g gift
		_ = m.Decode(&g)
		w.Coins += g.Coins // changed before deciding: the copy is dropped
		switch {
		case g.Coins < 0:
			panics.Add(1)
			panic("negative gift")
		case !accept.Load():
			return errors.New("not now")
		}
		w.Received++
		return nil
	}})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Send(ctx, "user:7", gift{Coins: -1}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the first refusal", func() bool { return panics.Load() > 0 })
	if err := p.Save(ctx); err != nil { // runs after the pull's own write, on the profile's owner
		t.Fatal(err)
	}
	if _, err := d.Send(ctx, "user:7", gift{Coins: 9}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the refusal is logged", func() bool {
		return containsAll(s.logs.String(), "OnMessage refused messages", "game callback panicked")
	})
	eventually(t, 5*time.Second, "the second pull", func() bool { return panics.Load() >= 2 })
	if w := walletOf(p); w != (wallet{}) {
		t.Fatalf("data %+v after refused messages, want unchanged", w)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if n := panics.Load(); n != 2 {
		t.Fatalf("the panicking message was tried %d times by two pulls, want 2 (one per pull)", n)
	}
	if n := inboxLen(t, r, "user:7"); n != 2 {
		t.Fatalf("inbox %d, want both refused messages kept", n)
	}
	accept.Store(true)
	if _, err := d.Send(ctx, "user:7", gift{Coins: 1}, datadriver.SendOptions{}); err != nil { // a new message makes it pull again
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the accepted messages", func() bool { return walletOf(p).Received == 2 })
	if w := walletOf(p); w.Coins != 10 {
		t.Fatalf("data %+v, want 9+1 coins (the panicking one still refused)", w)
	}
}

// A trade first saves the messages its participants applied, so that a
// trade image never carries a message still in the inbox.
func TestTradeSavesAppliedMessagesFirst(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	d := giftDriver(t, s)
	ctx := ctxT(t)
	a, err := d.Join(ctx, "user:8")
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Join(ctx, "user:9")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Send(ctx, "user:8", gift{Coins: 50}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the gift", func() bool { return walletOf(a).Received == 1 })
	err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
		datadriver.TradeData(tx, a).Coins -= 20
		datadriver.TradeData(tx, b).Coins += 20
		return nil
	}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := inboxLen(t, r, "user:8"); n != 0 {
		t.Fatalf("inbox %d after the trade, want 0", n)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := d.Join(ctx, "user:8")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(q); w.Coins != 30 || w.Received != 1 {
		t.Fatalf("after the trade and a rejoin: %+v, want 50-20 and the gift once", w)
	}
}

// A message that comes while a trade's outcome is unknown waits for the
// outcome: applied to the data before the trade, it would be lost when the
// trade turns out committed (its image replaces the data) while the save
// that settles it deletes the message from the inbox. Once the next save
// learns the outcome, the holder pulls the inbox again.
func TestMessageWhileTradeOutcomeUnknown(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	d := giftDriver(t, s)
	ctx := ctxT(t)
	a, err := d.Join(ctx, "user:10")
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Join(ctx, "user:11")
	if err != nil {
		t.Fatal(err)
	}
	// The commit lands, then the backend goes away until the trade gave up.
	var down atomic.Bool
	s.faults.SetBefore(func(context.Context, redis.Cmder) error {
		if down.Load() {
			return testsupport.ErrInjected
		}
		return nil
	})
	s.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isCommit(cmd) && err == nil {
			down.Store(true)
			return testsupport.ErrInjected
		}
		return nil
	})
	err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
		datadriver.TradeData(tx, a).Coins -= 20
		datadriver.TradeData(tx, b).Coins += 20
		return nil
	}, a, b)
	if !errors.Is(err, datadriver.ErrTradeOutcomeUnknown) {
		t.Fatalf("Trade = %v, want ErrTradeOutcomeUnknown", err)
	}
	down.Store(false)
	s.faults.Clear()
	if _, err := d.Send(ctx, "user:10", gift{Coins: 50}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the pull", func() bool {
		return walletOf(a).Received == 1 || strings.Contains(s.logs.String(), "messages wait for a trade's outcome")
	})
	if err := a.Save(ctx); err != nil { // learns that the trade committed
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the gift once the outcome is known", func() bool { return walletOf(a).Received == 1 })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := inboxLen(t, r, "user:10"); n != 0 {
		t.Fatalf("inbox %d after the release, want 0", n)
	}
	if got := stored(t, r, "user:10"); got.Coins != 30 {
		t.Fatalf("record %+v, want the trade (-20) and the gift (+50)", got)
	}
}
