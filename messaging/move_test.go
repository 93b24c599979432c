package messaging

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMoveMessageRoundTrip(t *testing.T) {
	body := strings.Repeat("\x00\xffprofile", 50_000) // ~450 KiB: over the handoff limit, under a move's
	m := Message{Type: TypeMove, Driver: "PlayerData", Key: "user:1", Sender: "server-a", Body: body}
	b, err := Encode(m)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if _, err := Decode(b, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode under the handoff limit: %v, want ErrTooLarge", err)
	}
	got, err := Decode(b, limitOf(TypeMove, 0))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got != m {
		t.Fatal("the move does not decode to what was encoded")
	}
}

func TestMoveMessageRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    Message
	}{
		{"a body on a request", Message{Type: TypeRequest, Driver: "d", Key: "k", Requester: "a", Body: "x"}},
		{"a move without a body", Message{Type: TypeMove, Driver: "d", Key: "k", Sender: "a"}},
		{"a move without a sender", Message{Type: TypeMove, Driver: "d", Key: "k", Body: "x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Encode(tt.m); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Encode: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestMoveMACCoversTheBody(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	now := time.UnixMilli(1_700_000_000_000)
	m := sign(key, DefaultPrefix, "server-b", Message{Type: TypeMove, Driver: "d", Key: "k", Sender: "server-a",
		Body: "data-1"}, now)
	if err := verify([][]byte{key}, DefaultPrefix, "server-b", m, now, defaultReplayWindow); err != nil {
		t.Fatalf("verify: %v", err)
	}
	m.Body = "data-2"
	if err := verify([][]byte{key}, DefaultPrefix, "server-b", m, now, defaultReplayWindow); !errors.Is(err, errUnauthenticated) {
		t.Fatalf("verify of an edited body: %v, want errUnauthenticated", err)
	}
	// A message without a body signs as before the move existed.
	r := Message{Type: TypeNotify, Driver: "d", Key: "k", Sender: "server-a"}
	if got, want := appendMACInput(nil, DefaultPrefix, "server-b", r), appendMACInput(nil, DefaultPrefix, "server-b", r); !bytes.Equal(got, want) {
		t.Fatal("unstable MAC input")
	}
	if n := len(appendMACInput(nil, DefaultPrefix, "server-b", r)); n != 12*4+len(macDomain)+len(DefaultPrefix)+len("server-b")+8+1+1+1+len("server-a") {
		t.Fatalf("a notify's MAC input is %d bytes: it changed", n)
	}
}

func TestNATSBusCarriesALargeMove(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	busA, busB := newBus(t, ncA), newBus(t, ncB)
	ch, _ := subscribe(t, busA, ncA, "server-a")
	m := Message{Type: TypeMove, Driver: "d", Key: "k", Sender: "server-b", Body: strings.Repeat("p", 600<<10)}
	if err := busB.Publish(t.Context(), "server-a", m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := receive(t, ch); got != m {
		t.Fatal("the move arrived changed")
	}
	big := Message{Type: TypeMove, Driver: "d", Key: "k", Sender: "server-b", Body: strings.Repeat("p", DefaultMaxMoveBytes)}
	if err := busB.Publish(t.Context(), "server-a", big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Publish of a move over DefaultMaxMoveBytes: %v, want ErrTooLarge", err)
	}
}
