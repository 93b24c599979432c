package datadriver_test

import (
	"slices"
	"testing"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// TestAResidentProfileCarriesNoExtras: a profile that is joined, changed and
// saved, and uses no trade, cleanup, user id, metadata or message, carries
// none of their state (about 240 bytes of every resident profile); the
// first user id makes it, and what it holds is saved and loaded again.
func TestAResidentProfileCarriesNoExtras(t *testing.T) {
	r := testsupport.StartRedis(t)
	d := players(t, newServer(t, r, "server-a"))
	ctx := ctxT(t)

	p, err := d.Join(ctx, "user:plain")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Update(func(v *player) { v.Coins += 5 }); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if game, exec := datadriver.HasExtras(p); game || exec {
		t.Fatalf("a profile that used nothing rare carries extras (game side %t, executor side %t)", game, exec)
	}
	if s := p.LastSaved(); s.Key != "user:plain" || s.Updates != 1 || s.At.IsZero() || s.Ver == 0 {
		t.Fatalf("LastSaved = %+v; want the key, 1 update, a time and a version", s)
	}
	if ids := p.UserIDs(); len(ids) != 0 {
		t.Fatalf("UserIDs = %v; want none", ids)
	}
	if m := p.Meta(); m == nil || len(m) != 0 {
		t.Fatalf("Meta = %#v; want an empty map", m)
	}

	p.SetUserIDs("1001", "1002")
	p.SetMeta("region", "eu")
	if game, _ := datadriver.HasExtras(p); !game {
		t.Fatal("SetUserIDs did not make the extras")
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := d.Join(ctx, "user:plain")
	if err != nil {
		t.Fatal(err)
	}
	if ids := again.UserIDs(); !slices.Equal(ids, []string{"1001", "1002"}) {
		t.Fatalf("UserIDs after a new join = %v; want [1001 1002]", ids)
	}
	if m := again.Meta(); m["region"] != "eu" {
		t.Fatalf("Meta after a new join = %v; want region=eu", m)
	}
	if _, exec := datadriver.HasExtras(again); !exec {
		t.Fatal("the user ids as stored were not kept for the record's checksum")
	}
	if err := again.Update(func(v *player) { v.Coins++ }); err != nil {
		t.Fatal(err)
	}
	if err := again.Save(ctx); err != nil {
		t.Fatal(err)
	}
	// The record's checksum covers the user ids and metadata as stored: a
	// save that forgot them leaves a record the next load finds corrupt.
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := d.Join(ctx, "user:plain")
	if err != nil {
		t.Fatalf("the join after a save of a profile with user ids: %v", err)
	}
	defer third.Release(ctx)
	if ids := third.UserIDs(); !slices.Equal(ids, []string{"1001", "1002"}) || coins(third) != 106 {
		t.Fatalf("after a save: UserIDs %v, coins %d; want [1001 1002], 106", ids, coins(third))
	}
}

// TestTheProfileStaysInItsSizeClass: a Profile of a 40-byte value takes at
// most 288 bytes (issue 35: a resident profile's heap; 640 before its rarely
// used state moved out, 416 before the inbox counters did and the Redis
// clock became one number, 384 before the epoch moved into the life view,
// the stopped and kicked bits into one word beside the lease generation,
// and the writer's rare flags and refresh retry into its extras, 352
// before the tick and the age fence became one deadline, 320 before that
// deadline's entry lost its pointer back to the profile, the age deadline
// and the last write's send time became one number, and the mailbox's
// queue a ring held by its last request). A field added to it must be paid
// for.
func TestTheProfileStaysInItsSizeClass(t *testing.T) {
	if n := datadriver.ProfileSize[[40]byte](); n > 288 {
		t.Fatalf("a Profile of a 40-byte value takes %d bytes; want at most 288", n)
	}
	// Its life view, replaced whole at each transition, in the 48-byte
	// class (64 before the earlier tokens of an adoption moved behind a
	// pointer; the epoch fills its last 8 bytes).
	if n := datadriver.LifeViewSize(); n > 48 {
		t.Fatalf("a life view takes %d bytes; want at most 48", n)
	}
}
