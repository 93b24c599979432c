package messaging

import (
	"errors"
	"strings"
	"testing"
)

// FuzzDecode checks that Decode never panics, sorts every failure into one of
// its three errors, and that whatever it accepts survives Encode and Decode
// unchanged.
func FuzzDecode(f *testing.F) {
	for _, m := range []Message{
		validRequest(),
		{Type: TypeRequest, Driver: "D", Key: "K", Requester: "j"},
		{Type: TypeReply, Driver: "PlayerData", Key: "user:42"},
		{Type: TypeReply, Driver: "D", Key: strings.Repeat("k", 200), Requester: "j", Token: "t"},
	} {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append(b, 0))
	}
	for _, v := range []any{
		map[string]any{"T": "X", "D": "d", "K": "k"},
		map[string]any{"T": "R", "D": 7, "K": "k"},
		map[string]any{"T": "R", "D": "d", "K": "k", "R": nil, "N": []any{1, map[string]any{"a": nil}}},
		map[string]any{"T": "Q", "D": "d", "K": "k", "R": "a.b"},
		map[any]any{"T": "R", "D": "d", "K": "k", 1: "x"},
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

	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, 0)
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
