package datadriver

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// plainMoveMsg is moveMsg without its EncodeMsgpack: msgpack encodes it by
// reflection, from the same tags.
type plainMoveMsg moveMsg

// TestMoveMsgEncodingIsReflections checks that moveMsg's hand-written
// encoder writes the bytes msgpack's reflection writes for every step
// (so either side of a mixed-version pair reads the other), and that the
// message reads back as it was.
func TestMoveMsgEncodingIsReflections(t *testing.T) {
	full := moveMsg{Step: stepPrepare, ID: "0123456789abcdef", Driver: "PlayerData", Key: "user:1", From: "server-a",
		To: "server-b", Expiry: 1765000000123, Window: 5000, Data: bytes.Repeat([]byte{0xa5}, 300), Schema: 3,
		SchemaMin: 2, UIDs: []byte{0x91, 0x01}, Meta: []byte{0x80}, HistAt: 1765000000001, SeenSeq: 7,
		Token: "tok", Presence: true, Ver: 12, Epoch: 4, At: 1765000000002, LockAt: 1765000000003, InboxSeq: 9,
		Reason: RefusedBusy, Why: "another move"}
	msgs := map[string]moveMsg{
		"prepare": {Step: stepPrepare, ID: "m1", Driver: "PlayerData", Key: "user:1", From: "server-a", To: "server-b",
			Expiry: 1765000000123, Window: 5000, Data: []byte{0x81, 0xa1, 0x63, 0x05}, Schema: 1, SchemaMin: 1, SeenSeq: 3},
		"accept":      {Step: stepAccept, ID: "m1", To: "server-a", Token: "t1", Presence: true},
		"refuse":      {Step: stepRefuse, ID: "m1", To: "server-a", Reason: RefusedHeld, Why: "this server has the key"},
		"commit":      {Step: stepCommit, ID: "m1", To: "server-b", Token: "t1", Ver: 2, Epoch: 5, At: 1, LockAt: 2, InboxSeq: 1},
		"negative":    {Step: stepCommit, ID: "m1", Ver: -1, Schema: -40, Window: -2},
		"empty slice": {Step: stepPrepare, ID: "m1", Data: []byte{}},
		"every field": full,
		"ids only":    {Step: stepPrepare, ID: "m1"},
	}
	for name, m := range msgs {
		t.Run(name, func(t *testing.T) {
			want, err := msgpack.Marshal((*plainMoveMsg)(&m))
			if err != nil {
				t.Fatal(err)
			}
			wm, err := m.message()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal([]byte(wm.Body), want) {
				t.Fatalf("encoded\n%x\nreflection\n%x", wm.Body, want)
			}
			wm.Sender = m.From
			back, err := moveMsgOf(wm)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Data) == 0 {
				m.Data = nil // omitted, read back as nil
			}
			if !msgEqual(back, m) {
				t.Fatalf("read back %+v, want %+v", back, m)
			}
		})
	}
}

// msgEqual compares two moveMsgs field by field.
func msgEqual(a, b moveMsg) bool {
	return reflect.DeepEqual(a, b)
}

// TestMoveMsgDecodingIsReflections checks that moveMsg's hand-written
// decoder reads what msgpack's reflection reads from any body a peer may
// send: every step, the keys in another order, values in other encodings
// (narrow or unsigned integers, bytes as a string, nil), unknown keys
// (skipped), and that it refuses what reflection refuses.
func TestMoveMsgDecodingIsReflections(t *testing.T) {
	bodies := map[string]any{
		"prepare": map[string]any{"s": "prepare", "i": "m1", "t": "server-b", "e": int64(1765000000123), "w": int16(5000),
			"d": []byte{0x81, 0xa1, 0x63, 0x05}, "v": uint8(1), "m": int64(1), "q": uint32(3), "h": int8(-4)},
		"reordered accept": map[string]any{"f": true, "k": "t1", "t": "server-a", "i": "m1", "s": "accept"},
		"commit": map[string]any{"s": "commit", "i": "m1", "k": "t1", "r": 2, "p": uint64(5), "a": 1, "l": 2,
			"n": 1},
		"refuse":         map[string]any{"s": "refuse", "i": "m1", "y": string(RefusedHeld), "z": "held"},
		"nil values":     map[string]any{"s": "prepare", "i": "m1", "d": nil, "t": nil, "e": nil, "f": nil, "v": nil},
		"bytes as str":   map[string]any{"s": "prepare", "i": "m1", "d": "\x81\xa1c\x05", "u": "\x91\x01", "x": ""},
		"unknown keys":   map[string]any{"s": "accept", "i": "m1", "zz": []any{1, "a", map[string]any{"b": nil}}, "k": "t"},
		"false presence": map[string]any{"s": "accept", "i": "m1", "f": false},
		"empty map":      map[string]any{},
		"not a map":      []any{"prepare", "m1"},
		"bad int":        map[string]any{"s": "commit", "i": "m1", "r": "two"},
		"bad bool":       map[string]any{"s": "accept", "i": "m1", "f": 1},
		"bad string":     map[string]any{"s": 7, "i": "m1"},
	}
	for name, v := range bodies {
		t.Run(name, func(t *testing.T) {
			body, err := msgpack.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var want plainMoveMsg
			wantErr := msgpack.Unmarshal(body, &want)
			got, gotErr := decodeMoveBody(string(body))
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("error %v, reflection's %v", gotErr, wantErr)
			}
			if wantErr == nil && !msgEqual(got, moveMsg(want)) {
				t.Fatalf("read %+v, reflection read %+v", got, want)
			}
		})
	}
}
