package testsupport

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestNATSClusterRoutesMessages(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartNATSCluster(t, 3)
	t.Logf("three-node NATS cluster meshed in %v", time.Since(start).Round(time.Millisecond))
	pub, sub := c.Connect(t, 0), c.Connect(t, 2)
	if c.NodeOf(pub) != 0 || pub.ConnectedUrl() != c.URLs[0] {
		t.Fatalf("Connect(0) is on node %d (%s), want node 0 (%s)", c.NodeOf(pub), pub.ConnectedUrl(), c.URLs[0])
	}
	if c.NodeOf(sub) != 2 || sub.ConnectedUrl() != c.URLs[2] {
		t.Fatalf("Connect(2) is on node %d (%s), want node 2 (%s)", c.NodeOf(sub), sub.ConnectedUrl(), c.URLs[2])
	}
	s, err := sub.SubscribeSync("CKHandoff.server-b")
	if err != nil {
		t.Fatal(err)
	}
	c.WaitInterest(t, 2, "CKHandoff.server-b") // its own client (/subsz)
	c.WaitInterest(t, 0, "CKHandoff.server-b") // through the route (/routez)
	if err := pub.Publish("CKHandoff.server-b", []byte("release user:1")); err != nil {
		t.Fatal(err)
	}
	msg, err := s.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("message published on node 0 did not reach the subscriber on node 2: %v", err)
	}
	if string(msg.Data) != "release user:1" {
		t.Fatalf("got %q", msg.Data)
	}
}

func TestNATSClusterFailover(t *testing.T) {
	t.Parallel()
	c := StartNATSCluster(t, 3)
	reconnected := make(chan struct{}, 1)
	sub := c.Connect(t, 1, nats.ReconnectHandler(func(*nats.Conn) {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	}))
	pub := c.Connect(t, 0)
	s, err := sub.SubscribeSync("CKHandoff.server-a")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip := func(data string) {
		t.Helper()
		c.WaitInterest(t, 0, "CKHandoff.server-a")
		if err := pub.Publish("CKHandoff.server-a", []byte(data)); err != nil {
			t.Fatal(err)
		}
		msg, err := s.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: subscriber on node %d got nothing: %v", data, c.NodeOf(sub), err)
		}
		if string(msg.Data) != data {
			t.Fatalf("got %q, want %q", msg.Data, data)
		}
	}
	roundTrip("before")

	start := time.Now()
	c.Kill(t, 1)
	select {
	case <-reconnected:
	case <-time.After(5 * time.Second):
		t.Fatalf("connection on killed node 1 did not reconnect within 5 s (status %v)", sub.Status())
	}
	t.Logf("reconnected to node %d (%s) %v after the kill", c.NodeOf(sub), sub.ConnectedUrl(), time.Since(start).Round(time.Millisecond))
	if n := c.NodeOf(sub); n != 0 && n != 2 {
		t.Fatalf("after node 1 died the connection is on node %d (%s)", n, sub.ConnectedUrl())
	}
	roundTrip("after kill") // the subscription was resent to the new node

	c.Restart(t, 1)
	back := c.Connect(t, 1)
	if c.NodeOf(back) != 1 {
		t.Fatalf("Connect(1) after Restart is on node %d", c.NodeOf(back))
	}
	c.WaitInterest(t, 1, "CKHandoff.server-a")
	if err := back.Publish("CKHandoff.server-a", []byte("from restarted node")); err != nil {
		t.Fatal(err)
	}
	if msg, err := s.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "from restarted node" {
		t.Fatalf("message from restarted node 1: %v, %v", msg, err)
	}
}

func TestNATSClusterSubjectMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"a.b.c", "a.b", false},
	} {
		if got := subjectMatches(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}
