package record_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The flip (move.lua) writes the data, hands the lock to the target's
// token with epoch + 1 and records the move, in one write fenced by the
// source's token and the move's expiry; every refusal writes nothing.
func TestMoveFlipWritesOnlyUnderTheSourcesTokenBeforeTheExpiry(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:flip")
	rdb.HSet(ctx, key, "ver", "3", "epoch", "2", "lock.token", "src", "lock.job", "server-a", "data", "\x80",
		"at", "1000", "move.why", "refused: busy")
	sent, err := record.Send(ctx, rdb, key, []byte("gift"), record.SendArgs{MaxInbox: 10})
	if err != nil || sent.Outcome != record.Sent {
		t.Fatalf("send = %+v, %v", sent, err)
	}
	args := record.MoveArgs{Token: "src", Expiry: time.Now().Add(time.Minute), To: "server-b", ToToken: "dst",
		ToPresence: true, ID: "m1", From: "server-a", Data: []byte("\x81\xa1C\x05"), Schema: 2, SchemaMin: 1,
		Sum: "0badf00d", Applied: []string{sent.ID}}

	refused := func(name string, a record.MoveArgs, want record.MoveOutcome) record.MoveResult {
		t.Helper()
		before := snapshot(t, rdb, key)
		res, err := record.Move(ctx, rdb, key, a)
		if err != nil || res.Outcome != want {
			t.Fatalf("%s: flip = %+v, %v; want outcome %d", name, res, err, want)
		}
		if after := snapshot(t, rdb, key); !maps.Equal(after, before) {
			t.Fatalf("%s: a refused flip changed the record:\n got %v\nwant %v", name, after, before)
		}
		return res
	}
	other := args
	other.Token = "someone-else"
	if res := refused("another's token", other, record.MoveLost); res.Holder.Job != "server-a" || res.Holder.Token != "src" {
		t.Fatalf("lost names %+v, want server-a's lock", res.Holder)
	}
	late := args
	late.Expiry = time.Now().Add(-time.Second)
	refused("past the expiry", late, record.MoveExpired)
	rdb.HSet(ctx, key, "trade", "t-9")
	if res := refused("a pending trade", args, record.MoveTradeHeld); res.Trade != "t-9" {
		t.Fatalf("trade = %q", res.Trade)
	}
	rdb.HSet(ctx, key, "trade", "", "ver", "3x")
	if res := refused("a broken ver", args, record.MoveCorrupt); res.Corrupt.Field != "ver" {
		t.Fatalf("corrupt = %+v, want ver", res.Corrupt)
	}
	rdb.HSet(ctx, key, "ver", "3", "epoch", "1234567890123456")
	if res := refused("an epoch too long", args, record.MoveCorrupt); res.Corrupt.Field != "epoch" {
		t.Fatalf("corrupt = %+v, want epoch", res.Corrupt)
	}
	rdb.HSet(ctx, key, "epoch", "2")
	if res, err := record.Move(ctx, rdb, key+"-none", args); err != nil || res.Outcome != record.MoveGone {
		t.Fatalf("flip of no record = %+v, %v", res, err)
	}

	res, err := record.Move(ctx, rdb, key, args)
	if err != nil || res.Outcome != record.Moved || res.Ver != 4 || res.Epoch != 3 || res.InboxSeq != 1 ||
		!res.At.Equal(res.LockAt) || time.Since(res.LockAt) > time.Minute {
		t.Fatalf("flip = %+v, %v; want moved to ver 4, epoch 3", res, err)
	}
	f := rdb.HGetAll(ctx, key).Val()
	now := strconv.FormatInt(res.LockAt.UnixMilli(), 10)
	want := map[string]string{"lock.token": "dst", "lock.job": "server-b", "lock.presence": "1", "lock.at": now,
		"epoch": "3", "lock.since": "3," + now, "data": "\x81\xa1C\x05", "ver": "4", "at": now, "schema": "2",
		"schema.min": "1", "sum": "4," + now + ",0badf00d", "fmt": "2", record.FieldMoveID: "m1",
		record.FieldMoveState: record.MoveCommitted, record.FieldMoveFrom: "server-a", record.FieldMoveTo: "server-b",
		record.FieldMoveAt: now, record.FieldMoveWhy: ""}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("after the flip %s = %q, want %q", k, f[k], v)
		}
	}
	if n := rdb.XLen(ctx, record.InboxKey(key)).Val(); n != 0 {
		t.Errorf("the applied message is still in the inbox (%d)", n)
	}
	// The source's token is spent: a second flip of the same move is lost.
	if again, err := record.Move(ctx, rdb, key, args); err != nil || again.Outcome != record.MoveLost ||
		again.Holder.Token != "dst" {
		t.Fatalf("second flip = %+v, %v; want lost to dst", again, err)
	}
}

// A flip without new data keeps the data, its version and time; new user
// ids and metadata are written with the checksum over the kept data.
func TestMoveFlipWithoutDataKeepsTheData(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:meta")
	rdb.HSet(ctx, key, "ver", "7", "epoch", "5", "lock.token", "src", "lock.job", "server-a", "data", "\x80",
		"at", "1234", "sum", "7,1234,old")
	args := record.MoveArgs{Token: "src", Expiry: time.Now().Add(time.Minute), To: "server-b", ToToken: "dst", ID: "m2",
		From: "server-a", Sum: "newsum", Meta: &record.Meta{UserIDs: []byte("u1"), Meta: []byte("m1")}}
	res, err := record.Move(ctx, rdb, key, args)
	if err != nil || res.Outcome != record.Moved || res.Ver != 7 || res.Epoch != 6 || res.At.UnixMilli() != 1234 {
		t.Fatalf("flip = %+v, %v; want moved, ver 7, epoch 6, at 1234", res, err)
	}
	f := rdb.HGetAll(ctx, key).Val()
	if f["data"] != "\x80" || f["ver"] != "7" || f["at"] != "1234" || f["sum"] != "7,1234,newsum" || f["uids"] != "u1" ||
		f["meta"] != "m1" || f["lock.presence"] != "0" || !strings.HasPrefix(f["lock.since"], "6,") {
		t.Fatalf("record after a flip without data: %v", f)
	}
}
