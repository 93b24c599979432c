package testsupport

import (
	"testing"
	"time"
)

func TestStartNATS(t *testing.T) {
	t.Parallel()
	n := StartNATS(t)
	sub, pub := n.Connect(t), n.Connect(t)
	s, err := sub.SubscribeSync("CKHandoff.server-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil { // the server knows the subscription
		t.Fatal(err)
	}
	if err := pub.Publish("CKHandoff.server-a", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	msg, err := s.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "hello" {
		t.Fatalf("got %q, want hello", msg.Data)
	}
}
