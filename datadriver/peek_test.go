package datadriver_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/testsupport"
)

// TestPeekNewPlayer: a key never saved peeks as Defaults, and the peek
// writes nothing (no record appears).
func TestPeekNewPlayer(t *testing.T) {
	pr := newPair(t)
	d := players(t, pr.a)
	got, err := d.Peek(ctxT(t), "user:new")
	if err != nil {
		t.Fatal(err)
	}
	if got.Coins != 100 || got.Items["starter-sword"] != 1 {
		t.Fatalf("Peek of a new player = %+v, want Defaults", got)
	}
	got.Items["starter-sword"] = 7 // the answer is a copy: Defaults stay as they are
	again, _ := d.Peek(ctxT(t), "user:new")
	if again.Items["starter-sword"] != 1 {
		t.Fatalf("a change to a peeked value reached Defaults: %+v", again)
	}
	if f := recordFields(t, pr.r, "PlayerData", "user:new"); len(f) != 0 {
		t.Fatalf("Peek wrote a record: %v", f)
	}
}

// TestPeekHeldByAnotherServer: while server A holds the key, B's Peek
// answers A's last landed save (not A's unsaved change) and leaves the lock
// as it was.
func TestPeekHeldByAnotherServer(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	a, b := players(t, pr.a), players(t, pr.b)
	p, err := a.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 250 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 999 }) // not saved
	before := recordFields(t, pr.r, "PlayerData", "user:1")
	got, err := b.Peek(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Coins != 250 {
		t.Fatalf("Peek while held = %d coins, want the last saved 250", got.Coins)
	}
	if after := recordFields(t, pr.r, "PlayerData", "user:1"); !maps.Equal(before, after) {
		t.Fatalf("Peek changed the record:\nbefore %v\nafter  %v", before, after)
	}
	select {
	case <-p.Done():
		t.Fatalf("the holder's session ended: %v", p.Err())
	default:
	}
	if err := p.Save(ctx); err != nil {
		t.Fatalf("the holder cannot save after a peek: %v", err)
	}
	if got, _ := b.Peek(ctx, "user:1"); got.Coins != 999 {
		t.Fatalf("Peek after the holder's next save = %d coins, want 999", got.Coins)
	}
}

// TestPeekMigrates: a record written at schema v1 peeks through a v2
// driver with the migration applied, and the stored bytes stay v1's.
func TestPeekMigrates(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	v1 := newDriver(t, pr.a, datadriver.Config[heroV1]{})
	p, err := v1.Join(ctx, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *heroV1) { d.Gold = 40; d.Items = map[string]gearV1{"axe": {Count: 1}} })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := recordFields(t, pr.r, "PlayerData", "hero:1")
	v2 := newDriver(t, pr.b, datadriver.Config[heroV2]{Migrations: []datadriver.Migration{addDurability}})
	got, err := v2.Peek(ctx, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Gold != 40 || got.Items["axe"] != (gearV2{Count: 1, Durability: 100}) {
		t.Fatalf("Peek through the migration = %+v, want Gold 40 and the axe with Durability 100", got)
	}
	if after := recordFields(t, pr.r, "PlayerData", "hero:1"); !maps.Equal(before, after) {
		t.Fatalf("Peek wrote the migrated data back:\nbefore %v\nafter  %v", before, after)
	}
}

// TestPeekBrokenRecord: a record a join refuses is refused by Peek with the
// same kind of error, never a panic, and left as it was.
func TestPeekBrokenRecord(t *testing.T) {
	cases := []struct {
		name  string
		field string
		value string
		want  error
		path  string
	}{
		{"data not msgpack", "data", "\xc1\xc1garbage", datadriver.ErrCorruptRecord, "data"},
		{"ver not an integer", "ver", "seven", datadriver.ErrCorruptRecord, "ver"},
		{"epoch not an integer", "epoch", "1e3", datadriver.ErrCorruptRecord, "epoch"},
		{"newer format", "fmt", "99", datadriver.ErrSchemaTooNew, ""},
		{"newer min-reader", "schema.min", "5", datadriver.ErrSchemaTooNew, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := newPair(t)
			ctx := ctxT(t)
			d := players(t, pr.a)
			p, err := d.Join(ctx, "user:1")
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Update(func(d *player) { d.Coins = 5 })
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			rk := record.Key(pr.r.Namespace, "PlayerData", "user:1")
			if err := pr.r.Client(t).HSet(ctx, rk, tc.field, tc.value).Err(); err != nil {
				t.Fatal(err)
			}
			before := recordFields(t, pr.r, "PlayerData", "user:1")
			_, perr := d.Peek(ctx, "user:1")
			if after := recordFields(t, pr.r, "PlayerData", "user:1"); !maps.Equal(before, after) {
				t.Fatalf("Peek changed a broken record:\nbefore %v\nafter  %v", before, after)
			}
			_, jerr := players(t, pr.b).Join(ctx, "user:1")
			if !errors.Is(perr, tc.want) || !errors.Is(jerr, tc.want) {
				t.Fatalf("Peek: %v; Join: %v; want both %v", perr, jerr, tc.want)
			}
			var ce *datadriver.CorruptRecordError
			if tc.path != "" && (!errors.As(perr, &ce) || ce.Path != tc.path) {
				t.Fatalf("Peek: %v: want a *CorruptRecordError naming %q", perr, tc.path)
			}
		})
	}
}

// TestPeekRecordKeyNotAHash: a record key of another type is refused as
// corrupt, naming the record.
func TestPeekRecordKeyNotAHash(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	d := players(t, pr.a)
	rk := record.Key(pr.r.Namespace, "PlayerData", "user:1")
	if err := pr.r.Client(t).Set(ctx, rk, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := d.Peek(ctx, "user:1")
	var ce *datadriver.CorruptRecordError
	if !errors.As(err, &ce) || ce.Path != "(record)" {
		t.Fatalf("Peek of a string key: %v; want a *CorruptRecordError naming (record)", err)
	}
	if _, err := d.Peek(ctx, ""); !errors.Is(err, datadriver.ErrInvalidKey) {
		t.Fatalf("Peek of an empty key: %v; want ErrInvalidKey", err)
	}
}

// TestPeekCommittedTrade: a record marked with a trade whose journal says
// COMMITTED, and whose image was not written into it yet (a settle that did
// not land), peeks as the trade left it; one whose trade is only PREPARED
// peeks as stored. Nothing is written.
func TestPeekCommittedTrade(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	rdb := r.Client(t)
	j := tradejournal.New(rdb, r.Namespace, time.Hour)
	for _, tc := range []struct {
		id     string
		commit bool
		want   int
	}{{"t-prepared", false, 100}, {"t-committed", true, 50}} {
		key := "buyer-" + tc.id
		p, err := d.Join(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *player) { d.Coins = 100 })
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		img, err := msgpackMarshal(player{Coins: 50, Items: map[string]int{"sword": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Begin(ctx, tc.id, "server-a",
			[]tradejournal.Participant{{Driver: "PlayerData", Key: key, Token: "t", Ver: 1, Image: img}}); err != nil {
			t.Fatal(err)
		}
		if tc.commit {
			if err := j.Commit(ctx, tc.id); err != nil {
				t.Fatal(err)
			}
		}
		if err := rdb.HSet(ctx, record.Key(r.Namespace, "PlayerData", key), "trade", tc.id).Err(); err != nil {
			t.Fatal(err)
		}
		before := recordFields(t, r, "PlayerData", key)
		got, err := d.Peek(ctx, key)
		if err != nil || got.Coins != tc.want {
			t.Fatalf("Peek of a record marked with trade %s = %+v, %v; want %d coins", tc.id, got, err, tc.want)
		}
		if after := recordFields(t, r, "PlayerData", key); !maps.Equal(before, after) {
			t.Fatalf("Peek changed the record:\nbefore %v\nafter  %v", before, after)
		}
	}
}
