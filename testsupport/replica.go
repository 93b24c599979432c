package testsupport

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaReadyWithin bounds the waits of a ReplicatedRedis: for a replica's
// link to come up, for the primary to count or drop a replica. A sync of an
// empty primary takes well under a second; this only catches a link that
// never forms.
const replicaReadyWithin = 10 * time.Second

// ReplicatedRedis is a Redis primary and its replicas, each a redis-server
// process of its own, for one test. Make it with [StartRedisReplicated].
// Processes keep their identity: Replica(i) is the process started as
// replica i for the whole test, even after Failover made it the primary.
// Its methods are safe for concurrent use.
//
// WAIT counts the replicas that acknowledged the last write of its own
// connection: send the write and the WAIT on one connection (a
// [redis.Conn] from Client(tb).Conn(), a pipeline or a transaction). On
// another connection of the pool WAIT may answer at once, counting a
// paused replica.
type ReplicatedRedis struct {
	// Namespace is fresh per call ("t" and 16 hex digits), as StartRedis
	// gives; tests prefix their keys with it (see Key).
	Namespace string

	mu       sync.Mutex
	primary  *RedisProcess
	replicas []*RedisProcess
}

// StartRedisReplicated starts a primary and the given number of replicas on
// free 127.0.0.1 ports, each redis-server in its own temporary directory
// without persistence, and points each replica at the primary (REPLICAOF).
// Full syncs go through a disk file, deleted once loaded
// (rdb-del-sync-files): after a diskless sync the primary streams to a
// replica only from its first ACK, which can take a second (see
// waitAcked). It returns once every replica reports
// master_link_status:up, the primary lists each as online in
// connected_slaves, and each has acknowledged a write (WAIT): 0.1 to 0.3 s
// on an idle machine. Everything stops when the test ends; the servers'
// logs are shown when the test failed. It skips the test when redis-server
// is not on PATH, and never uses REDIS_URL.
func StartRedisReplicated(tb testing.TB, replicas int) *ReplicatedRedis {
	tb.Helper()
	binary := lookPathOrSkip(tb, "redis-server", "StartRedisReplicated")
	if replicas < 0 {
		tb.Fatalf("testsupport: StartRedisReplicated(%d): negative replica count", replicas)
	}
	r := &ReplicatedRedis{Namespace: newNamespace(tb)}
	args := func() ([]string, error) {
		return []string{"--repl-diskless-sync", "no", "--rdb-del-sync-files", "yes"}, nil
	}
	r.primary = spawnRedisProcess(tb, binary, "primary", args)
	ctx, cancel := context.WithTimeout(context.Background(), replicaReadyWithin)
	defer cancel()
	host, port, _ := net.SplitHostPort(r.primary.Addr)
	for i := range replicas {
		p := spawnRedisProcess(tb, binary, fmt.Sprintf("replica %d", i), args)
		if err := p.do(ctx, "REPLICAOF", host, port); err != nil {
			tb.Fatalf("testsupport: %v", err)
		}
		r.replicas = append(r.replicas, p)
	}
	if err := waitLinks(ctx, r.primary, r.replicas); err != nil {
		tb.Fatalf("testsupport: replication not up within %v: %v", replicaReadyWithin, err)
	}
	return r
}

// Key returns Namespace and parts joined by ":", as [Redis.Key] does.
func (r *ReplicatedRedis) Key(parts ...string) string {
	return strings.Join(append([]string{r.Namespace}, parts...), ":")
}

// Primary returns the current primary: the process started as primary,
// or Replica(0) after Failover.
func (r *ReplicatedRedis) Primary() *RedisProcess {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.primary
}

// Replica returns the process started as replica i (0 <= i < the count
// given to StartRedisReplicated). Its Client reads what has been
// replicated to it; it refuses writes while it is a replica.
func (r *ReplicatedRedis) Replica(i int) *RedisProcess {
	return r.replicas[i]
}

// Client returns a new client of whichever process is the primary when it
// opens a connection, closed when the test ends, as a Sentinel client would
// follow a failover: after Failover, connections to the dead primary fail
// (go-redis retries the command on a new one) and new connections go to
// the promoted replica. opts change the options after the defaults are set;
// a Dialer they set replaces this following.
func (r *ReplicatedRedis) Client(tb testing.TB, opts ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	opt := &redis.Options{
		Addr: r.Primary().Addr, // only a label: the Dialer picks the address
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.Primary().Addr)
		},
	}
	for _, o := range opts {
		o(opt)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// PauseReplica stops replica i with SIGSTOP. Its connection to the primary
// stays open but it applies and acknowledges nothing, so the primary's
// WAIT counts it no more and times out. What the primary sends meanwhile
// waits in the kernel's socket buffers and is applied on ResumeReplica.
func (r *ReplicatedRedis) PauseReplica(tb testing.TB, i int) {
	tb.Helper()
	r.replicas[i].pause(tb)
}

// ResumeReplica continues replica i with SIGCONT; it then applies what was
// sent to it while paused and acknowledges again.
func (r *ReplicatedRedis) ResumeReplica(tb testing.TB, i int) {
	tb.Helper()
	r.replicas[i].resume(tb)
}

// KillReplica kills replica i with SIGKILL, reaps it, and returns once the
// primary no longer lists it, so WAIT counts one replica fewer at once.
func (r *ReplicatedRedis) KillReplica(tb testing.TB, i int) {
	tb.Helper()
	p := r.replicas[i]
	p.kill()
	ctx, cancel := context.WithTimeout(context.Background(), replicaReadyWithin)
	defer cancel()
	primary := r.Primary()
	if primary == p {
		return
	}
	if err := pollUntil(ctx, func() error {
		info, err := replicationInfo(ctx, primary)
		if err != nil {
			return err
		}
		if _, listed := infoReplicas(info)[replicaPort(p)]; listed {
			return fmt.Errorf("%s still lists %s", primary.name, p.name)
		}
		return nil
	}); err != nil {
		tb.Fatalf("testsupport: kill replica %d: %v", i, err)
	}
}

// Failover replaces a crashed primary by replica 0, as an operator or
// Sentinel would: the primary is killed (SIGKILL) and reaped, replica 0 is
// promoted with REPLICAOF NO ONE, and every other running replica is
// pointed at it. It returns the new primary once each of those replicas is
// linked to it. Replicas that are paused are resumed first (they could not
// obey REPLICAOF otherwise): whatever the old primary had sent them before
// it died is still in their socket buffers and is applied then, so a write
// survives a failover when it reached replica 0's socket, which WAIT
// acknowledging it proves. Writes the primary answered but replica 0 never
// received are lost. Failover may run once; Replica(0) is then Primary().
func (r *ReplicatedRedis) Failover(tb testing.TB) *RedisProcess {
	tb.Helper()
	if len(r.replicas) == 0 {
		tb.Fatal("testsupport: Failover needs a replica")
	}
	r.mu.Lock()
	old, promoted := r.primary, r.replicas[0]
	if old == promoted {
		r.mu.Unlock()
		tb.Fatal("testsupport: Failover runs once")
	}
	r.mu.Unlock()
	if !promoted.Running() {
		tb.Fatal("testsupport: Failover needs replica 0 running")
	}
	old.kill()
	var others []*RedisProcess
	for _, p := range r.replicas {
		if p.Running() {
			p.resume(tb)
			if p != promoted {
				others = append(others, p)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaReadyWithin)
	defer cancel()
	if err := promoted.do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		tb.Fatalf("testsupport: failover: %v", err)
	}
	r.mu.Lock()
	r.primary = promoted
	r.mu.Unlock()
	host, port, _ := net.SplitHostPort(promoted.Addr)
	for _, p := range others {
		if err := p.do(ctx, "REPLICAOF", host, port); err != nil {
			tb.Fatalf("testsupport: failover: %v", err)
		}
	}
	if err := waitLinks(ctx, promoted, others); err != nil {
		tb.Fatalf("testsupport: failover: replication to %s not up within %v: %v", promoted.name, replicaReadyWithin, err)
	}
	return promoted
}

// waitLinks polls until every one of replicas is linked to primary
// (master_link_status:up, master_port its port) and primary lists each as
// online, then until each has acknowledged a write.
func waitLinks(ctx context.Context, primary *RedisProcess, replicas []*RedisProcess) error {
	_, port, _ := net.SplitHostPort(primary.Addr)
	err := pollUntil(ctx, func() error {
		for _, p := range replicas {
			info, err := replicationInfo(ctx, p)
			if err != nil {
				return err
			}
			if infoField(info, "master_port") != port || infoField(info, "master_link_status") != "up" {
				return fmt.Errorf("%s: master_port:%s master_link_status:%s, want %s and up", p.name,
					infoField(info, "master_port"), infoField(info, "master_link_status"), port)
			}
		}
		info, err := replicationInfo(ctx, primary)
		if err != nil {
			return err
		}
		listed := infoReplicas(info)
		for _, p := range replicas {
			if state := listed[replicaPort(p)]; state != "online" {
				return fmt.Errorf("%s: %s is %q in connected_slaves (%s), want online",
					primary.name, p.name, state, infoField(info, "connected_slaves"))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return waitAcked(ctx, primary, len(replicas))
}

// waitAcked sends a write (a PUBLISH, which replicas receive and which
// changes no key) and WAITs on the same connection until n replicas have
// acknowledged it, so a replica listed online is known to be streamed to.
// With diskless syncs it may not be: the primary starts streaming on the
// replica's first REPLCONF ACK, and an ACK that arrives before the primary
// has seen the transfer end is ignored (Redis 7.0), so streaming starts
// with the next once-a-second ACK and a test's first WAIT would take a
// second.
func waitAcked(ctx context.Context, primary *RedisProcess, n int) error {
	if n == 0 {
		return nil
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(replicaReadyWithin)
	}
	rdb := primary.dial()
	defer rdb.Close()
	conn := rdb.Conn() // WAIT counts acknowledgements of its own connection's writes
	defer conn.Close()
	if err := conn.Publish(ctx, "__testsupport:replication-probe", "x").Err(); err != nil {
		return fmt.Errorf("%s: PUBLISH probe: %w", primary.name, err)
	}
	got, err := conn.Wait(ctx, n, time.Until(deadline)).Result()
	if err != nil {
		return fmt.Errorf("%s: WAIT %d: %w", primary.name, n, err)
	}
	if got < int64(n) {
		return fmt.Errorf("%s: WAIT %d: only %d replicas acknowledged a write", primary.name, n, got)
	}
	return nil
}

// replicationInfo returns INFO replication of p.
func replicationInfo(ctx context.Context, p *RedisProcess) (string, error) {
	rdb := p.dial()
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("%s: INFO replication: %w", p.name, err)
	}
	return info, nil
}

// infoReplicas maps the port of each replica a primary's INFO replication
// lists (slaveN:ip=...,port=...,state=...) to its state.
func infoReplicas(info string) map[string]string {
	states := map[string]string{}
	for n := 0; ; n++ {
		line := infoField(info, "slave"+strconv.Itoa(n))
		if line == "" {
			return states
		}
		fields := map[string]string{}
		for kv := range strings.SplitSeq(line, ",") {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		states[fields["port"]] = fields["state"]
	}
}

// replicaPort returns the port of p as a primary lists it.
func replicaPort(p *RedisProcess) string {
	_, port, _ := net.SplitHostPort(p.Addr)
	return port
}

// pollUntil calls check every redisPoll until it returns nil, and returns
// its last error once ctx is done.
func pollUntil(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(redisPoll):
		}
	}
}
