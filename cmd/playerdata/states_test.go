package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

// addMessage writes an inbox entry by hand, as Driver.Send stores one (b,
// and k when idem is not ""), and answers its id.
func (e testEnv) addMessage(t *testing.T, rk string, body []byte, idem string) string {
	t.Helper()
	vals := []any{record.EntryBody, body}
	if idem != "" {
		vals = append(vals, record.EntryIdemKey, idem)
	}
	id, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: record.InboxKey(rk), Values: vals}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func testInspectTellsMessageStates(t *testing.T, e testEnv) {
	ctx := context.Background()
	a := e.startServer(t, "server-a", serverOpts{}) // no OnMessage: messages wait
	a.hold(t, "user:7", 1)
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)
	rk := e.rk("PlayerData", "user:7")

	// Two waiting messages, the first refused twice; one dead letter.
	refused := e.addMessage(t, rk, mp(t, map[string]any{"item": "nope"}), "gift-1")
	fresh := e.addMessage(t, rk, mp(t, map[string]any{"coins": 5}), "")
	if err := e.rdb.HSet(ctx, record.TriesKey(rk), refused, 2, refused+record.TriesErrSuffix, "no such item",
		refused+record.TriesJobSuffix, "server-a").Err(); err != nil {
		t.Fatal(err)
	}
	deadID, err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: record.DeadKey(rk), Values: []any{record.EntryBody, "x",
		record.DeadID, "1700000000000-0", record.DeadTries, 5, record.DeadErr, "bad body", record.DeadJob, "server-b",
		record.EntryIdemKey, "gift-0"}}).Result()
	if err != nil {
		t.Fatal(err)
	}

	var rep inspectReport
	r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--driver", "PlayerData", "user:7")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	decodeJSON(t, r.stdout, &rep)
	in := rep.Inbox
	switch {
	case in.Count != 2 || len(in.Messages) != 2 || in.Refused != 1:
		t.Fatalf("inbox %+v, want 2 waiting, 1 refused", in)
	case in.Messages[0].ID != refused || in.Messages[0].Refusals != 2 || in.Messages[0].LastError != "no such item" ||
		in.Messages[0].RefusedBy != "server-a" || in.Messages[0].IdemKey != "gift-1" || in.Messages[0].AgeMS == nil:
		t.Fatalf("refused message %+v", in.Messages[0])
	case in.Messages[1].ID != fresh || in.Messages[1].Refusals != 0 || in.Messages[1].IdemKey != "":
		t.Fatalf("fresh message %+v", in.Messages[1])
	case in.Dead != 1 || len(in.DeadMessages) != 1:
		t.Fatalf("dead letters %d %+v, want 1", in.Dead, in.DeadMessages)
	}
	if d := in.DeadMessages[0]; d.ID != deadID || d.OriginalID != "1700000000000-0" || d.Attempts != 5 ||
		d.LastError != "bad body" || d.RefusedBy != "server-b" || d.IdemKey != "gift-0" || d.Bytes != 1 {
		t.Fatalf("dead letter %+v", d)
	}
	if !strings.Contains(in.Meaning, "server-a holds the profile and reads alive: a live holder applies and saves a message") ||
		!strings.Contains(in.Meaning, "1 message was refused Config.MaxMessageAttempts times and moved to the dead-letter stream") {
		t.Fatalf("meaning %q", in.Meaning)
	}

	r = runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:7")...)
	for _, want := range []string{
		"inbox      2 messages wait, the oldest " + refused, "1 refused at least once",
		refused + ", ", `idempotency key "gift-1", refused 2 times, last by server-a: "no such item"`,
		"dead       1 message dead-lettered", deadID + ` (sent as 1700000000000-0), 1 bytes, 5 attempts, last refused by server-b: "bad body"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect output has no %q:\n%s", want, r.stdout)
		}
	}

	// No holder: the next load applies them.
	idle := e.rk("PlayerData", "user:8")
	e.putRecord(t, idle, record.FieldEpoch, 1, record.FieldLockToken, "")
	e.addMessage(t, idle, mp(t, 1), "")
	r = runArgs(t, 10*time.Second, e.args("inspect", "--json", "--driver", "PlayerData", "user:8")...)
	decodeJSON(t, r.stdout, &rep)
	if rep.Inbox.Count != 1 || rep.Inbox.Dead != 0 || rep.Inbox.Meaning != "no server holds the profile: the next load applies them before its Join returns" {
		t.Fatalf("idle inbox %+v", rep.Inbox)
	}
}

func testPresenceShardsAreFound(t *testing.T, e testEnv) {
	const shards = 16
	a := e.startServer(t, "server-a", serverOpts{presenceShards: shards})
	a.hold(t, "user:1", 1)
	// The server marks its count in the layout hash on its first full check.
	var rep presenceReport
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := runArgs(t, 10*time.Second, e.args("presence", "--json")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		decodeJSON(t, r.stdout, &rep)
		if rep.Layout.Source == "marked" && len(rep.Servers) == 1 && rep.Servers[0].Status == "alive" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("presence never found server-a alive in a marked layout: %s", r.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rep.Shards != shards || rep.Servers[0].Shard != presencecore.ShardOf("server-a", shards) {
		t.Fatalf("presence read %d shards, server-a in shard %d; want %d shards, shard %d", rep.Shards, rep.Servers[0].Shard,
			shards, presencecore.ShardOf("server-a", shards))
	}
	// Every verb reads presence with the count found: server-a is alive.
	r := runArgs(t, 10*time.Second, e.args("locks", "--job", "server-a")...)
	if r.err != nil || !strings.Contains(r.stdout, "server-a is alive") || !strings.Contains(r.stdout, "1 lock held by server-a") {
		t.Fatalf("locks = %v:\n%s", r.err, r.stdout)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "--driver", "PlayerData", "user:1")...)
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "server-a is alive") {
		t.Fatalf("unlock of a live holder's lock = %v", r.err)
	}
	// An override that disagrees reads what the servers' marks say.
	r = runArgs(t, 10*time.Second, e.args("presence", "--presence-shards", "1")...)
	if r.err != nil || !strings.Contains(r.stdout, "servers of this deployment use [16]") {
		t.Fatalf("presence --presence-shards 1 = %v:\n%s", r.err, r.stdout)
	}
}

func testUnknownPresenceSaysWhy(t *testing.T, e testEnv) {
	// A namespace a moment old: a JobID that never beat reads unknown, for
	// the hash's first beat is younger than one PresenceTTL (10 s).
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:1", 1)
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)
	// p9 holds a lock (written by hand) but never beat: locks lists it and
	// says why its presence reads unknown (a JobID with neither would be a
	// mistyped --job: testMistypedJob).
	e.putRecord(t, e.rk("PlayerData", "user:9"), record.FieldEpoch, 1, record.FieldLockJob, "p9",
		record.FieldLockToken, "token-of-p9", record.FieldLockPresence, "1")
	var rep locksReport
	r := runArgs(t, 10*time.Second, e.args("locks", "--json", "--job", "p9")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	decodeJSON(t, r.stdout, &rep)
	// Which reason is true depends on how long this Redis has been up.
	node := e.rdb
	if e.cluster != nil {
		node = e.clusterNode(t, presencecore.KeyFor(e.ns))
	}
	info, err := node.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	up, _ := strconv.Atoi(infoField(info, "uptime_in_seconds"))
	want := "was first beaten into"
	if time.Duration(up)*time.Second >= presencecore.DefaultTTL+time.Second {
		want = "a new deployment or namespace, or a hash that was deleted (Redis did not restart"
	}
	if rep.Presence.Status != "unknown" || !strings.Contains(rep.Presence.Why, want) {
		t.Fatalf("p9's presence %+v (Redis up %d s), want unknown because %q", rep.Presence, up, want)
	}
	r = runArgs(t, 10*time.Second, e.args("locks", "--job", "p9")...)
	if strings.Contains(r.stdout, "restarted or failed over") || !strings.Contains(r.stdout, want) {
		t.Fatalf("locks output:\n%s", r.stdout)
	}
}

// clusterNode is a client of the master serving key.
func (e testEnv) clusterNode(t *testing.T, key string) redis.UniversalClient {
	t.Helper()
	n, err := e.rdb.(*redis.ClusterClient).MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testMistypedDriver(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	e.putRecord(t, e.rk("Inventory", "user:42"), record.FieldEpoch, 1)
	want := `driver "playerdata" has no record in namespace "` + e.ns + `"; drivers with records there, closest first: PlayerData, Inventory (`
	for _, args := range [][]string{
		{"inspect", "--driver", "playerdata", "user:42"},
		{"locks", "--job", "server-a", "--driver", "playerdata"},
		{"unlock", "--driver", "playerdata", "user:42"},
		{"send", "--driver", "playerdata", "user:42", "{}"},
		{"restore", "--driver", "playerdata", "--at", "-1h", "user:42"},
		{"replay", "--driver", "playerdata", "--all", "user:42"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := runArgs(t, 10*time.Second, e.args(args[0], args[1:]...)...)
			if exitStatus(r.err) != exitUsage || !strings.HasPrefix(r.err.Error(), want) {
				t.Fatalf("%s = %v (status %d), want %q… with status 2", args[0], r.err, exitStatus(r.err), want)
			}
		})
	}
}

// addDeadLetter writes a dead letter by hand, in the format the servers
// write (b, id, n, err, job, k), and answers its id.
func (e testEnv) addDeadLetter(t *testing.T, rk string, body []byte, orig, idem string) string {
	t.Helper()
	id, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: record.DeadKey(rk), Values: []any{
		record.EntryBody, body, record.DeadID, orig, record.DeadTries, 5, record.DeadErr, "no such item", record.DeadJob, "server-a",
		record.EntryIdemKey, idem}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func testReplayDeadLetters(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	a := e.startGrantServer(t, "server-a", "")
	p := a.hold(t, "user:5", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rk := e.rk("PlayerData", "user:5")
	first := e.addDeadLetter(t, rk, mp(t, grant{Coins: 7}), "1700000000000-0", "gift-7")
	second := e.addDeadLetter(t, rk, mp(t, grant{Coins: 9}), "1700000000001-0", "gift-9")
	dead := func() int64 { n, _ := e.rdb.XLen(ctx, record.DeadKey(rk)).Result(); return n }
	replayJSON := func(t *testing.T, extra ...string) replayReport {
		t.Helper()
		r := runArgs(t, 10*time.Second, e.args("replay", append([]string{"--json", "--driver", "PlayerData", "user:5"}, extra...)...)...)
		if r.err != nil {
			t.Fatalf("replay %q: %v", extra, r.err)
		}
		var rep replayReport
		decodeJSON(t, r.stdout, &rep)
		return rep
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no id", nil, "name the messages to replay by their ids"},
		{"not a dead letter", []string{"1-0"}, "neither a dead letter nor a waiting message of the profile: 1-0 (its dead " +
			"letters: " + first + ", " + second + "; its refused waiting messages: none)"},
	} {
		r := runArgs(t, 10*time.Second, e.args("replay", append([]string{"--driver", "PlayerData", "user:5"}, tc.args...)...)...)
		if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), tc.want) {
			t.Fatalf("%s: replay = %v, want status 2 and %q", tc.name, r.err, tc.want)
		}
	}
	if rep := replayJSON(t, "--dry-run", first); len(rep.Chosen) != 1 || rep.Moved != 0 || dead() != 2 || len(e.inbox(t, rk)) != 0 {
		t.Fatalf("dry run %+v: %d dead, inbox %v; want one chosen, nothing moved", rep, dead(), e.inbox(t, rk))
	}
	rep := replayJSON(t, first)
	if rep.Moved != 1 || rep.Chosen[0].OriginalID != "1700000000000-0" || rep.Chosen[0].IdemKey != "gift-7" || dead() != 1 ||
		!strings.Contains(rep.Next, "no server holds the profile") {
		t.Fatalf("replay of %s: %+v, %d dead left", first, rep, dead())
	}
	if rep := replayJSON(t, "--all"); rep.Moved != 1 || dead() != 0 || len(e.inbox(t, rk)) != 2 {
		t.Fatalf("replay --all: %+v, %d dead left, inbox %v", rep, dead(), e.inbox(t, rk))
	}
	// The replayed messages are the ones refused: a holder applies both.
	p, err := a.players.Join(ctx, "user:5")
	if err != nil {
		t.Fatal(err)
	}
	a.next(t, 5*time.Second)
	a.next(t, 5*time.Second)
	if got := coins(p); got != 1+7+9 {
		t.Fatalf("coins %d after the replayed grants of 7 and 9, want 17", got)
	}
	if rep := replayJSON(t, "--all"); rep.Moved != 0 || rep.Next != "the profile has no dead letter and no refused waiting "+
		"message: nothing to replay" {
		t.Fatalf("replay of nothing: %+v", rep)
	}
}

func testInspectShowsRefusalsAndDeadLetters(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	ctx := context.Background()
	a := e.startServer(t, "server-a", serverOpts{}) // no OnMessage: messages wait
	a.hold(t, "user:9", 1)
	rk := e.rk("PlayerData", "user:9")
	// Sent with playerdata send; a retry with the same idempotency key
	// stores nothing new and answers the first id.
	first := e.sendJSON(t, "--idempotency-key", "gift-1", "user:9", `{"item": "sword"}`)
	if again := e.sendJSON(t, "--idempotency-key", "gift-1", "user:9", `{"item": "sword"}`); again.ID != first.ID ||
		again.Inbox.Count != 1 {
		t.Fatalf("a retried send: %+v, want the first id %s and one message", again, first.ID)
	}
	second := e.sendJSON(t, "user:9", `{"item": "shield"}`).ID
	// The holder's saves count refusals (save.lua, as a server calls it):
	// the second refusal of the first message dead-letters it.
	token := e.lockOf(t, rk).Token
	for _, refused := range [][]string{{first.ID}, {first.ID, second}} {
		args := record.SaveArgs{Mode: record.ModeSave, Token: token, Job: "server-a", MaxAttempts: 2}
		for _, id := range refused {
			args.Refused = append(args.Refused, record.Refusal{ID: id, Err: "no such item"})
		}
		if res, err := record.Save(ctx, e.rdb, rk, args); err != nil || res.Outcome != record.Written {
			t.Fatalf("save with refusals: %+v, %v", res, err)
		}
	}
	r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--driver", "PlayerData", "user:9")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep inspectReport
	decodeJSON(t, r.stdout, &rep)
	in := rep.Inbox
	if in.Count != 1 || in.Messages[0].ID != second || in.Messages[0].Refusals != 1 || in.Messages[0].LastError != "no such item" ||
		in.Messages[0].RefusedBy != "server-a" {
		t.Fatalf("inbox %+v, want %s waiting, refused once by server-a", in, second)
	}
	if in.Dead != 1 {
		t.Fatalf("dead letters %d, want 1", in.Dead)
	}
	if d := in.DeadMessages[0]; d.OriginalID != first.ID || d.Attempts != 2 || d.LastError != "no such item" ||
		d.RefusedBy != "server-a" || d.IdemKey != "gift-1" || d.Bytes != first.BodyBytes {
		t.Fatalf("dead letter %+v, want %s after 2 attempts, idempotency key gift-1, %d bytes", d, first.ID, first.BodyBytes)
	}
}
