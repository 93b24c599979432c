package testsupport

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestNATSClusterPause(t *testing.T) {
	t.Parallel()
	c := StartNATSCluster(t, 3)
	pub, sub := c.Connect(t, 0), c.Connect(t, 1)
	s, err := sub.SubscribeSync("CKHandoff.server-b")
	if err != nil {
		t.Fatal(err)
	}
	c.WaitInterest(t, 0, "CKHandoff.server-b")

	c.Pause(t, 1)
	c.Pause(t, 1) // pausing a paused node does nothing
	if err := pub.Publish("CKHandoff.server-b", []byte("while paused")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil { // node 0 is not paused: it answers
		t.Fatal(err)
	}
	if msg, err := s.NextMsg(200 * time.Millisecond); err != nats.ErrTimeout {
		t.Fatalf("a paused node delivered %v (%v)", msg, err)
	}
	c.Resume(t, 1)
	msg, err := s.NextMsg(5 * time.Second)
	if err != nil || string(msg.Data) != "while paused" {
		t.Fatalf("after Resume: %v, %v; want the message sent while paused", msg, err)
	}

	// A paused node can be killed: what waited for it is lost.
	c.Pause(t, 1)
	if err := pub.Publish("CKHandoff.server-b", []byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	c.Kill(t, 1)
	c.Resume(t, 1)                             // a killed node: nothing
	c.WaitInterest(t, 0, "CKHandoff.server-b") // sub reconnected elsewhere and resubscribed
	if err := pub.Publish("CKHandoff.server-b", []byte("after the kill")); err != nil {
		t.Fatal(err)
	}
	msg, err = s.NextMsg(5 * time.Second)
	if err != nil || string(msg.Data) != "after the kill" {
		t.Fatalf("after the kill: %v, %v; want only the message sent after it (the one sent to the paused node is lost)", msg, err)
	}
}
