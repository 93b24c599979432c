// Package datadriver loads player profiles from Redis under a per-key
// session lock, so that a profile is never live on two game servers at once,
// and hands it over at once to a player who rejoins elsewhere.
//
// A game server creates one Node and one Driver per kind of profile. Join
// loads a profile; it is live until Release (the leave save, which clears
// the lock) or until its session ends otherwise (Done closes, Err says why).
// The repository's README and docs/ pages (guarantees.md, handoff.md,
// self-fencing.md) give the words, the record layout and every promise.
package datadriver
