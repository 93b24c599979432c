package testsupport_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// A MemBus stands in for NATS: each server gets an endpoint, messages go
// through the real wire codec, and faults are one line.
func ExampleMemBus() {
	bus := testsupport.NewMemBus(nil)
	defer bus.Close()
	got := make(chan messaging.Message, 1)
	if _, err := bus.Endpoint("server-a").Subscribe("server-a", func(m messaging.Message) { got <- m }); err != nil {
		panic(err)
	}
	b := bus.Endpoint("server-b")
	req := messaging.Message{Type: messaging.TypeRequest, Driver: "PlayerData", Key: "user:1", Requester: "server-b", Token: "t1"}

	bus.SetFault(func(string, messaging.Message) testsupport.Fault { return testsupport.Fault{Drop: true} })
	_ = b.Publish(context.Background(), "server-a", req) // lost
	bus.SetFault(nil)
	_ = b.Publish(context.Background(), "server-a", req)

	select {
	case m := <-got:
		fmt.Println(m.Type, m.Key, "from", m.Requester)
	case <-time.After(5 * time.Second):
		fmt.Println("nothing arrived")
	}
	fmt.Println("dropped:", bus.Stats().Dropped)
	// Output:
	// Q user:1 from server-b
	// dropped: 1
}
