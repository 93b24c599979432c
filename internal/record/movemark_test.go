package record_test

import (
	"context"
	"maps"
	"testing"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// A cancelled move lands as the last move only while its source holds the
// lock: never over the COMMITTED of a flip (the lock is the target's then),
// never on a record that is not there, never on a key that is not a hash.
func TestMarkMoveIsFencedByTheSourcesToken(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	rdb.HSet(ctx, key, "ver", "3", "epoch", "2", "lock.token", "src", "lock.job", "server-a", "data", "\x80")
	mark := record.MoveMark{Token: "src", ID: "m1", State: record.MoveCancelled, From: "server-a", To: "server-b",
		Why: "refused: busy"}
	if ok, err := record.MarkMove(ctx, rdb, key, mark); !ok || err != nil {
		t.Fatalf("mark by the holder = %v, %v; want landed", ok, err)
	}
	before := snapshot(t, rdb, key)
	if before[key+" move.state"] != record.MoveCancelled || before[key+" move.why"] != "refused: busy" ||
		before[key+" move.id"] != "m1" || before[key+" move.at"] == "" || before[key+" ver"] != "3" || before[key+" epoch"] != "2" {
		t.Fatalf("record after the mark: %v", before)
	}
	// The lock flips to the target (as move.lua does): a late mark of the
	// source lands nowhere.
	rdb.HSet(ctx, key, "lock.token", "dst", "lock.job", "server-b", "move.id", "m2", "move.state", record.MoveCommitted,
		"move.why", "")
	after := snapshot(t, rdb, key)
	mark.ID = "m2"
	if ok, err := record.MarkMove(ctx, rdb, key, mark); ok || err != nil {
		t.Fatalf("mark by a former holder = %v, %v; want not landed", ok, err)
	}
	if got := snapshot(t, rdb, key); !maps.Equal(got, after) {
		t.Fatalf("a refused mark changed the record:\n got %v\nwant %v", got, after)
	}
	missing := record.Key(r.Namespace, "PlayerData", "user:none")
	if ok, err := record.MarkMove(ctx, rdb, missing, mark); ok || err != nil {
		t.Fatalf("mark of no record = %v, %v", ok, err)
	}
	if n, _ := rdb.Exists(ctx, missing).Result(); n != 0 {
		t.Fatal("a mark created a record")
	}
	rdb.Set(ctx, missing, "x", 0)
	if ok, err := record.MarkMove(ctx, rdb, missing, mark); ok || err != nil {
		t.Fatalf("mark of a string key = %v, %v", ok, err)
	}
}
