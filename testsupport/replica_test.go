package testsupport

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// writeAndWait sets key to value and WAITs for n replicas within timeout on
// one connection (WAIT counts the acknowledgements of its own connection's
// writes), and returns how many acknowledged and how long WAIT took.
func writeAndWait(tb testing.TB, conn *redis.Conn, key, value string, n int, timeout time.Duration) (int64, time.Duration) {
	tb.Helper()
	ctx := context.Background()
	if err := conn.Set(ctx, key, value, 0).Err(); err != nil {
		tb.Fatalf("SET %s: %v", key, err)
	}
	start := time.Now()
	got, err := conn.Wait(ctx, n, timeout).Result()
	if err != nil {
		tb.Fatalf("WAIT %d %v: %v", n, timeout, err)
	}
	return got, time.Since(start)
}

// oneConn returns a single connection of the replicated Redis's primary,
// closed when the test ends.
func oneConn(tb testing.TB, r *ReplicatedRedis) *redis.Conn {
	tb.Helper()
	conn := r.Client(tb).Conn()
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestReplicaWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	r := StartRedisReplicated(t, 1)
	t.Logf("primary and one replica linked in %v", time.Since(start).Round(time.Millisecond))
	conn := oneConn(t, r)
	key := r.Key("user", "1")

	if n, took := writeAndWait(t, conn, key, "live", 1, 5*time.Second); n != 1 || took > time.Second {
		t.Fatalf("WAIT 1 with a live replica = %d after %v; want 1 at once", n, took)
	}
	if got, err := r.Replica(0).Client(t).Get(ctx, key).Result(); err != nil || got != "live" {
		t.Fatalf("replica has %q, %v; want live", got, err)
	}

	r.PauseReplica(t, 0)
	const timeout = 300 * time.Millisecond
	n, took := writeAndWait(t, conn, key, "paused", 1, timeout)
	if n != 0 {
		t.Fatalf("WAIT 1 with the replica paused = %d; want 0", n)
	}
	if took < timeout-10*time.Millisecond || took > timeout+2*time.Second {
		t.Fatalf("WAIT 1 %v with the replica paused answered after %v", timeout, took)
	}

	r.ResumeReplica(t, 0)
	if n, err := conn.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 after resuming = %d, %v; want 1", n, err)
	}
	if got, err := r.Replica(0).Client(t).Get(ctx, key).Result(); err != nil || got != "paused" {
		t.Fatalf("resumed replica has %q, %v; want paused", got, err)
	}
}

func TestReplicaKillAndFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	r := StartRedisReplicated(t, 2)
	t.Logf("primary and two replicas linked in %v", time.Since(start).Round(time.Millisecond))
	conn := oneConn(t, r)
	acked, unacked := r.Key("acked"), r.Key("unacked")

	if err := r.Replica(1).Client(t).Set(ctx, acked, "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("write on a replica answered %v, want READONLY", err)
	}
	if n, _ := writeAndWait(t, conn, acked, "x", 2, 5*time.Second); n != 2 {
		t.Fatalf("WAIT 2 = %d; want 2", n)
	}

	r.KillReplica(t, 1)
	if r.Replica(1).Running() {
		t.Fatal("replica 1 runs after KillReplica")
	}
	if n, _ := writeAndWait(t, conn, acked, "x", 2, 100*time.Millisecond); n != 1 {
		t.Fatalf("WAIT 2 after killing replica 1 = %d; want 1", n)
	}

	// WAIT answering 0 does not mean lost: the primary has sent the write,
	// and it waits in the paused replica's socket buffer.
	r.PauseReplica(t, 0)
	if n, _ := writeAndWait(t, conn, unacked, "z", 1, 100*time.Millisecond); n != 0 {
		t.Fatalf("WAIT 1 with replica 0 paused = %d; want 0", n)
	}

	old := r.Primary()
	start = time.Now()
	promoted := r.Failover(t)
	t.Logf("failover to replica 0 in %v", time.Since(start).Round(time.Millisecond))
	if promoted != r.Replica(0) || r.Primary() != promoted || old.Running() {
		t.Fatalf("after Failover: primary %s, replica 0 %s, old primary running %v", r.Primary().Addr, r.Replica(0).Addr, old.Running())
	}
	rdb := r.Client(t) // follows the primary
	if got, err := rdb.Get(ctx, acked).Result(); err != nil || got != "x" {
		t.Fatalf("acknowledged write after failover: %q, %v; want x", got, err)
	}
	if got, err := rdb.Get(ctx, unacked).Result(); err != nil || got != "z" {
		t.Fatalf("write sent to replica 0 while it was paused, after failover: %q, %v; want z (applied on resume)", got, err)
	}
	if n, _ := writeAndWait(t, oneConn(t, r), r.Key("after"), "y", 1, 100*time.Millisecond); n != 0 {
		t.Fatalf("WAIT 1 on the promoted primary, which has no replica left = %d; want 0", n)
	}
}

func TestReplicaFailoverRepointsReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := StartRedisReplicated(t, 2)
	before := r.Client(t) // made before the failover, follows it
	if err := before.Set(ctx, r.Key("k"), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Failover(t)
	if err := before.Set(ctx, r.Key("k"), "2", 0).Err(); err != nil {
		t.Fatalf("write through a client made before the failover: %v", err)
	}
	if n, _ := writeAndWait(t, oneConn(t, r), r.Key("k"), "3", 1, 5*time.Second); n != 1 {
		t.Fatalf("WAIT 1 on the promoted primary with replica 1 re-pointed = %d; want 1", n)
	}
	if got, err := r.Replica(1).Client(t).Get(ctx, r.Key("k")).Result(); err != nil || got != "3" {
		t.Fatalf("replica 1 after failover has %q, %v; want 3", got, err)
	}
}
