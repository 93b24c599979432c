package messaging

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// mustMarshal encodes v with msgpack, for building hand-made wire messages.
func mustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		tb.Fatalf("marshal %v: %v", v, err)
	}
	return b
}

func validRequest() Message {
	return Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b", Token: "tok-1"}
}

// Trace context values of the W3C Trace Context examples.
const (
	testTraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	testTraceState  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

// fullRequest is a request with every field set, signed with a made-up MAC.
func fullRequest() Message {
	m := validRequest()
	m.Sender = m.Requester
	m.TraceParent, m.TraceState = testTraceParent, testTraceState
	m.Stamp, m.MAC = 1767225600000, strings.Repeat("\xa5", macSize)
	return m
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		m    Message
	}{
		{"request", validRequest()},
		{"request without token", Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b"}},
		{"reply", Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42"}},
		{"reply carrying requester and token", Message{Type: TypeReply, Driver: "D", Key: "K", Requester: "job", Token: "t"}},
		{"unicode and odd bytes", Message{Type: TypeReply, Driver: "Données", Key: "ключ\x00\xff", Token: "🙂"}},
		{"long key", Message{Type: TypeReply, Driver: "D", Key: strings.Repeat("k", 1500)}},
		{"longest requester", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: strings.Repeat("j", maxJobIDBytes)}},
		{"notify", Message{Type: TypeNotify, Driver: "PlayerData", Key: "user:42"}},
		{"notify with sender and trace", Message{Type: TypeNotify, Driver: "D", Key: "K", Sender: "server-a", TraceParent: testTraceParent}},
		{"request with every field", fullRequest()},
		{"request of a restore", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "playerdata-restore-1", Token: "t",
			Purpose: PurposeRestore}},
		{"reply with sender, trace state and MAC", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "server-a",
			TraceParent: testTraceParent, TraceState: testTraceState, Stamp: 42, MAC: strings.Repeat("\x00", macSize)}},
		{"stamp zero (a mock clock at the epoch)", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", MAC: strings.Repeat("m", macSize)}},
		{"negative stamp", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", Stamp: -1 << 40, MAC: strings.Repeat("m", macSize)}},
		{"largest stamp", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", Stamp: math.MaxInt64, MAC: strings.Repeat("m", macSize)}},
		{"smallest stamp", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", Stamp: math.MinInt64, MAC: strings.Repeat("m", macSize)}},
		{"reply whose sender is not its requester", Message{Type: TypeReply, Driver: "D", Key: "K", Requester: "b", Sender: "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.m)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(b, 0)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got != tt.m {
				t.Fatalf("round trip: got %+v, want %+v", got, tt.m)
			}
		})
	}
}

// TestEncodeIsCanonical checks the key order and value forms Encode
// promises, byte for byte.
func TestEncodeIsCanonical(t *testing.T) {
	m := Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "b", Token: "t", Sender: "b",
		TraceParent: testTraceParent, TraceState: "x=y", Stamp: 300, MAC: strings.Repeat("\x01", macSize)}
	var want []byte
	want = append(want, 0x8a)
	for _, kv := range [][2]string{{"T", "Q"}, {"D", "D"}, {"K", "K"}, {"R", "b"}, {"L", "t"}, {"S", "b"}, {"P", testTraceParent}, {"A", "x=y"}} {
		want = append(want, mustMarshal(t, kv[0])...)
		want = append(want, mustMarshal(t, kv[1])...)
	}
	want = append(want, 0xa1, 'W', 0xcd, 0x01, 0x2c) // 300 as uint16
	want = append(want, 0xa1, 'H', 0xc4, macSize)    // bin8
	want = append(want, bytes.Repeat([]byte{1}, macSize)...)
	got, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode:\n got %x\nwant %x", got, want)
	}
}

func TestEncodeOmitsEmptyOptionalFields(t *testing.T) {
	b, err := Encode(Message{Type: TypeReply, Driver: "D", Key: "K"})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := msgpack.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"T": "R", "D": "D", "K": "K"}
	if len(raw) != len(want) {
		t.Fatalf("wire map %v, want %v", raw, want)
	}
	for k, v := range want {
		if raw[k] != v {
			t.Fatalf("wire map %v, want %v", raw, want)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		name string
		m    Message
		want []error
	}{
		{"empty", Message{}, []error{ErrMalformed}},
		{"no type", Message{Driver: "D", Key: "K"}, []error{ErrMalformed}},
		{"unknown type", Message{Type: "X", Driver: "D", Key: "K"}, []error{ErrUnknownType}},
		{"lowercase type", Message{Type: "q", Driver: "D", Key: "K", Requester: "j"}, []error{ErrUnknownType}},
		{"reply without driver", Message{Type: TypeReply, Key: "K"}, []error{ErrMalformed}},
		{"reply without key", Message{Type: TypeReply, Driver: "D"}, []error{ErrMalformed}},
		{"request without driver", Message{Type: TypeRequest, Key: "K", Requester: "j"}, []error{ErrMalformed}},
		{"request without key", Message{Type: TypeRequest, Driver: "D", Requester: "j"}, []error{ErrMalformed}},
		{"request without requester", Message{Type: TypeRequest, Driver: "D", Key: "K", Token: "t"}, []error{ErrMalformed}},
		{"requester with a dot", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "a.b"}, []error{ErrMalformed, errInvalidJobID}},
		{"requester wildcard", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: ">"}, []error{ErrMalformed, errInvalidJobID}},
		{"notify without driver", Message{Type: TypeNotify, Key: "K"}, []error{ErrMalformed}},
		{"purpose on a reply", Message{Type: TypeReply, Driver: "D", Key: "K", Purpose: PurposeRestore}, []error{ErrMalformed}},
		{"purpose not a word", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "j", Purpose: "Restore!"}, []error{ErrMalformed}},
		{"purpose too long", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "j",
			Purpose: strings.Repeat("p", maxPurposeBytes+1)}, []error{ErrMalformed}},
		{"notify without key", Message{Type: TypeNotify, Driver: "D"}, []error{ErrMalformed}},
		{"lowercase notify", Message{Type: "m", Driver: "D", Key: "K"}, []error{ErrUnknownType}},
		{"sender with a dot", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a.b"}, []error{ErrMalformed, errInvalidJobID}},
		{"sender too long", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: strings.Repeat("s", maxJobIDBytes+1)}, []error{ErrMalformed, errInvalidJobID}},
		{"request whose sender is not its requester", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "b", Sender: "a"}, []error{ErrMalformed}},
		{"invalid trace parent", Message{Type: TypeReply, Driver: "D", Key: "K", TraceParent: "00-xyz"}, []error{ErrMalformed, errInvalidTrace}},
		{"uppercase trace parent", Message{Type: TypeReply, Driver: "D", Key: "K", TraceParent: strings.ToUpper(testTraceParent)}, []error{ErrMalformed, errInvalidTrace}},
		{"trace state without trace parent", Message{Type: TypeReply, Driver: "D", Key: "K", TraceState: testTraceState}, []error{ErrMalformed}},
		{"trace state with a newline", Message{Type: TypeReply, Driver: "D", Key: "K", TraceParent: testTraceParent, TraceState: "a=b\n"}, []error{ErrMalformed, errInvalidTrace}},
		{"trace state too long", Message{Type: TypeReply, Driver: "D", Key: "K", TraceParent: testTraceParent, TraceState: strings.Repeat("a", maxTraceStateBytes+1)}, []error{ErrMalformed, errInvalidTrace}},
		{"stamp without MAC", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", Stamp: 1}, []error{ErrMalformed}},
		{"MAC without sender", Message{Type: TypeReply, Driver: "D", Key: "K", Stamp: 1, MAC: strings.Repeat("m", macSize)}, []error{ErrMalformed}},
		{"short MAC", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", Stamp: 1, MAC: strings.Repeat("m", macSize-1)}, []error{ErrMalformed}},
		{"long MAC", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "a", Stamp: 1, MAC: strings.Repeat("m", macSize+1)}, []error{ErrMalformed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.m)
			if err == nil {
				t.Fatalf("Encode(%+v) = %x, want an error", tt.m, b)
			}
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Fatalf("Encode error %q does not wrap %q", err, want)
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	valid, err := Encode(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	withTrailing := append(append([]byte{}, valid...), 0xc0)

	// map16 header claiming 3 entries, then a valid fixmap body's entries.
	map16 := append([]byte{0xde, 0x00, 0x03}, mustMarshal(t, map[string]string{"T": "R"})[1:]...)

	tests := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"nil input", nil, 0, ErrMalformed},
		{"empty input", []byte{}, 0, ErrMalformed},
		{"truncated by one byte", valid[:len(valid)-1], 0, ErrMalformed},
		{"truncated to the header", valid[:1], 0, ErrMalformed},
		{"truncated inside a key", valid[:2], 0, ErrMalformed},
		{"truncated map16", map16, 0, ErrMalformed},
		{"trailing garbage", withTrailing, 0, ErrMalformed},
		{"two messages back to back", append(append([]byte{}, valid...), valid...), 0, ErrMalformed},
		{"array instead of map", mustMarshal(t, []string{"Q", "PlayerData", "user:42", "job"}), 0, ErrMalformed},
		{"number at the top", mustMarshal(t, 42), 0, ErrMalformed},
		{"string at the top", mustMarshal(t, "Q"), 0, ErrMalformed},
		{"nil at the top", []byte{0xc0}, 0, ErrMalformed},
		{"reserved code 0xc1", []byte{0xc1}, 0, ErrMalformed},
		{"map inside an ext", append([]byte{0xc7, byte(len(valid)), 1}, valid...), 0, ErrMalformed},
		{"number for driver", mustMarshal(t, map[string]any{"T": "R", "D": 7, "K": "k"}), 0, ErrMalformed},
		{"number for type", mustMarshal(t, map[string]any{"T": 1, "D": "d", "K": "k"}), 0, ErrMalformed},
		{"bool for key", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": true}), 0, ErrMalformed},
		{"bytes for key", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": []byte("k")}), 0, ErrMalformed},
		{"array for token", mustMarshal(t, map[string]any{"T": "Q", "D": "d", "K": "k", "R": "j", "L": []string{"t"}}), 0, ErrMalformed},
		{"map for requester", mustMarshal(t, map[string]any{"T": "Q", "D": "d", "K": "k", "R": map[string]string{"a": "b"}}), 0, ErrMalformed},
		{"number as map key", mustMarshal(t, map[any]any{"T": "R", "D": "d", "K": "k", 1: "x"}), 0, ErrMalformed},
		{"nil as map key", []byte{0x81, 0xc0, 0xa1, 'x'}, 0, ErrMalformed},
		{"duplicate driver", []byte{0x84, 0xa1, 'T', 0xa1, 'R', 0xa1, 'D', 0xa1, 'a', 0xa1, 'K', 0xa1, 'k', 0xa1, 'D', 0xa1, 'b'}, 0, ErrMalformed},
		{"empty map", []byte{0x80}, 0, ErrMalformed},
		{"missing type", mustMarshal(t, map[string]any{"D": "d", "K": "k"}), 0, ErrMalformed},
		{"nil type", mustMarshal(t, map[string]any{"T": nil, "D": "d", "K": "k"}), 0, ErrMalformed},
		{"empty type", mustMarshal(t, map[string]any{"T": "", "D": "d", "K": "k"}), 0, ErrMalformed},
		{"missing driver", mustMarshal(t, map[string]any{"T": "R", "K": "k"}), 0, ErrMalformed},
		{"missing key", mustMarshal(t, map[string]any{"T": "R", "D": "d"}), 0, ErrMalformed},
		{"request missing requester", mustMarshal(t, map[string]any{"T": "Q", "D": "d", "K": "k", "L": "t"}), 0, ErrMalformed},
		{"request with invalid requester", mustMarshal(t, map[string]any{"T": "Q", "D": "d", "K": "k", "R": "a b"}), 0, ErrMalformed},
		{"map claiming more entries than bytes", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'T'}, 0, ErrMalformed},
		{"unknown field claiming a huge array", []byte{0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}, 0, ErrMalformed},
		{"unknown field claiming a huge string", []byte{0x81, 0xa1, 'x', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, 0, ErrMalformed},
		{"driver claiming a huge string", []byte{0x81, 0xa1, 'D', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, 0, ErrMalformed},
		{"unknown field claiming huge bytes", []byte{0x81, 0xa1, 'x', 0xc6, 0x7f, 0xff, 0xff, 0xff, 'a'}, 0, ErrMalformed},
		{"unknown field claiming a huge ext", []byte{0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xff, 1, 'a'}, 0, ErrMalformed},
		{"unknown field truncated fixext", []byte{0x81, 0xa1, 'x', 0xd8, 1, 'a'}, 0, ErrMalformed},
		{"number for sender", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "S": 5}), 0, ErrMalformed},
		{"bytes for trace parent", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "P": []byte(testTraceParent)}), 0, ErrMalformed},
		{"invalid sender", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "S": "a*"}), 0, ErrMalformed},
		{"request from another sender", mustMarshal(t, map[string]any{"T": "Q", "D": "d", "K": "k", "R": "b", "S": "a"}), 0, ErrMalformed},
		{"invalid trace parent", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "P": "00-00"}), 0, ErrMalformed},
		{"trace state alone", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "A": "a=b"}), 0, ErrMalformed},
		{"string for stamp", signedMap(t, map[string]any{"W": "1"}), 0, ErrMalformed},
		{"float for stamp", signedMap(t, map[string]any{"W": 1.5}), 0, ErrMalformed},
		{"stamp over int64", signedMap(t, map[string]any{"W": uint64(math.MaxInt64) + 1}), 0, ErrMalformed},
		{"stamp without MAC", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "S": "a", "W": 1}), 0, ErrMalformed},
		{"stamp without MAC, zero", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": "k", "S": "a", "W": 0}), 0, ErrMalformed},
		{"MAC without stamp", signedMap(t, map[string]any{"W": nil}), 0, ErrMalformed},
		{"MAC as a string", signedMap(t, map[string]any{"H": strings.Repeat("m", macSize)}), 0, ErrMalformed},
		{"short MAC", signedMap(t, map[string]any{"H": make([]byte, macSize-1)}), 0, ErrMalformed},
		{"long MAC", signedMap(t, map[string]any{"H": make([]byte, macSize+1)}), 0, ErrMalformed},
		{"empty MAC", signedMap(t, map[string]any{"H": []byte{}}), 0, ErrMalformed},
		{"nil MAC with a stamp", signedMap(t, map[string]any{"H": nil}), 0, ErrMalformed},
		{"MAC without sender", signedMap(t, map[string]any{"S": nil}), 0, ErrMalformed},
		{"MAC claiming a huge bin", []byte{0x81, 0xa1, 'H', 0xc6, 0x7f, 0xff, 0xff, 0xff, 'a'}, 0, ErrMalformed},
		{"MAC truncated", []byte{0x81, 0xa1, 'H', 0xc4, macSize, 'a'}, 0, ErrMalformed},
		{"stamp truncated", []byte{0x81, 0xa1, 'W', 0xcf, 0x01}, 0, ErrMalformed},
		{"duplicate stamp", []byte{0x82, 0xa1, 'W', 0x01, 0xa1, 'W', 0x02}, 0, ErrMalformed},
		{"duplicate MAC after nil", append([]byte{0x82, 0xa1, 'H', 0xc0, 0xa1, 'H', 0xc4, macSize}, make([]byte, macSize)...), 0, ErrMalformed},
		{"unknown type", mustMarshal(t, map[string]any{"T": "X", "D": "d", "K": "k"}), 0, ErrUnknownType},
		{"unknown type without other fields", mustMarshal(t, map[string]any{"T": "Z"}), 0, ErrUnknownType},
		{"oversized valid message", valid, len(valid) - 1, ErrTooLarge},
		{"oversized garbage", bytes.Repeat([]byte{0xc1}, DefaultMaxBytes+1), 0, ErrTooLarge},
		{"oversized at the default limit", mustMarshal(t, map[string]any{"T": "R", "D": "d", "K": strings.Repeat("k", DefaultMaxBytes)}), -1, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(tt.in, tt.max)
			if err == nil {
				t.Fatalf("Decode(%x) = %+v, want %v", tt.in, m, tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode(%x) error %q, want %q", tt.in, err, tt.want)
			}
			for _, other := range []error{ErrMalformed, ErrTooLarge, ErrUnknownType} {
				if other != tt.want && errors.Is(err, other) {
					t.Fatalf("Decode error %q also wraps %q", err, other)
				}
			}
			if m != (Message{}) {
				t.Fatalf("Decode returned %+v with its error, want the zero Message", m)
			}
		})
	}
}

// signedMap returns the wire form of a signed reply with the entries of
// change set over it (nil values included).
func signedMap(tb testing.TB, change map[string]any) []byte {
	tb.Helper()
	m := map[string]any{"T": "R", "D": "d", "K": "k", "S": "a", "W": 1, "H": make([]byte, macSize)}
	maps.Copy(m, change)
	return mustMarshal(tb, m)
}

// TestDecodeAcceptsIntegerForms checks that a stamp is read in every
// msgpack integer form and nil fields read as absent.
func TestDecodeAcceptsIntegerForms(t *testing.T) {
	mac := strings.Repeat("\x07", macSize)
	tests := []struct {
		name  string
		stamp []byte
		want  int64
	}{
		{"positive fixint", []byte{0x05}, 5},
		{"negative fixint", []byte{0xff}, -1},
		{"uint8", []byte{0xcc, 0xc8}, 200},
		{"uint16", []byte{0xcd, 0x01, 0x00}, 256},
		{"uint32", []byte{0xce, 0x00, 0x01, 0x00, 0x00}, 65536},
		{"uint64", []byte{0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MaxInt64},
		{"int8", []byte{0xd0, 0x80}, -128},
		{"int16", []byte{0xd1, 0x00, 0x05}, 5},
		{"int32", []byte{0xd2, 0xff, 0xff, 0xff, 0xfe}, -2},
		{"int64", []byte{0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}, math.MinInt64},
		{"int64 zero", []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// {T:R, D:d, K:k, S:a, W:<stamp>, H:<mac>, P:nil}
			b := []byte{0x87}
			for _, kv := range [][2]string{{"T", "R"}, {"D", "d"}, {"K", "k"}, {"S", "a"}} {
				b = append(b, mustMarshal(t, kv[0])...)
				b = append(b, mustMarshal(t, kv[1])...)
			}
			b = append(append(b, 0xa1, 'W'), tt.stamp...)
			b = append(append(b, 0xa1, 'H', 0xc4, macSize), mac...)
			b = append(b, 0xa1, 'P', 0xc0)
			got, err := Decode(b, 0)
			if err != nil {
				t.Fatalf("Decode(%x): %v", b, err)
			}
			want := Message{Type: TypeReply, Driver: "d", Key: "k", Sender: "a", Stamp: tt.want, MAC: mac}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

// TestDecodeHostileLengthsAreCheap checks that a tiny message claiming a huge
// string, array or ext is refused without allocating for the claim.
func TestDecodeHostileLengthsAreCheap(t *testing.T) {
	inputs := [][]byte{
		{0x81, 0xa1, 'D', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		{0x81, 0xa1, 'x', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		{0x81, 0xa1, 'x', 0xc6, 0x7f, 0xff, 0xff, 0xff, 'a'},
		{0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xff, 1, 'a'},
		{0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0},
		{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'T'},
		{0x81, 0xa1, 'H', 0xc6, 0x7f, 0xff, 0xff, 0xff, 'a'},
	}
	const runs = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		for _, in := range inputs {
			if _, err := Decode(in, 0); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%x): %v, want ErrMalformed", in, err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / (runs * uint64(len(inputs))); perCall > 16<<10 {
		t.Fatalf("a hostile length costs %d bytes of allocation per Decode", perCall)
	}
}

func TestDecodeIgnoresUnknownFields(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want Message
	}{
		{
			name: "scalar extras",
			in:   map[string]any{"T": "R", "D": "d", "K": "k", "V": 2, "X": "x", "F": 1.5, "B": true},
			want: Message{Type: TypeReply, Driver: "d", Key: "k"},
		},
		{
			name: "nested extras",
			in: map[string]any{"T": "Q", "D": "d", "K": "k", "R": "job", "L": "tok",
				"N": map[string]any{"a": []any{1, "b", map[string]any{"c": nil}}, "d": []byte{1, 2}}},
			want: Message{Type: TypeRequest, Driver: "d", Key: "k", Requester: "job", Token: "tok"},
		},
		{
			name: "lowercase lookalikes are other fields",
			in:   map[string]any{"T": "R", "D": "d", "K": "k", "t": "Q", "d": 5},
			want: Message{Type: TypeReply, Driver: "d", Key: "k"},
		},
		{
			name: "nil optional fields read as absent",
			in:   map[string]any{"T": "R", "D": "d", "K": "k", "R": nil, "L": nil},
			want: Message{Type: TypeReply, Driver: "d", Key: "k"},
		},
		{
			name: "nil new fields read as absent",
			in:   map[string]any{"T": "M", "D": "d", "K": "k", "S": nil, "P": nil, "A": nil, "W": nil, "H": nil},
			want: Message{Type: TypeNotify, Driver: "d", Key: "k"},
		},
		{
			name: "extras beside the new fields",
			in: map[string]any{"T": "M", "D": "d", "K": "k", "S": "a", "P": testTraceParent, "Z": []any{"x", 1},
				"W": 7, "H": bytes.Repeat([]byte{9}, macSize), "HH": []byte{1}},
			want: Message{Type: TypeNotify, Driver: "d", Key: "k", Sender: "a", TraceParent: testTraceParent,
				Stamp: 7, MAC: strings.Repeat("\x09", macSize)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(mustMarshal(t, tt.in), 0)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeSizeLimit(t *testing.T) {
	b, err := Encode(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		max     int
		wantErr error
	}{
		{"exactly at the limit", len(b), nil},
		{"one byte over", len(b) - 1, ErrTooLarge},
		{"zero means the default", 0, nil},
		{"negative means the default", -5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(b, tt.max)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Decode with limit %d: %v, want %v", tt.max, err, tt.wantErr)
			}
		})
	}
}

func TestValidJobID(t *testing.T) {
	tests := []struct {
		name  string
		jobID string
		ok    bool
	}{
		{"simple", "server-a", true},
		{"guid", "5b9c1d2e-0f3a-4b6c-8d7e-9f0a1b2c3d4e", true},
		{"unicode", "serveur-é-1", true},
		{"128 bytes", strings.Repeat("a", 128), true},
		{"punctuation", "a_b:c/d@e$f", true},
		{"empty", "", false},
		{"129 bytes", strings.Repeat("a", 129), false},
		{"dot", "a.b", false},
		{"star", "*", false},
		{"star inside", "a*b", false},
		{"gt", ">", false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"newline", "a\n", false},
		{"no-break space", "a\u00a0b", false},
		{"nul", "a\x00b", false},
		{"del", "a\x7fb", false},
		{"c1 control", "a\u0085b", false},
		{"invalid utf-8", "a\xffb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validJobID(tt.jobID)
			if tt.ok && err != nil {
				t.Fatalf("validJobID(%q) = %v, want nil", tt.jobID, err)
			}
			if !tt.ok && !errors.Is(err, errInvalidJobID) {
				t.Fatalf("validJobID(%q) = %v, want errInvalidJobID", tt.jobID, err)
			}
		})
	}
}
