package main

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testSpeed plays the timed cases ten times faster than the real timings:
// the crash case then takes about 1.3 s and the stalling case 1.5 s, with
// room left for a loaded machine (B's LockWait of 1.5 s against a crash
// takeover of about 1.3 s).
const testSpeed = "10"

func TestDemoJSON(t *testing.T) {
	noEnv(t)
	r := runArgs(t, 60*time.Second, "demo", "--json", "--speed", testSpeed)
	if r.err != nil {
		t.Fatalf("demo --json: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	var got []struct {
		Case          string  `json:"case"`
		Outcome       string  `json:"outcome"`
		WaitMS        float64 `json:"wait_ms"`
		Speed         float64 `json:"speed"`
		ScaledWaitMS  float64 `json:"scaled_wait_ms"`
		DataOK        bool    `json:"data_ok"`
		Promise       string  `json:"promise"`
		WithinPromise bool    `json:"within_promise"`
		Timeline      []struct {
			AtMS   float64 `json:"at_ms"`
			Server string  `json:"server"`
			Event  string  `json:"event"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("demo --json printed no JSON array: %v\n%s", err, r.stdout)
	}
	want := []struct {
		name, outcome, promise string
		speed                  float64
		minScaled, maxScaled   time.Duration
		event                  string // a line the timeline must hold
	}{
		{"stale-connection", "loaded", "about one save", 1, 0, time.Second, `Kick(user:101, joined_elsewhere): the game disconnects the player: "You joined another server."`},
		{"failed-leave-save", "loaded", "about one save", 1, 0, time.Second, "retrying its release at once"},
		// Crash: 10 to 15 s at real timings, a second of slack for measuring.
		{"crash", "loaded", "10 to 15 s", 10, 9 * time.Second, 16 * time.Second,
			"took the lock of user:103 from server A, which stopped beating presence"},
		// Stalling holder: refused after LockWait (15 s), never before it.
		{"stalling-holder", "refused", "kick after LockWait (15 s)", 10, 15 * time.Second, 19 * time.Second,
			`Kick(user:104, joined_elsewhere)`},
	}
	if len(got) != len(want) {
		t.Fatalf("demo --json gave %d cases, want %d:\n%s", len(got), len(want), r.stdout)
	}
	for i, w := range want {
		g := got[i]
		t.Run(w.name, func(t *testing.T) {
			if g.Case != w.name || g.Outcome != w.outcome || !g.DataOK || g.Promise != w.promise || g.Speed != w.speed {
				t.Fatalf("got %+v, want case %s, outcome %s, data_ok, promise %q, speed %v", g, w.name, w.outcome, w.promise, w.speed)
			}
			scaled := time.Duration(g.ScaledWaitMS * float64(time.Millisecond))
			if scaled < w.minScaled || scaled > w.maxScaled {
				t.Fatalf("scaled wait %s (wait %.1f ms × %v), want within [%s, %s]", scaled, g.WaitMS, g.Speed, w.minScaled, w.maxScaled)
			}
			if d := g.ScaledWaitMS - g.WaitMS*g.Speed; d > 0.1 || d < -0.1 {
				t.Fatalf("scaled_wait_ms %v is not wait_ms %v × speed %v", g.ScaledWaitMS, g.WaitMS, g.Speed)
			}
			if !g.WithinPromise {
				t.Fatalf("within_promise false: %+v", g)
			}
			found := false
			for _, e := range g.Timeline {
				found = found || strings.Contains(e.Event, w.event)
				// Each case starts clean (no presence of an earlier case's
				// A), and the stalling A keeps its lock: it never fences.
				for _, bad := range []string{"took the JobID over", "fenced"} {
					if strings.Contains(e.Event, bad) {
						t.Errorf("timeline line %q: no case should say %q", e.Event, bad)
					}
				}
			}
			if !found {
				t.Fatalf("timeline has no %q:\n%+v", w.event, g.Timeline)
			}
		})
	}
}

func TestDemoHuman(t *testing.T) {
	noEnv(t)
	r := runArgs(t, 60*time.Second, "demo", "--speed", testSpeed)
	if r.err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s", r.err, r.stdout)
	}
	for _, want := range []string{
		"embedded miniredis", "embedded nats-server",
		"[1/4] stale-connection", "[2/4] failed-leave-save", "[3/4] crash", "[4/4] stalling-holder",
		"speed 1: real timings", "speed 10: beat 300 ms, presence TTL 1.00 s",
		"release save of user:101 landed", "reply received: user:101 is no longer played there",
		"took the lock of user:103 from server A, which stopped beating presence",
		"presence of A read: stopped",
		"the record still holds A's lock", "Join failed closed after",
		"refused: the record keeps A's lock and last save",
		"Summary", "reference design promises", "10 to 15 s", "kick after LockWait (15 s)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output has no %q", want)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Error("demo coloured output that is not a terminal")
	}
	// A fact about the Redis is said once per run, not once per server and case.
	if n := strings.Count(r.stdout, "answers neither INFO memory nor CONFIG GET"); n != 1 {
		t.Errorf("the eviction-policy note is printed %d times, want once", n)
	}
	// The crashed A's silence is the time since its last beat: the case
	// kills it at once and proves it stopped after about one presence TTL
	// (1 s) and one beat (300 ms) at speed 10.
	if m := regexp.MustCompile(`A proven stopped: .*\(its last beat ([0-9.]+) (ms|s) ago\)`).FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("demo output does not say how long ago A last beat")
	} else if v, _ := strconv.ParseFloat(m[1], 64); m[2] != "s" || v < 1.0 {
		t.Errorf("A's last beat %s %s ago, want at least the presence TTL (1 s)", m[1], m[2])
	}
	if t.Failed() {
		t.Logf("output:\n%s", r.stdout)
	}
}

func TestDemoOneCase(t *testing.T) {
	noEnv(t)
	r := runArgs(t, 30*time.Second, "demo", "--json", "--case", "stale-connection", "--namespace", "onecase")
	if r.err != nil {
		t.Fatalf("demo --case: %v\n%s", r.err, r.stdout)
	}
	var got []caseResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 || got[0].Case != "stale-connection" {
		t.Fatalf("demo --case stale-connection gave %v:\n%s", err, r.stdout)
	}
}

func TestDescribeUnknownRecord(t *testing.T) {
	text, kind, _ := describe(slog.LevelError, "something new", map[string]string{"key": "user:1", "err": "boom"})
	if text != "something new key=user:1 err=boom" || kind != kindWarn {
		t.Fatalf("describe = %q, %v", text, kind)
	}
}
