package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/scriptcatalog"
	"github.com/ckernel/playerdata/testsupport"
)

func TestInspectShowsTheLastMove(t *testing.T) {
	e := newTestEnv(t)
	n := testsupport.StartNATS(t)
	a := e.startServer(t, "server-a", serverOpts{natsURL: n.URL})
	e.startServer(t, "server-b", serverOpts{natsURL: n.URL})
	p := a.hold(t, "user:7", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.MoveTo(ctx, "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	var moved *datadriver.MovedError
	if !errors.As(p.Err(), &moved) {
		t.Fatalf("source Err = %v", p.Err())
	}
	r := runArgs(t, 10*time.Second, "inspect", "--redis", e.url, "--namespace", e.ns, "--driver", "PlayerData", "user:7")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "move " + moved.ID + " COMMITTED: server-a → server-b"; !strings.Contains(r.stdout, want) {
		t.Fatalf("inspect output has no %q:\n%s", want, r.stdout)
	}
	r = runArgs(t, 10*time.Second, "inspect", "--json", "--redis", e.url, "--namespace", e.ns, "--driver", "PlayerData", "user:7")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	m := rep.LastMove
	if m == nil || m.ID != moved.ID || m.State != "COMMITTED" || m.From != "server-a" || m.To != "server-b" || m.At.IsZero() {
		t.Fatalf("last_move = %+v", m)
	}
}

// inspectJSON runs inspect --json of PlayerData's key with extra flags.
func inspectJSON(t *testing.T, e testEnv, key string, extra ...string) inspectReport {
	t.Helper()
	args := append(e.args("inspect", "--json", "--driver", "PlayerData"), extra...)
	r := runArgs(t, 10*time.Second, append(args, key)...)
	if r.err != nil {
		t.Fatalf("inspect: %v\n%s", r.err, r.stderr)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	return rep
}

// inspectUntil runs inspect --json (with extra flags) until ok holds of
// its report, failing the test after 8 s.
func inspectUntil(t *testing.T, e testEnv, key, what string, ok func(inspectReport) bool, extra ...string) inspectReport {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		rep := inspectJSON(t, e, key, extra...)
		if ok(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("inspect never showed %s; last: in flight %+v (%s), last move %+v", what, rep.MoveInFlight,
				rep.MoveQuery, rep.LastMove)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every state of a move shows in inspect: PREPARED and ACCEPTED while it
// is in flight (the holder answers over NATS), CANCELLED once a move ended
// without a flip (the record), COMMITTED once it flipped (the record).
func TestInspectShowsEveryMoveState(t *testing.T) {
	e := newTestEnv(t)
	n := testsupport.StartNATS(t)
	a := e.startServer(t, "server-a", serverOpts{natsURL: n.URL})
	e.startServer(t, "server-b", serverOpts{natsURL: n.URL})
	e.startServer(t, "server-deaf", serverOpts{}) // beats presence, hears nothing: never answers a prepare
	release := make(chan struct{})
	stall := newFaultHook(func(redis.Cmder) {})
	stall.set(func(ctx context.Context, cmd redis.Cmder) error {
		if in, ok := scriptcatalog.Identify(cmd); ok && in.Name() == record.ScriptFlip {
			select { // the flip hangs until the test lets it go
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})
	a.rdb.AddHook(stall)
	p := a.hold(t, "user:7", 5)
	withNATS := []string{"--nats", n.URL}

	if rep := inspectJSON(t, e, "user:7", withNATS...); rep.MoveInFlight != nil || !strings.Contains(rep.MoveQuery,
		"no move in flight") {
		t.Fatalf("before any move: in flight %+v (%s)", rep.MoveInFlight, rep.MoveQuery)
	}
	ctx, cancel := context.WithCancel(context.Background())
	moved := make(chan error, 1)
	go func() { moved <- p.MoveTo(ctx, "server-deaf") }()
	rep := inspectUntil(t, e, "user:7", "PREPARED", func(r inspectReport) bool { return r.MoveInFlight != nil }, withNATS...)
	prepared := rep.MoveInFlight
	if prepared.State != "PREPARED" || prepared.From != "server-a" || prepared.To != "server-deaf" || prepared.ID == "" {
		t.Fatalf("a move waiting for its target's answer shows as %+v", prepared)
	}
	cancel()
	if err := <-moved; !errors.Is(err, context.Canceled) {
		t.Fatalf("MoveTo cancelled: %v", err)
	}
	rep = inspectUntil(t, e, "user:7", "CANCELLED", func(r inspectReport) bool { return r.LastMove != nil })
	if m := rep.LastMove; m.ID != prepared.ID || m.State != "CANCELLED" || m.From != "server-a" || m.To != "server-deaf" ||
		!strings.Contains(m.Why, "context canceled") || m.At.IsZero() {
		t.Fatalf("the cancelled move %s shows as %+v", prepared.ID, m)
	}
	if r := runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:7")...); !strings.Contains(r.stdout,
		"move "+prepared.ID+" CANCELLED: server-a → server-deaf") {
		t.Fatalf("inspect output has no cancelled move:\n%s%s", r.stdout, r.stderr)
	}

	go func() { moved <- p.MoveTo(context.Background(), "server-b") }()
	rep = inspectUntil(t, e, "user:7", "ACCEPTED", func(r inspectReport) bool {
		return r.MoveInFlight != nil && r.MoveInFlight.State == "ACCEPTED"
	}, withNATS...)
	accepted := rep.MoveInFlight
	if accepted.ID == prepared.ID || accepted.From != "server-a" || accepted.To != "server-b" {
		t.Fatalf("a move whose flip is under way shows as %+v", accepted)
	}
	if r := runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "--nats", n.URL, "user:7")...); !strings.Contains(
		r.stdout, "move "+accepted.ID+" ACCEPTED: server-a → server-b (in flight") {
		t.Fatalf("inspect output has no move in flight:\n%s%s", r.stdout, r.stderr)
	}
	close(release)
	if err := <-moved; err != nil {
		t.Fatalf("MoveTo server-b: %v", err)
	}
	rep = inspectJSON(t, e, "user:7", withNATS...)
	if m := rep.LastMove; m == nil || m.ID != accepted.ID || m.State != "COMMITTED" || m.Why != "" || rep.MoveInFlight != nil {
		t.Fatalf("after the flip: last move %+v, in flight %+v", m, rep.MoveInFlight)
	}
}
