// Package datadriver loads player profiles from Redis under a per-key
// session lock, so that a profile is never live on two game servers at once,
// and hands a profile over at once to a player who rejoins seconds after
// leaving, on the same server or another.
//
// A game server creates one Node (its JobID, Redis client, clock and
// logger) and one Driver per kind of profile. Join loads a profile for a
// player session; the Profile it returns is live until Release (the leave
// save, which clears the lock) or until its lock is lost (Done closes, Err
// matches ErrLockLost).
//
// # The record
//
// Each profile is one Redis hash, "<ns>:{<driver>:<key>}", whose data field is an
// opaque msgpack blob and whose lock lives in plain fields beside it: lock.job,
// lock.token, lock.at (Redis TIME), lock.presence, plus ver (+1 per data write),
// epoch (+1 per acquisition: a fencing token), released and released.ver
// (recognise a release whose answer was lost), schema and schema.min (see
// Migration), trade and fmt. Two more keys share its hash tag, so a Redis
// Cluster keeps all three in one slot: the inbox stream
// "<ns>:{<driver>:<key>}:inbox" (Driver.Send, Config.OnMessage) and the
// history hash "<ns>:{<driver>:<key>}:hist" (kept versions, compressed: see
// Config.History and HistoryEvery). Every state change is one Lua script and
// one round trip, fenced by the lock token: a write from a server that no
// longer holds the lock never lands.
//
// # Taking a lock
//
// A free lock is taken. A lock held elsewhere changes hands only when its
// holder releases it, when the holder has been proven stopped (its presence
// expired; see package lockhandoff), or when it is older than LockTTL +
// LockSkew and does not carry presence protection (or its holder's presence
// reads stopped or unknown). A live holder that beats presence never loses
// its lock by age.
//
// # Same-server rejoins
//
// A load waits, without polling, while its key is still loading on this Node
// or a leaving profile of it is still saving. When a leave save failed, the
// profile is retained under its lock; a rejoin adopts it: the player goes on
// with the same Profile and everything earned before the leave.
package datadriver
