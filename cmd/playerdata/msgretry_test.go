package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// Sent twice with one --idempotency-key, the second send says it was a
// duplicate, of which message and where that message is (applied; or
// waiting, with who applies it), and stores nothing; the key reused with
// another body is refused.
func testSendTwiceWithAnIdempotencyKey(t *testing.T, e testEnv) {
	n := testsupport.StartNATS(t)
	a := e.startGrantServer(t, "server-a", n.URL) // Autosave off: only a notification makes it pull
	a.hold(t, "user:42", 10)
	rk := e.rk("PlayerData", "user:42")
	first := e.sendJSON(t, "--nats", n.URL, "--idempotency-key", "order-7", "user:42", `{"coins": 50}`)
	if first.Duplicate || first.State != "waiting" || !first.Notified {
		t.Fatalf("first send %+v, want stored, waiting, the holder told", first)
	}
	a.next(t, 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for len(e.inbox(t, rk)) != 0 { // the holder saves what it applied at once
		if time.Now().After(deadline) {
			t.Fatalf("inbox %v 5 s after the holder applied it", e.inbox(t, rk))
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := runArgs(t, 10*time.Second, e.args("send", "--driver", "PlayerData", "--nats", n.URL, "--idempotency-key", "order-7",
		"user:42", `{"coins": 50}`)...)
	if r.err != nil {
		t.Fatalf("the second send: %v\n%s", r.err, r.stderr)
	}
	out := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"message " + first.ID + " already sent to user:42 of PlayerData under this idempotency key (applied)",
		"a duplicate: an earlier send with this --idempotency-key stored message " + first.ID + "; nothing new was stored. " +
			"It was applied and saved already"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second send's output has no %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(out, "no notification went out") {
		t.Errorf("the second send blames NATS:\n%s", r.stdout)
	}

	// Offline: a duplicate of a waiting message says who applies it.
	e.sendJSON(t, "--allow-new", "--idempotency-key", "order-8", "user:43", `{"coins": 5}`)
	dup := e.sendJSON(t, "--idempotency-key", "order-8", "user:43", `{"coins": 5}`)
	if !dup.Duplicate || dup.State != "waiting" || !strings.Contains(dup.Next, "It still waits in the inbox; no server "+
		"holds the profile: the next load applies the message") || len(e.inbox(t, e.rk("PlayerData", "user:43"))) != 1 {
		t.Fatalf("a duplicate of a waiting message: %+v", dup)
	}
	r = runArgs(t, 10*time.Second, e.args("send", "--driver", "PlayerData", "--idempotency-key", "order-8", "user:43",
		`{"coins": 5000}`)...)
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "idempotency key names another message") ||
		!strings.Contains(r.err.Error(), "nothing stored") {
		t.Fatalf("the key reused with another body = %v (status %d), want status 1 and the conflict", r.err, exitStatus(r.err))
	}
	if ids := e.inbox(t, e.rk("PlayerData", "user:43")); len(ids) != 1 {
		t.Fatalf("inbox %v after the refused send, want the first message alone", ids)
	}

	// The key sent to another profile: refused, saying which profile the
	// key names, and nothing stored there.
	r = runArgs(t, 10*time.Second, e.args("send", "--driver", "PlayerData", "--allow-new", "--idempotency-key", "order-8",
		"user:44", `{"coins": 5}`)...)
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), `names a message sent to "user:43" of driver PlayerData`) ||
		!strings.Contains(r.err.Error(), "nothing stored") || strings.Contains(r.err.Error(), "send the first body again") {
		t.Fatalf("the key sent to another profile = %v (status %d), want status 1 naming user:43", r.err, exitStatus(r.err))
	}
	if ids := e.inbox(t, e.rk("PlayerData", "user:44")); len(ids) != 0 {
		t.Fatalf("inbox %v of the other profile after the refused send, want none", ids)
	}
}

// A message the live holder refused waits in the inbox; once OnMessage is
// mended, replay names it: its refusals start over and, with --nats, the
// holder (autosave off, its own retry half a minute away) is told at once
// and applies it.
func testReplayOfARefusedWaitingMessage(t *testing.T, e testEnv) {
	n := testsupport.StartNATS(t)
	var refuse atomic.Bool
	refuse.Store(true)
	applied := make(chan string, 4)
	a := e.startServer(t, "server-a", serverOpts{natsURL: n.URL, onMessage: func(d *profile, m datadriver.Message) error {
		if refuse.Load() {
			return errors.New("the shop is closed")
		}
		d.Coins++
		applied <- m.ID
		return nil
	}})
	p := a.hold(t, "user:42", 10)
	rk := e.rk("PlayerData", "user:42")
	sent := e.sendJSON(t, "--nats", n.URL, "user:42", `{"coins": 1}`)
	deadline := time.Now().Add(5 * time.Second)
	for e.rdb.HGet(context.Background(), record.TriesKey(rk), sent.ID).Val() != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the holder's refusal was not counted within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	refuse.Store(false) // mended
	r := runArgs(t, 10*time.Second, e.args("replay", "--json", "--driver", "PlayerData", "--nats", n.URL, "user:42", sent.ID)...)
	if r.err != nil {
		t.Fatalf("replay: %v\n%s", r.err, r.stderr)
	}
	var rep replayReport
	decodeJSON(t, r.stdout, &rep)
	if rep.Retried != 1 || rep.Moved != 0 || len(rep.Waiting) != 1 || rep.Waiting[0].Refusals != 1 ||
		rep.Waiting[0].LastError != "the shop is closed" || !rep.Notified || !strings.Contains(rep.Next, "was told over NATS") {
		t.Fatalf("replay of the waiting message: %+v", rep)
	}
	select {
	case id := <-applied:
		if id != sent.ID {
			t.Fatalf("applied %s, want %s", id, sent.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder did not apply the replayed message within 5 s")
	}
	if c := coins(p); c != 11 {
		t.Fatalf("coins %d, want 10 + 1", c)
	}
}
