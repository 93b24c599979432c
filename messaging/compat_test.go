package messaging

import (
	"encoding/hex"
	"errors"
	"testing"
)

// v1Wire are messages as the first wire version's Encode wrote them.
var v1Wire = []struct {
	name string
	hex  string
	want Message
}{
	{"request", "85a154a151a144aa506c6179657244617461a14ba7757365723a3432a152a87365727665722d62a14ca5746f6b2d31", validRequest()},
	{"reply", "83a154a152a144aa506c6179657244617461a14ba7757365723a3432", Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42"}},
	{"request without token", "84a154a151a144a144a14ba14ba152a87365727665722d62", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "server-b"}},
}

// TestDecodesOlderBuildMessages checks that what an older build sends
// decodes as before, and that a message without the new fields encodes to
// the very bytes the older build wrote.
func TestDecodesOlderBuildMessages(t *testing.T) {
	for _, tt := range v1Wire {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b, 0)
			if err != nil || got != tt.want {
				t.Fatalf("Decode = %+v, %v; want %+v", got, err, tt.want)
			}
			enc, err := Encode(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(enc) != tt.hex {
				t.Fatalf("Encode = %x, the older build wrote %s", enc, tt.hex)
			}
		})
	}
}

// TestOlderBuildDecodesNewMessages runs the first version's decoder, frozen
// in v1decoder_test.go, on what this one sends: it skips the new fields and
// reads the request or reply as before. A notify is a type it does not
// know: it drops it with ErrUnknownType (and counts it), as it should.
func TestOlderBuildDecodesNewMessages(t *testing.T) {
	signedReply := sign(testKey, testPrefix, "server-b",
		Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42", Sender: "server-a", TraceParent: testTraceParent}, testEpoch)
	tests := []struct {
		name    string
		m       Message
		want    v1Message
		wantErr error
	}{
		{"request with every field", fullRequest(),
			v1Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b", Token: "tok-1"}, nil},
		{"a restore's request", func() Message { m := fullRequest(); m.Purpose = PurposeRestore; return m }(),
			v1Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b", Token: "tok-1"}, nil},
		{"signed reply", signedReply, v1Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42"}, nil},
		{"reply with a sender only", Message{Type: TypeReply, Driver: "D", Key: "K", Sender: "server-a"},
			v1Message{Type: TypeReply, Driver: "D", Key: "K"}, nil},
		{"notify", Message{Type: TypeNotify, Driver: "D", Key: "K", Sender: "server-a"}, v1Message{}, ErrUnknownType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v1Decode(b, 0)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("older build's Decode(%x): %v, want %v", b, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("older build's Decode = %+v, want %+v", got, tt.want)
			}
		})
	}
}
