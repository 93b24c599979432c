package record_test

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/damage"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

func sendArgs(key string) record.SendArgs {
	return record.SendArgs{MaxInbox: 100, IdempotencyKey: key, IdempotencyWindow: time.Hour, IdempotencyKeys: 1000}
}

// A send with an idempotency key the profile remembers stores nothing and
// answers the first id, before and after the first message was applied.
func TestSendIdempotencyKey(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	first, err := record.Send(ctx, rdb, key, []byte("gift"), sendArgs("order-1"))
	if err != nil || first.Outcome != record.Sent {
		t.Fatalf("first send = %+v, %v", first, err)
	}
	again, err := record.Send(ctx, rdb, key, []byte("gift"), sendArgs("order-1"))
	if err != nil || again.Outcome != record.Duplicate || again.ID != first.ID {
		t.Fatalf("retried send = %+v, %v; want Duplicate of %s", again, err, first.ID)
	}
	if n, _ := rdb.XLen(ctx, record.InboxKey(key)).Result(); n != 1 {
		t.Errorf("inbox holds %d messages after a retried send, want 1", n)
	}
	// Applied (deleted from the inbox by a save): the key is still remembered.
	if res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok")); err != nil || res.Outcome != record.Acquired {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
	if res, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok", Data: []byte("d"),
		Applied: []string{first.ID}}); err != nil || res.Outcome != record.Written {
		t.Fatalf("save applying it: %+v, %v", res, err)
	}
	again, err = record.Send(ctx, rdb, key, []byte("gift"), sendArgs("order-1"))
	if err != nil || again.Outcome != record.Duplicate || again.ID != first.ID {
		t.Fatalf("send retried after the message was applied = %+v, %v; want Duplicate of %s", again, err, first.ID)
	}
	other, err := record.Send(ctx, rdb, key, []byte("gift"), sendArgs("order-2"))
	if err != nil || other.Outcome != record.Sent || other.ID == first.ID {
		t.Fatalf("send with another key = %+v, %v", other, err)
	}
}

// A message refused MaxAttempts times moves, in the save that counts the
// last refusal, to the dead letters (with its idempotency key, which stays
// remembered); a replay puts it back in the inbox.
func TestRefusedMessagesAreDeadLettered(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	sent, _ := record.Send(ctx, rdb, key, []byte("poison"), sendArgs("order-9"))
	record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok"))
	refuse := record.SaveArgs{Mode: record.ModeSave, Token: "tok", Job: "server-a", MaxAttempts: 3,
		Refused: []record.Refusal{{ID: sent.ID, Err: "unknown item"}}}
	for i := 1; i <= 3; i++ {
		res, err := record.Save(ctx, rdb, key, refuse)
		if err != nil || res.Outcome != record.Written {
			t.Fatalf("save %d: %+v, %v", i, res, err)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 3]; res.DeadLettered != want {
			t.Errorf("refusal %d dead-lettered %d messages, want %d", i, res.DeadLettered, want)
		}
		if i < 3 {
			if n, _ := rdb.HGet(ctx, record.TriesKey(key), sent.ID).Int(); n != i {
				t.Errorf("refusal %d counted %d", i, n)
			}
		}
	}
	if n, _ := rdb.XLen(ctx, record.InboxKey(key)).Result(); n != 0 {
		t.Errorf("the dead-lettered message is still in the inbox (%d)", n)
	}
	dead, err := record.ReadDeadLetters(ctx, rdb, key, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %+v, %v", dead, err)
	}
	d := dead[0]
	if d.MessageID != sent.ID || string(d.Body) != "poison" || d.Attempts != 3 || d.Err != "unknown item" ||
		d.Job != "server-a" || d.IdempotencyKey != "order-9" {
		t.Errorf("dead letter = %+v", d)
	}
	if n, _ := rdb.Exists(ctx, record.TriesKey(key)).Result(); n != 0 {
		t.Error("the refusal count outlived the dead-lettering")
	}
	if dup, _ := record.Send(ctx, rdb, key, []byte("poison"), sendArgs("order-9")); dup.Outcome != record.Duplicate {
		t.Errorf("a retried send of a dead-lettered message = %+v, want Duplicate", dup)
	}
	rep, err := record.Replay(ctx, rdb, key, nil)
	if err != nil || rep.Moved != 1 || rep.Holder.Job != "server-a" {
		t.Fatalf("replay = %+v, %v", rep, err)
	}
	msgs, seq, _ := record.ReadInbox(ctx, rdb, key, "", 10)
	if len(msgs) != 1 || string(msgs[0].Body) != "poison" {
		t.Errorf("inbox after the replay = %+v", msgs)
	}
	if seq != 2 {
		t.Errorf("inbox counter after a send and its replay = %d, want 2 (the holder pulls a replayed message)", seq)
	}
	if n, _ := rdb.XLen(ctx, record.DeadKey(key)).Result(); n != 0 {
		t.Errorf("%d dead letters left after the replay", n)
	}
}

// A message to a record deleted while its inbox remains is refused, naming
// the record, and stores nothing: it never makes the record again as a new
// profile (whose next join would get Defaults at epoch 1). The operator's
// repair starts it over with the messages that waited.
func TestSendToARecordDeletedBesideItsInbox(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:deleted")
	if _, err := record.Send(ctx, rdb, key, []byte("first"), sendArgs("")); err != nil {
		t.Fatal(err)
	}
	if got, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a")); err != nil || got.Outcome != record.Acquired {
		t.Fatalf("acquire = %+v, %v", got, err)
	}
	rdb.Del(ctx, key) // a stray DEL of the record alone
	before := snapshot(t, rdb, key)
	res, err := record.Send(ctx, rdb, key, []byte("second"), sendArgs("order-2"))
	if err != nil || res.Outcome != record.SendCorrupt || res.Corrupt.Field != "(record)" {
		t.Fatalf("send to a deleted record = %+v, %v; want SendCorrupt naming (record)", res, err)
	}
	if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
		t.Fatalf("the refused send wrote:\nbefore %v\nafter  %v", before, after)
	}
	if got, _ := record.Acquire(ctx, rdb, key, acquireArgs("server-b", "tok-b")); got.Outcome != record.Corrupt {
		t.Fatalf("acquire of the deleted record = %+v, want Corrupt", got)
	}
	if _, err := record.Repair(ctx, rdb, key, record.RepairArgs{Force: true, Skew: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got, err := record.Acquire(ctx, rdb, key, acquireArgs("server-b", "tok-b"))
	if err != nil || got.Outcome != record.Acquired || len(got.Messages) != 1 || string(got.Messages[0].Body) != "first" {
		t.Fatalf("acquire after the repair = %+v, %v; want the record started over with the message that waited", got, err)
	}
}

// The attack of issue 32 on an idempotency entry (the key's message id, in
// the idem hash): every byte flipped, the id cut at every byte, extended,
// the entry deleted from one of its two keys. A retried send with the key
// is refused (SendCorrupt, nothing stored), or answered as a duplicate and
// stores nothing: never a second message. An id of the form a send writes
// that names no waiting message cannot be told from the id of one already
// applied: it is answered as is (the send is deduplicated all the same).
func TestIdempotencyEntryEveryByte(t *testing.T) {
	e := newIdemEntry(t)
	damage.Every([]byte(e.first.ID), func(v []byte, what string) {
		e.rdb.HSet(e.ctx, e.idem, "shop-1", string(v))
		e.checkRetry(t, what)
	})
	e.rdb.HDel(e.ctx, e.idem, "shop-1")
	if res, err := record.Send(e.ctx, e.rdb, e.key, []byte("gift"), e.args); err != nil || res.Outcome != record.SendCorrupt {
		t.Fatalf("the key deleted from the hash (its time kept): send = %+v, %v, want refused", res, err)
	}
	e.rdb.HSet(e.ctx, e.idem, "shop-1", e.first.ID)
	e.checkRetry(t, "as written")
}

// FuzzIdempotencyEntry edits an idempotency entry's message id once: a
// retried send is refused, or answered as a duplicate storing nothing.
func FuzzIdempotencyEntry(f *testing.F) {
	e := newIdemEntry(f)
	for _, op := range []uint8{0, 1, 2, 3} {
		f.Add(op, uint16(0), byte(1))
		f.Add(op, uint16(13), byte('-'))
	}
	f.Fuzz(func(t *testing.T, op uint8, pos uint16, b byte) {
		e.rdb.HSet(e.ctx, e.idem, "shop-1", string(damage.Once([]byte(e.first.ID), op, int(pos), b)))
		e.checkRetry(t, "edited")
	})
}

// idemEntry is a profile with one message sent under the idempotency key
// "shop-1", still waiting.
type idemEntry struct {
	ctx   context.Context
	rdb   redis.UniversalClient
	key   string
	idem  string
	args  record.SendArgs
	first record.SendResult
}

func newIdemEntry(tb testing.TB) *idemEntry {
	tb.Helper()
	r := testsupport.StartRedis(tb)
	e := &idemEntry{ctx: context.Background(), rdb: r.Client(tb), key: record.Key(r.Namespace, "PlayerData", "user:idem"),
		args: record.SendArgs{MaxInbox: 100, IdempotencyKey: "shop-1", IdempotencyWindow: time.Hour, IdempotencyKeys: 100}}
	e.idem = record.IdemKey(e.key)
	var err error
	if e.first, err = record.Send(e.ctx, e.rdb, e.key, []byte("gift"), e.args); err != nil || e.first.Outcome != record.Sent {
		tb.Fatalf("send: %+v, %v", e.first, err)
	}
	return e
}

// checkRetry fails unless a retried send is refused, or a duplicate that
// stores nothing answered with the first send's id or an id of the form a
// send writes that names no waiting message.
func (e *idemEntry) checkRetry(t *testing.T, what string) {
	t.Helper()
	inbox := record.InboxKey(e.key)
	n := e.rdb.XLen(e.ctx, inbox).Val()
	res, err := record.Send(e.ctx, e.rdb, e.key, []byte("gift"), e.args)
	switch {
	case err != nil:
		t.Fatalf("%s: send = %v", what, err)
	case res.Outcome == record.SendCorrupt:
	case res.Outcome != record.Duplicate:
		t.Fatalf("%s: the retried send was %+v, want refused or a duplicate", what, res)
	case res.ID != e.first.ID && (!validID(res.ID) || len(e.rdb.XRange(e.ctx, inbox, res.ID, res.ID).Val()) > 0):
		t.Fatalf("%s: answered %q, want refused or the first send's %q", what, res.ID, e.first.ID)
	}
	if m := e.rdb.XLen(e.ctx, inbox).Val(); m != n {
		t.Fatalf("%s: the retried send stored a message (%d → %d)", what, n, m)
	}
}

// validID reports whether id has the form of a stream id.
func validID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return ok && err1 == nil && err2 == nil
}
