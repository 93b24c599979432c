package messaging

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
)

var (
	testKey      = []byte("0123456789abcdef0123456789abcdef")
	otherKey     = []byte("fedcba9876543210fedcba9876543210")
	testEpoch    = time.UnixMilli(1_767_225_600_000) // 2026-01-01 00:00:00 UTC
	testPrefix   = DefaultPrefix
	macItemNames = []string{"domain", "prefix", "to", "stamp", "T", "D", "K", "R", "L", "S", "P", "A"}
)

// parseMACInput splits a MAC input back into its items, and fails unless
// the input is exactly a sequence of length-prefixed items.
func parseMACInput(b []byte) ([]string, error) {
	var items []string
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%d bytes left, too few for a length", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("item of %d bytes, %d left", n, len(b))
		}
		items = append(items, string(b[:n]))
		b = b[n:]
	}
	return items, nil
}

// macItems is what appendMACInput must write for (prefix, to, m).
func macItems(prefix, to string, m Message) []string {
	var stamp [8]byte
	binary.BigEndian.PutUint64(stamp[:], uint64(m.Stamp))
	return []string{"playerdata/handoff/v1", prefix, to, string(stamp[:]),
		string(m.Type), m.Driver, m.Key, m.Requester, m.Token, m.Sender, m.TraceParent, m.TraceState}
}

// checkMACInputParsesBack fails unless the MAC input of (prefix, to, m)
// parses back into exactly its twelve items: the input determines the
// triple, so no two triples can share one.
func checkMACInputParsesBack(tb testing.TB, prefix, to string, m Message) []byte {
	tb.Helper()
	in := appendMACInput(nil, prefix, to, m)
	got, err := parseMACInput(in)
	if err != nil {
		tb.Fatalf("MAC input of %q %q %+v does not parse: %v", prefix, to, m, err)
	}
	want := macItems(prefix, to, m)
	if len(got) != len(want) {
		tb.Fatalf("MAC input has %d items, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			tb.Fatalf("MAC input item %s = %q, want %q", macItemNames[i], got[i], want[i])
		}
	}
	return in
}

// TestMACInputLayout pins the MAC input byte for byte and the MAC of a
// known message, so that a change of the layout (which breaks every
// running server's MACs) cannot go unnoticed, and another implementation
// has a test vector.
func TestMACInputLayout(t *testing.T) {
	m := Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b", Token: "tok-1",
		Sender: "server-b", TraceParent: testTraceParent, Stamp: 0x0102030405060708}
	var want []byte
	item := func(s string) {
		want = append(want, byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s)))
		want = append(want, s...)
	}
	item("playerdata/handoff/v1")
	item("CKHandoff")
	item("server-a")
	item("\x01\x02\x03\x04\x05\x06\x07\x08")
	for _, s := range []string{"Q", "PlayerData", "user:42", "server-b", "tok-1", "server-b", testTraceParent, ""} {
		item(s)
	}
	got := appendMACInput(nil, "CKHandoff", "server-a", m)
	if !bytes.Equal(got, want) {
		t.Fatalf("MAC input:\n got %x\nwant %x", got, want)
	}
	h := hmac.New(sha256.New, testKey)
	h.Write(want)
	if mac := computeMAC(testKey, "CKHandoff", "server-a", m); !bytes.Equal(mac, h.Sum(nil)) {
		t.Fatalf("MAC %x, want HMAC-SHA256 of the input %x", mac, h.Sum(nil))
	}
	// The MAC under testKey: a test vector for other implementations.
	const vector = "9a65b07ddd0b8b770edad876c935fb74e295fc6a5e8f12d9661abfcfb2838c6b"
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != vector {
		t.Fatalf("MAC %s, want %s", got, vector)
	}
	checkMACInputParsesBack(t, "CKHandoff", "server-a", m)
}

// TestMACInputNoCollisions tries pairs of different messages that a careless
// MAC input would give the same bytes (fields written only when set, or
// joined without lengths or with a separator) and checks that theirs differ,
// that their MACs differ, and that the MAC of one does not verify the other.
func TestMACInputNoCollisions(t *testing.T) {
	type triple struct {
		prefix, to string
		m          Message
	}
	reply := func(change func(*Message)) Message {
		m := Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42"}
		change(&m)
		return m
	}
	at := func(prefix, to string, m Message) triple { return triple{prefix, to, m} }
	def := func(m Message) triple { return triple{testPrefix, "server-a", m} }
	tests := []struct {
		name string
		a, b triple
	}{
		{"bytes shifted from driver to key",
			def(reply(func(m *Message) { m.Driver, m.Key = "ab", "c" })),
			def(reply(func(m *Message) { m.Driver, m.Key = "a", "bc" }))},
		{"bytes shifted from key to requester",
			def(reply(func(m *Message) { m.Key, m.Requester = "kx", "job" })),
			def(reply(func(m *Message) { m.Key, m.Requester = "k", "xjob" }))},
		{"bytes shifted from token to sender",
			def(reply(func(m *Message) { m.Token, m.Sender = "t-a", "b" })),
			def(reply(func(m *Message) { m.Token, m.Sender = "t-", "ab" }))},
		{"bytes shifted between prefix and destination",
			at("CKHandoff", "a", reply(func(*Message) {})),
			at("CKHandof", "fa", reply(func(*Message) {}))},
		{"bytes shifted between destination and type",
			at(testPrefix, "aQ", Message{Type: TypeReply, Driver: "D", Key: "K"}),
			at(testPrefix, "a", Message{Type: "QR", Driver: "D", Key: "K"})},
		{"absent requester, token set vs requester set, token absent",
			def(reply(func(m *Message) { m.Requester, m.Token = "", "x" })),
			def(reply(func(m *Message) { m.Requester, m.Token = "x", "" }))},
		{"absent sender vs empty trace state (raw)",
			def(reply(func(m *Message) { m.Sender, m.TraceState = "", "z" })),
			def(reply(func(m *Message) { m.Sender, m.TraceState = "z", "" }))},
		{"trace parent vs trace state (raw)",
			def(reply(func(m *Message) { m.TraceParent, m.TraceState = "", testTraceParent })),
			def(reply(func(m *Message) { m.TraceParent, m.TraceState = testTraceParent, "" }))},
		{"requester and sender reordered",
			def(reply(func(m *Message) { m.Requester = "server-b" })),
			def(reply(func(m *Message) { m.Sender = "server-b" }))},
		{"driver and key swapped",
			def(reply(func(m *Message) { m.Driver, m.Key = "x", "y" })),
			def(reply(func(m *Message) { m.Driver, m.Key = "y", "x" }))},
		{"destination and sender swapped",
			at(testPrefix, "server-a", reply(func(m *Message) { m.Sender = "server-b" })),
			at(testPrefix, "server-b", reply(func(m *Message) { m.Sender = "server-a" }))},
		{"separator inside a value",
			def(reply(func(m *Message) { m.Driver, m.Key = "a\x00b", "c" })),
			def(reply(func(m *Message) { m.Driver, m.Key = "a", "b\x00c" }))},
		{"a value that looks like a length prefix",
			def(reply(func(m *Message) { m.Driver, m.Key = "a\x00\x00\x00\x01b", "c" })),
			def(reply(func(m *Message) { m.Driver, m.Key = "a", "b\x00\x00\x00\x01c" }))},
		{"empty key vs a key of the next item's length bytes (raw)",
			def(reply(func(m *Message) { m.Key, m.Requester = "", "\x00\x00\x00\x00" })),
			def(reply(func(m *Message) { m.Key, m.Requester = "\x00\x00\x00\x00", "" }))},
		{"request vs reply",
			def(Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "b"}),
			def(Message{Type: TypeReply, Driver: "D", Key: "K", Requester: "b"})},
		{"reply vs notify",
			def(Message{Type: TypeReply, Driver: "D", Key: "K"}),
			def(Message{Type: TypeNotify, Driver: "D", Key: "K"})},
		{"stamp byte order",
			def(reply(func(m *Message) { m.Stamp = 1 })),
			def(reply(func(m *Message) { m.Stamp = 1 << 56 }))},
		{"stamp sign",
			def(reply(func(m *Message) { m.Stamp = -1 })),
			def(reply(func(m *Message) { m.Stamp = math.MaxInt64 }))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.a == tt.b {
				t.Fatal("the pair is one message")
			}
			inA := checkMACInputParsesBack(t, tt.a.prefix, tt.a.to, tt.a.m)
			inB := checkMACInputParsesBack(t, tt.b.prefix, tt.b.to, tt.b.m)
			if bytes.Equal(inA, inB) {
				t.Fatalf("same MAC input %x", inA)
			}
			macA := computeMAC(testKey, tt.a.prefix, tt.a.to, tt.a.m)
			if bytes.Equal(macA, computeMAC(testKey, tt.b.prefix, tt.b.to, tt.b.m)) {
				t.Fatal("same MAC")
			}
			forged := tt.b.m
			forged.MAC = string(macA)
			if err := verify([][]byte{testKey}, tt.b.prefix, tt.b.to, forged, time.UnixMilli(forged.Stamp), time.Hour); !errors.Is(err, errUnauthenticated) {
				t.Fatalf("the MAC of one verifies the other: %v", err)
			}
		})
	}
}

// TestMACInputRandomTriples builds many triples from a tiny alphabet of
// troublesome bytes (NULs, length-like bytes, separators, letters of the
// field names) and checks that each input parses back and no two distinct
// triples share one.
func TestMACInputRandomTriples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 4, 'Q', 'R', 'M', ':', '-', '.', 'a'}
	str := func() string {
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	seen := make(map[string][3]any)
	for range 20000 {
		prefix, to := str(), str()
		m := Message{Type: Type(str()), Driver: str(), Key: str(), Requester: str(), Token: str(),
			Sender: str(), TraceParent: str(), TraceState: str(), Stamp: int64(rng.IntN(3)) - 1}
		in := string(checkMACInputParsesBack(t, prefix, to, m))
		this := [3]any{prefix, to, m}
		if prev, ok := seen[in]; ok && prev != this {
			t.Fatalf("%v and %v share the MAC input %x", prev, this, in)
		}
		seen[in] = this
	}
}

func TestVerify(t *testing.T) {
	unsigned := fullRequest()
	unsigned.Stamp, unsigned.MAC = 0, ""
	signed := sign(testKey, testPrefix, "server-a", unsigned, testEpoch)
	if signed.Stamp != testEpoch.UnixMilli() || len(signed.MAC) != macSize {
		t.Fatalf("sign: stamp %d, MAC of %d bytes", signed.Stamp, len(signed.MAC))
	}
	const window = defaultReplayWindow
	changed := func(change func(*Message)) Message {
		m := signed
		change(&m)
		return m
	}
	// resigned is signed again with its stamp set to at.
	resigned := func(stamp int64) Message {
		m := signed
		m.Stamp = stamp
		m.MAC = string(computeMAC(testKey, testPrefix, "server-a", m))
		return m
	}
	tests := []struct {
		name   string
		keys   [][]byte
		prefix string
		to     string
		m      Message
		now    time.Time
		ok     bool
	}{
		{"as signed", nil, "", "", signed, testEpoch, true},
		{"under the second key", [][]byte{otherKey, testKey}, "", "", signed, testEpoch, true},
		{"wrong key", [][]byte{otherKey}, "", "", signed, testEpoch, false},
		{"no key", [][]byte{}, "", "", signed, testEpoch, false},
		{"no MAC", nil, "", "", unsigned, testEpoch, false},
		{"another destination", nil, "", "server-c", signed, testEpoch, false},
		{"another prefix", nil, "mygame.CKHandoff", "", signed, testEpoch, false},
		{"type changed", nil, "", "", changed(func(m *Message) { m.Type = TypeReply }), testEpoch, false},
		{"driver changed", nil, "", "", changed(func(m *Message) { m.Driver = "Inventory" }), testEpoch, false},
		{"key changed", nil, "", "", changed(func(m *Message) { m.Key = "user:43" }), testEpoch, false},
		{"requester changed", nil, "", "", changed(func(m *Message) { m.Requester = "server-c" }), testEpoch, false},
		{"token changed", nil, "", "", changed(func(m *Message) { m.Token = "tok-2" }), testEpoch, false},
		{"token removed", nil, "", "", changed(func(m *Message) { m.Token = "" }), testEpoch, false},
		{"sender changed", nil, "", "", changed(func(m *Message) { m.Sender, m.Requester = "server-c", "server-c" }), testEpoch, false},
		{"trace parent changed", nil, "", "", changed(func(m *Message) { m.TraceParent = strings.Replace(m.TraceParent, "-01", "-00", 1) }), testEpoch, false},
		{"trace state removed", nil, "", "", changed(func(m *Message) { m.TraceState = "" }), testEpoch, false},
		{"purpose added", nil, "", "", changed(func(m *Message) { m.Purpose = PurposeRestore }), testEpoch, false},
		{"stamp changed", nil, "", "", changed(func(m *Message) { m.Stamp++ }), testEpoch, false},
		{"MAC bit flipped", nil, "", "", changed(func(m *Message) { m.MAC = "\x01" + m.MAC[1:] }), testEpoch, false},
		{"received at the far edge of the window", nil, "", "", signed, testEpoch.Add(window), true},
		{"received just past the window", nil, "", "", signed, testEpoch.Add(window + time.Millisecond), false},
		{"sender's clock ahead, at the edge", nil, "", "", signed, testEpoch.Add(-window), true},
		{"sender's clock ahead, past the edge", nil, "", "", signed, testEpoch.Add(-window - time.Millisecond), false},
		{"stamp at the start of time", nil, "", "", resigned(math.MinInt64), testEpoch, false},
		{"stamp at the end of time", nil, "", "", resigned(math.MaxInt64), testEpoch, false},
		{"stamp at the mock clock's zero", nil, "", "", resigned(0), time.UnixMilli(0), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, prefix, to := tt.keys, tt.prefix, tt.to
			if keys == nil {
				keys = [][]byte{testKey}
			}
			if prefix == "" {
				prefix = testPrefix
			}
			if to == "" {
				to = "server-a"
			}
			err := verify(keys, prefix, to, tt.m, tt.now, window)
			if tt.ok && err != nil {
				t.Fatalf("verify: %v", err)
			}
			if !tt.ok && !errors.Is(err, errUnauthenticated) {
				t.Fatalf("verify: %v, want errUnauthenticated", err)
			}
		})
	}
}

func TestAuthOptions(t *testing.T) {
	nc := connect(t, startNATS(t))
	short := make([]byte, MinKeyBytes-1)
	invalid := []struct {
		name string
		opts []option
	}{
		{"nil key", []option{withKey(nil)}},
		{"key one byte short", []option{withKey(short)}},
		{"short accepted key", []option{withKey(testKey), withAcceptedKeys(otherKey, short)}},
		{"accepted keys without a key", []option{withAcceptedKeys(otherKey)}},
		{"accept unauthenticated without a key", []option{withAcceptUnauthenticated()}},
		{"replay window without a key", []option{withReplayWindow(time.Minute)}},
		{"zero replay window", []option{withKey(testKey), withReplayWindow(0)}},
		{"negative replay window", []option{withKey(testKey), withReplayWindow(-time.Second)}},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			b, err := newNATSBus(nc, tt.opts...)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewNATSBus = %v, %v; want ErrInvalidConfig", b, err)
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		b := newBus(t, nc)
		if b.keys != nil || b.opts.acceptUnauthenticated || b.opts.replayWindow != defaultReplayWindow {
			t.Fatalf("defaults: keys %d, %+v", len(b.keys), b.opts)
		}
	})

	t.Run("key of the minimum length, rotation and window", func(t *testing.T) {
		key := bytes.Repeat([]byte{7}, MinKeyBytes)
		b := newBus(t, nc, withKey(key), withAcceptedKeys(otherKey), withAcceptUnauthenticated(), withReplayWindow(5*time.Second))
		if len(b.keys) != 2 || !bytes.Equal(b.keys[0], key) || !bytes.Equal(b.keys[1], otherKey) ||
			!b.opts.acceptUnauthenticated || b.opts.replayWindow != 5*time.Second {
			t.Fatalf("options not applied: keys %q, %+v", b.keys, b.opts)
		}
		key[0] = 8 // the bus keeps its own copy
		if b.keys[0][0] != 7 {
			t.Fatal("the bus shares the caller's key slice")
		}
	})
}

// authWorld is a NATS server with two client connections, one per server.
type authWorld struct {
	ncA, ncB *nats.Conn
	clk      *clock.Mock // every bus's clock unless a test gives another
}

func newAuthWorld(t *testing.T) *authWorld {
	s := startNATS(t)
	clk := clock.NewMock()
	clk.Set(testEpoch)
	return &authWorld{ncA: connect(t, s), ncB: connect(t, s), clk: clk}
}

// rawPublish sends b, as is, to server to's subject over nc.
func rawPublish(tb testing.TB, nc *nats.Conn, to string, b []byte) {
	tb.Helper()
	if err := nc.Publish(testPrefix+"."+to, b); err != nil {
		tb.Fatal(err)
	}
}

// signedBytes is the wire form of m signed with key for to at now.
func signedBytes(tb testing.TB, key []byte, prefix, to string, m Message, now time.Time) []byte {
	tb.Helper()
	b, err := Encode(sign(key, prefix, to, m, now))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestAuthenticatedPublishSubscribe(t *testing.T) {
	w := newAuthWorld(t)
	busA := newBus(t, w.ncA, withKey(testKey), withClock(w.clk))
	busB := newBus(t, w.ncB, withKey(testKey), withClock(w.clk))
	chA, _ := subscribe(t, busA, w.ncA, "server-a")
	chB, _ := subscribe(t, busB, w.ncB, "server-b")
	ctx := context.Background()

	req := fullRequest() // carries a made-up MAC: the bus replaces it
	if err := busB.Publish(ctx, "server-a", req); err != nil {
		t.Fatal(err)
	}
	got := receive(t, chA)
	if got.Stamp != testEpoch.UnixMilli() || got.MAC == req.MAC || len(got.MAC) != macSize {
		t.Fatalf("A received stamp %d and MAC %x, want the bus's", got.Stamp, got.MAC)
	}
	if want := sign(testKey, testPrefix, "server-a", req, testEpoch); got != want {
		t.Fatalf("A received %+v, want %+v", got, want)
	}

	reply := Message{Type: TypeReply, Driver: req.Driver, Key: req.Key, Sender: "server-a"}
	w.clk.Add(defaultReplayWindow) // the clocks agree; the message is still in time
	if err := busA.Publish(ctx, "server-b", reply); err != nil {
		t.Fatal(err)
	}
	if got, want := receive(t, chB), sign(testKey, testPrefix, "server-b", reply, w.clk.Now()); got != want {
		t.Fatalf("B received %+v, want %+v", got, want)
	}
	for name, bus := range map[string]*NATSBus{"A": busA, "B": busB} {
		if st := bus.Stats(); st.Published != 1 || st.Received != 1 || st.Dropped != 0 {
			t.Fatalf("%s stats %+v", name, st)
		}
	}
}

func TestPublishWithKeyNeedsSender(t *testing.T) {
	w := newAuthWorld(t)
	bus := newBus(t, w.ncB, withKey(testKey))
	m := validRequest() // no Sender
	if err := bus.Publish(context.Background(), "server-a", m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Publish without a sender: %v, want ErrMalformed", err)
	}
	m.Sender = "server-c" // not the requester
	if err := bus.Publish(context.Background(), "server-a", m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Publish of a request whose sender is not its requester: %v, want ErrMalformed", err)
	}
	if st := traffic(bus.Stats()); st != (Stats{}) {
		t.Fatalf("refused publishes counted: %+v", st)
	}
}

// TestUnkeyedBusSendsNoMAC checks that a bus without a key strips a MAC the
// caller left on a message, and clears one it receives before the handler
// sees it (a MAC a handler sees is one its bus verified).
func TestUnkeyedBusSendsNoMAC(t *testing.T) {
	w := newAuthWorld(t)
	raw := make(chan *nats.Msg, 1)
	if _, err := w.ncA.ChanSubscribe(testPrefix+".server-raw", raw); err != nil {
		t.Fatal(err)
	}
	busA, busB := newBus(t, w.ncA), newBus(t, w.ncB)
	ch, _ := subscribe(t, busA, w.ncA, "server-a")

	if err := busB.Publish(context.Background(), "server-raw", fullRequest()); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-raw:
		if bytes.Contains(msg.Data, []byte{0xa1, 'H'}) || bytes.Contains(msg.Data, []byte{0xa1, 'W'}) {
			t.Fatalf("an unkeyed bus sent a stamp or MAC: %x", msg.Data)
		}
	case <-time.After(waitTimeout):
		t.Fatal("nothing published")
	}

	rawPublish(t, w.ncB, "server-a", signedBytes(t, otherKey, testPrefix, "server-a", fullRequest(), testEpoch))
	got := receive(t, ch)
	want := fullRequest()
	want.Stamp, want.MAC = 0, ""
	if got != want {
		t.Fatalf("received %+v, want %+v", got, want)
	}
	if st := busA.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestKeyedBusDropsUnauthenticated sends a keyed server every way a message
// can fail authentication, then a good one, over one connection (so in
// order), and checks that only the good one arrives, each other is counted,
// and only the first drop is logged at Warn until a minute has passed.
func TestKeyedBusDropsUnauthenticated(t *testing.T) {
	w := newAuthWorld(t)
	logs := &syncBuffer{}
	busA := newBus(t, w.ncA, withKey(testKey), withClock(w.clk),
		withLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ch, _ := subscribe(t, busA, w.ncA, "server-a")
	unkeyed := newBus(t, w.ncB)

	req := fullRequest()
	now := testEpoch
	tampered := sign(testKey, testPrefix, "server-a", req, now)
	tampered.Key = "user:1"
	tamperedBytes, err := Encode(tampered)
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		send func()
	}{
		{"from a bus without a key", func() {
			if err := unkeyed.Publish(context.Background(), "server-a", req); err != nil {
				t.Fatal(err)
			}
		}},
		{"under another key", func() { rawPublish(t, w.ncB, "server-a", signedBytes(t, otherKey, testPrefix, "server-a", req, now)) }},
		{"signed for another server", func() { rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, testPrefix, "server-c", req, now)) }},
		{"signed under another prefix", func() {
			rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, "mygame.CKHandoff", "server-a", req, now))
		}},
		{"a field changed after signing", func() { rawPublish(t, w.ncB, "server-a", tamperedBytes) }},
		{"stamped too long ago", func() {
			rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, testPrefix, "server-a", req, now.Add(-defaultReplayWindow-time.Millisecond)))
		}},
		{"stamped too far ahead", func() {
			rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, testPrefix, "server-a", req, now.Add(defaultReplayWindow+time.Millisecond)))
		}},
	}
	for _, b := range bad {
		b.send()
	}
	goodAt := now.Add(-defaultReplayWindow + time.Second) // within the window, from a clock behind
	good := sign(testKey, testPrefix, "server-a", req, goodAt)
	rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, testPrefix, "server-a", req, goodAt))
	if got := receive(t, ch); got != good {
		t.Fatalf("delivered %+v, want %+v", got, good)
	}
	n := uint64(len(bad))
	if st := busA.Stats(); st != (Stats{Received: n + 1, Dropped: n, DroppedUnauthenticated: n}) {
		t.Fatalf("stats %+v", st)
	}
	out := logs.String()
	if c := strings.Count(out, "level=WARN msg=\"messaging: dropped an unauthenticated message"); c != 1 {
		t.Fatalf("%d warnings for %d drops, want 1:\n%s", c, n, out)
	}
	if c := strings.Count(out, "level=DEBUG msg=\"messaging: dropped message\""); c != int(n)-1 {
		t.Fatalf("%d debug lines, want %d:\n%s", c, n-1, out)
	}
	for _, reason := range []string{"no MAC", "verifies under no key", "off the receiver's clock"} {
		if !strings.Contains(out, reason) {
			t.Fatalf("no drop logged with %q:\n%s", reason, out)
		}
	}

	// A minute later, the next drop is a warning again.
	w.clk.Add(unauthenticatedWarnEvery)
	bad[0].send()
	rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, testPrefix, "server-a", req, w.clk.Now()))
	receive(t, ch)
	if c := strings.Count(logs.String(), "level=WARN"); c != 2 {
		t.Fatalf("%d warnings after a minute, want 2:\n%s", c, logs)
	}
}

// TestReplayRefused shows that a signed message is delivered once: the same
// message sent again within the window (a replay of a captured one) is
// dropped and counted as replayed, the first drop logged at Warn; once its
// stamp has left the window it is refused by its stamp. The same content
// signed at another instant is another message.
func TestReplayRefused(t *testing.T) {
	w := newAuthWorld(t)
	logs := &syncBuffer{}
	busA := newBus(t, w.ncA, withKey(testKey), withClock(w.clk), withReplayWindow(10*time.Second),
		withLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ch, _ := subscribe(t, busA, w.ncA, "server-a")
	captured := signedBytes(t, testKey, testPrefix, "server-a", fullRequest(), w.clk.Now())
	marker := func(key string) {
		t.Helper()
		m := Message{Type: TypeReply, Driver: "D", Key: key, Sender: "server-b"}
		rawPublish(t, w.ncB, "server-a", signedBytes(t, testKey, testPrefix, "server-a", m, w.clk.Now()))
		if got := receive(t, ch); got.Key != key {
			t.Fatalf("delivered %+v, want the marker %s", got, key)
		}
	}

	rawPublish(t, w.ncB, "server-a", captured)
	if got := receive(t, ch); got.Type != TypeRequest {
		t.Fatalf("delivered %+v, want the request", got)
	}
	w.clk.Add(10 * time.Second) // the edge of the window
	for range 3 {
		rawPublish(t, w.ncB, "server-a", captured)
	}
	marker("after-replays")
	if st := busA.Stats(); st.DroppedReplayed != 3 || st.Dropped != 3 {
		t.Fatalf("stats %+v, want 3 replays dropped", st)
	}
	again := signedBytes(t, testKey, testPrefix, "server-a", fullRequest(), w.clk.Now())
	rawPublish(t, w.ncB, "server-a", again)
	if got := receive(t, ch); got.Type != TypeRequest {
		t.Fatalf("delivered %+v, want the request signed again", got)
	}

	w.clk.Add(time.Millisecond)
	rawPublish(t, w.ncB, "server-a", captured)
	marker("past-the-window")
	if st := busA.Stats(); st.DroppedReplayed != 3 || st.DroppedUnauthenticated != 1 {
		t.Fatalf("stats %+v, want the replay past the window refused by its stamp", st)
	}
	if c := strings.Count(logs.String(), "level=WARN msg=\"messaging: dropped a replayed message"); c != 1 {
		t.Fatalf("%d warnings for 3 replays, want 1:\n%s", c, logs)
	}
}

// busKind is how a server of a rolling deploy is configured.
type busKind struct {
	name string
	opts []option
	key  []byte // the key its MACs verify under, for the marker; nil: none
}

var (
	kindOld        = busKind{"no key (older build or not enabled)", nil, nil}
	kindPermissive = busKind{"key, accepting unauthenticated", []option{withKey(testKey), withAcceptUnauthenticated()}, testKey}
	kindStrict     = busKind{"key required", []option{withKey(testKey)}, testKey}
	kindOtherKey   = busKind{"next key", []option{withKey(otherKey)}, otherKey}
	kindRotating   = busKind{"next key, accepting the previous", []option{withKey(otherKey), withAcceptedKeys(testKey)}, otherKey}
	kindRotating0  = busKind{"previous key, accepting the next", []option{withKey(testKey), withAcceptedKeys(otherKey)}, testKey}
)

// TestRollout checks, sender by receiver, which servers of a mixed fleet
// hear each other during the rollouts the package documentation describes:
// every pair that can meet within one step of a rollout must hear each
// other; the pairs marked false are why the steps exist.
func TestRollout(t *testing.T) {
	tests := []struct {
		from, to  busKind
		delivered bool
	}{
		// Turning authentication on, step 1: some servers accept both.
		{kindOld, kindPermissive, true},
		{kindPermissive, kindOld, true},
		{kindPermissive, kindPermissive, true},
		// Step 2: some servers require the key; everyone signs already.
		{kindPermissive, kindStrict, true},
		{kindStrict, kindPermissive, true},
		{kindStrict, kindStrict, true},
		// Skipping step 1: a server without the key is not heard.
		{kindOld, kindStrict, false},
		{kindStrict, kindOld, true},
		// Key rotation: old key accepting the next, then the next key
		// accepting the old, then the next key alone.
		{kindStrict, kindRotating0, true},
		{kindRotating0, kindStrict, true},
		{kindRotating0, kindRotating, true},
		{kindRotating, kindRotating0, true},
		{kindRotating, kindOtherKey, true},
		{kindOtherKey, kindRotating, true},
		// Skipping a rotation step.
		{kindStrict, kindOtherKey, false},
		{kindOtherKey, kindStrict, false},
	}
	s := startNATS(t)
	clk := clock.NewMock()
	clk.Set(testEpoch)
	for _, tt := range tests {
		t.Run(tt.from.name+" to "+tt.to.name, func(t *testing.T) {
			ncFrom, ncTo := connect(t, s), connect(t, s)
			from := newBus(t, ncFrom, append([]option{withClock(clk)}, tt.from.opts...)...)
			to := newBus(t, ncTo, append([]option{withClock(clk)}, tt.to.opts...)...)
			ch, _ := subscribe(t, to, ncTo, "server-a")

			m := Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b", Sender: "server-b", Token: "t"}
			if err := from.Publish(context.Background(), "server-a", m); err != nil {
				t.Fatal(err)
			}
			// A marker the receiver always accepts, after it on the same
			// connection: once it arrives, the message was delivered or
			// dropped.
			marker := Message{Type: TypeReply, Driver: "D", Key: "marker", Sender: "server-b"}
			mb, err := Encode(marker)
			if tt.to.key != nil {
				mb = signedBytes(t, tt.to.key, testPrefix, "server-a", marker, clk.Now())
			} else if err != nil {
				t.Fatal(err)
			}
			rawPublish(t, ncFrom, "server-a", mb)

			got := receive(t, ch)
			if delivered := got.Key == m.Key; delivered != tt.delivered {
				t.Fatalf("delivered %v, want %v (stats %+v)", delivered, tt.delivered, to.Stats())
			}
			if tt.delivered {
				receive(t, ch) // the marker
			}
		})
	}
}

// A request with a Purpose is covered by its MAC (a changed or removed
// purpose does not verify), and a message without one is covered exactly
// as before Purpose existed (the twelve items of TestMACInputLayout).
func TestMACCoversPurpose(t *testing.T) {
	m := fullRequest()
	m.Stamp, m.MAC = 0, ""
	without := appendMACInput(nil, testPrefix, "server-a", m)
	m.Purpose = PurposeRestore
	with := appendMACInput(nil, testPrefix, "server-a", m)
	want := append(append(bytes.Clone(without), 0, 0, 0, byte(len(PurposeRestore))), PurposeRestore...)
	if !bytes.Equal(with, want) {
		t.Fatalf("MAC input with a purpose = %q, want the v1 input then the purpose as a thirteenth item %q", with, want)
	}
	signed := sign(testKey, testPrefix, "server-a", m, testEpoch)
	for _, p := range []string{"", "other"} {
		c := signed
		c.Purpose = p
		if bytes.Equal([]byte(c.MAC), computeMAC(testKey, testPrefix, "server-a", c)) {
			t.Errorf("purpose %q verifies under the MAC made for %q", p, PurposeRestore)
		}
	}
}
