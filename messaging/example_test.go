package messaging_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"

	"github.com/ckernel/playerdata/messaging"
)

func ExampleEncode() {
	b, err := messaging.Encode(messaging.Message{
		Type:      messaging.TypeRequest,
		Driver:    "PlayerData",
		Key:       "user:42",
		Requester: "server-b",
		Token:     "7f3c",
	})
	if err != nil {
		log.Fatal(err)
	}
	m, err := messaging.Decode(b, messaging.DefaultMaxBytes)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes\n", len(b))
	fmt.Printf("%s %s %s from %s, token %s\n", m.Type, m.Driver, m.Key, m.Requester, m.Token)

	_, err = messaging.Decode([]byte("not msgpack"), 0)
	fmt.Println(err)
	// Output:
	// 46 bytes
	// Q PlayerData user:42 from server-b, token 7f3c
	// messaging: malformed message: not a map (code 0x6e)
}

// A server subscribes to its own subject and asks another to release a key.
// (Not run: it needs a NATS server.)
func ExampleNATSBus() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	bus, err := messaging.NewNATSBus(nc, messaging.NATSConfig{Prefix: "mygame.CKHandoff"})
	if err != nil {
		log.Fatal(err)
	}
	sub, err := bus.Subscribe("server-b", func(m messaging.Message) {
		if m.Type == messaging.TypeReply {
			fmt.Println("server-a released", m.Key)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Unsubscribe()
	err = bus.Publish(context.Background(), "server-a", messaging.Message{
		Type: messaging.TypeRequest, Driver: "PlayerData", Key: "user:42",
		Requester: "server-b", Token: "7f3c",
	})
	if err != nil {
		log.Print(err)
	}
}

// A fleet with request authentication: every server is given the same key
// (32 random bytes from a secret store; generated here), names itself as
// the Sender of what it publishes, and passes the trace context of the span
// it is in. (Not run: it needs a NATS server.)
func ExampleNATSConfig() {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	bus, err := messaging.NewNATSBus(nc, messaging.NATSConfig{
		Key: key,
		// While some servers do not have the key yet (see docs/bus.md):
		AcceptUnauthenticated: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	err = bus.Publish(context.Background(), "server-a", messaging.Message{
		Type: messaging.TypeRequest, Driver: "PlayerData", Key: "user:42",
		Requester: "server-b", Token: "7f3c",
		Sender:      "server-b",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	})
	if err != nil {
		log.Print(err)
	}
	fmt.Println(bus.Stats().Published)
}

// A Bus of your own carries a Message as the bytes Encode makes, and hands
// its handler what Decode reads back (refusing anything over the limit
// before decoding it).
func ExampleDecode() {
	b, err := messaging.Encode(messaging.Message{Type: messaging.TypeReply, Driver: "PlayerData", Key: "user:42",
		Sender: "server-a"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := messaging.Decode(b, messaging.DefaultMaxBytes)
	fmt.Println(m.Type == messaging.TypeReply, m.Key, m.Sender, err)
	_, err = messaging.Decode(b[:len(b)-1], messaging.DefaultMaxBytes)
	fmt.Println(errors.Is(err, messaging.ErrMalformed))
	// Output:
	// true user:42 server-a <nil>
	// true
}
