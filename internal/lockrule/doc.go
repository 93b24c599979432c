// Package lockrule is the one authority on whether a profile's session lock
// may change hands. The project's defining rule: a lock changes hands only
// when its holder released it or is provably stopped, never by age while
// the holder lives. Its only yeses:
//
//   - the lock is free (its holder released it);
//   - its holder is proven stopped: two presence reads at least one Beat
//     apart both find no live beat, with nothing else between, the proving
//     read sent after the lock was last written; a reading that is unknown
//     (a failed read; a Redis restart or failover, or a hash first beaten
//     into, less than one PresenceTTL ago, whose data may be older than the
//     beats; a step of the Redis clock; another shard count in use) never
//     counts as stopped (Stop);
//   - a lock without the presence flag is older than LockTTL+LockSkew on the
//     Redis clock (its holder does not protect it by presence);
//   - a lock that names no holder (a broken lock.job) once no live server
//     can hold its token (Judge).
//
// Every path that moves a lock follows it. A Node's joins and loads (a
// handoff, the takeover after a crash, Load, RestoreAt and the CLI's restore,
// which run a Node) prove stops through lockhandoff's prover, which folds
// its readings with Stop, and take the lock with acquire.lua, which
// re-checks the static half (the token the proof covers, the flag, the age)
// atomically. The operator's verbs that free a lock (`playerdata unlock`,
// `playerdata repair --force`) read the lock once, Judge it, and free it with
// free.lua, which frees exactly the lock judged (and re-checks the age rule
// atomically) or nothing (Unlock, Repair); the CLI, the simulation's operator
// and the robustness suite call these functions, and keep no rule of their
// own. Repair never frees a lock whose holder it names: it mends the broken
// field in place and the holder keeps its token.
//
// A move (datadriver's Profile.MoveTo) hands a lock over without this rule:
// its flip (move.lua) is a release by the holder itself, to a server it
// names and that accepted it, fenced by the holder's token and by an expiry
// on the Redis clock. It takes no lock from anyone, and the lock never
// passes through a free state that another server could take.
package lockrule
