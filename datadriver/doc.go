// Package datadriver loads player profiles from Redis under a per-key
// session lock, so that a profile is never live on two game servers at once,
// and hands a profile over at once to a player who rejoins seconds after
// leaving, on the same server or another.
//
// A game server creates one Node (its JobID, Redis client, NATS connection)
// and one Driver per kind of profile. Join loads a profile for a player
// session; the Profile it returns is live until Release (the leave save,
// which clears the lock) or until the session ends otherwise (Done closes,
// Err says why). A lock changes hands only when its holder releases it or
// has provably stopped, never by age while the holder is alive; a server
// that can no longer prove it is alive ends its sessions first.
//
// Words used throughout: a session "leaves" when asked to go (Release, a
// handoff, Close) and "ends" once (Done); a "release" is the write that
// saves the data and clears the lock; a lock is "given back" when a write
// without data clears it for a session that ended otherwise. The record's
// layout, the handoff and every promise are in the repository's docs/ pages.
package datadriver
