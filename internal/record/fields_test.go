package record_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// acquireArgs is an acquire by job with token at the library's default
// timings (LockTTL 180 s + LockSkew 60 s).
func acquireArgs(job, token string) record.AcquireArgs {
	return record.AcquireArgs{Job: job, Token: token, Presence: true, MaxAge: 4 * time.Minute, Skew: time.Minute,
		Format: record.Format, MaxMessages: 100, MaxMessageBytes: 1 << 20, MessagesPerRead: 8}
}

// snapshot is every key of one record, as a plain client reads it.
func snapshot(t testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range []string{key, record.InboxKey(key), record.HistoryKey(key), record.TriesKey(key), record.DeadKey(key),
		record.IdemKey(key), record.IdemAtKey(key)} {
		ty, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k+" type"] = ty
		switch ty {
		case "hash":
			m, err := rdb.HGetAll(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			for f, v := range m {
				out[k+" "+f] = v
			}
		case "string":
			out[k], _ = rdb.Get(ctx, k).Result()
		case "stream":
			n, _ := rdb.XLen(ctx, k).Result()
			out[k+" len"] = strconv.FormatInt(n, 10)
		case "zset":
			zs, _ := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			for _, z := range zs {
				out[k+" "+fmt.Sprint(z.Member)] = strconv.FormatFloat(z.Score, 'f', -1, 64)
			}
		}
	}
	return out
}

// A record whose fields are not what the library writes is refused at
// once, naming the field, and nothing is written: no lock, no epoch step.
func TestAcquireRefusesWhatItCannotComputeWith(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	future := strconv.FormatInt(time.Now().Add(100*time.Hour).UnixMilli(), 10)
	tests := []struct {
		name      string
		fields    map[string]string
		other     func(key string) // another key of the record, set by another tool
		wantField string
	}{
		{name: "ver not an integer", fields: map[string]string{"ver": "x1", "epoch": "3", "data": "d"}, wantField: "ver"},
		{name: "epoch a string", fields: map[string]string{"ver": "1", "epoch": "three", "data": "d"}, wantField: "epoch"},
		{name: "epoch too long to be exact", fields: map[string]string{"ver": "1", "epoch": "12345678901234567890", "data": "d"},
			wantField: "epoch"},
		{name: "schema negative", fields: map[string]string{"ver": "1", "epoch": "1", "schema": "-1"}, wantField: "schema"},
		{name: "schema past 32 bits", fields: map[string]string{"ver": "1", "epoch": "1", "schema": "2147483648",
			"schema.min": "0"}, wantField: "schema"},
		{name: "schema.min past 32 bits", fields: map[string]string{"ver": "1", "epoch": "1", "schema": "3000000000",
			"schema.min": "3000000000"}, wantField: "schema.min"},
		{name: "inbox.seq a float", fields: map[string]string{"ver": "1", "epoch": "1", "inbox.seq": "1.5"}, wantField: "inbox.seq"},
		{name: "lock.at not a number", fields: map[string]string{"ver": "1", "epoch": "1", "lock.token": "t",
			"lock.job": "tool", "lock.at": "yesterday"}, wantField: "lock.at"},
		{name: "lock.at far ahead, no presence flag", fields: map[string]string{"ver": "1", "epoch": "1", "lock.token": "t",
			"lock.job": "tool", "lock.at": future}, wantField: "lock.at"},
		{name: "a lock without a holder", fields: map[string]string{"ver": "1", "epoch": "1", "lock.token": "t",
			"lock.at": "1"}, wantField: "lock.job"},
		{name: "presence flag neither 1 nor 0", fields: map[string]string{"ver": "1", "epoch": "1", "lock.token": "t",
			"lock.job": "tool", "lock.at": "1", "lock.presence": "yes"}, wantField: "lock.presence"},
		{name: "inbox of the wrong type", fields: map[string]string{"ver": "1", "epoch": "1", "inbox.seq": "2"},
			other: func(key string) { rdb.Set(ctx, record.InboxKey(key), "x", 0) }, wantField: "inbox"},
		{name: "history of the wrong type", fields: map[string]string{"ver": "1", "epoch": "1", "hist.at": "5"},
			other: func(key string) { rdb.RPush(ctx, record.HistoryKey(key), "x") }, wantField: "history"},
		{name: "record missing while its history remains",
			other: func(key string) { rdb.HSet(ctx, record.HistoryKey(key), "d1", "x", "t1", "1,0,0") }, wantField: "(record)"},
		{name: "record made again by a Send while its history remains", other: func(key string) {
			rdb.HSet(ctx, record.HistoryKey(key), "d1", "x", "t1", "1,0,0")
			if _, err := record.Send(ctx, rdb, key, []byte("gift"), sendArgs("")); err != nil {
				t.Fatal(err)
			}
		}, wantField: "(record)"},
		{name: "record key of the wrong type", other: func(key string) { rdb.Set(ctx, key, "x", 0) }, wantField: "(record)"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := record.Key(r.Namespace, "PlayerData", "user:"+strconv.Itoa(i))
			if len(tc.fields) > 0 {
				if err := rdb.HSet(ctx, key, tc.fields).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.other != nil {
				tc.other(key)
			}
			before := snapshot(t, rdb, key)
			res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
			if err != nil {
				t.Fatalf("acquire: %v (want a CORRUPT answer, not a script error)", err)
			}
			if res.Outcome != record.Corrupt || res.Corrupt.Field != tc.wantField {
				t.Fatalf("acquire = %+v, want Corrupt naming %q", res, tc.wantField)
			}
			if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
				t.Errorf("the refused acquire wrote:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// The largest schema a profile keeps (record.MaxSchema) is read as any
// other.
func TestAcquireReadsTheLargestSchema(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:max")
	max := strconv.Itoa(record.MaxSchema)
	if err := rdb.HSet(ctx, key, "ver", "1", "epoch", "1", "schema", max, "schema.min", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
	if err != nil || res.Outcome != record.Acquired || res.Schema != record.MaxSchema {
		t.Fatalf("acquire = %+v, %v; want it acquired with schema %s", res, err, max)
	}
}

// A lock with the presence flag stamped ahead of the Redis clock (a
// backward step of that clock) is not taken and not refused: it counts as
// fresh, and changes hands by release or by the proof of its holder's stop.
func TestAcquireAFlaggedLockAheadOfTheClock(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	ahead := strconv.FormatInt(time.Now().Add(10*time.Minute).UnixMilli(), 10)
	rdb.HSet(ctx, key, "ver", "1", "epoch", "4", "lock.token", "held", "lock.job", "server-b", "lock.at", ahead,
		"lock.presence", "1")
	res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
	if err != nil || res.Outcome != record.Locked || res.Lock.Age != 0 {
		t.Fatalf("acquire = %+v, %v; want Locked at age 0", res, err)
	}
	a := acquireArgs("server-a", "tok-a")
	a.StealJob, a.StealToken = "server-b", "held"
	res, err = record.Acquire(ctx, rdb, key, a)
	if err != nil || res.Outcome != record.Acquired || res.How != record.TakenStolen || res.Epoch != 5 {
		t.Fatalf("steal with a proof = %+v, %v; want Acquired (stolen) at epoch 5", res, err)
	}
}

// A presence-flagged lock never goes by age: only a proof moves it. A lock
// without the flag goes once older than LockTTL + LockSkew.
func TestAcquireAgeRule(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	old := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	for _, flag := range []string{"1", "0"} {
		key := record.Key(r.Namespace, "PlayerData", "user:"+flag)
		rdb.HSet(ctx, key, "ver", "1", "epoch", "1", "lock.token", "held", "lock.job", "server-b", "lock.at", old,
			"lock.presence", flag)
		res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case flag == "1" && res.Outcome != record.Locked:
			t.Errorf("an hour-old lock with the presence flag: %+v, want Locked", res)
		case flag == "0" && (res.Outcome != record.Acquired || res.How != record.TakenExpired):
			t.Errorf("an hour-old lock without the flag: %+v, want taken as expired", res)
		}
	}
}

// A held record whose ver or epoch another tool broke: a save writes
// nothing, a release under the profile's token frees the lock only (so the
// key is not wedged), and a record deleted while held answers Gone.
func TestSaveOnABrokenRecord(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	for i, field := range []string{"ver", "epoch", "inbox.seq", "lock.seq"} {
		key := record.Key(r.Namespace, "PlayerData", "user:"+strconv.Itoa(i))
		if res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a")); err != nil || res.Outcome != record.Acquired {
			t.Fatalf("acquire: %+v, %v", res, err)
		}
		rdb.HSet(ctx, key, field, "not-a-number")
		save := record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: []byte("d1"), Schema: 0}
		res, err := record.Save(ctx, rdb, key, save)
		if err != nil || res.Outcome != record.CorruptRecord || res.Corrupt.Field != field || res.Freed {
			t.Fatalf("save with %s broken = %+v, %v; want CorruptRecord naming it, lock kept", field, res, err)
		}
		if d, _ := rdb.HGet(ctx, key, "data").Result(); d != "" {
			t.Errorf("the refused save wrote data %q", d)
		}
		save.Mode = record.ModeRelease
		res, err = record.Save(ctx, rdb, key, save)
		if err != nil || res.Outcome != record.CorruptRecord || !res.Freed {
			t.Fatalf("release with %s broken = %+v, %v; want CorruptRecord with the lock freed", field, res, err)
		}
		if tok, _ := rdb.HGet(ctx, key, "lock.token").Result(); tok != "" {
			t.Errorf("lock.token = %q after the release, want it freed", tok)
		}
	}
	key := record.Key(r.Namespace, "PlayerData", "user:gone")
	record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
	rdb.Del(ctx, key)
	res, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: []byte("d")})
	if err != nil || res.Outcome != record.Gone {
		t.Fatalf("save of a deleted record = %+v, %v; want Gone", res, err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Error("the save of a deleted record recreated it")
	}
}

// A history key of the wrong type never wedges saves: the data is written,
// no version is kept, and the answer says so.
func TestSaveWithAHistoryOfTheWrongType(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
	rdb.Set(ctx, record.HistoryKey(key), "someone's string", 0)
	res, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: []byte("d1"),
		History: 24, HistoryEvery: time.Hour, Keep: record.KeptValue{Head: []byte("old")}, KeepVer: 0, KeepAlways: true})
	if err != nil || res.Outcome != record.Written || !res.HistoryUnusable || res.Ver != 1 {
		t.Fatalf("save = %+v, %v; want written at ver 1, HistoryUnusable", res, err)
	}
	if s, _ := rdb.Get(ctx, record.HistoryKey(key)).Result(); s != "someone's string" {
		t.Errorf("the history key was overwritten: %q", s)
	}
}

// FuzzRecordFields writes arbitrary values into a record's fields (as
// another tool might) and runs a session's scripts over it: acquire, save,
// release. No script fails with a raw error; a refused acquire changes
// nothing; a record that was acquired saves and releases (the lock ends
// free); the epoch never decreases.
func FuzzRecordFields(f *testing.F) {
	r := testsupport.StartRedis(f)
	rdb := r.Client(f)
	f.Add("1", "2", "0", "", "", "", "", "0", "")
	f.Add("x", "2", "0", "t", "tool", "1", "1", "0", "")
	f.Add("1", "abc", "0", "t", "", "1", "", "", "")
	f.Add("1", "2", "99999999999999999999", "t", "b", "-5", "0", "3", "7")
	f.Add("", "", "", "", "", "", "", "", "")
	n := 0
	f.Fuzz(func(t *testing.T, ver, epoch, schema, token, job, lockAt, presence, seq, histAt string) {
		ctx := context.Background()
		n++
		key := record.Key(r.Namespace, "PlayerData", fmt.Sprintf("fuzz:%d", n))
		fields := map[string]string{"ver": ver, "epoch": epoch, "schema": schema, "lock.token": token, "lock.job": job,
			"lock.at": lockAt, "lock.presence": presence, "inbox.seq": seq, "hist.at": histAt, "data": "d0"}
		set := []any{}
		for k, v := range fields {
			if v != "" {
				set = append(set, k, v)
			}
		}
		if len(set) > 0 {
			rdb.HSet(ctx, key, set...)
		}
		defer rdb.Del(ctx, key, record.InboxKey(key), record.HistoryKey(key))
		before := snapshot(t, rdb, key)
		res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-fuzz"))
		if err != nil {
			t.Fatalf("acquire failed with a raw error: %v", err)
		}
		if res.Outcome != record.Acquired {
			if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
				t.Fatalf("acquire answered %+v and wrote:\nbefore %v\nafter  %v", res, before, after)
			}
			return
		}
		if e, err := strconv.ParseInt(epoch, 10, 64); err == nil && res.Epoch <= e {
			t.Fatalf("epoch %d after acquiring a record at epoch %d", res.Epoch, e)
		}
		s, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok-fuzz", Data: []byte("d1")})
		if err != nil || s.Outcome != record.Written {
			t.Fatalf("save of an acquired record = %+v, %v", s, err)
		}
		s, err = record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeRelease, Token: "tok-fuzz", Data: []byte("d2")})
		if err != nil || s.Outcome != record.Written {
			t.Fatalf("release of an acquired record = %+v, %v", s, err)
		}
		if tok, _ := rdb.HGet(ctx, key, "lock.token").Result(); tok != "" {
			t.Fatalf("lock.token %q after the release", tok)
		}
	})
}

// A release whose answer was lost and that is retried after another
// session took the lock answers already-released: it landed, and the
// retry writes nothing over the new holder (found by the robustness suite:
// the retry used to answer lost, so the holder reported a lost lock for a
// release that had landed).
func TestReleaseRetriedAfterAnotherAcquired(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:1")
	record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a"))
	release := record.SaveArgs{Mode: record.ModeRelease, Token: "tok-a", Data: []byte("a's data")}
	if res, err := record.Save(ctx, rdb, key, release); err != nil || res.How != record.HowReleased {
		t.Fatalf("release = %+v, %v", res, err)
	}
	if res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-b", "tok-b")); err != nil || res.Outcome != record.Acquired {
		t.Fatalf("B's acquire = %+v, %v", res, err)
	}
	before := snapshot(t, rdb, key)
	res, err := record.Save(ctx, rdb, key, release) // the client's retry
	if err != nil || res.Outcome != record.Written || res.How != record.HowAlreadyReleased {
		t.Fatalf("retried release = %+v, %v; want already-released", res, err)
	}
	if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
		t.Errorf("the retried release wrote over B's lock:\nbefore %v\nafter  %v", before, after)
	}
}

// Every broken field an acquire refuses is put right by Repair (with force
// for a missing record), after which the record loads, or, for a broken
// lock, is mended in place with its holder and token kept (the acquire then
// meets that lock); nothing stored is deleted (keys of the wrong type are
// renamed aside), the epoch does not go back, and a dry run changes
// nothing.
func TestRepairMakesARefusedRecordLoad(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	future := strconv.FormatInt(time.Now().Add(100*time.Hour).UnixMilli(), 10)
	tests := []struct {
		name   string
		fields map[string]string
		other  func(key string)
		force  bool
		aside  string // a key that must now be found renamed aside
		// minVer and messages: what the acquire after the repair must
		// find (a ver above every kept version, the messages waiting).
		minVer   int64
		messages int
		// held: the repair keeps a lock, which the acquire after it meets.
		held bool
	}{
		{name: "ver not an integer", fields: map[string]string{"ver": "x1", "epoch": "3", "data": "d"}},
		{name: "epoch a string", fields: map[string]string{"ver": "1", "epoch": "three", "data": "d"}},
		{name: "inbox.seq a float", fields: map[string]string{"ver": "1", "epoch": "1", "inbox.seq": "1.5"}},
		{name: "lock.seq a word", fields: map[string]string{"ver": "1", "epoch": "1", "lock.seq": "many"}},
		{name: "lock.at far ahead", fields: map[string]string{"ver": "1", "epoch": "1", "lock.token": "t",
			"lock.job": "tool", "lock.at": future}, held: true},
		{name: "lock.at not an integer", fields: map[string]string{"ver": "1", "epoch": "1", "lock.token": "t",
			"lock.job": "tool", "lock.at": "abc", "lock.presence": "1"}, held: true},
		{name: "inbox of the wrong type", fields: map[string]string{"ver": "1", "epoch": "1", "inbox.seq": "2"},
			other: func(key string) { rdb.Set(ctx, record.InboxKey(key), "x", 0) }, aside: ":inbox"},
		{name: "history of the wrong type", fields: map[string]string{"ver": "1", "epoch": "1", "hist.at": "5"},
			other: func(key string) { rdb.RPush(ctx, record.HistoryKey(key), "x") }, aside: ":hist"},
		{name: "record missing while its history remains", force: true, minVer: 8,
			other: func(key string) { rdb.HSet(ctx, record.HistoryKey(key), "d7", "x", "t7", "1,0,0") }},
		{name: "record missing while its inbox remains", force: true, messages: 1,
			other: func(key string) {
				rdb.XAdd(ctx, &redis.XAddArgs{Stream: record.InboxKey(key), Values: []string{"b", "gift"}})
			}},
		{name: "record made again by a Send while its history remains", force: true, minVer: 8, messages: 1,
			other: func(key string) {
				rdb.HSet(ctx, record.HistoryKey(key), "d7", "x", "t7", "1,0,0")
				if _, err := record.Send(ctx, rdb, key, []byte("gift"), sendArgs("")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "record key of the wrong type", force: true, aside: "",
			other: func(key string) {
				rdb.Set(ctx, key, "x", 0)
				rdb.HSet(ctx, record.HistoryKey(key), "d1", "x", "t1", "1,0,0")
			}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := record.Key(r.Namespace, "PlayerData", "repair:"+strconv.Itoa(i))
			if len(tc.fields) > 0 {
				rdb.HSet(ctx, key, tc.fields)
			}
			if tc.other != nil {
				tc.other(key)
			}
			before := snapshot(t, rdb, key)
			dry, err := record.Repair(ctx, rdb, key, record.RepairArgs{DryRun: true, Force: tc.force, Skew: time.Minute, Aside: ":corrupt:1"})
			if err != nil || len(dry.Changed) == 0 {
				t.Fatalf("dry run = %+v, %v; want something to change", dry, err)
			}
			if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
				t.Fatalf("the dry run wrote:\nbefore %v\nafter  %v", before, after)
			}
			res, err := record.Repair(ctx, rdb, key, record.RepairArgs{Force: tc.force, Skew: time.Minute, Aside: ":corrupt:1"})
			if err != nil || len(res.Left) != 0 {
				t.Fatalf("repair = %+v, %v", res, err)
			}
			if tc.aside != "" {
				if n, _ := rdb.Exists(ctx, key+tc.aside+":corrupt:1").Result(); n != 1 {
					t.Errorf("%s%s was not kept aside", key, tc.aside)
				}
			}
			got, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok"))
			if tc.held {
				if err != nil || got.Outcome != record.Locked || got.Lock.Token != tc.fields["lock.token"] ||
					got.Lock.Job != tc.fields["lock.job"] {
					t.Fatalf("acquire after the repair = %+v, %v; want the lock kept by its holder", got, err)
				}
				return
			}
			if err != nil || got.Outcome != record.Acquired {
				t.Fatalf("acquire after the repair = %+v, %v", got, err)
			}
			if e, err := strconv.ParseInt(tc.fields["epoch"], 10, 64); err == nil && got.Epoch <= e {
				t.Errorf("epoch %d after the repair of a record at epoch %d", got.Epoch, e)
			}
			if got.Ver < tc.minVer {
				t.Errorf("ver %d after the repair, want at least %d: above every kept version", got.Ver, tc.minVer)
			}
			if len(got.Messages) != tc.messages || got.InboxSeq < int64(tc.messages) {
				t.Errorf("the acquire after the repair read %d messages (inbox.seq %d), want the %d waiting",
					len(got.Messages), got.InboxSeq, tc.messages)
			}
			if tc.fields["epoch"] == "three" && got.Epoch < time.Now().Add(-time.Hour).UnixMilli() {
				t.Errorf("a broken epoch repaired to %d, want the Redis time in ms (the epoch never goes back)", got.Epoch)
			}
		})
	}
}

// A lock that names no holder, a presence flag nobody judged and a schema
// are left, forced or not: no repair frees a lock. A broken presence flag
// under the token the caller judged is set to 1, the lock kept.
func TestRepairNeverFreesALock(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "repair:left")
	rdb.HSet(ctx, key, "ver", "1", "epoch", "1", "lock.token", "t", "lock.job", "", "lock.at", "5", "lock.presence", "x",
		"schema", "v2")
	for _, force := range []bool{false, true} {
		res, err := record.Repair(ctx, rdb, key, record.RepairArgs{Skew: time.Minute, Force: force})
		if err != nil || len(res.Left) != 3 || len(res.Changed) != 0 {
			t.Fatalf("repair (force %v) = %+v, %v; want lock.presence, lock.job and schema left", force, res, err)
		}
	}
	if tok := rdb.HGet(ctx, key, "lock.token").Val(); tok != "t" {
		t.Fatalf("lock.token %q after the repairs, want the lock kept", tok)
	}
	key = record.Key(r.Namespace, "PlayerData", "repair:flag")
	rdb.HSet(ctx, key, "ver", "1", "epoch", "1", "lock.token", "t", "lock.job", "a", "lock.at", "5", "lock.presence", "x")
	if res, err := record.Repair(ctx, rdb, key, record.RepairArgs{Skew: time.Minute, FlagToken: "other"}); err != nil ||
		len(res.Left) != 1 || res.Left[0].Field != "lock.presence" {
		t.Fatalf("repair under another token = %+v, %v; want lock.presence left", res, err)
	}
	if res, err := record.Repair(ctx, rdb, key, record.RepairArgs{Skew: time.Minute, FlagToken: "t"}); err != nil ||
		len(res.Left) != 0 || len(res.Changed) != 1 {
		t.Fatalf("repair under the lock's token = %+v, %v; want lock.presence set", res, err)
	}
	if f := rdb.HMGet(ctx, key, "lock.presence", "lock.token", "lock.job").Val(); f[0] != "1" || f[1] != "t" || f[2] != "a" {
		t.Fatalf("lock after the repair %v, want presence 1 under the same token and holder", f)
	}
}

// A save whose answer was lost, retried by the client after its profile let
// the lock go under the same token (a fence's give-back), answers
// already-stored: it landed before the release, the record holds its data,
// and the retry writes nothing (found by the robustness suite under a Redis
// restarted from its AOF: the retry used to answer lost, so Save reported
// ErrLockLost for a save whose data was stored). A save that did not land
// before the release (other data), or one after another session wrote,
// stays refused.
func TestSaveRetriedAfterItsOwnRelease(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	key := record.Key(r.Namespace, "PlayerData", "user:2")
	if res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-a", "tok-a")); err != nil ||
		res.Outcome != record.Acquired {
		t.Fatalf("acquire = %+v, %v", res, err)
	}
	save := record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: []byte("a's data"), Sum: "1234"}
	landed, err := record.Save(ctx, rdb, key, save)
	if err != nil || landed.How != record.HowSaved {
		t.Fatalf("save = %+v, %v", landed, err)
	}
	giveBack := record.SaveArgs{Mode: record.ModeRelease, Token: "tok-a"}
	if res, err := record.Save(ctx, rdb, key, giveBack); err != nil || res.How != record.HowReleased {
		t.Fatalf("release = %+v, %v", res, err)
	}
	before := snapshot(t, rdb, key)
	late := save
	late.Data, late.Sum = []byte("newer data"), "5678"
	if res, err := record.Save(ctx, rdb, key, late); err != nil || res.Outcome != record.LockLost {
		t.Fatalf("a save that did not land before the release = %+v, %v; want lost", res, err)
	}
	res, err := record.Save(ctx, rdb, key, save) // the client's retry
	if err != nil || res.Outcome != record.Written || res.How != record.HowAlreadyStored || res.Ver != landed.Ver ||
		!res.At.Equal(landed.At) {
		t.Fatalf("retried save = %+v, %v; want already-stored at ver %d, %v", res, err, landed.Ver, landed.At)
	}
	if after := snapshot(t, rdb, key); !reflect.DeepEqual(after, before) {
		t.Errorf("the retried save wrote:\nbefore %v\nafter  %v", before, after)
	}
	if res, err := record.Acquire(ctx, rdb, key, acquireArgs("server-b", "tok-b")); err != nil ||
		res.Outcome != record.Acquired {
		t.Fatalf("B's acquire = %+v, %v", res, err)
	}
	if res, err := record.Save(ctx, rdb, key, save); err != nil || res.Outcome != record.LockLost {
		t.Fatalf("the retry once B holds the lock = %+v, %v; want lost", res, err)
	}
}
