package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // as main does: failed dials are reported by the commands
	os.Exit(m.Run())
}

// result is what one in-process run of the program gave.
type result struct {
	stdout, stderr string
	err            error
	took           time.Duration
}

// runArgs runs the program in-process with args, as main would, bounded by
// within.
func runArgs(tb testing.TB, within time.Duration, args ...string) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out, errOut bytes.Buffer
	start := time.Now()
	err := run(ctx, args, &out, &errOut)
	return result{stdout: out.String(), stderr: errOut.String(), err: err, took: time.Since(start)}
}

// noEnv makes the program ignore REDIS_URL and NATS_URL of the test's
// environment.
func noEnv(t *testing.T) {
	t.Helper()
	t.Setenv(envRedis, "")
	t.Setenv(envNATS, "")
}

func TestUsageErrors(t *testing.T) {
	noEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"no command", nil, "no command"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"inspect", "--bogus", "--driver", "D", "k"}, "flag provided but not defined: -bogus"},
		{"inspect without driver", []string{"inspect", "user:1"}, "--driver is required"},
		{"inspect without key", []string{"inspect", "--driver", "PlayerData"}, "KEY is required"},
		{"inspect with two keys", []string{"inspect", "--driver", "PlayerData", "a", "b"}, "one KEY only"},
		{"presence with an argument", []string{"presence", "extra"}, `unexpected argument "extra"`},
		{"demo speed zero", []string{"demo", "--speed", "0"}, "--speed 0"},
		{"demo speed not a number", []string{"demo", "--speed", "fast"}, "invalid value"},
		{"demo unknown case", []string{"demo", "--case", "nope"}, "want one of stale-connection, failed-leave-save, crash, stalling-holder"},
		{"demo bad namespace", []string{"demo", "--namespace", "a.b"}, `--namespace "a.b"`},
		{"locks without job", []string{"locks"}, "--job is required"},
		{"locks limit zero", []string{"locks", "--job", "a", "--limit", "0"}, "--limit 0"},
		{"locks with an argument", []string{"locks", "--job", "a", "extra"}, `unexpected argument "extra"`},
		{"where without driver", []string{"where", "user:1"}, "--driver is required"},
		{"where without key", []string{"where", "--driver", "PlayerData"}, "at least one profile KEY is required"},
		{"where with a bad key", []string{"where", "--driver", "PlayerData", "user:1", ""}, "invalid profile key"},
		{"unlock without key", []string{"unlock", "--driver", "PlayerData"}, "KEY is required"},
		{"unlock with two keys", []string{"unlock", "a", "b"}, "one KEY only"},
		{"empty presence key", []string{"presence", "--presence-key", ""}, "--presence-key is empty"},
		{"presence shards negative", []string{"inspect", "--presence-shards", "-1", "--driver", "D", "k"}, "--presence-shards -1"},
		{"presence ttl too short", []string{"unlock", "--presence-ttl", "1ms", "k"}, "--presence-ttl 1ms is too short"},
		{"send without driver", []string{"send", "user:1", "{}"}, "--driver is required"},
		{"send without body", []string{"send", "--driver", "PlayerData", "user:1"}, "KEY and BODY_JSON are required"},
		{"send with an unquoted body", []string{"send", "--driver", "PlayerData", "user:1", "{", "}"}, "quote the JSON"},
		{"send bad JSON", []string{"send", "--driver", "PlayerData", "user:1", `{"coins":}`}, "BODY_JSON: not valid JSON at byte 9"},
		{"send max inbox zero", []string{"send", "--max-inbox", "0", "--driver", "D", "k", "{}"}, "--max-inbox 0"},
		{"restore without at", []string{"restore", "--driver", "PlayerData", "user:1"}, "--at is required"},
		{"restore without driver", []string{"restore", "--at", "-2h", "user:1"}, "--driver is required"},
		{"restore without key", []string{"restore", "--driver", "PlayerData", "--at", "-2h"}, "KEY is required"},
		{"restore bad time", []string{"restore", "--driver", "D", "--at", "yesterday", "k"}, `--at "yesterday": want RFC 3339`},
		{"restore time ahead", []string{"restore", "--driver", "D", "--at", "2h", "k"}, "a relative TIME looks back: -2h"},
		{"restore negative wait", []string{"restore", "--driver", "D", "--at", "-2h", "--wait", "-1s", "k"}, "--wait -1s"},
		{"restore empty subject prefix", []string{"restore", "--subject-prefix", "", "--driver", "D", "--at", "-2h", "k"}, "--subject-prefix is empty"},
		{"version with an argument", []string{"version", "extra"}, `unexpected argument "extra"`},
		{"help of an unknown command", []string{"help", "frobnicate"}, `help: unknown command "frobnicate"`},
		{"help of two commands", []string{"help", "inspect", "locks"}, "one COMMAND only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 5*time.Second, tc.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, r.err, tc.want)
			}
			// One line that says what was wrong; the help only when asked
			// (no command at all asks for it).
			if msg := r.err.Error(); strings.Contains(msg, "\n") || (tc.args != nil && !strings.Contains(msg, "see playerdata help")) {
				t.Fatalf("run(%q) = %q, want one line pointing at the help", tc.args, msg)
			}
			if printed := strings.Contains(r.stderr, "Usage"); printed != (tc.args == nil) {
				t.Fatalf("run(%q) printed usage %v on stderr, want %v:\n%s", tc.args, printed, tc.args == nil, r.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("run(%q) wrote to stdout:\n%s", tc.args, r.stdout)
			}
			if got := exitStatus(r.err); got != exitUsage {
				t.Fatalf("run(%q): exit status %d, want %d", tc.args, got, exitUsage)
			}
		})
	}
}

func TestHelpCommand(t *testing.T) {
	for name, cmd := range commands {
		t.Run(name, func(t *testing.T) {
			r := runArgs(t, 5*time.Second, "help", name)
			if r.err != nil || r.stdout != cmd.usage {
				t.Fatalf("help %s = %v:\n%s", name, r.err, r.stdout)
			}
			if !strings.Contains(usage, "playerdata "+name) {
				t.Errorf("the general help does not list %s", name)
			}
			if name == "demo" {
				return // demo's --help is demo's own
			}
			if name == "bench" {
				// Outside a checkout, without playerdata-bench: bench's own
				// help (in one, it builds and runs playerdata-bench's:
				// TestBenchBuildsFromACheckout).
				t.Chdir(t.TempDir())
			}
			flags := runArgs(t, 5*time.Second, name, "--help")
			if flags.err != nil || flags.stdout != cmd.usage {
				t.Fatalf("%s --help = %v:\n%s", name, flags.err, flags.stdout)
			}
			if !strings.Contains(cmd.usage, "Exit status") && name != "version" {
				t.Errorf("help %s says nothing of its exit status", name)
			}
		})
	}
	r := runArgs(t, 5*time.Second, "help", "help")
	if r.err != nil || !strings.Contains(r.stdout, "Usage: playerdata help [COMMAND]") {
		t.Fatalf("help help = %v:\n%s", r.err, r.stdout)
	}
}

// TestUsageListsEveryFlag checks each flag a command's help names is one
// the command takes (the flag, then --help: nothing runs).
func TestUsageListsEveryFlag(t *testing.T) {
	flagRE := regexp.MustCompile(`(?m)^\s+(--?[a-z][a-z-]*)`)
	for _, name := range []string{"inspect", "presence", "locks", "where", "unlock", "version"} {
		documented := flagRE.FindAllStringSubmatch(commands[name].usage, -1)
		if len(documented) == 0 {
			t.Fatalf("help %s lists no flags", name)
		}
		for _, m := range documented {
			r := runArgs(t, 5*time.Second, name, m[1]+"=1", "--help")
			if r.err != nil && strings.Contains(r.err.Error(), "flag provided but not defined") {
				t.Errorf("help %s documents %s, which the command does not take", name, m[1])
			}
		}
	}
}

func TestVersion(t *testing.T) {
	r := runArgs(t, 5*time.Second, "version", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep buildReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if rep.Go != runtime.Version() || rep.Module == "" || rep.Version == "" {
		t.Fatalf("version %+v", rep)
	}
	r = runArgs(t, 5*time.Second, "version")
	if r.err != nil || !strings.Contains(r.stdout, runtime.Version()) {
		t.Fatalf("version = %v:\n%s", r.err, r.stdout)
	}

	got := buildVersion(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/ckernel/playerdata", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-12-01T08:00:00Z"}, {Key: "vcs.modified", Value: "true"}}})
	if want := "github.com/ckernel/playerdata v1.2.3 git abc123 2026-12-01T08:00:00Z (modified), go1.26.8"; got.String() != want {
		t.Fatalf("version line %q, want %q", got.String(), want)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("boom"), exitFailed},
		{usagef("bad"), exitUsage},
		{fmt.Errorf("wrapped: %w", usagef("bad")), exitUsage},
		{fmt.Errorf("unlock k: %w: alive", errRefused), exitFailed},
	} {
		if got := exitStatus(tc.err); got != tc.want {
			t.Errorf("exitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"demo", "--help"}, {"inspect", "-h"}, {"presence", "--help"},
		{"locks", "--help"}, {"unlock", "-h"}, {"version", "--help"}, {"help", "unlock"}, {"help", "--help"}} {
		r := runArgs(t, 5*time.Second, args...)
		if r.err != nil || !strings.Contains(r.stdout, "Usage") {
			t.Fatalf("run(%q) = %v, stdout:\n%s", args, r.err, r.stdout)
		}
	}
}

func TestUnreachableServers(t *testing.T) {
	noEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"inspect", []string{"inspect", "--redis", "redis://127.0.0.1:1", "--driver", "PlayerData", "user:1"}, "cannot reach Redis at 127.0.0.1:1"},
		{"presence", []string{"presence", "--redis", "redis://127.0.0.1:1"}, "cannot reach Redis at 127.0.0.1:1"},
		{"demo redis", []string{"demo", "--redis", "redis://127.0.0.1:1"}, "cannot reach Redis at 127.0.0.1:1"},
		{"demo nats", []string{"demo", "--nats", "nats://127.0.0.1:1"}, "cannot reach NATS at nats://127.0.0.1:1"},
		{"bad redis url", []string{"presence", "--redis", "ftp://127.0.0.1:1"}, "bad Redis URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 30*time.Second, tc.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, r.err, tc.want)
			}
			if r.took > 5*time.Second {
				t.Fatalf("run(%q) took %s to fail; want a few seconds at most", tc.args, r.took)
			}
			if strings.Contains(r.err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", r.err)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\nb\n"); got != "a; b" {
		t.Fatalf("oneLine = %q", got)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:secret@host:6379/0": "redis://:***@host:6379/0",
		"nats://user:pw@h:4222":       "nats://user:***@h:4222",
		"nats://token@h:4222":         "nats://***@h:4222",
		"redis://127.0.0.1:6379":      "redis://127.0.0.1:6379",
		"127.0.0.1:6379":              "127.0.0.1:6379",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
