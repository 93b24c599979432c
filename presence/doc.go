// Package presence tells a live game server from a crashed one.
//
// Every server beats its JobID into one Redis hash (see [KeyFor]) every
// [DefaultBeat]; the value is an expiry [DefaultTTL] ahead, taken from the Redis
// server's own clock (TIME) inside a Lua script, so app-server clock skew never
// changes an answer. Another server reads that hash with [Presence.IsAlive] to
// learn whether the holder of a lock still lives:
//
//   - [Alive]: the server beat within the TTL.
//   - [Stopped]: a read that succeeded found no live beat, and the Redis run has
//     lasted at least one TTL, so a live server would have beaten into it.
//   - [Unknown]: the read failed, or a missing beat proves nothing yet.
//
// A Redis restart or failover empties or rewinds the hash. The hash therefore
// carries meta fields (whose names start with a NUL byte, which no JobID may):
// the run id of the Redis process (from INFO server) and the Redis time since
// which that run has been seen. While they are missing, name another run, or
// are younger than one TTL, a missing beat reads [Unknown], never [Stopped].
//
// Redis 7.0 has no per-field hash expiry, so each beat also looks at three
// random fields and deletes the expired ones: O(1) work per beat, and no
// answer depends on it.
//
// # The lease
//
// A server whose beats fail can be read as stopped by others and lose its
// locks. [Presence.Lease] is what the server itself can know: a deadline on
// its own monotonic clock, TTL-FenceMargin after the send time of its last
// acknowledged beat, before which no other server can read it as stopped. The
// lease runs on its own goroutine and every beat call has its own deadline
// (one Beat), so a Redis call that hangs never delays it. When it passes,
// [Config.OnLapse] tells the server to end what it holds (self-fencing), and
// [Presence.Holds] answers false from that instant, so a server checks it
// before every change. A lapsed lease stays lapsed: a later beat starts a new
// generation, for new sessions only.
//
// Each beat, read and list is one Lua script round trip (EVALSHA; go-redis
// falls back to EVAL, one more round trip, when Redis has not cached the script
// yet, e.g. right after a restart). All time on the app server goes through
// the injected [clock.Clock]; Redis-side time comes from TIME.
package presence
