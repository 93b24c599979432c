package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// presenceJSON runs "presence --json" on e and decodes it.
func presenceJSON(t *testing.T, e testEnv) presenceReport {
	t.Helper()
	r := runArgs(t, 10*time.Second, e.args("presence", "--json", "--presence-ttl", fastTTL.String())...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep presenceReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	return rep
}

// sessionsOf maps each server of rep to its session count (-1: none shown).
func sessionsOf(rep presenceReport) map[string]int {
	got := map[string]int{}
	for _, s := range rep.Servers {
		got[s.JobID] = -1
		if s.Sessions != nil {
			got[s.JobID] = *s.Sessions
		}
	}
	return got
}

// testPresenceShowsSessions: "playerdata presence" shows each live server's
// session count (3 and 5 players), a count that changes after a release,
// none for a dead server, and a garbage count ignored with a note.
func testPresenceShowsSessions(t *testing.T, e testEnv) {
	ctx := context.Background()
	a := e.startServer(t, "server-a", serverOpts{fast: true})
	b := e.startServer(t, "server-b", serverOpts{fast: true})
	var held []any
	for i := range 3 {
		held = append(held, a.hold(t, fmt.Sprintf("a-%d", i), i))
	}
	for i := range 5 {
		b.hold(t, fmt.Sprintf("b-%d", i), i)
	}
	key := presencecore.KeyFor(e.ns)
	// A server that beat once, long ago, with a count: dead, so none shown.
	if err := e.rdb.HSet(ctx, key, "server-old", time.Now().Add(-time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, presencecore.LoadKey(key), "server-old", "7@"+strconv.FormatInt(time.Now().UnixMilli(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := sessionsOf(presenceJSON(t, e))
		if got["server-a"] == 3 && got["server-b"] == 5 && got["server-old"] == -1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions %v, want server-a 3, server-b 5, server-old none", got)
		}
		time.Sleep(fastBeat)
	}
	r := runArgs(t, 10*time.Second, e.args("presence", "--presence-ttl", fastTTL.String())...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for job, want := range map[string]string{"server": "sessions", "server-a": "3", "server-b": "5", "server-old": "-"} {
		if f := strings.Fields(lineOf(r.stdout, job+" ")); len(f) < 3 || f[2] != want {
			t.Errorf("%s's sessions column %v, want %q:\n%s", job, f, want, r.stdout)
		}
	}

	// A release shows at the next beat.
	p := held[0].(interface{ Release(context.Context) error })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2*fastBeat + time.Second)
	for sessionsOf(presenceJSON(t, e))["server-a"] != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("server-a's count still not 2 %v after its release", 2*fastBeat+time.Second)
		}
		time.Sleep(fastBeat / 4)
	}

	// Another tool writes garbage over server-b's count: shown as "?" with
	// a note, null in the JSON, never a crash. (server-b's next beat writes
	// its count back only when it changes or on a full check, so the
	// garbage stays for a while.)
	if err := e.rdb.HSet(ctx, presencecore.LoadKey(key), "server-b", "lots of players").Err(); err != nil {
		t.Fatal(err)
	}
	rep := presenceJSON(t, e)
	for _, s := range rep.Servers {
		if s.JobID == "server-b" && (s.Sessions != nil || !strings.Contains(s.SessionsNote, `"lots of players"`)) {
			t.Fatalf("server-b %+v: want no count and a note naming the garbage", s)
		}
	}
	r = runArgs(t, 10*time.Second, e.args("presence", "--presence-ttl", fastTTL.String())...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if f := strings.Fields(lineOf(r.stdout, "server-b ")); len(f) < 3 || f[2] != "?" ||
		!strings.Contains(r.stdout, "sessions: server-b in") ||
		!strings.Contains(r.stdout, "(ignored)") {
		t.Errorf("presence output does not flag server-b's garbage count:\n%s", r.stdout)
	}
	t.Logf("presence:\n%s", r.stdout)
}

// lineOf returns the first line of out that contains s.
func lineOf(out, s string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
