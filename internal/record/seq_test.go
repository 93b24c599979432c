package record_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// A profile numbers its writes (SaveArgs.Seq): save.lua refuses one below
// the highest that landed under the lock (Superseded, nothing written), so a
// write the network delivers after a newer one never puts older data over
// it. A write without a number is neither checked nor counted; the same
// number again (a client's retry of a write that landed) lands. The count
// is kept with the epoch it landed in ("<epoch>,<n>"), so an acquisition,
// which steps the epoch without touching the count (as every build's does),
// starts it afresh: a rolling deploy's older build never leaves a count that
// a newer build's session would be held to.
func TestSaveRefusesAWriteOlderThanOneThatLanded(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "seq")
	if a, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a")); err != nil || a.Outcome != record.Acquired {
		t.Fatalf("acquire = %+v, %v", a, err)
	}
	save := func(seq int64, data string) record.SaveResult {
		t.Helper()
		s, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Seq: seq, Token: "tok-a",
			Data: []byte(data), Sum: "0badcafe"})
		if err != nil {
			t.Fatalf("save %d: %v", seq, err)
		}
		return s
	}
	s2 := save(2, "two")
	if s2.Outcome != record.Written {
		t.Fatalf("save 2 = %+v, want written", s2)
	}
	before := snapshot(t, rdb, key)
	if got, want := rdb.HGet(ctx, key, "lock.seq").Val(), fmt.Sprintf("%d,2", s2.Epoch); got != want {
		t.Fatalf("lock.seq = %q, want %q (the epoch and the number)", got, want)
	}
	if s := save(1, "one"); s.Outcome != record.Superseded || s.LandedSeq != 2 {
		t.Fatalf("save 1 after save 2 = %+v, want superseded by 2", s)
	}
	if after := snapshot(t, rdb, key); !maps.Equal(after, before) {
		t.Fatalf("the late save changed the record:\n%v\nwas\n%v", after, before)
	}
	if s := save(2, "two"); s.Outcome != record.Written {
		t.Fatalf("save 2 again = %+v, want written (a retry of the write that landed)", s)
	}
	if s := save(0, "unnumbered"); s.Outcome != record.Written {
		t.Fatalf("a save without a number = %+v, want written", s)
	}
	if s := save(1, "one"); s.Outcome != record.Superseded || s.LandedSeq != 2 {
		t.Fatalf("save 1 after an unnumbered save = %+v, want superseded by 2 still", s)
	}
	if s, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeRelease, Seq: 3, Token: "tok-a"}); err != nil ||
		s.How != record.HowReleased {
		t.Fatalf("release = %+v, %v", s, err)
	}
	if a, err := record.Acquire(ctx, rdb, key, acquireArgs("server-b", "tok-b")); err != nil || a.Outcome != record.Acquired {
		t.Fatalf("acquire by b = %+v, %v", a, err)
	}
	s, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Seq: 1, Token: "tok-b",
		Data: []byte("b-one"), Sum: "0badcafe"})
	if err != nil || s.Outcome != record.Written {
		t.Fatalf("the new session's first save = %+v, %v; want written (its count starts afresh)", s, err)
	}
}
