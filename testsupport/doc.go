// Package testsupport holds what the tests and benchmarks of playerdata share:
// real Redis and NATS servers started for one test, and a go-redis hook that
// counts round trips.
//
// It is a test rig: tests (this repository's, and a game's own tests of its
// use of the library) import it; a game server never does. Its helpers take
// a testing.TB and start real processes.
//
// Every helper takes a [testing.TB], marks itself with tb.Helper, and registers
// its teardown with tb.Cleanup, so a test never stops what it started by hand
// and nothing outlives the test, even one that panics. The package keeps no
// mutable state of its own: two parallel tests never share a server, a client
// or a counter unless they pass one to each other.
//
// # Redis
//
// [StartRedis] gives a test a Redis and a fresh [Redis.Namespace] to prefix its
// keys with. It uses, in order of preference:
//
//   - the server named by REDIS_URL (any URL [redis.ParseURL] accepts); the
//     namespace's keys are deleted when the test ends;
//   - a private redis-server, when the binary is on PATH, spawned on a free
//     127.0.0.1 port without persistence, its log in the test's temporary
//     directory;
//   - an in-process [miniredis.Miniredis], which tb.Log mentions.
//
// [StartOwnRedis] never uses REDIS_URL, so a test may crash and restart the
// server with [Redis.Restart], or take it away with [Redis.Stop] and bring it
// back with [Redis.Start]. The address never changes, so clients made with
// [Redis.Client] reconnect by themselves.
//
// # NATS
//
// [StartNATS] runs a real nats-server inside the test process (or uses
// NATS_URL), and [NATS.Connect] opens connections that close with the test.
//
// # Redis Cluster
//
// [StartRedisCluster] starts three redis-server masters with cluster mode on,
// without replicas, on free ports, assembles them (CLUSTER ADDSLOTSRANGE and
// MEET) and returns once every master says cluster_state:ok and a cluster
// client reaches each one: a little over 2 s, because a master waits 2 s
// after it starts before it calls its cluster ok. The slots never move, so
// [RedisCluster.MasterOf] answers from the key's hash slot ([KeySlot]) alone,
// and [RedisCluster.KeysOnDifferentMasters] gives two hash tags on different
// masters, for tests of scripts that must stay within one slot.
// [RedisCluster.Client] is a [redis.ClusterClient]; [RedisCluster.Node] is
// one master on its own, which answers MOVED for the others' keys.
//
// # Replicated Redis
//
// [StartRedisReplicated] starts a primary and replicas and returns once each
// replica is linked and has acknowledged a write. [ReplicatedRedis.Client]
// follows the primary across [ReplicatedRedis.Failover], which kills the
// primary and promotes replica 0. [ReplicatedRedis.PauseReplica] (SIGSTOP)
// makes WAIT time out while the replica's connection stays open;
// [ReplicatedRedis.KillReplica] takes it away. WAIT counts the
// acknowledgements of its own connection's writes, so a test sends the write
// and the WAIT on one connection. A write sent to a paused replica waits in
// its socket buffer and is applied when it resumes, so it survives a
// failover even though WAIT did not count it.
//
// # NATS cluster
//
// [StartNATSCluster] starts n nats-server processes with routes to each
// other and returns once each has a route to every other. [NATSCluster.Connect]
// puts a connection on a chosen node first, so game server A can sit on node
// 0 and B on node 1, and lets it fail over to the others within milliseconds
// when its node dies ([NATSCluster.Kill], SIGKILL); nc.ConnectedUrl() or
// [NATSCluster.NodeOf] tells where it is now. [NATSCluster.Restart] brings a
// node back on the same ports. Interest crosses routes asynchronously: a test
// that publishes on one node to a subscriber on another first calls
// [NATSCluster.WaitInterest].
//
// # Sentinel
//
// [StartSentinel] starts a primary, its replicas and one or three
// `redis-server --sentinel`; [Sentinel.Client] is a go-redis failover
// client that follows promotions, and [Sentinel.KillPrimary] kills the
// primary with -9 and returns once a replica is promoted.
//
// # A Redis whose clock steps
//
// [StartRedisSteppable] starts a redis-server under an LD_PRELOAD shim
// (built for the test with gcc) over its wall clock; [SteppableRedis.Step]
// moves TIME, Lua's TIME and key expiry forward or back while it runs.
//
// # Network namespaces
//
// [NewNetLab] makes a private network of Linux namespaces behind a hub
// namespace (root only: [NetLabUsable] says whether it can);
// [NetLab.NewNetNS] adds one, [NetNS.Command] runs a process in it, and
// [NetNS.Cut] drops its packets to or from an address silently, one way
// or both, until [NetNS.Heal]. Everything is deleted when the test ends,
// and leftovers of a crashed run by the next lab.
//
// Every process of these topologies is a child of the test binary, killed
// and reaped when the test ends (and killed with it on Linux); each logs to
// a file in the test's temporary directory, whose tail tb.Log shows when the
// test failed. They never use REDIS_URL or NATS_URL, and skip the test when
// redis-server or nats-server is not on PATH.
//
// # Counting round trips
//
// A [CommandCounter] added to a client with AddHook counts one round trip per
// command and one per pipeline, and records the command names in order, so a
// test can assert that a state change costs exactly one EVALSHA.
package testsupport
