package record_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// applyAll has a holder apply and save every message waiting for key (the
// save deletes them from the inbox), as server-a under token tok.
func applyAll(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	ctx := context.Background()
	msgs, _, err := record.ReadInbox(ctx, rdb, key, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	res, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok", Job: "server-a",
		Data: []byte(fmt.Sprint(ids)), Applied: ids})
	if err != nil || res.Outcome != record.Written {
		t.Fatalf("save applying %v: %+v, %v", ids, res, err)
	}
}

// holdRecord takes key's lock as server-a under token tok.
func holdRecord(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	if res, err := record.Acquire(context.Background(), rdb, key, acquireArgs("server-a", "tok")); err != nil ||
		res.Outcome != record.Acquired {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
}

// A key names one message: sent again with another body it is refused,
// whether the first message waits, was applied or lies dead, and nothing
// is stored; with the same body it answers the first id and where that
// message is.
func TestSendIdempotencyConflict(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	first, err := record.Send(ctx, rdb, key, []byte("500 coins"), sendArgs("order-1"))
	if err != nil || first.Outcome != record.Sent {
		t.Fatalf("first send = %+v, %v", first, err)
	}
	holdRecord(t, rdb, key)
	for _, state := range []record.MessageState{record.MessageWaiting, record.MessageApplied} {
		if state == record.MessageApplied {
			applyAll(t, rdb, key)
		}
		before := snapshot(t, rdb, key)
		res, err := record.Send(ctx, rdb, key, []byte("5000 coins"), sendArgs("order-1"))
		if err != nil || res.Outcome != record.IdempotencyConflict || res.ID != first.ID {
			t.Fatalf("%s: a send reusing the key with another body = %+v, %v; want IdempotencyConflict naming %s",
				state, res, err, first.ID)
		}
		if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the refused send wrote:\nbefore %v\nafter  %v", state, before, after)
		}
		dup, err := record.Send(ctx, rdb, key, []byte("500 coins"), sendArgs("order-1"))
		if err != nil || dup.Outcome != record.Duplicate || dup.ID != first.ID || dup.State != state {
			t.Fatalf("%s: the same send again = %+v, %v; want Duplicate of %s, %s", state, dup, err, first.ID, state)
		}
	}
	// A key stored before digests were kept (its message id alone) repeats
	// whatever the body: nothing to compare with.
	rdb.HSet(ctx, record.IdemKey(key), "order-old", first.ID)
	rdb.ZAdd(ctx, record.IdemAtKey(key), redis.Z{Score: float64(time.Now().UnixMilli()), Member: "order-old"})
	if res, err := record.Send(ctx, rdb, key, []byte("any body"), sendArgs("order-old")); err != nil ||
		res.Outcome != record.Duplicate || res.ID != first.ID {
		t.Fatalf("a send with a key stored without a digest = %+v, %v; want Duplicate of %s", res, err, first.ID)
	}
	// The same key to another profile is another message.
	other := record.Key(r.Namespace, "PlayerData", "user:2")
	if res, err := record.Send(ctx, rdb, other, []byte("5000 coins"), sendArgs("order-1")); err != nil || res.Outcome != record.Sent {
		t.Fatalf("the key sent to another profile = %+v, %v", res, err)
	}
}

// At MaxIdempotencyKeys keys a keyed send is refused, nothing stored, as
// long as every key is remembered (inside its window, or its message
// waiting): no key is forgotten early. Once keys pass their window they go,
// and keyed sends are stored again; a send without a key is never refused
// by the bound.
func TestSendIdempotencyKeysBoundRefuses(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	a := sendArgs("")
	a.IdempotencyKeys, a.IdempotencyWindow = 3, 300*time.Millisecond
	send := func(k string) record.SendResult {
		t.Helper()
		a.IdempotencyKey = k
		res, err := record.Send(ctx, rdb, key, []byte("gift "+k), a)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range 3 {
		if res := send(fmt.Sprint("order-", i)); res.Outcome != record.Sent {
			t.Fatalf("send %d = %+v", i, res)
		}
	}
	holdRecord(t, rdb, key)
	applyAll(t, rdb, key) // applied, but inside their window: remembered
	before := snapshot(t, rdb, key)
	if res := send("order-3"); res.Outcome != record.TooManyKeys || res.Count != 3 {
		t.Fatalf("a fourth key with 3 remembered = %+v, want TooManyKeys (3)", res)
	}
	if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
		t.Fatalf("the refused send wrote:\nbefore %v\nafter  %v", before, after)
	}
	for i := range 3 {
		if res := send(fmt.Sprint("order-", i)); res.Outcome != record.Duplicate {
			t.Fatalf("a retry of order-%d at the bound = %+v, want Duplicate", i, res)
		}
	}
	if res, err := record.Send(ctx, rdb, key, []byte("no key"), sendArgs("")); err != nil || res.Outcome != record.Sent {
		t.Fatalf("a send without a key at the bound = %+v, %v", res, err)
	}
	time.Sleep(400 * time.Millisecond) // Redis time past the keys' window
	if res := send("order-3"); res.Outcome != record.Sent {
		t.Fatalf("a new key once the others passed their window = %+v, want Sent", res)
	}
	if n := rdb.HLen(ctx, record.IdemKey(key)).Val(); n != 1 {
		t.Errorf("%d keys remembered, want 1: the three past their window are forgotten", n)
	}
}

// Past its window a key is forgotten by time alone: a retry then is stored
// again whether or not other keyed sends came in between; a key whose
// message still waits is remembered however old.
func TestSendIdempotencyKeyForgottenByTimeAlone(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	a := sendArgs("")
	a.IdempotencyWindow = 200 * time.Millisecond
	for _, between := range []bool{false, true} {
		key := record.Key(r.Namespace, "PlayerData", fmt.Sprint("user-", between))
		a.IdempotencyKey = "order-1"
		first, _ := record.Send(ctx, rdb, key, []byte("gift"), a)
		a.IdempotencyKey = "order-waits"
		waits, _ := record.Send(ctx, rdb, key, []byte("gift"), a)
		holdRecord(t, rdb, key)
		if res, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok", Data: []byte("d"),
			Applied: []string{first.ID}}); err != nil || res.Outcome != record.Written {
			t.Fatalf("save: %+v, %v", res, err)
		}
		time.Sleep(300 * time.Millisecond)
		if between {
			a.IdempotencyKey = "unrelated"
			record.Send(ctx, rdb, key, []byte("other"), a)
		}
		a.IdempotencyKey = "order-1"
		if res, _ := record.Send(ctx, rdb, key, []byte("gift"), a); res.Outcome != record.Sent || res.ID == first.ID {
			t.Errorf("unrelated send between: %v: a retry past the window of an applied message = %+v, want Sent anew",
				between, res)
		}
		a.IdempotencyKey = "order-waits"
		if res, _ := record.Send(ctx, rdb, key, []byte("gift"), a); res.Outcome != record.Duplicate || res.ID != waits.ID ||
			res.State != record.MessageWaiting {
			t.Errorf("unrelated send between: %v: a retry past the window of a waiting message = %+v, want Duplicate of %s",
				between, res, waits.ID)
		}
	}
}

// A dead-lettered message's key is remembered however long it lies there,
// counts toward the bound (the bound refuses rather than forget it), and
// after a replay names the message under its new id, remembered while it
// waits; once applied and past its window it is forgotten.
func TestDeadLetteredKeysAreRemembered(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	a := sendArgs("")
	a.IdempotencyKeys, a.IdempotencyWindow = 2, 200*time.Millisecond
	var ids []string
	for i := range 2 {
		a.IdempotencyKey = fmt.Sprint("order-", i)
		res, _ := record.Send(ctx, rdb, key, []byte(a.IdempotencyKey), a)
		ids = append(ids, res.ID)
	}
	holdRecord(t, rdb, key)
	res, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok", Job: "server-a", MaxAttempts: 1,
		Refused: []record.Refusal{{ID: ids[0], Err: "no"}, {ID: ids[1], Err: "no"}}})
	if err != nil || res.DeadLettered != 2 || !reflect.DeepEqual(res.Tries, []record.Tries{{ID: ids[0], N: 1}, {ID: ids[1], N: 1}}) {
		t.Fatalf("the refusing save = %+v, %v; want both dead-lettered, each refused once", res, err)
	}
	time.Sleep(300 * time.Millisecond) // past the window
	a.IdempotencyKey = "order-2"
	if res, _ := record.Send(ctx, rdb, key, []byte("order-2"), a); res.Outcome != record.TooManyKeys {
		t.Fatalf("a new key while two dead letters hold theirs = %+v, want TooManyKeys", res)
	}
	for i := range 2 {
		a.IdempotencyKey = fmt.Sprint("order-", i)
		if res, _ := record.Send(ctx, rdb, key, []byte(a.IdempotencyKey), a); res.Outcome != record.Duplicate ||
			res.State != record.MessageDead || res.ID != ids[i] {
			t.Fatalf("a retry of dead-lettered order-%d = %+v, want Duplicate (dead) of %s", i, res, ids[i])
		}
	}
	rep, err := record.Replay(ctx, rdb, key, nil)
	if err != nil || rep.Moved != 2 {
		t.Fatalf("replay = %+v, %v", rep, err)
	}
	msgs, _, _ := record.ReadInbox(ctx, rdb, key, "", 10)
	if len(msgs) != 2 {
		t.Fatalf("inbox after the replay: %v", msgs)
	}
	a.IdempotencyKey = "order-0"
	if res, _ := record.Send(ctx, rdb, key, []byte("order-0"), a); res.Outcome != record.Duplicate || res.ID != msgs[0].ID ||
		res.State != record.MessageWaiting {
		t.Fatalf("a retry after the replay = %+v, want Duplicate of the replayed message %s, waiting", res, msgs[0].ID)
	}
	applyAll(t, rdb, key)
	a.IdempotencyKey = "order-2"
	if res, _ := record.Send(ctx, rdb, key, []byte("order-2"), a); res.Outcome != record.Sent {
		t.Fatalf("a new key once the replayed messages were applied past their window = %+v, want Sent", res)
	}
}

// A replay that names a message waiting in the inbox leaves it there and
// drops its refusal count, so the next refusals count from one again; the
// counter grows so that the holder pulls at its next save.
func TestReplayOfAWaitingMessage(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	sent, _ := record.Send(ctx, rdb, key, []byte("gift"), sendArgs(""))
	holdRecord(t, rdb, key)
	refuse := record.SaveArgs{Mode: record.ModeSave, Token: "tok", Job: "server-a", MaxAttempts: 3,
		Refused: []record.Refusal{{ID: sent.ID, Err: "not yet"}}}
	for range 2 {
		record.Save(ctx, rdb, key, refuse)
	}
	rep, err := record.Replay(ctx, rdb, key, []string{sent.ID, "1-1"})
	if err != nil || rep.Moved != 0 || rep.Retried != 1 || rep.Holder.Job != "server-a" {
		t.Fatalf("replay of a waiting message = %+v, %v; want 1 retried", rep, err)
	}
	if n := rdb.XLen(ctx, record.InboxKey(key)).Val(); n != 1 {
		t.Errorf("inbox %d, want the message still there", n)
	}
	if _, seq, _ := record.ReadInbox(ctx, rdb, key, "", 10); seq != 2 {
		t.Errorf("inbox counter %d, want 2: a replay of a waiting message has the holder pull", seq)
	}
	res, err := record.Save(ctx, rdb, key, refuse)
	if err != nil || res.DeadLettered != 0 || len(res.Tries) != 1 || res.Tries[0].N != 1 {
		t.Fatalf("a refusal after the replay = %+v, %v; want it counted as the first", res, err)
	}
	if rep, _ := record.Replay(ctx, rdb, key, nil); rep.Retried != 1 {
		t.Errorf("replay of everything = %+v, want the refused waiting message retried", rep)
	}
}
