package datadriver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradescript"
	"github.com/ckernel/playerdata/testsupport"
)

// What another tool writes into a record never wedges its key: a join
// refuses it at once (no wait, nothing written, the epoch where it was),
// naming the field and the command that repairs it.
func TestJoinRefusesABrokenRecordAtOnce(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	d := players(t, s, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	ctx := ctxT(t)
	c := r.Client(t)
	ahead := strconv.FormatInt(time.Now().Add(100*time.Hour).UnixMilli(), 10)
	for i, tc := range []struct {
		name   string
		fields []any
		other  func(rk string)
		field  string
	}{
		{"ver not an integer", []any{"ver", "1.5", "epoch", "4"}, nil, "ver"},
		{"epoch a string", []any{"ver", "1", "epoch", "four"}, nil, "epoch"},
		// A profile keeps its schema numbers in 32 bits: one past them
		// would be written back cut (a checksum that no longer matches).
		{"schema past 32 bits", []any{"ver", "1", "epoch", "4", "schema", "4294967297"}, nil, "schema"},
		{"another tool's lock stamped ahead of the clock", []any{"ver", "1", "epoch", "4", "lock.token", "t",
			"lock.job", "admin-tool", "lock.at", ahead}, nil, "lock.at"},
		{"lock.at not a number", []any{"ver", "1", "epoch", "4", "lock.token", "t", "lock.job", "admin-tool",
			"lock.at", "soon"}, nil, "lock.at"},
		{"the inbox of the wrong type", []any{"ver", "1", "epoch", "4", "inbox.seq", "3"},
			func(rk string) { c.Set(ctx, record.InboxKey(rk), "oops", 0) }, "inbox"},
		{"the history of the wrong type", []any{"ver", "1", "epoch", "4", "hist.at", "1"},
			func(rk string) { c.LPush(ctx, record.HistoryKey(rk), "oops") }, "history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "user:" + strconv.Itoa(i)
			rk := record.Key(r.Namespace, "PlayerData", key)
			c.HSet(ctx, rk, append([]any{"fmt", record.Format}, tc.fields...)...)
			if tc.other != nil {
				tc.other(rk)
			}
			before := recordFields(t, r, "PlayerData", key)
			start := time.Now()
			_, err := d.Join(ctx, key)
			var ce *datadriver.CorruptRecordError
			hint := "playerdata repair" // repair leaves the schema to the build that wrote it
			if tc.field == "schema" {
				hint = "set it by hand after checking"
			}
			if !errors.As(err, &ce) || ce.Path != tc.field || !strings.Contains(err.Error(), hint) {
				t.Fatalf("Join = %v, want a *CorruptRecordError naming %s and %q", err, tc.field, hint)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the join took %v: a broken record is refused at once, not waited on", took)
			}
			if after := recordFields(t, r, "PlayerData", key); len(after) != len(before) || after["epoch"] != before["epoch"] ||
				after["lock.token"] != before["lock.token"] {
				t.Errorf("the refused join wrote: before %v, after %v", before, after)
			}
		})
	}
}

// A field broken while a session holds the record ends the session without
// writing over it (Kick ReasonRecordCorrupt, Err matching ErrLockLost and
// ErrCorruptRecord), and its lock is freed, so the key is not wedged: the
// next join is refused at once, naming the field.
func TestABrokenFieldEndsTheSession(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	var mu sync.Mutex
	var reasons []datadriver.KickReason
	d := players(t, s, func(c *datadriver.Config[player]) {
		c.Kick = func(_ string, k datadriver.KickReason) { mu.Lock(); reasons = append(reasons, k); mu.Unlock() }
	})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	r.Client(t).HSet(ctx, record.Key(r.Namespace, "PlayerData", "user:1"), "ver", "garbage")
	_ = p.Update(func(pl *player) { pl.Coins = 7 })
	err = p.Save(ctx)
	if !errors.Is(err, datadriver.ErrCorruptRecord) || !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("Save = %v, want ErrCorruptRecord and ErrLockLost", err)
	}
	<-p.Done()
	eventually(t, 5*time.Second, "the lock freed", func() bool {
		return recordFields(t, r, "PlayerData", "user:1")["lock.token"] == ""
	})
	if v := recordFields(t, r, "PlayerData", "user:1")["ver"]; v != "garbage" {
		t.Errorf("ver %q: the broken field was written over", v)
	}
	eventually(t, 5*time.Second, "the seller's Kick", func() bool { mu.Lock(); defer mu.Unlock(); return len(reasons) > 0 })
	mu.Lock()
	if len(reasons) != 1 || reasons[0] != datadriver.ReasonRecordCorrupt {
		t.Errorf("Kicks %v, want one ReasonRecordCorrupt", reasons)
	}
	mu.Unlock()
	if _, err := d.Join(ctx, "user:1"); !errors.Is(err, datadriver.ErrCorruptRecord) {
		t.Errorf("the next Join = %v, want ErrCorruptRecord at once", err)
	}
}

// A live session's record deleted by another tool: the holder's next
// write finds it gone and ends the session with ReasonRecordGone (not
// joined_elsewhere), logged as a loss with the key; it never recreates the
// record. A join of the key meanwhile is refused while its history remains
// (it does not hand out Defaults in place of a record that existed).
func TestARecordDeletedWhileHeld(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	var mu sync.Mutex
	var reasons []datadriver.KickReason
	d := players(t, s, func(c *datadriver.Config[player]) {
		c.Kick = func(_ string, k datadriver.KickReason) { mu.Lock(); reasons = append(reasons, k); mu.Unlock() }
	})
	b := newServer(t, r, "server-b", fast)
	db := players(t, b)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	for coins := 1; coins <= 2; coins++ { // the second data write keeps the first as a version
		_ = p.Update(func(pl *player) { pl.Coins = coins })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rk := record.Key(r.Namespace, "PlayerData", "user:1")
	if err := r.Client(t).Del(ctx, rk).Err(); err != nil { // a stray DEL of the record alone
		t.Fatal(err)
	}
	if _, err := db.Load(ctx, "user:1", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrCorruptRecord) {
		t.Fatalf("B's load of a record deleted while its history remains = %v, want ErrCorruptRecord", err)
	}
	_ = p.Update(func(pl *player) { pl.Coins = 3 })
	if err := p.Save(ctx); !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("the holder's save of a deleted record = %v, want ErrLockLost", err)
	}
	if n, _ := r.Client(t).Exists(context.Background(), rk).Result(); n != 0 {
		t.Error("the holder's save recreated the deleted record")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) != 1 || reasons[0] != datadriver.ReasonRecordGone {
		t.Errorf("Kicks %v, want one ReasonRecordGone", reasons)
	}
	if !strings.Contains(s.logs.String(), "session ended without saving") || !strings.Contains(s.logs.String(), "key=user:1") {
		t.Errorf("the loss was not logged with its key:\n%s", s.logs.String())
	}
}

// A trade whose settle finds a participant's record broken by another tool
// (between the trade's commit and its settle) ends that session as the
// broken record's, not as a lock taken elsewhere, and gives its lock back:
// once the record is repaired, a join of it on the same server loads at
// once, with the trade settled from the journal.
func TestATradeSettleOnABrokenRecord(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	var mu sync.Mutex
	var reasons []datadriver.KickReason
	kick := func(_ string, k datadriver.KickReason) { mu.Lock(); reasons = append(reasons, k); mu.Unlock() }
	d := players(t, s, func(c *datadriver.Config[player]) { c.Kick, c.LockWait = kick, 3*time.Second })
	ctx := ctxT(t)
	seller, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	buyer, err := d.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	_ = seller.Update(func(pl *player) { pl.Coins = 10 })
	_ = buyer.Update(func(pl *player) { pl.Coins = 10 })
	for _, p := range []*datadriver.Profile[player]{seller, buyer} {
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rk := record.Key(r.Namespace, "PlayerData", "user:1")
	plain := r.Client(t)
	var broke sync.Once
	s.faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd, tradescript.NameMove) { // the commit: prepared, settled next
			broke.Do(func() { plain.HSet(ctx, rk, "ver", "not-a-number") })
		}
		return nil
	})
	err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
		datadriver.TradeData(tx, seller).Coins -= 4
		datadriver.TradeData(tx, buyer).Coins += 4
		return nil
	}, seller, buyer)
	t.Logf("Trade answered %v", err)
	select {
	case <-seller.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the seller's session outlived a settle its broken record refused")
	}
	if !errors.Is(seller.Err(), datadriver.ErrCorruptRecord) {
		t.Errorf("the seller's session ended with %v, want ErrCorruptRecord", seller.Err())
	}
	eventually(t, 5*time.Second, "the seller's Kick", func() bool { mu.Lock(); defer mu.Unlock(); return len(reasons) > 0 })
	mu.Lock()
	if len(reasons) != 1 || reasons[0] != datadriver.ReasonRecordCorrupt {
		t.Errorf("Kicks %v, want one ReasonRecordCorrupt", reasons)
	}
	mu.Unlock()
	eventually(t, 5*time.Second, "the broken record's lock given back", func() bool {
		return plain.HGet(ctx, rk, record.FieldLockToken).Val() == ""
	})
	if _, err := record.Repair(ctx, plain, rk, record.RepairArgs{Skew: time.Minute}); err != nil {
		t.Fatal(err)
	}
	again, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatalf("a join on the same server after the repair: %v", err)
	}
	if coins(again) != 6 {
		t.Errorf("the seller has %d coins after the repair, want 6: the committed trade settled from the journal", coins(again))
	}
}
