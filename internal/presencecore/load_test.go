package presencecore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/redis/go-redis/v9"
)

// counted is a Config whose Sessions answers n.
func counted(n *atomic.Int64) Config {
	return Config{Sessions: func() int { return int(n.Load()) }}
}

// pair is two servers, a and b, beating one fresh presence key with the
// session counts na and nb, each beaten once.
type pair struct {
	rdb    redis.UniversalClient
	a, b   *Presence
	na, nb atomic.Int64
}

// realCounted starts server "a" on a fresh key of a real redis-server
// (skipped on miniredis, saying why), counting the sessions n holds (n
// sessions at first); not yet beaten.
func realCounted(t *testing.T, n int64, why string) (redis.UniversalClient, *Presence, *atomic.Int64) {
	t.Helper()
	r := startRedis(t)
	if !r.real {
		t.Skip(why)
	}
	rdb := r.client(t)
	var count atomic.Int64
	count.Store(n)
	return rdb, server(t, rdb, testKey(t), "a", counted(&count)), &count
}

// countedPair starts a pair counting na and nb sessions.
func countedPair(t *testing.T, na, nb int64) *pair {
	t.Helper()
	pr := &pair{rdb: startRedis(t).client(t)}
	pr.na.Store(na)
	pr.nb.Store(nb)
	key := testKey(t)
	pr.a = server(t, pr.rdb, key, "a", counted(&pr.na))
	pr.b = server(t, pr.rdb, key, "b", counted(&pr.nb))
	mustBeat(t, pr.a)
	mustBeat(t, pr.b)
	return pr
}

// TestLoads: each server's count travels with its beat; Loads gives every
// live server's, least loaded first, stamped on the Redis clock, and a
// changed count is read after the next beat.
func TestLoads(t *testing.T) {
	ctx := context.Background()
	pr := countedPair(t, 5, 3)
	a, b, na := pr.a, pr.b, &pr.na
	before := time.Now().Add(-time.Second)

	loads, err := a.Loads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(loads) != 2 || loads[0].JobID != "b" || loads[0].Sessions != 3 || loads[1].JobID != "a" || loads[1].Sessions != 5 {
		t.Fatalf("Loads = %+v, want b 3 then a 5", loads)
	}
	for _, l := range loads {
		if l.At.Before(before) || l.At.After(time.Now().Add(time.Second)) || l.ExpiresIn <= 0 {
			t.Errorf("load %+v: At not the beat's Redis time, or not alive", l)
		}
	}

	na.Store(1)
	if _, err := a.beat(ctx, true); err != nil { // a loop beat: the fast path carries the change
		t.Fatal(err)
	}
	loads, err = b.Loads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(loads) != 2 || loads[0].JobID != "a" || loads[0].Sessions != 1 {
		t.Fatalf("after a's count fell to 1: Loads = %+v", loads)
	}
	entries, err := b.List(ctx)
	if err != nil || len(entries) != 2 || entries[0].Sessions != 1 || entries[1].Sessions != 3 || entries[0].SessionsErr != nil {
		t.Fatalf("List = %+v, %v; want a 1, b 3", entries, err)
	}
}

// TestLoadOnlyWhenChanged: a steady server's loop beat writes no count (the
// fast path stays TIME and HINCRBY); a changed count adds one HSET; a full
// check writes it whatever it is. Counted by Redis (INFO commandstats).
func TestLoadOnlyWhenChanged(t *testing.T) {
	rdb, p, n := realCounted(t, 4, "miniredis keeps no command statistics")
	ctx := context.Background()
	mustBeat(t, p)
	beats := func(k int) map[string]int64 {
		t.Helper()
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for range k {
			if _, err := p.beat(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
		return commandCalls(t, rdb)
	}
	if got := beats(3); got["hset"] != 0 || got["hincrby"] != 3 || got["time"] != 3 {
		t.Errorf("3 steady beats: %v, want TIME and HINCRBY only", got)
	}
	n.Store(6)
	if got := beats(3); got["hset"] != 1 || got["hincrby"] != 3 {
		t.Errorf("a count changed once in 3 beats: %v, want one HSET", got)
	}
	if v := rdb.HGet(ctx, p.own.load, "a").Val(); !strings.HasPrefix(v, "6@") {
		t.Errorf("load entry %q, want 6@<ms>", v)
	}
	if err := rdb.HDel(ctx, p.own.load, "a").Err(); err != nil { // lost by hand: the next full check writes it back
		t.Fatal(err)
	}
	mustBeat(t, p)
	if v := rdb.HGet(ctx, p.own.load, "a").Val(); !strings.HasPrefix(v, "6@") {
		t.Errorf("after a full check the load entry is %q, want 6@<ms>", v)
	}
}

// TestLoadOfDeadServer: the count of a server whose beat is dead is never
// given; the bounded cleaning drops it with the beat; Remove drops ours.
func TestLoadOfDeadServer(t *testing.T) {
	r := startRedis(t)
	rdb := r.client(t)
	ctx := context.Background()
	var n atomic.Int64
	n.Store(2)
	p := server(t, rdb, testKey(t), "a", counted(&n))
	mustBeat(t, p)
	writeBeat(t, rdb, p, "dead", "gone", -time.Minute)
	if err := rdb.HSet(ctx, p.own.load, "dead", "9@"+strconv.FormatInt(time.Now().UnixMilli(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	entries, err := p.List(ctx)
	if err != nil || len(entries) != 2 {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	if d := entries[1]; d.JobID != "dead" || d.Status == Alive || d.Sessions != 0 || !d.SessionsAt.IsZero() || d.SessionsErr != nil {
		t.Errorf("dead server's entry %+v: its count is shown", d)
	}
	loads, err := p.Loads(ctx)
	if err != nil || len(loads) != 1 || loads[0].JobID != "a" || loads[0].Sessions != 2 {
		t.Fatalf("Loads = %+v, %v; want a alone", loads, err)
	}
	eventually(t, 5*time.Second, "the dead server's load entry cleaned", func() bool {
		mustBeat(t, p) // a full check cleans a few random fields
		return rdb.HExists(ctx, p.own.load, "dead").Val() == false
	})
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if rdb.HExists(ctx, p.own.load, "a").Val() {
		t.Error("Remove left this server's load entry")
	}
}

// TestLoadGarbage: a load entry another tool wrote as garbage, or a load key
// of another type, is ignored with an error naming it, never a panic; the
// beat itself carries on, and writes the count again once it can.
func TestLoadGarbage(t *testing.T) {
	r := startRedis(t)
	rdb := r.client(t)
	ctx := context.Background()
	key := testKey(t)
	var na, nb atomic.Int64
	na.Store(1)
	nb.Store(2)
	a := server(t, rdb, key, "a", counted(&na))
	b := server(t, rdb, key, "b", counted(&nb))
	mustBeat(t, a)
	mustBeat(t, b)
	for _, junk := range []string{"lots", "-3@5", "7@", "7@x", "@", strings.Repeat("9", 300)} {
		if err := rdb.HSet(ctx, b.own.load, "b", junk).Err(); err != nil {
			t.Fatal(err)
		}
		entries, err := a.List(ctx)
		if err != nil || len(entries) != 2 {
			t.Fatalf("%q: List = %+v, %v", junk, entries, err)
		}
		e := entries[1]
		if !errors.Is(e.SessionsErr, ErrBadLoad) || !strings.Contains(e.SessionsErr.Error(), "b in "+b.own.load) ||
			!e.SessionsAt.IsZero() || e.Sessions != 0 {
			t.Errorf("%q: entry %+v, want ErrBadLoad naming b and the load hash", junk, e)
		}
		if loads, err := a.Loads(ctx); err != nil || len(loads) != 1 || loads[0].JobID != "a" {
			t.Errorf("%q: Loads = %+v, %v; want a alone", junk, loads, err)
		}
	}

	// A load key of another type: every live count is unreadable, and beats
	// still land.
	if err := rdb.Del(ctx, a.own.load).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, a.own.load, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	ans, err := a.beat(ctx, false)
	if err != nil || ans.Load != presencescript.LoadFailed || ans.Outcome != presencescript.BeatWritten {
		t.Fatalf("beat over a broken load key = %+v, %v; want written, load failed", ans, err)
	}
	entries, err := a.List(ctx)
	if err != nil || len(entries) != 2 {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	for _, e := range entries {
		if !errors.Is(e.SessionsErr, ErrBadLoad) || !strings.Contains(e.SessionsErr.Error(), "WRONGTYPE") {
			t.Errorf("entry %+v: want ErrBadLoad with Redis's WRONGTYPE", e)
		}
	}
	if err := rdb.Del(ctx, a.own.load).Err(); err != nil {
		t.Fatal(err)
	}
	if ans, err := a.beat(ctx, true); err != nil || ans.Load != presencescript.LoadWritten {
		t.Fatalf("loop beat after the key was mended = %+v, %v; want the count written again", ans, err)
	}
}

func TestParseLoad(t *testing.T) {
	tests := []struct {
		raw  string
		n    int
		at   int64
		fine bool
	}{
		{"0@1", 0, 1, true},
		{"12@1900000000123", 12, 1_900_000_000_123, true},
		{"12", 0, 0, false},
		{"12@0", 0, 0, false},
		{"-1@5", 0, 0, false},
		{"1.5@5", 0, 0, false},
		{"", 0, 0, false},
		{"5@6@7", 0, 0, false},
	}
	for _, tt := range tests {
		n, at, err := parseLoad(tt.raw)
		if tt.fine != (err == nil) || n != tt.n || (tt.fine && at.UnixMilli() != tt.at) {
			t.Errorf("parseLoad(%q) = %d, %v, %v", tt.raw, n, at, err)
		}
		if err != nil && !errors.Is(err, ErrBadLoad) {
			t.Errorf("parseLoad(%q): %v does not wrap ErrBadLoad", tt.raw, err)
		}
	}
}

func TestLoadKeySlot(t *testing.T) {
	for _, k := range []string{"g:CKPresence", "g:CKPresence:{3}", "{g}:CKPresence"} {
		want := k + ":load"
		if _, ok := hashTag(k); !ok {
			want = k + ":{" + k + "}:load"
		}
		if got := LoadKey(k); got != want {
			t.Errorf("LoadKey(%q) = %q, want %q", k, got, want)
		}
	}
}

// TestCleaningDropsOrphanedOwnersAndLoads: a full check's cleaning looks up
// the beats of two sampled owners entries and two sampled load entries (in
// one HMGET) and drops those whose beat is gone, each from its own hash;
// live servers' entries stay.
func TestCleaningDropsOrphanedOwnersAndLoads(t *testing.T) {
	ctx := context.Background()
	pr := countedPair(t, 1, 2)
	rdb, a := pr.rdb, pr.a
	at := strconv.FormatInt(time.Now().UnixMilli(), 10)
	var owners, loads []string
	for i := range 6 {
		owners = append(owners, fmt.Sprintf("owner-only-%d", i))
		loads = append(loads, fmt.Sprintf("load-only-%d", i))
	}
	for _, f := range owners {
		if err := rdb.HSet(ctx, a.own.owners, f, "gone-instance").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range loads {
		if err := rdb.HSet(ctx, a.own.load, f, "4@"+at).Err(); err != nil {
			t.Fatal(err)
		}
	}
	left := func(hash string, fields []string) int {
		n := 0
		for _, f := range fields {
			if rdb.HExists(ctx, hash, f).Val() {
				n++
			}
		}
		return n
	}
	for beats := 0; left(a.own.owners, owners)+left(a.own.load, loads) > 0; beats++ {
		if beats > 2000 {
			t.Fatalf("after %d full checks %d orphaned owners and %d orphaned loads are left", beats,
				left(a.own.owners, owners), left(a.own.load, loads))
		}
		mustBeat(t, a)
	}
	for _, job := range []string{"a", "b"} {
		if !rdb.HExists(ctx, a.own.key, job).Val() || !rdb.HExists(ctx, a.own.owners, job).Val() ||
			!rdb.HExists(ctx, a.own.load, job).Val() {
			t.Errorf("the live server %s lost its beat, owner or load entry to the cleaning", job)
		}
	}
}

// TestFullCheckKeepsTheHashesHashtables: a full check writes MetaEnc into
// the shard, owners and load hashes, so that Redis keeps each a hashtable
// (a beat finds its field in O(1), not by a scan of a listpack), and no
// reader takes it for a server.
func TestFullCheckKeepsTheHashesHashtables(t *testing.T) {
	rdb, p, _ := realCounted(t, 3, "miniredis has no listpack encoding")
	ctx := context.Background()
	for _, h := range []string{p.own.key, p.own.owners, p.own.load} {
		if err := rdb.HSet(ctx, h, "other", "1").Err(); err != nil { // a listpack, as a small hash is
			t.Fatal(err)
		}
		if enc := rdb.ObjectEncoding(ctx, h).Val(); enc != "listpack" && enc != "ziplist" {
			t.Fatalf("%s is a %s before any beat; the test needs a listpack", h, enc)
		}
	}
	mustBeat(t, p)
	for _, h := range []string{p.own.key, p.own.owners, p.own.load} {
		if enc := rdb.ObjectEncoding(ctx, h).Val(); enc != "hashtable" {
			t.Errorf("after a full check %s is a %s, want a hashtable", h, enc)
		}
		if !rdb.HExists(ctx, h, MetaEnc).Val() {
			t.Errorf("%s has no %q", h, MetaEnc)
		}
	}
	entries, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.JobID != "a" && e.JobID != "other" {
			t.Errorf("List shows %q", e.JobID)
		}
	}
	if loads, err := p.Loads(ctx); err != nil || len(loads) != 1 || loads[0].JobID != "a" || loads[0].Sessions != 3 {
		t.Errorf("Loads = %+v, %v; want a alone, 3 sessions", loads, err)
	}
}
