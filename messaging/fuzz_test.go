package messaging

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// fuzzBus returns a bus with no connection, for calling receive directly:
// with keys, it requires a MAC under them, on a mock clock at testEpoch.
func fuzzBus(keys ...[]byte) *NATSBus {
	clk := clock.NewMock()
	clk.Set(testEpoch)
	b := &NATSBus{opts: options{
		prefix: DefaultPrefix, maxBytes: DefaultMaxBytes, clock: clk,
		logger: slog.New(slog.DiscardHandler), replayWindow: defaultReplayWindow,
	}}
	if len(keys) > 0 {
		b.opts.key, b.keys = keys[0], keys
		b.replays = newReplayCache(defaultReplayWindow)
	}
	return b
}

// FuzzDecode checks that Decode never panics, sorts every failure into one of
// its three errors, and that whatever it accepts survives Encode and Decode
// unchanged. It also runs every input through the receive path of a bus
// without a key, which delivers exactly what Decode accepts and never a
// MAC, and of a bus with testKey, which delivers only the messages the seeds
// signed with testKey for server-a: no mutation forges a MAC.
func FuzzDecode(f *testing.F) {
	signed := make(map[Message]bool)
	for _, m := range []Message{
		validRequest(),
		{Type: TypeRequest, Driver: "D", Key: "K", Requester: "j"},
		{Type: TypeReply, Driver: "PlayerData", Key: "user:42"},
		{Type: TypeReply, Driver: "D", Key: strings.Repeat("k", 200), Requester: "j", Token: "t"},
		{Type: TypeNotify, Driver: "PlayerData", Key: "user:42", Sender: "server-b"},
		{Type: TypeReply, Driver: "D", Key: "K", Sender: "server-a", TraceParent: testTraceParent, TraceState: testTraceState},
		fullRequest(),
		sign(testKey, DefaultPrefix, "server-a", fullRequest(), testEpoch),
		sign(testKey, DefaultPrefix, "server-a", Message{Type: TypeNotify, Driver: "D", Key: "K", Sender: "s"}, testEpoch.Add(-defaultReplayWindow)),
		sign(testKey, DefaultPrefix, "server-a", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "s", Requester: "r"}, testEpoch.Add(time.Second)),
		sign(otherKey, DefaultPrefix, "server-a", fullRequest(), testEpoch),
		sign(testKey, DefaultPrefix, "server-c", fullRequest(), testEpoch),
	} {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		if verify([][]byte{testKey}, DefaultPrefix, "server-a", m, testEpoch, defaultReplayWindow) == nil {
			signed[m] = true
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append(b, 0))
	}
	if len(signed) != 3 {
		f.Fatalf("%d seeds verify, want 3", len(signed))
	}
	for _, v := range []any{
		map[string]any{"T": "X", "D": "d", "K": "k"},
		map[string]any{"T": "R", "D": 7, "K": "k"},
		map[string]any{"T": "R", "D": "d", "K": "k", "R": nil, "N": []any{1, map[string]any{"a": nil}}},
		map[string]any{"T": "Q", "D": "d", "K": "k", "R": "a.b"},
		map[any]any{"T": "R", "D": "d", "K": "k", 1: "x"},
		map[string]any{"T": "M", "D": "d", "K": "k", "S": "a", "W": -1, "H": bytes.Repeat([]byte{1}, macSize)},
		map[string]any{"T": "R", "D": "d", "K": "k", "S": "a", "W": uint64(1) << 63, "H": bytes.Repeat([]byte{1}, macSize)},
		map[string]any{"T": "R", "D": "d", "K": "k", "S": "a", "W": 1, "H": strings.Repeat("h", macSize)},
		map[string]any{"T": "R", "D": "d", "K": "k", "P": testTraceParent, "A": "a=\x01"},
		map[string]any{"T": "Q", "D": "d", "K": "k", "R": "b", "S": "a"},
		[]string{"Q", "D", "K", "R"},
		42,
		"Q",
	} {
		f.Add(mustMarshal(f, v))
	}
	f.Add([]byte{})
	f.Add([]byte{0xc0})
	f.Add([]byte{0xc1})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0})
	f.Add([]byte{0x81, 0xa1, 'D', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Add([]byte{0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xff, 1, 'a'})
	f.Add([]byte{0x84, 0xa1, 'T', 0xa1, 'R', 0xa1, 'D', 0xa1, 'a', 0xa1, 'K', 0xa1, 'k', 0xa1, 'D', 0xa1, 'b'})

	unkeyed, keyed := fuzzBus(), fuzzBus(testKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, 0)
		plain, delivered := unkeyed.receive("server-a", "CKHandoff.server-a", b)
		if delivered != (err == nil) || plain.MAC != "" || plain.Stamp != 0 {
			t.Fatalf("a bus without a key delivered %v (%+v) of %x; Decode: %v", delivered, plain, b, err)
		}
		if got, ok := keyed.receive("server-a", "CKHandoff.server-a", b); ok && !signed[got] {
			t.Fatalf("a bus with a key delivered %+v from %x, which no seed signed", got, b)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("Decode(%x): error %q wraps none of the decode errors", b, err)
			}
			if m != (Message{}) {
				t.Fatalf("Decode(%x) returned %+v with its error", b, m)
			}
			return
		}
		enc, err := Encode(m)
		if err != nil {
			t.Fatalf("Decode accepted %+v from %x but Encode refuses it: %v", m, b, err)
		}
		if len(enc) > len(b) {
			t.Fatalf("re-encoding of %x is longer (%d bytes) than the input", b, len(enc))
		}
		again, err := Decode(enc, 0)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)): %v", m, err)
		}
		if again != m {
			t.Fatalf("round trip changed the message: %+v, then %+v", m, again)
		}
	})
}

// FuzzMACInput checks, for any triple of prefix, destination and message
// fields (valid or not), that the MAC input parses back into exactly those
// items: the input determines the triple, so no two triples share one.
func FuzzMACInput(f *testing.F) {
	f.Add("CKHandoff", "server-a", "Q", "PlayerData", "user:42", "server-b", "tok", "server-b", testTraceParent, testTraceState, int64(1))
	f.Add("", "", "", "", "", "", "", "", "", "", int64(0))
	f.Add("a", "b\x00\x00\x00\x01c", "", "\x00\x00\x00\x00", "", "x", "", "", "", "z", int64(-1))
	f.Fuzz(func(t *testing.T, prefix, to, typ, driver, key, requester, token, sender, tp, ts string, stamp int64) {
		m := Message{Type: Type(typ), Driver: driver, Key: key, Requester: requester, Token: token,
			Sender: sender, TraceParent: tp, TraceState: ts, Stamp: stamp}
		checkMACInputParsesBack(t, prefix, to, m)
	})
}

// FuzzSignedTamper signs a message, changes one byte of its wire form, and
// checks that what still decodes and verifies is the very message signed:
// a change either breaks the message or is refused, never delivered as
// another message.
func FuzzSignedTamper(f *testing.F) {
	f.Add("PlayerData", "user:42", "tok-1", "server-b", true, uint(10), byte(1))
	f.Add("D", "K", "", "s", false, uint(0), byte(0x80))
	f.Add("D", strings.Repeat("k", 40), "t", "sender", true, uint(70), byte(0xff))
	f.Fuzz(func(t *testing.T, driver, key, token, sender string, trace bool, pos uint, flip byte) {
		m := Message{Type: TypeRequest, Driver: driver, Key: key, Requester: sender, Token: token, Sender: sender}
		if trace {
			m.TraceParent, m.TraceState = testTraceParent, testTraceState
		}
		m = sign(testKey, DefaultPrefix, "server-a", m, testEpoch)
		b, err := Encode(m)
		if err != nil || flip == 0 {
			return // not a valid message, or no change
		}
		b[pos%uint(len(b))] ^= flip
		got, err := Decode(b, 0)
		if err != nil {
			return
		}
		if verify([][]byte{testKey}, DefaultPrefix, "server-a", got, testEpoch, defaultReplayWindow) == nil && got != m {
			t.Fatalf("a changed byte gave %+v, which verifies; signed %+v", got, m)
		}
	})
}
