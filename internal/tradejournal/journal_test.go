package tradejournal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/testsupport"
)

func parts() []tradejournal.Participant {
	return []tradejournal.Participant{
		{Driver: "PlayerData", Key: "a", Token: "ta", Ver: 3, Image: []byte("image-a")},
		{Driver: "Inventory", Key: "b", Token: "tb", Ver: 0, Image: []byte("image-b")},
	}
}

func begin(t *testing.T, _ *testsupport.Redis, j *tradejournal.Journal, id string) error {
	t.Helper()
	return j.Begin(context.Background(), id, "server-a", parts())
}

func TestJournalLifecycle(t *testing.T) {
	r := testsupport.StartRedis(t)
	c := r.Client(t)
	j := tradejournal.New(c, r.Namespace, time.Hour)
	ctx := context.Background()

	t.Run("begin, commit, settle, expire", func(t *testing.T) {
		if err := begin(t, r, j, "t1"); err != nil {
			t.Fatal(err)
		}
		if ttl := c.PTTL(ctx, j.Key("t1")).Val(); ttl <= 0 {
			t.Fatalf("a PREPARED entry must expire on its own; PTTL %s", ttl)
		}
		e, err := j.Read(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if e.State != tradejournal.Prepared || e.Coordinator != "server-a" || len(e.Participants) != 2 ||
			string(e.Participants[1].Image) != "image-b" || e.Participants[0].Ver != 3 || e.Find("Inventory", "b") != 1 {
			t.Fatalf("entry %+v", e)
		}
		if err := j.Commit(ctx, "t1"); err != nil {
			t.Fatal(err)
		}
		if ttl := c.PTTL(ctx, j.Key("t1")).Val(); ttl != -1 {
			t.Fatalf("a COMMITTED entry must not expire before it settles; PTTL %s", ttl)
		}
		if err := j.Abort(ctx, "t1"); !errors.Is(err, tradejournal.ErrState) {
			t.Fatalf("Abort of a committed trade = %v, want ErrState", err)
		}
		if err := j.MarkSettled(ctx, "t1", 0); err != nil {
			t.Fatal(err)
		}
		if ttl := c.PTTL(ctx, j.Key("t1")).Val(); ttl != -1 {
			t.Fatal("the entry expires with one participant unsettled")
		}
		if err := j.MarkSettled(ctx, "t1", 1); err != nil {
			t.Fatal(err)
		}
		if ttl := c.PTTL(ctx, j.Key("t1")).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("settled entry PTTL %s, want the retention", ttl)
		}
		e, _ = j.Read(ctx, "t1")
		if e.State != tradejournal.Committed || !e.Settled[0] || !e.Settled[1] {
			t.Fatalf("entry %+v", e)
		}
	})

	t.Run("abort by compare-and-set", func(t *testing.T) {
		if err := begin(t, r, j, "t2"); err != nil {
			t.Fatal(err)
		}
		if err := j.Abort(ctx, "t2"); err != nil {
			t.Fatal(err)
		}
		var se *tradejournal.StateError
		if err := j.Commit(ctx, "t2"); !errors.As(err, &se) || se.State != tradejournal.Aborted {
			t.Fatalf("Commit after Abort = %v, want a StateError naming ABORTED", err)
		}
		if err := j.Abort(ctx, "t2"); err != nil {
			t.Fatalf("a second Abort = %v, want nil", err)
		}
	})

	t.Run("abort of an entry never opened leaves a tombstone", func(t *testing.T) {
		if _, err := j.Read(ctx, "t3"); !errors.Is(err, tradejournal.ErrNotFound) {
			t.Fatalf("Read = %v, want ErrNotFound", err)
		}
		if err := j.Abort(ctx, "t3"); err != nil {
			t.Fatal(err)
		}
		var se *tradejournal.StateError
		if err := begin(t, r, j, "t3"); !errors.As(err, &se) || se.State != tradejournal.Aborted {
			t.Fatalf("a late begin = %v, want EXISTS as ABORTED", err)
		}
		if err := j.Commit(ctx, "t3"); !errors.Is(err, tradejournal.ErrState) {
			t.Fatalf("Commit of a tombstone = %v", err)
		}
		if ttl := c.PTTL(ctx, j.Key("t3")).Val(); ttl <= 0 {
			t.Fatalf("tombstone PTTL %s, want an expiry", ttl)
		}
		e, err := j.Read(ctx, "t3")
		if err != nil || e.State != tradejournal.Aborted {
			t.Fatalf("Read of a tombstone = %+v, %v", e, err)
		}
	})

	t.Run("corrupt entries are refused", func(t *testing.T) {
		c.HSet(ctx, j.Key("t4"), "state", "WEIRD")
		if _, err := j.Read(ctx, "t4"); !errors.Is(err, tradejournal.ErrCorrupt) {
			t.Fatalf("Read = %v, want ErrCorrupt", err)
		}
		c.HSet(ctx, j.Key("t5"), "state", "COMMITTED", "n", "2", "p0", "\xc1")
		if _, err := j.Read(ctx, "t5"); !errors.Is(err, tradejournal.ErrCorrupt) {
			t.Fatalf("Read = %v, want ErrCorrupt", err)
		}
	})
}
