package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

func testWhere(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{})
	b := e.startServer(t, "server-b", serverOpts{})
	before := time.Now()
	a.hold(t, "user:1", 1)
	p := b.hold(t, "user:2", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)

	t.Run("json", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("where", "--json", "--driver", "PlayerData", "user:1", "user:2", "user:3")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep whereReport
		decodeJSON(t, r.stdout, &rep)
		if len(rep.Keys) != 3 {
			t.Fatalf("where answered %d keys, want 3: %+v", len(rep.Keys), rep)
		}
		k1, k2, k3 := rep.Keys[0], rep.Keys[1], rep.Keys[2]
		since, err := time.Parse(time.RFC3339Nano, k1.Since)
		if err != nil || k1.Job != "server-a" || k1.Epoch != 1 || !k1.PresenceFlag || k1.Presence == nil ||
			k1.Presence.Status != "alive" || since.Before(before.Add(-time.Second)) || since.After(time.Now()) {
			t.Fatalf("user:1 = %+v (since %v); want held by server-a since the join, alive", k1, err)
		}
		if !k2.Exists || k2.Job != "" || k2.Presence != nil || k2.Epoch != 1 {
			t.Fatalf("user:2 = %+v; want a record held by nobody", k2)
		}
		if k3.Exists || k3.Job != "" {
			t.Fatalf("user:3 = %+v; want no record", k3)
		}
	})

	t.Run("for people", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("where", "--driver", "PlayerData", "user:1", "user:2", "user:3")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		want := []string{"user:1 is held by server-a since ", "user:2 is held by no server: the next join takes it at once",
			"user:3 has no record of driver PlayerData"}
		if len(lines) != 3 {
			t.Fatalf("where printed %d lines, want one sentence per key:\n%s", len(lines), r.stdout)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) || !strings.HasSuffix(lines[i], ".") {
				t.Errorf("line %d = %q; want a sentence starting %q", i+1, lines[i], w)
			}
		}
		if !strings.Contains(lines[0], "ago), epoch 1; server-a is alive (its beat expires in") {
			t.Errorf("user:1's sentence says neither how long nor that server-a is alive: %q", lines[0])
		}
	})

	t.Run("since unknown", func(t *testing.T) {
		if err := e.rdb.HDel(ctx, e.rk("PlayerData", "user:1"), "lock.since").Err(); err != nil {
			t.Fatal(err)
		}
		r := runArgs(t, 10*time.Second, e.args("where", "--driver", "PlayerData", "user:1")...)
		if r.err != nil || !strings.Contains(r.stdout, "user:1 is held by server-a since a time this record does not say") {
			t.Fatalf("where of a lock without since = %v:\n%s", r.err, r.stdout)
		}
	})

	t.Run("mistyped driver", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("where", "--driver", "playerdata", "user:1")...)
		if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "PlayerData") {
			t.Fatalf("where with a mistyped driver = %v (status %d); want status 2 naming PlayerData", r.err, exitStatus(r.err))
		}
	})
}

func testWhereOfACrashedHolder(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{fast: true})
	a.hold(t, "user:7", 5)
	a.crash()
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Stopped)
	r := runArgs(t, 10*time.Second, e.args("where", "--presence-ttl", fastTTL.String(), "--driver", "PlayerData", "user:7")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "server-a is stopped (no live beat for a full PresenceTTL): the next join takes the lock over at once."; !strings.Contains(r.stdout, want) {
		t.Fatalf("where of a crashed holder:\n%s\nwant %q", r.stdout, want)
	}
}
