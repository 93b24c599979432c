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

// poisonDriver is a gift driver whose OnMessage refuses a gift of 13 coins
// while refuse is set.
func poisonDriver(tb testing.TB, s *server, refuse *atomic.Bool, attempts int) *datadriver.Driver[wallet] {
	tb.Helper()
	return newDriver(tb, s, datadriver.Config[wallet]{MaxMessageAttempts: attempts,
		OnMessage: func(w *wallet, m datadriver.Message) error {
			var g gift
			if err := m.Decode(&g); err != nil {
				return err
			}
			if g.Coins == 13 && refuse.Load() {
				return errors.New("unlucky number")
			}
			w.Coins += g.Coins
			w.Received++
			return nil
		}})
}

// A message OnMessage refuses MaxMessageAttempts times moves to the dead
// letters, in the write that counts its last refusal: it stops costing
// every pull, other messages still apply once, nothing is lost, the log
// says so without flooding, and a replay puts it back.
func TestPoisonMessagesAreDeadLettered(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	var refuse atomic.Bool
	refuse.Store(true)
	d := poisonDriver(t, s, &refuse, 3)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Send(ctx, "user:1", gift{Coins: 13}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ { // each new message makes the holder pull again: one more try of the poison
		if _, err := d.Send(ctx, "user:1", gift{Coins: 1}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the gift applied", func() bool { return walletOf(p).Received == i })
	}
	rk := record.Key(r.Namespace, "PlayerData", "user:1")
	var dead []record.DeadLetter
	eventually(t, 5*time.Second, "the poison dead-lettered", func() bool {
		dead, err = record.ReadDeadLetters(ctx, r.Client(t), rk, 10)
		return err == nil && len(dead) == 1
	})
	if dl := dead[0]; dl.Attempts != 3 || dl.Err != "unlucky number" || dl.Job != "server-a" {
		t.Errorf("dead letter %+v, want 3 attempts by server-a with the refusal", dl)
	}
	if n := inboxLen(t, r, "user:1"); n != 0 {
		t.Errorf("inbox %d, want 0: the poison is dead-lettered, the gifts applied and saved", n)
	}
	if w := walletOf(p); w.Coins != 3 || w.Received != 3 {
		t.Fatalf("data %+v, want the three gifts only", w)
	}
	logs := s.logs.String()
	if n := strings.Count(logs, "level=WARN msg=\"OnMessage refused a message; it stays in the inbox"); n != 1 {
		t.Errorf("%d warnings about the refusals within a minute, want 1", n)
	}
	if n := strings.Count(logs, "level=WARN msg=\"OnMessage refused a message MaxMessageAttempts times: it moved to the dead "+
		"letters"); n != 1 || !strings.Contains(logs, "id="+dead[0].MessageID+" attempts=3 err=\"unlucky number\"") {
		t.Errorf("%d warnings about the dead letter, want 1 naming %s, its 3 attempts and the refusal:\n%s", n,
			dead[0].MessageID, logs)
	}

	refuse.Store(false) // what made OnMessage refuse it was mended
	if rep, err := record.Replay(ctx, r.Client(t), rk, nil); err != nil || rep.Moved != 1 {
		t.Fatalf("replay = %+v, %v", rep, err)
	}
	if err := p.Save(ctx); err != nil { // the save learns a message waits, and pulls
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the replayed message applied", func() bool { return walletOf(p).Coins == 16 })
	if w := rejoinedWallet(t, ctx, p, d); w.Coins != 16 || w.Received != 4 {
		t.Errorf("after a rejoin: %+v, want every message exactly once", w)
	}
}

// An inbox full of large messages that OnMessage refuses never holds Redis
// for long: the join reads a page bounded in bytes, the pull goes on a page
// at a time, and after MaxMessageAttempts joins the messages are dead
// letters. Redis's slow log (server-side time only) has no script call of
// 50 ms or more; reading the whole inbox in one call took ~200 ms.
func TestPoisonInboxDoesNotStallRedis(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	if r.Kind == testsupport.KindMiniredis {
		t.Skip("needs a real redis-server: miniredis has no slow log")
	}
	s := newServer(t, r, "server-a", fast)
	var refuse atomic.Bool
	refuse.Store(true)
	const attempts, msgs = 2, 400
	d := poisonDriver(t, s, &refuse, attempts)
	ctx := ctxT(t)
	admin := r.Client(t)
	body := strings.Repeat("x", 60<<10)
	for range msgs {
		if _, err := d.Send(ctx, "user:1", struct {
			Coins int
			Pad   string
		}{13, body}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.ConfigSet(ctx, "slowlog-log-slower-than", "50000").Err(); err != nil {
		t.Fatal(err)
	}
	admin.SlowLogReset(ctx)
	rk := record.Key(r.Namespace, "PlayerData", "user:1")
	for i := range attempts {
		p, err := d.Join(ctx, "user:1")
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "every message tried", func() bool {
			n, _ := admin.HLen(ctx, record.TriesKey(rk)).Result()
			dead, _ := admin.XLen(ctx, record.DeadKey(rk)).Result()
			return (i < attempts-1 && n >= 3*msgs) || dead == msgs
		})
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	slow, err := admin.SlowLogGet(ctx, 20).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range slow {
		if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "evalsha") {
			t.Errorf("a script call held Redis %v (args %.60v)", e.Duration, e.Args)
		}
	}
	if n := inboxLen(t, r, "user:1"); n != 0 {
		t.Errorf("inbox %d after %d refusals of each, want every message dead-lettered", n, attempts)
	}
}

// A Send that failed without an answer may have landed: retried with the
// same idempotency key it stores nothing new and answers the first id,
// before and after the message was applied.
func TestSendRetriedWithAnIdempotencyKey(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	d := giftDriver(t, s)
	ctx := ctxT(t)
	var landed atomic.Bool
	s.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isScript(cmd, record.ScriptSend) && landed.CompareAndSwap(false, true) {
			return testsupport.ErrInjected // it ran; its answer is lost
		}
		return err
	})
	if _, err := d.Send(ctx, "user:1", gift{Coins: 500}, datadriver.SendOptions{IdempotencyKey: "order-77"}); err == nil {
		t.Fatal("Send with its answer lost reported success")
	}
	s.faults.Clear()
	id, err := d.Send(ctx, "user:1", gift{Coins: 500}, datadriver.SendOptions{IdempotencyKey: "order-77"})
	if err != nil || id == "" {
		t.Fatalf("retried Send = %q, %v", id, err)
	}
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(p); w.Coins != 500 || w.Received != 1 {
		t.Fatalf("after a lost answer and a retry: %+v, want the gift exactly once", w)
	}
	again, err := d.Send(ctx, "user:1", gift{Coins: 500}, datadriver.SendOptions{IdempotencyKey: "order-77"})
	if err != nil || again != id {
		t.Fatalf("Send retried after the gift was applied = %q, %v; want %q", again, err, id)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if w := walletOf(p); w.Received != 1 {
		t.Errorf("%+v: a retried send was applied again", w)
	}
}

// A message whose inbox entry does not match its checksum (c) is damaged:
// no server applies it (OnMessage never sees it), each refuses it naming
// the entry, and after MaxMessageAttempts it is a dead letter that says it
// is damaged, and keeps its checksum: replayed, it is still refused. The
// messages around it apply once.
func TestDamagedMessageIsNeverApplied(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	var refuse atomic.Bool
	d := poisonDriver(t, s, &refuse, 2)
	ctx := ctxT(t)
	c := r.Client(t)
	rk := record.Key(r.Namespace, "PlayerData", "user:2")
	if _, err := d.Send(ctx, "user:2", gift{Coins: 1}, datadriver.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	// A gift of 7 coins whose stored body became one of 70 (its checksum
	// is the 7's): as a bad disk or a tool would leave it.
	body7, body70 := msgpackOf(t, gift{Coins: 7}), msgpackOf(t, gift{Coins: 70})
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: record.InboxKey(rk), Values: []any{record.EntryBody, body70,
		record.EntrySumField, record.EntrySum("", body7)}}).Err(); err != nil {
		t.Fatal(err)
	}
	c.HIncrBy(ctx, rk, record.FieldInboxSeq, 1)
	p, err := d.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Send(ctx, "user:2", gift{Coins: 2}, datadriver.SendOptions{}); err != nil { // a pull: the damaged one's second refusal
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the gifts applied", func() bool { return walletOf(p).Received == 2 })
	var dead []record.DeadLetter
	eventually(t, 5*time.Second, "the damaged message dead-lettered", func() bool {
		dead, err = record.ReadDeadLetters(ctx, c, rk, 10)
		return err == nil && len(dead) == 1
	})
	if dl := dead[0]; dl.Damaged == nil || !strings.Contains(dl.Err, "does not match its checksum") {
		t.Errorf("dead letter %+v (damaged %v), want it named damaged, refused for its checksum", dl, dl.Damaged)
	}
	if w := walletOf(p); w.Coins != 3 {
		t.Fatalf("data %+v, want the two gifts only: the damaged one never applied", w)
	}
	if rep, err := record.Replay(ctx, c, rk, nil); err != nil || rep.Moved != 1 {
		t.Fatalf("replay = %+v, %v", rep, err)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the replayed damaged message refused again", func() bool {
		_ = p.Save(ctx) // a write counts the refusals of the pull before it
		return c.HLen(ctx, record.TriesKey(rk)).Val() > 0
	})
	if w := walletOf(p); w.Coins != 3 {
		t.Fatalf("data %+v after the replay, want the damaged message still not applied", w)
	}
}

// msgpackOf is v's msgpack.
func msgpackOf(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := msgpackMarshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
