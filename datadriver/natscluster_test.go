package datadriver_test

import (
	"errors"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// The NATS cluster tests: game servers on different nodes of a three-node
// NATS cluster (nats-server processes routed to each other) hand players
// over through the routes, and keep doing so when the node a holder is
// connected to hangs or dies.

// natsOn connects a server to node i of the cluster (the other nodes are its
// fail-over list) and keeps the connection in *nc.
func natsOn(tb testing.TB, ncl *testsupport.NATSCluster, i int, nc **nats.Conn, opts ...nats.Option) func(*datadriver.NodeConfig) {
	return func(c *datadriver.NodeConfig) {
		*nc = ncl.Connect(tb, i, opts...)
		c.NATS = *nc
	}
}

// handoffSubject is the subject server job receives release requests on.
func handoffSubject(ns, job string) string {
	return ns + "." + messaging.DefaultPrefix + "." + job
}

// Server A on node 0 and server B on node 1: every handoff's request and
// reply cross the cluster's route, and each is answered at the first request.
func TestNATSClusterHandoff(t *testing.T) {
	ncl := testsupport.StartNATSCluster(t, 3)
	r := testsupport.StartRedis(t)
	var ncA, ncB *nats.Conn
	timings := func(c *datadriver.NodeConfig) {
		clusterTimings(c)
		c.RequestRepeat = time.Second // a repeat would show a lost request
	}
	a := newServer(t, r, "server-a", timings, natsOn(t, ncl, 0, &ncA))
	b := newServer(t, r, "server-b", timings, natsOn(t, ncl, 1, &ncB))
	ncl.WaitInterest(t, 1, handoffSubject(r.Namespace, "server-a"))
	ncl.WaitInterest(t, 0, handoffSubject(r.Namespace, "server-b"))
	var ka, kb kicks
	da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
	db := players(t, b, func(c *datadriver.Config[player]) { c.Kick = kb.kick })
	ctx := ctxT(t)

	cur, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	const hops = 20
	var lat []time.Duration
	for i := range hops {
		_ = cur.Update(func(d *player) { d.Coins = i }) // not saved: only the release save carries it
		to := []*datadriver.Driver[player]{db, da}[i%2]
		start := time.Now()
		next, err := to.Join(ctx, "user:1")
		if err != nil {
			t.Fatalf("hop %d: %v", i, err)
		}
		lat = append(lat, time.Since(start))
		if coins(next) != i || next.Epoch() != int64(i+2) {
			t.Fatalf("hop %d: coins %d epoch %d, want %d and %d", i, coins(next), next.Epoch(), i, i+2)
		}
		awaitEnd(t, cur)
		if !errors.Is(cur.Err(), datadriver.ErrReleased) {
			t.Fatalf("hop %d: the former session's Err = %v, want ErrReleased", i, cur.Err())
		}
		cur = next
	}
	if na, nb := ncl.NodeOf(ncA), ncl.NodeOf(ncB); na != 0 || nb != 1 {
		t.Fatalf("A on node %d, B on node %d; want 0 and 1", na, nb)
	}
	sa, sb := a.node.HandoffStats(), b.node.HandoffStats()
	if sent := sa.RequestsSent + sb.RequestsSent; sent != hops {
		t.Errorf("%d requests for %d handoffs: a request crossing the cluster was lost and repeated", sent, hops)
	}
	// Every reply reaches its joiner, through the route. A join that
	// retook the lock before its reply came (its park ended first: the
	// release had landed) drops the reply as unwaited, and a reply may
	// still be on its way when the join returned.
	replies := func() uint64 {
		sa, sb := a.node.HandoffStats(), b.node.HandoffStats()
		return sa.RepliesReceived + sb.RepliesReceived + sa.DroppedUnwaited + sb.DroppedUnwaited
	}
	eventually(t, 5*time.Second, "every reply reaches its joiner", func() bool { return replies() >= hops })
	if got := replies(); got != hops {
		t.Errorf("%d replies reached a joiner for %d handoffs", got, hops)
	}
	eventually(t, 5*time.Second, "every handoff kicks its former holder", func() bool { return ka.joined.Load()+kb.joined.Load() >= hops })
	if ka.joined.Load()+kb.joined.Load() != hops {
		t.Errorf("%d kicks for %d handoffs", ka.joined.Load()+kb.joined.Load(), hops)
	}
	slices.Sort(lat)
	t.Logf("handoff across NATS nodes 0 and 1 (request and reply through the route): %d hops, p50 %s, p90 %s, max %s",
		hops, lat[hops/2].Round(time.Microsecond), lat[hops*9/10].Round(time.Microsecond), lat[hops-1].Round(time.Microsecond))
}

// The NATS node A is connected to fails while B waits on a handoff from A;
// A holds the player and releases on request. nats.go moves A to another
// node and B's repeated request reaches it there.
func TestNATSClusterHandoffSurvivesNodeKill(t *testing.T) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		t.Skip("nats-server is not on PATH; StartNATSCluster needs it")
	}
	const repeat = 100 * time.Millisecond
	// setup: A on node 0, B on node 2; reconnected gets the time A's
	// connection is back (on another node) after node 0 fails.
	setup := func(t *testing.T) (ncl *testsupport.NATSCluster, a, b *server, ncA *nats.Conn, ka *kicks, reconnected <-chan time.Time) {
		t.Helper()
		ncl = testsupport.StartNATSCluster(t, 3)
		r := testsupport.StartRedis(t)
		back := make(chan time.Time, 1)
		onReconnect := nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case back <- time.Now():
			default:
			}
		})
		timings := func(c *datadriver.NodeConfig) {
			clusterTimings(c)
			c.RequestRepeat = repeat
		}
		// A on node 0 fails over to node 1; B stays on node 2, so requests
		// still cross a route after the fail-over.
		var ncB *nats.Conn
		a = newServer(t, r, "server-a", timings, natsOn(t, ncl, 0, &ncA, onReconnect))
		b = newServer(t, r, "server-b", timings, natsOn(t, ncl, 2, &ncB))
		ncl.WaitInterest(t, 2, handoffSubject(r.Namespace, "server-a"))
		ncl.WaitInterest(t, 0, handoffSubject(r.Namespace, "server-b"))
		return ncl, a, b, ncA, &kicks{}, back
	}
	sinceKill := func(t *testing.T, reconnected <-chan time.Time, killed time.Time) time.Duration {
		t.Helper()
		select {
		case at := <-reconnected:
			return at.Sub(killed)
		case <-time.After(5 * time.Second):
			t.Fatal("A's connection did not come back within 5 s")
			return 0
		}
	}
	await := func(t *testing.T, joined <-chan *datadriver.Profile[player]) *datadriver.Profile[player] {
		t.Helper()
		select {
		case p := <-joined:
			if p == nil {
				t.FailNow()
			}
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("B's join did not return within 10 s")
			return nil
		}
	}

	t.Run("node hangs, then dies, before A hears the request", func(t *testing.T) {
		ncl, a, b, ncA, ka, reconnected := setup(t)
		da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
		db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 5 * time.Second })
		ctx := ctxT(t)
		pa, err := da.Join(ctx, "user:1")
		if err != nil {
			t.Fatal(err)
		}
		_ = pa.Update(func(d *player) { d.Coins = 77 }) // only A's release save carries it

		ncl.Pause(t, 0) // A's node hangs: what is routed to it goes nowhere
		started := time.Now()
		joined := joinAsync(t, ctx, db, "user:1")
		eventually(t, 5*time.Second, "B's request and a repeat go out unanswered", func() bool {
			return b.node.HandoffStats().RequestsSent >= 2
		})
		select {
		case <-joined:
			t.Fatal("B's join returned while A's node was hung: A's lock changed hands without A")
		default:
		}
		killed := time.Now()
		ncl.Kill(t, 0)
		pb := await(t, joined)
		done, total := time.Since(killed), time.Since(started)
		back := sinceKill(t, reconnected, killed)

		if coins(pb) != 77 || pb.Epoch() != 2 {
			t.Fatalf("B got coins %d epoch %d, want A's latest (77) and 2: A released on request", coins(pb), pb.Epoch())
		}
		awaitHandedOff(t, pa, ka)
		if ka.joined.Load() != 1 || !errors.Is(pa.Err(), datadriver.ErrReleased) {
			t.Fatalf("A: %d kicks, Err %v; want its session ended by the request", ka.joined.Load(), pa.Err())
		}
		if n := ncl.NodeOf(ncA); n != 1 && n != 2 {
			t.Fatalf("A is on node %d after node 0 died", n)
		}
		if a.node.HandoffStats().RequestsReceived == 0 {
			t.Fatal("A received no request: the handoff did not go through it")
		}
		t.Logf("B waited %s in all; node 0 killed, A back on node %d %s later, B's join returned %s after the kill (RequestRepeat %s; B sent %d requests)",
			total.Round(time.Millisecond), ncl.NodeOf(ncA), back.Round(time.Millisecond), done.Round(time.Millisecond), repeat, b.node.HandoffStats().RequestsSent)
	})

	t.Run("node dies while A's release save is in flight", func(t *testing.T) {
		ncl, a, b, ncA, ka, reconnected := setup(t)
		da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
		db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 5 * time.Second })
		ctx := ctxT(t)
		pa, err := da.Join(ctx, "user:2")
		if err != nil {
			t.Fatal(err)
		}
		_ = pa.Update(func(d *player) { d.Coins = 78 })

		inRelease, proceed := holdFirst(a, func(cmd redis.Cmder) bool { return isWrite(cmd, "release") })
		started := time.Now()
		joined := joinAsync(t, ctx, db, "user:2")
		select {
		case <-inRelease: // A heard B and is saving
		case <-time.After(5 * time.Second):
			t.Fatal("A never started its release save")
		}
		killed := time.Now()
		ncl.Kill(t, 0)
		back := sinceKill(t, reconnected, killed)
		if n := ncl.NodeOf(ncA); n != 1 && n != 2 {
			t.Fatalf("A is on node %d after node 0 died", n)
		}
		proceed()
		pb := await(t, joined)
		done, total := time.Since(killed), time.Since(started)

		if coins(pb) != 78 || pb.Epoch() != 2 {
			t.Fatalf("B got coins %d epoch %d, want A's latest (78) and 2", coins(pb), pb.Epoch())
		}
		awaitEnd(t, pa)
		if !errors.Is(pa.Err(), datadriver.ErrReleased) {
			t.Fatalf("A's Err %v, want ErrReleased", pa.Err())
		}
		// B's join may have retaken the lock before the reply came (the
		// release landed): then the reply reaches a B that waits no more,
		// which drops it as unwaited.
		eventually(t, 5*time.Second, "A's reply, sent from its new node, reaches B", func() bool {
			st := b.node.HandoffStats()
			return st.RepliesReceived+st.DroppedUnwaited >= 1
		})
		t.Logf("A reconnected to node %d %s after the kill; B's join returned %s after the kill (%s in all)",
			ncl.NodeOf(ncA), back.Round(time.Millisecond), done.Round(time.Millisecond), total.Round(time.Millisecond))
	})
}
