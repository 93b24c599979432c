// Package presence tells a live game server from a crashed one: every
// server beats its JobID into a Redis hash, its expiry on the Redis clock
// (app-server clock skew changes nothing), and any server asks whether
// another is [Alive], [Stopped] or, when a read proves neither, [Unknown].
// A datadriver Node runs its own; how a stop is proven is in the docs'
// handoff page (docs/handoff.md).
package presence
