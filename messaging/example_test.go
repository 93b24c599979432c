package messaging_test

import (
	"context"
	"crypto/rand"
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
	bus, err := messaging.NewNATSBus(nc, messaging.WithPrefix("mygame.CKHandoff"))
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
func ExampleWithKey() {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	bus, err := messaging.NewNATSBus(nc,
		messaging.WithKey(key),
		// While some servers do not have the key yet (see the package doc):
		messaging.WithAcceptUnauthenticated(),
	)
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

func ExampleValidTraceParent() {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
	} {
		fmt.Println(messaging.ValidTraceParent(tp))
	}
	// Output:
	// <nil>
	// messaging: invalid trace context: traceparent "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01": byte 4 is 'B', want lowercase hex
}
