package messaging_test

import (
	"context"
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
