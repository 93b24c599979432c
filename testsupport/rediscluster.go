package testsupport

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterMasters is how many masters a RedisCluster has: the fewest
	// with which one master can hold a key the others do not.
	clusterMasters = 3
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterReadyWithin bounds the wait for cluster_state:ok. A master
	// waits 2 s after it starts before it calls its cluster ok
	// (CLUSTER_WRITABLE_DELAY in cluster.c), so start-up takes a little
	// over 2 s; this only catches a cluster that never forms.
	clusterReadyWithin = 10 * time.Second
	// clusterNodeTimeout is cluster-node-timeout in milliseconds: shorter
	// than the default 15 s, so that a master that stops answering is
	// flagged failed (and the cluster down) within a test's patience.
	// Without replicas nothing fails over.
	clusterNodeTimeout = 2000
)

// RedisCluster is a Redis Cluster of three masters and no replicas, each a
// redis-server process of its own, for one test. Make it with
// [StartRedisCluster]. Its slots never move: Addrs[i] serves the i-th third
// of them for the whole test.
type RedisCluster struct {
	// Addrs are the masters' "127.0.0.1:port", in slot order: Addrs[0]
	// serves slot 0.
	Addrs []string
	// Namespace is fresh per call ("t" and 16 hex digits), as StartRedis
	// gives; tests prefix their keys with it (see Key).
	Namespace string

	nodes []*RedisProcess
}

// StartRedisCluster starts a Redis Cluster of three masters (no replicas) on
// free 127.0.0.1 ports, each redis-server in its own temporary directory
// without persistence. It assembles the cluster itself (CLUSTER
// SET-CONFIG-EPOCH, ADDSLOTSRANGE and MEET, as redis-cli --cluster create
// does, without redis-cli's one-second polls) and returns once every master
// reports cluster_state:ok, every master's CLUSTER SLOTS names the same
// three masters, and a cluster client has routed a command to each master:
// a little over 2 s. Everything stops when the test ends; the servers' logs
// are shown when the test failed.
//
// It skips the test when redis-server is not on PATH or is older than 7.0
// (the cluster bus port is chosen with cluster-port, new in 7.0). It never
// uses REDIS_URL.
func StartRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	binary := lookPathOrSkip(tb, "redis-server", "StartRedisCluster")
	if major := redisMajorVersion(binary); major < 7 {
		tb.Skipf("testsupport: StartRedisCluster needs redis-server 7.0 or later (cluster-port), found major version %d", major)
	}
	c := &RedisCluster{Namespace: newNamespace(tb)}
	busPorts := make([]int, clusterMasters)
	for i := range clusterMasters {
		p := spawnRedisProcess(tb, binary, fmt.Sprintf("cluster master %d", i), func() ([]string, error) {
			bus, err := freePort()
			if err != nil {
				return nil, fmt.Errorf("find a free cluster bus port: %w", err)
			}
			busPorts[i] = bus
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			}, nil
		})
		c.nodes = append(c.nodes, p)
		c.Addrs = append(c.Addrs, p.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyWithin)
	defer cancel()
	if err := c.assemble(ctx, busPorts); err != nil {
		tb.Fatalf("testsupport: assemble Redis Cluster: %v", err)
	}
	if err := c.waitReady(ctx, tb); err != nil {
		tb.Fatalf("testsupport: Redis Cluster %v not ready within %v: %v", c.Addrs, clusterReadyWithin, err)
	}
	return c
}

// redisMajorVersion returns the major version of the redis-server at binary,
// or 0 when it cannot tell.
func redisMajorVersion(binary string) int {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return 0
	}
	// "Redis server v=7.0.15 sha=..."
	_, v, _ := strings.Cut(string(out), " v=")
	major, _, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(major)
	return n
}

// slotRange returns the first and last slot master i serves.
func slotRange(i int) (lo, hi int) {
	return i * clusterSlots / clusterMasters, (i+1)*clusterSlots/clusterMasters - 1
}

// masterOfSlot returns the index of the master serving slot.
func masterOfSlot(slot int) int {
	for i := range clusterMasters {
		if _, hi := slotRange(i); slot <= hi {
			return i
		}
	}
	return clusterMasters - 1
}

// assemble gives each master a distinct config epoch and its slots, then
// introduces master 0 to the others; gossip does the rest.
func (c *RedisCluster) assemble(ctx context.Context, busPorts []int) error {
	for i, n := range c.nodes {
		lo, hi := slotRange(i)
		// Distinct epochs up front, as redis-cli does, so no epoch
		// collision has to be resolved after the meet.
		if err := n.do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return err
		}
		if err := n.do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return err
		}
	}
	for i, n := range c.nodes[1:] {
		_, port, _ := strings.Cut(n.Addr, ":")
		if err := c.nodes[0].do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, busPorts[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// waitReady polls every master until the cluster is ok and consistent
// everywhere, then routes a GET to each master through a cluster client.
func (c *RedisCluster) waitReady(ctx context.Context, tb testing.TB) error {
	tb.Helper()
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = n.dial()
		defer clients[i].Close()
	}
	if err := pollUntil(ctx, func() error { return c.checkNodes(ctx, clients) }); err != nil {
		return err
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer cc.Close()
	for i := range c.nodes {
		key := c.keyOn(i)
		if err := cc.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
			return fmt.Errorf("cluster client GET %s (slot %d, master %s): %v", key, KeySlot(key), c.Addrs[i], err)
		}
	}
	return nil
}

// checkNodes returns nil when every master says cluster_state:ok, knows all
// masters and maps every slot to the master that owns it.
func (c *RedisCluster) checkNodes(ctx context.Context, clients []*redis.Client) error {
	for i, rdb := range clients {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", c.nodes[i].name, err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_known_nodes:" + strconv.Itoa(clusterMasters), "cluster_slots_ok:" + strconv.Itoa(clusterSlots)} {
			field, _, _ := strings.Cut(want, ":")
			if got := infoField(info, field); field+":"+got != want {
				return fmt.Errorf("%s: CLUSTER INFO says %s:%s", c.nodes[i].name, field, got)
			}
		}
		//lint:ignore SA1019 CLUSTER SLOTS is the map go-redis itself routes by
		slots, err := rdb.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", c.nodes[i].name, err)
		}
		covered := 0
		for _, s := range slots {
			want := c.Addrs[masterOfSlot(int(s.Start))]
			if len(s.Nodes) == 0 || s.Nodes[0].Addr != want {
				return fmt.Errorf("%s: CLUSTER SLOTS maps %d-%d to %v, want %s", c.nodes[i].name, s.Start, s.End, s.Nodes, want)
			}
			covered += int(s.End-s.Start) + 1
		}
		if covered != clusterSlots {
			return fmt.Errorf("%s: CLUSTER SLOTS covers %d slots", c.nodes[i].name, covered)
		}
	}
	return nil
}

// keyOn returns a key of the namespace that master i serves.
func (c *RedisCluster) keyOn(i int) string {
	for n := 0; ; n++ {
		key := c.Key("probe", strconv.Itoa(n))
		if masterOfSlot(KeySlot(key)) == i {
			return key
		}
	}
}

// Client returns a new cluster client of the three masters, with its own
// connection pools, closed when the test ends. opts change the options
// after Addrs is set, e.g. func(o *redis.ClusterOptions) { o.MaxRedirects = 0 }.
func (c *RedisCluster) Client(tb testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	tb.Helper()
	opt := &redis.ClusterOptions{Addrs: append([]string(nil), c.Addrs...)}
	for _, o := range opts {
		o(opt)
	}
	cc := redis.NewClusterClient(opt)
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Node returns master i (0, 1 or 2), whose Client talks to it alone.
func (c *RedisCluster) Node(i int) *RedisProcess { return c.nodes[i] }

// Key returns Namespace and parts joined by ":", as [Redis.Key] does. It
// adds no hash tag: keys of one test spread over all masters.
func (c *RedisCluster) Key(parts ...string) string {
	return strings.Join(append([]string{c.Namespace}, parts...), ":")
}

// MasterOf returns the address (one of Addrs) of the master serving key,
// computed from the key's hash slot ([KeySlot]) and the fixed slot ranges.
func (c *RedisCluster) MasterOf(key string) string {
	return c.Addrs[masterOfSlot(KeySlot(key))]
}

// KeysOnDifferentMasters returns two keys served by different masters:
// "{<prefix>0}" and "{<prefix>N}" for the smallest N that lands elsewhere.
// Each is a whole hash tag, so every key that starts with a (or b) lives on
// the same master as a (or b): a+":lock" and a+":data" can go in one script,
// a+":x" and b+":x" cannot.
func (c *RedisCluster) KeysOnDifferentMasters(prefix string) (a, b string) {
	a = "{" + prefix + "0}"
	for n := 1; ; n++ {
		b = "{" + prefix + strconv.Itoa(n) + "}"
		if c.MasterOf(b) != c.MasterOf(a) {
			return a, b
		}
	}
}

// KeySlot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// does: CRC16 (XMODEM) modulo 16384 of the key, or of its hash tag, the part
// between the first "{" and the next "}" when that part is not empty.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key) % clusterSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the hash of
// Redis Cluster.
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// PauseMaster stops master i with SIGSTOP: its connections stay open and
// what is sent to it waits, unanswered, until ResumeMaster (or the test's
// end, which resumes it). Past the cluster's node timeout (2 s) the other
// masters would mark it failed and the cluster would refuse commands: keep
// a pause shorter.
func (c *RedisCluster) PauseMaster(tb testing.TB, i int) {
	tb.Helper()
	p := c.nodes[i]
	p.pause(tb)
	tb.Cleanup(func() { p.resume(tb) })
}

// ResumeMaster continues master i with SIGCONT; it then answers what waited.
func (c *RedisCluster) ResumeMaster(tb testing.TB, i int) {
	tb.Helper()
	c.nodes[i].resume(tb)
}
