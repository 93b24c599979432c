package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// grant is the message body of these tests, as a game decodes it.
type grant struct {
	Coins int    `msgpack:"coins"`
	Note  string `msgpack:"note"`
}

// grantServer is a server whose OnMessage adds a grant's coins to the
// profile and hands every message it applied to the test.
type grantServer struct {
	*testServer
	applied chan datadriver.Message
}

// startGrantServer starts job with OnMessage, on NATS when natsURL is set
// (its messages signed with key, when given).
func (e testEnv) startGrantServer(t *testing.T, job, natsURL string, key ...byte) *grantServer {
	t.Helper()
	applied := make(chan datadriver.Message, 16)
	s := e.startServer(t, job, serverOpts{natsURL: natsURL, requestKey: key, onMessage: func(d *profile, m datadriver.Message) error {
		var g grant
		if err := m.Decode(&g); err != nil {
			return err
		}
		d.Coins += g.Coins
		applied <- m
		return nil
	}})
	return &grantServer{testServer: s, applied: applied}
}

// next waits for the next message the server applies.
func (s *grantServer) next(t *testing.T, within time.Duration) datadriver.Message {
	t.Helper()
	select {
	case m := <-s.applied:
		return m
	case <-time.After(within):
		t.Fatalf("%s applied no message within %s", s.job, within)
		return datadriver.Message{}
	}
}

// coins is the profile's coins as its session sees them.
func coins(p *datadriver.Profile[profile]) int {
	var c int
	p.View(func(d *profile) { c = d.Coins })
	return c
}

// inbox reads the inbox of rk directly: its message ids, oldest first.
func (e testEnv) inbox(t *testing.T, rk string) []string {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), record.InboxKey(rk), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// sendJSON runs send --json and returns its report, failing on an error.
func (e testEnv) sendJSON(t *testing.T, extra ...string) sendReport {
	t.Helper()
	r := runArgs(t, 10*time.Second, e.args("send", append([]string{"--json", "--driver", "PlayerData"}, extra...)...)...)
	if r.err != nil {
		t.Fatalf("send %q: %v\n%s", extra, r.err, r.stderr)
	}
	var rep sendReport
	decodeJSON(t, r.stdout, &rep)
	return rep
}

func testSendIsAppliedAtOnceByALiveHolder(t *testing.T, e testEnv) {
	n := testsupport.StartNATS(t)
	a := e.startGrantServer(t, "server-a", n.URL) // Autosave off: only a notification makes it pull
	p := a.hold(t, "user:42", 10)
	rk := e.rk("PlayerData", "user:42")

	rep := e.sendJSON(t, "--nats", n.URL, "user:42", `{"coins": 50, "note": "sorry for the outage"}`)
	// The inbox, read right after the send, holds the message, or nothing
	// when the holder already applied and saved it.
	if rep.ID == "" || rep.Holder != "server-a" || !rep.Notified || rep.Inbox == nil || rep.Inbox.Count > 1 {
		t.Fatalf("send report %+v, want an id, holder server-a notified, at most one message in the inbox", rep)
	}
	m := a.next(t, 5*time.Second)
	var g grant
	if err := m.Decode(&g); err != nil || m.ID != rep.ID || g != (grant{Coins: 50, Note: "sorry for the outage"}) {
		t.Fatalf("applied %s %+v (%v), want %s {50 sorry for the outage}", m.ID, g, err, rep.ID)
	}
	if c := coins(p); c != 60 {
		t.Fatalf("the live profile has %d coins, want 10 + 50", c)
	}
	// The holder saves the change at once, in the write that takes the
	// message out of the inbox.
	deadline := time.Now().Add(5 * time.Second)
	for len(e.inbox(t, rk)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("inbox %v 5 s after the holder applied it, want empty: the holder saves what it applies at once",
				e.inbox(t, rk))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-a.applied:
		t.Fatalf("message %s applied twice", m.ID)
	default:
	}
}

// TestSendToServersThatRequireARequestKey: a holder that authenticates its
// messages drops the notification of a send without the key, and applies
// at once the one of a send given the key with --request-key-file.
func testSendToServersThatRequireARequestKey(t *testing.T, e testEnv) {
	n := testsupport.StartNATS(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	a := e.startGrantServer(t, "server-a", n.URL, key...) // Autosave off: only a notification makes it pull
	p := a.hold(t, "user:42", 10)

	e.sendJSON(t, "--nats", n.URL, "user:42", `{"coins": 1}`) // unsigned: dropped by server-a
	select {
	case m := <-a.applied:
		t.Fatalf("server-a applied %s on an unsigned notification", m.ID)
	case <-time.After(500 * time.Millisecond):
	}

	file := filepath.Join(t.TempDir(), "request.key")
	if err := os.WriteFile(file, key, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := e.sendJSON(t, "--nats", n.URL, "--request-key-file", file, "user:42", `{"coins": 50}`)
	a.next(t, 5*time.Second) // the pull the signed notification started reads both messages
	a.next(t, 5*time.Second)
	if c := coins(p); c != 61 || rep.ID == "" {
		t.Fatalf("the live profile has %d coins, want 10 + 1 + 50 (report %+v)", c, rep)
	}

	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, key[:8], 0o600); err != nil {
		t.Fatal(err)
	}
	r := runArgs(t, 10*time.Second, e.args("send", "--driver", "PlayerData", "--nats", n.URL,
		"--request-key-file", short, "user:42", `{"coins": 1}`)...)
	if r.err == nil || !strings.Contains(r.err.Error()+r.stderr, "fewer than the 16 of a request key") {
		t.Fatalf("send with an 8-byte key: %v\n%s", r.err, r.stderr)
	}
}

func testSendWithoutNATSWaitsForTheHoldersNextSave(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	n := testsupport.StartNATS(t)
	a := e.startGrantServer(t, "server-a", n.URL)
	p := a.hold(t, "user:42", 10)

	r := runArgs(t, 10*time.Second, e.args("send", "--driver", "PlayerData", "user:42", `{"coins": 5}`)...)
	if r.err != nil {
		t.Fatalf("send: %v\n%s", r.err, r.stderr)
	}
	out := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"sent to user:42 of PlayerData", "1 message waits, the oldest",
		"server-a holds the profile; without --nats it was not told: it applies the message at its next autosave or inbox pull"} {
		if !strings.Contains(out, want) {
			t.Errorf("send output has no %q:\n%s", want, r.stdout)
		}
	}
	// Nobody told server-a, and its autosave is off: nothing applied yet.
	if c := coins(p); c != 10 {
		t.Fatalf("coins %d before any save, want 10", c)
	}
	// Its next save learns that a message was sent, and it pulls.
	if err := p.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.next(t, 5*time.Second)
	if c := coins(p); c != 15 {
		t.Fatalf("coins %d after the pull, want 15", c)
	}
}

func testSendToAnIdleProfileIsAppliedByTheNextJoin(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	a := e.startGrantServer(t, "server-a", "")
	p := a.hold(t, "user:7", 100)
	if err := p.Release(context.Background()); err != nil {
		t.Fatal(err)
	}

	rep := e.sendJSON(t, "user:7", `{"coins": 1}`)
	if rep.Holder != "" || !strings.Contains(rep.Next, "the next load applies the message before Join returns") {
		t.Fatalf("send report %+v, want no holder", rep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := a.players.Join(ctx, "user:7")
	if err != nil {
		t.Fatal(err)
	}
	if c := coins(p); c != 101 {
		t.Fatalf("coins %d when Join returned, want 101", c)
	}
	if m := a.next(t, time.Second); m.ID != rep.ID {
		t.Fatalf("applied %s, want %s", m.ID, rep.ID)
	}
}

func testInspectShowsTheInbox(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	a := e.startServer(t, "server-a", serverOpts{}) // no OnMessage: messages wait
	a.hold(t, "user:42", 10)

	empty := runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:42")...)
	if empty.err != nil || !strings.Contains(empty.stdout, "inbox      empty") {
		t.Fatalf("inspect of an empty inbox = %v:\n%s", empty.err, empty.stdout)
	}
	first := e.sendJSON(t, "user:42", `{"coins": 1}`)
	second := e.sendJSON(t, "user:42", `{"coins": 2}`)
	if first.ID == second.ID || second.Inbox.Count != 2 || second.Inbox.OldestID != first.ID {
		t.Fatalf("sends %+v then %+v, want two ids, two waiting, the first the oldest", first, second)
	}

	r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--driver", "PlayerData", "user:42")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep inspectReport
	decodeJSON(t, r.stdout, &rep)
	in := rep.Inbox
	switch {
	case in == nil || in.Count != 2 || in.OldestID != first.ID:
		t.Fatalf("inspect inbox %+v, want 2 messages, the oldest %s", in, first.ID)
	case in.OldestAt == nil || time.Since(*in.OldestAt).Abs() > time.Minute:
		t.Fatalf("oldest at %v, want about now", in.OldestAt)
	case in.OldestAgeMS == nil || *in.OldestAgeMS < 0 || *in.OldestAgeMS > 60_000:
		t.Fatalf("oldest age %v ms", in.OldestAgeMS)
	}

	r = runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:42")...)
	if r.err != nil || !strings.Contains(r.stdout, "inbox      2 messages wait, the oldest "+first.ID+", sent ") {
		t.Fatalf("inspect = %v:\n%s", r.err, r.stdout)
	}
}

func testSendBeyondMaxInboxStoresNothing(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	rk := e.rk("PlayerData", "user:42")
	ids := []string{
		e.sendJSON(t, "--max-inbox", "2", "user:42", `{"coins": 1}`).ID,
		e.sendJSON(t, "--max-inbox", "2", "user:42", `{"coins": 2}`).ID,
	}

	r := runArgs(t, 10*time.Second, e.args("send", "--max-inbox", "2", "--driver", "PlayerData", "user:42", `{"coins": 3}`)...)
	if r.err == nil || exitStatus(r.err) != exitFailed {
		t.Fatalf("a send beyond --max-inbox = %v, want exit status 1", r.err)
	}
	for _, want := range []string{"profile inbox is full (2 messages wait)", "nothing was stored"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q has no %q", r.err, want)
		}
	}
	if r.stdout != "" {
		t.Errorf("a refused send printed:\n%s", r.stdout)
	}
	if got := e.inbox(t, rk); strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("inbox %v, want only the two sent %v", got, ids)
	}
}

func testSendRefusesWhatItCannotSend(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	for _, tc := range []struct {
		name, key, body string
		want            string // in the error
	}{
		{"cut short", "user:42", `{"coins": `, "BODY_JSON: not valid JSON: it ends after 10 bytes"},
		{"bare words", "user:42", `{coins: 5}`, "BODY_JSON: not valid JSON at byte 1: invalid character 'c'"},
		{"two values", "user:42", `{"coins": 5} {}`, "BODY_JSON: not valid JSON: more follows the value at byte 12"},
		{"empty", "user:42", ` `, "BODY_JSON: empty"},
		{"number out of range", "user:42", `{"coins": 1e999}`, "BODY_JSON: the number 1e999 does not fit a float64"},
		{"no record", "user:404", `{"coins": 5}`, "no record of the key under driver PlayerData"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 10*time.Second, e.args("send", "--driver", "PlayerData", tc.key, tc.body)...)
			if r.err == nil || exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("send %s = %v (status %d), want status 2 and %q", tc.body, r.err, exitStatus(r.err), tc.want)
			}
			if ids := e.inbox(t, e.rk("PlayerData", tc.key)); len(ids) != 0 {
				t.Fatalf("a refused send stored %v", ids)
			}
		})
	}
	// --allow-new sends to a key never loaded.
	rep := e.sendJSON(t, "--allow-new", "user:404", `{"coins": 5}`)
	if ids := e.inbox(t, e.rk("PlayerData", "user:404")); len(ids) != 1 || ids[0] != rep.ID {
		t.Fatalf("inbox %v after --allow-new, want %s", ids, rep.ID)
	}
}

func TestJSONToMsgpack(t *testing.T) {
	// Keys sorted, integers in their smallest form, other numbers float64.
	b, err := jsonToMsgpack(`{"b": 1, "a": [true, null, "x", -1, 1.5]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x82, 0xa1, 'a', 0x95, 0xc3, 0xc0, 0xa1, 'x', 0xff, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xa1, 'b', 0x01}
	if string(b) != string(want) {
		t.Fatalf("msgpack %x, want %x", b, want)
	}
	// What a game's OnMessage decodes from it.
	type item struct{ Count int }
	var got struct {
		Coins int
		Big   uint64
		Rate  float64
		Items map[string]item
		Tags  []string
	}
	b, err = jsonToMsgpack(`{"Tags": ["a"], "Items": {"sword": {"Count": 300}}, "Rate": 2, "Big": 18446744073709551615, "Coins": -70000}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := msgpack.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Coins != -70000 || got.Big != 18446744073709551615 || got.Rate != 2 || got.Items["sword"].Count != 300 ||
		len(got.Tags) != 1 || got.Tags[0] != "a" {
		t.Fatalf("decoded %+v", got)
	}
}
