package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
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
