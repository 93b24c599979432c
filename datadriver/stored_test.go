package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// failDataReads makes every read of a record's data for a kept version
// fail, as a read that times out would: an HGET of the data field, and
// the history's listing that reads it (a script whose KEYS[2] is the
// history hash and that writes nothing: versions.lua).
func failDataReads(s *server) {
	s.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "hget") && len(cmd.Args()) == 3 && cmd.Args()[2] == "data" {
			return errors.New("injected: the read of the data timed out")
		}
		if k, ok := testsupport.ScriptKey(cmd, 2); ok && strings.HasSuffix(k, ":hist") && isScript(cmd, "versions") {
			return errors.New("injected: the history's listing timed out")
		}
		return nil
	})
}

// A resident profile keeps no copy of its stored data: the version a save
// keeps is the data read from the record when the version is due. When
// that read fails the save lands all the same, without the version, and
// the next save keeps it: a version is late, never wrong, never lost by a
// save.
func TestAVersionIsReadFromTheRecordWhenItIsDue(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	const every = 10 * time.Millisecond
	d := players(t, a, func(c *datadriver.Config[player]) { c.History, c.HistoryEvery = 5, every })
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:60")
	if err != nil {
		t.Fatal(err)
	}
	save := func(coins int) {
		t.Helper()
		_ = p.Update(func(d *player) { d.Coins = coins })
		if err := p.Save(ctx); err != nil {
			t.Fatalf("save of coins %d: %v", coins, err)
		}
		time.Sleep(every + 5*time.Millisecond) // a version is due at the next save
	}
	save(1)
	save(2) // keeps coins 1
	failDataReads(a)
	save(3) // would keep coins 2: the read fails, the save lands without it
	a.faults.Clear()
	save(4) // keeps coins 3
	if got := coins(p); got != 4 {
		t.Fatalf("coins = %d, want 4", got)
	}
	vs, err := d.Versions(ctx, "user:60")
	if err != nil {
		t.Fatal(err)
	}
	var kept []int
	for _, v := range vs[1:] {
		q, err := d.ReadVersion(ctx, "user:60", v.At)
		if err != nil {
			t.Fatalf("ReadVersion %d: %v", v.Ver, err)
		}
		kept = append(kept, q.Coins)
	}
	if len(kept) != 2 || kept[0] != 3 || kept[1] != 1 {
		t.Fatalf("kept versions hold coins %v, want [3 1] (the version of coins 2 was due while its read failed)", kept)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A restore must keep the data it replaces (so that it can be undone):
// when that data cannot be read, the restore is refused and the record is
// left as it was.
func TestARestoreWhoseReplacedDataCannotBeReadChangesNothing(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	const every = 10 * time.Millisecond
	d := players(t, a, func(c *datadriver.Config[player]) { c.History, c.HistoryEvery = 5, every })
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:61")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		_ = p.Update(func(d *player) { d.Coins = i })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(every + 5*time.Millisecond)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions(ctx, "user:61")
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions = %+v, %v; want the current and one kept", vs, err)
	}
	before := recordFields(t, r, "PlayerData", "user:61")
	failDataReads(a)
	if _, err := d.RestoreAt(ctx, "user:61", vs[1].At, datadriver.LoadOptions{}); err == nil {
		t.Fatal("RestoreAt succeeded though the data it replaces could not be kept")
	}
	a.faults.Clear()
	after := recordFields(t, r, "PlayerData", "user:61")
	if after["ver"] != before["ver"] || after["data"] != before["data"] || after["lock.token"] != "" {
		t.Fatalf("a refused restore changed the record: ver %s→%s, lock %q", before["ver"], after["ver"], after["lock.token"])
	}
	q, err := d.RestoreAt(ctx, "user:61", vs[1].At, datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt once the data reads again: %v", err)
	}
	if coins(q) != 1 {
		t.Fatalf("restored coins = %d, want 1", coins(q))
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
