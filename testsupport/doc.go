// Package testsupport holds what the tests and benchmarks of playerdata share:
// real Redis and NATS servers started for one test, and a go-redis hook that
// counts round trips.
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
// # Counting round trips
//
// A [CommandCounter] added to a client with AddHook counts one round trip per
// command and one per pipeline, and records the command names in order, so a
// test can assert that a state change costs exactly one EVALSHA.
package testsupport
