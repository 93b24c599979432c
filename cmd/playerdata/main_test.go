package main

import (
	"bytes"
	"context"
	"os"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 5*time.Second, tc.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, r.err, tc.want)
			}
			if !strings.Contains(r.stderr, "Usage") {
				t.Fatalf("run(%q) printed no usage on stderr:\n%s", tc.args, r.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("run(%q) wrote to stdout:\n%s", tc.args, r.stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"demo", "--help"}, {"inspect", "-h"}, {"presence", "--help"}} {
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
