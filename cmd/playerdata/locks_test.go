package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

func testLocks(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{})
	b := e.startServer(t, "server-b", serverOpts{})
	for _, k := range []string{"user:1", "user:2", "user:3"} {
		a.hold(t, k, 1)
	}
	b.hold(t, "user:4", 1)
	inv, err := datadriver.NewDriver(a.node, datadriver.Config[profile]{Name: "Inventory", Autosave: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := inv.Join(ctx, "user:1"); err != nil {
		t.Fatal(err)
	}
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)

	t.Run("every driver", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("locks", "--json", "--job", "server-a")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep locksReport
		decodeJSON(t, r.stdout, &rep)
		var got []string
		for _, l := range rep.Locks {
			got = append(got, l.Driver+"/"+l.Key)
			if !l.PresenceFlag || l.Epoch != 1 || l.AgeMS < 0 || l.AgeMS > 10_000 || len(l.TokenPrefix) != 8 {
				t.Errorf("lock %+v: want presence flag, epoch 1, a recent age, a token prefix", l)
			}
		}
		if want := "Inventory/user:1 PlayerData/user:1 PlayerData/user:2 PlayerData/user:3"; strings.Join(got, " ") != want {
			t.Fatalf("locks of server-a: %v, want %s", got, want)
		}
		if rep.Records != 5 || !rep.Scan.Complete || rep.Scan.Cut || rep.Presence.Status != "alive" {
			t.Fatalf("report %+v: want 5 records read, a complete scan, server-a alive", rep)
		}
	})

	t.Run("one driver, for people", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("locks", "--job", "server-b", "--driver", "PlayerData")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, want := range []string{"server-b is alive (its beat expires in", "user:4", "PlayerData",
			"1 lock held by server-b, among 4 records read", "the scan examined every key"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("locks output has no %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "user:1") {
			t.Errorf("locks of server-b lists server-a's lock:\n%s", r.stdout)
		}
	})

	t.Run("a server nobody knows", func(t *testing.T) {
		// No lock, no presence entry: a mistyped --job (testMistypedJob).
		r := runArgs(t, 10*time.Second, e.args("locks", "--job", "server-z")...)
		if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "servers, closest first: server-a (alive), server-b (alive)") {
			t.Fatalf("locks of server-z = %v (status %d), want status 2 naming the servers", r.err, exitStatus(r.err))
		}
	})

	t.Run("every master", func(t *testing.T) {
		if e.cluster == nil {
			t.Skip("one Redis: one master")
		}
		// A lock of server-s on each master: a scan of one master finds one.
		want := map[string]string{} // master → key
		for i := 0; len(want) < len(e.cluster.Addrs); i++ {
			key := fmt.Sprintf("spread:%d", i)
			if m := e.cluster.MasterOf(e.rk("PlayerData", key)); want[m] == "" {
				want[m] = key
				e.putRecord(t, e.rk("PlayerData", key), record.FieldEpoch, 1, record.FieldLockJob, "server-s",
					record.FieldLockToken, "token-of-s-"+key, record.FieldLockPresence, "1")
			}
		}
		r := runArgs(t, 10*time.Second, e.args("locks", "--json", "--job", "server-s")...)
		var rep locksReport
		decodeJSON(t, r.stdout, &rep)
		if len(rep.Locks) != len(want) || rep.Scan.Masters != len(e.cluster.Addrs) || !rep.Scan.Complete {
			t.Fatalf("locks of server-s: %+v over %d masters, want one on each of %d", rep.Locks, rep.Scan.Masters, len(want))
		}
	})
}

func testLocksScanIsBounded(t *testing.T, e testEnv) {
	// 2,500 records of a crashed server-c, written directly: the scan reads
	// them in several batches.
	const n = 2500
	ctx := context.Background()
	if _, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			p.HSet(ctx, e.rk("PlayerData", fmt.Sprintf("user:%d", i)), record.FieldLockJob, "server-c",
				record.FieldLockToken, fmt.Sprintf("tok%08d", i), record.FieldLockPresence, "1", record.FieldEpoch, 3)
		}
		// Matches the pattern but is not a record.
		p.Set(ctx, e.rk("PlayerData", "not-a-hash"), "x", 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	r := runArgs(t, 30*time.Second, e.args("locks", "--json", "--job", "server-c", "--driver", "PlayerData")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep locksReport
	decodeJSON(t, r.stdout, &rep)
	if len(rep.Locks) != n || rep.Unreadable != 1 || !rep.Scan.Complete || rep.Scan.Matched != n+1 {
		t.Fatalf("%d locks, %d unreadable, scan %+v; want %d, 1, complete", len(rep.Locks), rep.Unreadable, rep.Scan, n)
	}
	if l := rep.Locks[0]; l.Epoch != 3 || !l.PresenceFlag || l.Driver != "PlayerData" || l.Key != "user:0" {
		t.Fatalf("first lock %+v", l)
	}

	r = runArgs(t, 30*time.Second, e.args("locks", "--job", "server-c", "--limit", "1000")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(r.stdout, "the scan stopped after examining about 1000 of") || !strings.Contains(r.stdout, "raise --limit") {
		t.Fatalf("locks --limit 1000 does not say it was cut short:\n%s", r.stdout)
	}
	r = runArgs(t, 30*time.Second, e.args("locks", "--json", "--job", "server-c", "--limit", "1000")...)
	decodeJSON(t, r.stdout, &rep)
	if !rep.Scan.Cut || rep.Scan.Complete || rep.Scan.Examined != 1000 || len(rep.Locks) >= n {
		t.Fatalf("scan %+v with %d locks; want cut after 1000 keys", rep.Scan, len(rep.Locks))
	}
}

func TestParseRecordKey(t *testing.T) {
	for _, tc := range []struct {
		ns, driver, rk   string
		wantDrv, wantKey string
		wantOK           bool
	}{
		{"g", "", "g:{PlayerData:user:1}", "PlayerData", "user:1", true},
		{"g", "Player:Data", "g:{Player:Data:user:1}", "Player:Data", "user:1", true},
		{"", "", "{Inv:k}", "Inv", "k", true},
		{"g", "", "h:{Inv:k}", "", "", false},
		{"g", "", "g:trade:{t1}", "", "", false},
	} {
		drv, key, ok := parseRecordKey(tc.ns, tc.driver, tc.rk)
		if drv != tc.wantDrv || key != tc.wantKey || ok != tc.wantOK {
			t.Errorf("parseRecordKey(%q, %q, %q) = %q, %q, %v", tc.ns, tc.driver, tc.rk, drv, key, ok)
		}
	}
	if got := recordPattern("a*b", "P?"); got != `a\*b:{P\?:*}` {
		t.Errorf("recordPattern = %q", got)
	}
}

// A --job that names no server (no lock, no presence entry) is a mistake,
// answered like a mistyped namespace or driver: status 2 and the servers
// that exist, closest first. A server that exists but holds nothing is an
// answer (status 0). And the status is the same on a Redis too large to
// scan whole (a scan cut by --limit).
func testMistypedJob(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	e.startServer(t, "server-b", serverOpts{}) // alive, holds nothing

	r := runArgs(t, 10*time.Second, e.args("locks", "--job", "server-ab")...)
	want := `server "server-ab" holds no lock among the records read and has no presence entry in `
	list := `: is --job right?; servers, closest first: server-a (alive), server-b (alive) (`
	if exitStatus(r.err) != exitUsage || !strings.HasPrefix(r.err.Error(), want) || !strings.Contains(r.err.Error(), list) {
		t.Fatalf("locks --job server-ab = %v (status %d), want %q…%q… with status 2", r.err, exitStatus(r.err), want, list)
	}
	if r.stdout != "" {
		t.Errorf("locks of an unknown job printed:\n%s", r.stdout)
	}

	r = runArgs(t, 10*time.Second, e.args("locks", "--job", "server-b")...)
	if r.err != nil || !strings.Contains(r.stdout, "0 locks held by server-b") {
		t.Fatalf("locks of a live server holding nothing = %v:\n%s", r.err, r.stdout)
	}

	// A Redis larger than the scan: 2,500 other records, scanned 1,000 keys
	// at a time, and --limit 1000.
	ctx := context.Background()
	if _, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 2500 {
			p.HSet(ctx, e.rk("Other", fmt.Sprintf("user:%d", i)), record.FieldEpoch, 1)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--job", "server-ab"},
		{"--job", "server-a", "--driver", "playerdata"},
	} {
		full := e.args("locks", append(args, "--limit", "1000")...)
		r := runArgs(t, 30*time.Second, full...)
		if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "keys examined of") {
			t.Errorf("run(%q) on a scan cut by --limit = %v (status %d), want status 2 as on a whole scan, saying the scan was cut",
				full, r.err, exitStatus(r.err))
		}
	}
}
