package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

func testUnlockRefusesALiveHolder(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)
	before := e.lockOf(t, e.rk("PlayerData", "user:42"))

	for _, dry := range []bool{true, false} {
		args := e.args("unlock", "--driver", "PlayerData", "user:42")
		if dry {
			args = append(args, "--dry-run")
		}
		r := runArgs(t, 10*time.Second, args...)
		if r.err == nil || exitStatus(r.err) != exitFailed {
			t.Fatalf("unlock (dry run %v) of a live holder's lock = %v, want a refusal with status 1", dry, r.err)
		}
		for _, want := range []string{"refused", "server-a is alive (its beat expires in", "freeing its lock would make a second owner"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("refusal %q has no %q", r.err, want)
			}
		}
		if !strings.Contains(r.stdout, "held by server-a") {
			t.Errorf("unlock printed no lock:\n%s", r.stdout)
		}
	}
	// Read with another shard count than the servers', the live holder is
	// never taken for gone.
	for _, shards := range []string{"2", "3", "4", "7"} {
		r := runArgs(t, 10*time.Second, e.args("unlock", "--presence-shards", shards, "--driver", "PlayerData", "user:42")...)
		if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "refused") {
			t.Fatalf("unlock --presence-shards %s = %v, want a refusal", shards, r.err)
		}
	}
	if after := e.lockOf(t, e.rk("PlayerData", "user:42")); after.Token != before.Token || after.Job != "server-a" {
		t.Fatalf("the lock changed: %+v, was %+v", after, before)
	}
}

func testUnlockFreesACrashedHoldersLock(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{fast: true})
	a.hold(t, "user:7", 180)
	a.crash()
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Stopped)
	rk := e.rk("PlayerData", "user:7")
	held := e.lockOf(t, rk)

	// Without --driver the key is looked up; --dry-run changes nothing.
	r := runArgs(t, 10*time.Second, e.args("unlock", "--presence-ttl", fastTTL.String(), "--beat", fastBeat.String(), "--dry-run", "--json", "user:7")...)
	if r.err != nil {
		t.Fatalf("unlock --dry-run: %v\n%s", r.err, r.stderr)
	}
	var rep unlockReport
	decodeJSON(t, r.stdout, &rep)
	if rep.Outcome != unlockWouldFree || rep.Driver != "PlayerData" || rep.Holder != "server-a" || rep.Presence == nil ||
		rep.Presence.Status != "stopped" || rep.Answer != "stopped" || rep.ProofReads < 2 || rep.ProofMS < ms(fastBeat) {
		t.Fatalf("dry run: %+v; want a proof of two reads at least a beat apart", rep)
	}
	if l := e.lockOf(t, rk); l.Token != held.Token {
		t.Fatalf("--dry-run changed the lock: %+v", l)
	}

	r = runArgs(t, 10*time.Second, e.args("unlock", "--presence-ttl", fastTTL.String(), "--beat", fastBeat.String(), "--driver", "PlayerData", "user:7")...)
	if r.err != nil {
		t.Fatalf("unlock: %v\n%s", r.err, r.stderr)
	}
	out := strings.Join(strings.Fields(r.stdout), " ") // unwrapped
	for _, want := range []string{"server-a is stopped", "freed: the lock of server-a (token " + held.Token[:8] + "…) is released",
		"server-a is proven stopped: 2 presence reads at least one Beat (50ms) apart", "proof 2 presence reads in",
		"the next join on any server takes the record at once"} {
		if !strings.Contains(out, want) {
			t.Errorf("unlock output has no %q:\n%s", want, r.stdout)
		}
	}
	if l := e.lockOf(t, rk); l.Held() || l.Epoch != held.Epoch {
		t.Fatalf("after unlock: %+v, want a free lock at epoch %d", l, held.Epoch)
	}

	// Another server now loads the record at once, with A's last save.
	b := e.startServer(t, "server-b", serverOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	p, err := b.players.Join(ctx, "user:7")
	if err != nil {
		t.Fatalf("server-b's join after unlock: %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("server-b's join took %s; want at once", took)
	}
	p.View(func(d *profile) {
		if d.Coins != 180 {
			t.Errorf("server-b loaded %d coins, want A's 180", d.Coins)
		}
	})

	// Unlocking a free lock: nothing to do, status 0.
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "--driver", "PlayerData", "user:7")...)
	if r.err != nil || !strings.Contains(r.stdout, "the lock is free: nothing to do") {
		t.Fatalf("unlock of a free lock = %v:\n%s", r.err, r.stdout)
	}
}

// A holder whose presence reads unknown (as after a restart or failover:
// the hash's run mark names another Redis run) is never freed: unlock
// refuses, says why from what it read, and when to try again; once a live
// server has marked the new run for one PresenceTTL, the crashed holder
// reads stopped and unlock frees its lock.
func testUnlockOfAnUnknownHolder(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{fast: true})
	a.hold(t, "user:8", 5)
	a.crash()
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Stopped)
	if err := e.rdb.HSet(context.Background(), presencecore.KeyFor(e.ns), "\x00run", "0000").Err(); err != nil {
		t.Fatal(err)
	}
	rk := e.rk("PlayerData", "user:8")
	held := e.lockOf(t, rk)
	args := e.args("unlock", "--presence-ttl", fastTTL.String(), "--beat", fastBeat.String(), "--driver", "PlayerData", "user:8")
	for _, dry := range []bool{true, false} {
		r := runArgs(t, 10*time.Second, append(args, "--dry-run="+strconv.FormatBool(dry))...)
		if exitStatus(r.err) != exitFailed {
			t.Fatalf("unlock (dry run %v) of an unknown holder = %v, want a refusal (status 1)\n%s", dry, r.err, r.stdout)
		}
		// The reason is what was read: the hash's run mark names another run
		// than INFO's run_id.
		msg := strings.Join(strings.Fields(r.err.Error()), " ")
		for _, want := range []string{"server-a's presence is unknown: a missing beat proves nothing for",
			"an unknown reading never counts as stopped", "names Redis process 0000…, but this Redis is", "(try again in"} {
			if !strings.Contains(msg, want) {
				t.Errorf("refusal %q has no %q", msg, want)
			}
		}
		if l := e.lockOf(t, rk); l.Token != held.Token {
			t.Fatalf("the lock of an unknown holder changed: %+v", l)
		}
	}
	// A live server marks the new run; one PresenceTTL later a missing beat
	// proves a stop again.
	e.startServer(t, "server-c", serverOpts{fast: true})
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := runArgs(t, 10*time.Second, args...)
		if r.err == nil {
			if !strings.Contains(r.stdout, "freed") {
				t.Fatalf("unlock output:\n%s", r.stdout)
			}
			break
		}
		if time.Now().After(deadline) || !strings.Contains(r.err.Error(), "unknown") {
			t.Fatalf("unlock after the new run was marked = %v", r.err)
		}
		time.Sleep(fastBeat)
	}
	if l := e.lockOf(t, rk); l.Held() {
		t.Fatalf("lock still held: %+v", l)
	}
}

func testUnlockRefusals(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{fast: true})
	a.hold(t, "user:9", 5)
	a.crash()
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Stopped)
	// A lock whose holder does not beat presence (handoff off).
	e.putRecord(t, e.rk("PlayerData", "user:10"), record.FieldLockJob, "server-old", record.FieldLockToken, "tok-old-0123",
		record.FieldLockPresence, "0", record.FieldLockAt, time.Now().UnixMilli(), record.FieldEpoch, 1, record.FieldVer, 0)
	// A presence "hash" that is not a hash: every read fails.
	if err := e.rdb.Set(context.Background(), e.ns+":Broken", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		flags     []string
		want      string
	}{
		{"no presence flag", "user:10", nil, "the lock carries no presence flag: its holder does not protect it by presence"},
		{"no presence hash", "user:9", []string{"--presence-key", "Elsewhere"}, "there is no presence hash " + e.ns + ":Elsewhere"},
		{"failed presence read", "user:9", []string{"--presence-key", "Broken"}, "server-a's presence could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rk := e.rk("PlayerData", tc.key)
			before := e.lockOf(t, rk)
			args := append(e.args("unlock", "--presence-ttl", fastTTL.String(), "--beat", fastBeat.String(), "--driver", "PlayerData", tc.key), tc.flags...)
			r := runArgs(t, 10*time.Second, args...)
			if r.err == nil || exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("unlock = %v (status %d), want a refusal with status 1 saying %q", r.err, exitStatus(r.err), tc.want)
			}
			if after := e.lockOf(t, rk); after.Token != before.Token {
				t.Fatalf("the lock changed: %+v", after)
			}
		})
	}
}

func testUnlockWhenTheLockMovesMeanwhile(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{fast: true})
	for _, k := range []string{"user:1", "user:2"} {
		a.hold(t, k, 1)
	}
	a.crash()
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Stopped)

	for _, tc := range []struct {
		name    string
		key     string
		move    func(ctx context.Context, rk string, l recordLock) error
		outcome string
		status  int
	}{
		{"taken by another server", "user:1", func(ctx context.Context, rk string, _ recordLock) error {
			return e.rdb.HSet(ctx, rk, record.FieldLockJob, "server-b", record.FieldLockToken, "tok-of-b-0001").Err()
		}, unlockChanged, exitFailed},
		{"released by its holder", "user:2", func(ctx context.Context, rk string, l recordLock) error {
			_, err := record.Save(ctx, e.rdb, rk, record.SaveArgs{Mode: record.ModeRelease, Token: l.Token})
			return err
		}, unlockReleasedMeanwhile, exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rk := e.rk("PlayerData", tc.key)
			held := e.lockOf(t, rk)
			f := readFlags{conn: connFlags{redisURL: e.url, namespace: e.ns}, presenceKey: presencecore.DefaultKeyName, presenceTTL: fastTTL}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := f.open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var moveErr error
			hook := &testsupport.BeforeScriptHook{Key: rk, Do: func(ctx context.Context) { moveErr = tc.move(ctx, rk, held) }}
			node, err := r.nodeOf(ctx, rk) // the verb writes through the record's node (a Cluster's master of its slot)
			if err != nil {
				t.Fatal(err)
			}
			node.(redis.UniversalClient).AddHook(hook)
			rules := lockrule.Rules{MaxAge: defaults.LockTTL + defaults.LockSkew, Skew: defaults.LockSkew, Beat: fastBeat}
			rep, err := unlock(ctx, r, "PlayerData", tc.key, rules, false)
			if err != nil || moveErr != nil {
				t.Fatalf("unlock: %v (move: %v)", err, moveErr)
			}
			if rep.Outcome != tc.outcome {
				t.Fatalf("outcome %q (%s), want %q", rep.Outcome, rep.Reason, tc.outcome)
			}
			after := e.lockOf(t, rk)
			switch tc.outcome {
			case unlockChanged:
				if after.Job != "server-b" || after.Token != "tok-of-b-0001" || rep.NowHeldBy != "server-b" {
					t.Fatalf("the new holder's lock was touched: %+v (report %+v)", after, rep)
				}
				if !strings.Contains(rep.Reason, "the lock changed hands meanwhile: server-b holds it now") {
					t.Fatalf("reason %q", rep.Reason)
				}
			default:
				if after.Held() {
					t.Fatalf("lock %+v, want free", after)
				}
			}
		})
	}
}

func testUnlockFindsTheDriver(t *testing.T, e testEnv) {
	e.putRecord(t, e.rk("PlayerData", "user:1"), record.FieldEpoch, 1, record.FieldLockToken, "")
	e.putRecord(t, e.rk("Inventory", "user:1"), record.FieldEpoch, 1, record.FieldLockToken, "")
	e.putRecord(t, e.rk("PlayerData", "user:2"), record.FieldEpoch, 1, record.FieldLockToken, "")
	// A key that ends like user:2 but is another key of PlayerData.
	e.putRecord(t, e.rk("PlayerData", "x:user:2"), record.FieldEpoch, 1, record.FieldLockToken, "")

	r := runArgs(t, 10*time.Second, e.args("unlock", "user:1")...)
	if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "records under drivers Inventory, PlayerData: pick one with --driver") {
		t.Fatalf("unlock of a key under two drivers = %v", r.err)
	}
	// A driver name holds no colon, so the record of x:user:2 is not one of
	// user:2 under a driver "PlayerData:x": user:2 has one driver.
	r = runArgs(t, 10*time.Second, e.args("unlock", "--json", "--", "user:2")...)
	var rep unlockReport
	if r.err != nil {
		t.Fatalf("unlock user:2: %v", r.err)
	}
	decodeJSON(t, r.stdout, &rep)
	if rep.Driver != "PlayerData" || rep.Outcome != unlockAlreadyFree {
		t.Fatalf("unlock user:2: %+v", rep)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "--json", "--", "x:user:2")...)
	if r.err != nil {
		t.Fatalf("unlock x:user:2: %v", r.err)
	}
	decodeJSON(t, r.stdout, &rep)
	if rep.Driver != "PlayerData" || rep.Outcome != unlockAlreadyFree {
		t.Fatalf("unlock x:user:2: %+v", rep)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "user:nobody")...)
	if r.err != nil || !strings.Contains(r.stdout, "there is no record of the key under any driver: nothing to do") {
		t.Fatalf("unlock of a missing key = %v:\n%s", r.err, r.stdout)
	}
	// Other keys, so that a scan of COUNT 1 cannot go through them at once.
	if _, err := e.rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		for i := range 200 {
			p.Set(context.Background(), fmt.Sprintf("%s-filler:%d", e.ns, i), "x", 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "--limit", "1", "user:1")...)
	if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "the scan stopped there: give --driver, or raise --limit") {
		t.Fatalf("unlock of a key with a scan cut short = %v", r.err)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "--driver", "PlayerData", "user:nobody")...)
	if r.err != nil || !strings.Contains(r.stdout, "there is no record of the key: nothing to do") {
		t.Fatalf("unlock of a missing key = %v:\n%s", r.err, r.stdout)
	}
}
