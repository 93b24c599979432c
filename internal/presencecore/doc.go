// Package presencecore tells a live game server from a crashed one.
//
// Every server beats its JobID into a Redis hash every [DefaultBeat]; the
// value is an expiry [DefaultTTL] ahead, taken from the Redis server's own
// clock (TIME) inside a Lua script, so app-server clock skew never changes an
// answer. Another server reads that hash with [Presence.IsAlive] to learn
// whether the holder of a lock still lives:
//
//   - [Alive]: the server beat within the TTL.
//   - [Stopped]: a read that succeeded found no live beat, and the Redis run
//     has lasted at least one TTL, so a live server would have beaten into it.
//   - [Unknown]: the read failed, a missing beat proves nothing yet, or the
//     deployment's servers do not agree on the shard count.
//
// The Redis clock is watched against the reader's own: every answer carries
// TIME, and when a shard's clock is seen to jump ahead (a step of the Redis
// host's clock makes every beat look expired at once), a missing beat there
// reads Unknown for one TTL of the reader's clock, time for every live
// server to beat again. A beat stamped further ahead than one TTL (the clock
// stepped back) counts as expiring one TTL after it is first seen so.
//
// # Keys
//
// With [Config.Shards] = N (default 1) a JobID beats into shard
// [ShardOf](JobID, N), FNV-1a of the JobID modulo N. Shard 0 is the key
// [KeyFor] gives, "<namespace>:CKPresence", the only one with one shard, so a
// deployment and the operator CLI keep the key they always had; shard n is
// "<namespace>:CKPresence:{n}" ([ShardKey]), each in a Redis Cluster slot of
// its own. Each shard hash holds:
//
//	<JobID>   expiry of its last beat, ms on the Redis clock (a plain integer)
//	"\0run"   run_id of the Redis process the meta below was written under
//	"\0since" Redis time (ms) since which that run has been seen
//	"\0enc"   a text longer than hash-max-listpack-value ([MetaEnc]; in
//	          the owners and load hashes too): Redis keeps the hash a
//	          hashtable
//
// Beside each shard, in the same slot, its owners hash ([OwnersKey]) records
// which process wrote each beat: <JobID> = instance, and its load hash
// ([LoadKey]) each server's session count (see "Load" below). One layout
// hash for the whole deployment ([LayoutKey]) records the shard counts in
// use.
//
// Every server and reader of a deployment must use the same shard count: a
// reader looks for a server only in the shard its own count names, and would
// find a server of another count missing. Each server marks its count in the
// layout hash on every full check (below), for CheckEvery beats and a TTL; a
// reader looks there before any Stopped answer and answers Unknown with an
// error wrapping [ErrShardMismatch] while another count is marked; a server
// logs an error when it finds another count. Change the count only with every server stopped: for
// CheckEvery×Beat+TTL (40 s) after, readers still see the old count's mark and
// answer Unknown instead of Stopped.
//
// # Identity
//
// A JobID names a server in lock records, and a process that restarts may
// keep it (a Kubernetes pod name). Each process also has a random instance
// id ([Config.Instance]), written beside its beat, and a beat never overwrites
// another instance's live beat:
//
//   - [Presence.Claim], a server's first beat, takes a JobID whose field is
//     free (never used, or deleted by [Presence.Remove] after a clean
//     shutdown) or expired at once. When another instance's beat is live, it
//     waits: if that beat expires unrenewed (the process is gone: a restart),
//     Claim takes the JobID, at most one TTL after that process's last beat;
//     if it is renewed (a live process), Claim returns an [*InUseError]
//     ([ErrJobIDInUse]), usually within one Beat. A beat whose owner entry is
//     missing (the owners hash was evicted or deleted) is nobody's: it is
//     taken at once, and a running server re-claims its own.
//   - A running server whose beat meets another instance's beat of its JobID
//     (two processes with one JobID; or this one was paused longer than a TTL
//     and a new process took the JobID) fences itself: its lease lapses at
//     once, [Config.OnLapse] is called, no beat sent before that moment can
//     renew it, and an error names both instances. While the other's beat
//     lives every beat is refused; once it expired, the next beat takes the
//     field back (and fences again, since the other may have taken what this
//     one held), and the one after starts a new lease.
//   - Remove deletes the field only when this instance owns it.
//
// A Redis restart without persistence empties the hash: the first claim of a
// JobID then succeeds at once, even if a process that still lives had beaten
// it into the lost hash. That process's next beat is refused and it fences
// itself, within one Beat (or its lease lapses on its own if its beats fail),
// but until then both may run: the only window in which two processes hold
// one JobID. After a restart with persistence, or a failover to a replica,
// the owners survive with the beats (a rewind by the replication lag aside).
//
// # Restart detection, and the cost of a beat
//
// A Redis restart or failover empties or rewinds the hash. The run meta tells
// a reader: while it is missing, names another run than INFO server's, or is
// younger than one TTL, a missing beat reads [Unknown], never [Stopped]. A
// reader checks the run id itself (INFO server) whenever the beat it reads is
// not alive, so its answer never depends on a beat having noticed the new run
// first.
//
// Writers do not read INFO on every beat. Start's loop sends the fast
// path: beat.lua adds (now + TTL - expected) to the field with one HINCRBY,
// where expected is the expiry this instance's last acknowledged beat wrote;
// when the result is now + TTL, nobody else wrote the field since and the
// beat is done: two Redis commands in the script (TIME, HINCRBY), three in
// INFO commandstats with the EVALSHA (one HSET more when the session count
// changed: see "Load"). Otherwise the field is put back and the full path
// runs.
// A full check (TIME, HMGET, HGET, INFO, HSET, the owner's HSET, the
// count's HSET, three HRANDFIELDs and one HMGET for cleaning, then the
// layout mark: TIME, HSET, HGETALL) runs on [Presence.Beat] and
// [Presence.Claim], and in the loop:
//
//   - on the beat after any failed beat (Redis may have restarted or failed
//     over while unreachable);
//   - when Redis answers NOSCRIPT (a new process forgot the script cache: a
//     restart, a failover to a replica, SCRIPT FLUSH);
//   - when the field is not what this instance wrote (a lost hash, a lost
//     answer, another instance), and when the meta is missing;
//   - at the latest every [CheckEvery]-th beat.
//
// The trade-off: a new run whose hash survived with its meta (a restart with
// AOF or RDB, a failover to a replica) and that no beat noticed through a
// failure or NOSCRIPT is written into the meta up to CheckEvery beats late
// (30 s at the defaults). Readers are not misled meanwhile (they read INFO
// themselves and answer Unknown): only the end of their Unknown grace, one
// TTL after the meta is reset, comes that much later. Measured with 1,000
// servers on one redis-server (BenchmarkBeatLoad): 6 commands and 19 to 25 µs
// of script time per beat before; 3 commands and 9 to 14 µs for the common
// beat, 4.1 commands and 13 to 16 µs per beat averaged over full checks and
// marks. With 200 servers beating, each publishing a count that changes
// every fourth beat (playerdata-bench; docs/performance.md): 3.3 commands
// and 8.3 to 8.9 µs of script time per beat on a quiet machine, against
// 11.0 to 11.8 µs for the build before [MetaEnc] and the leaner beat, and
// about 4 µs for the least beat a script can make (TIME and one HSET) in
// the same runs. A full check writes [MetaEnc] into the shard, owners and
// load hashes, so that Redis keeps them hashtables (a listpack, which a
// shard of up to 512 servers would be, is scanned by every lookup). A full
// check also cleans: it looks at three random fields of its shard, two of
// the owners hash and two of the load hash and drops expired or orphaned
// ones, O(1) work on which no answer depends (Redis 7.0 has no per-field
// hash expiry).
//
// # Load
//
// A server's session count travels with its presence: [Config.Sessions]
// (for a datadriver Node, the profiles it holds or is loading, across its
// drivers) is written by the beat into the shard's load hash, <JobID> =
// "<sessions>@<ms>", the count and the Redis time of the write. The beat
// field itself keeps its format (a plain integer that builds before counts
// read and move with HINCRBY); the load hash is additive, and those builds
// never read it. A beat carries the count only when it changed since the
// last acknowledged write, and on every full check: a steady server's
// fast-path beat stays two commands, a changed count adds one HSET, and a
// live server's count is rewritten at least every CheckEvery beats. The
// full check's cleaning drops an expired beat's load entry with it, and two
// random load entries whose beat is gone; [Presence.Remove] drops ours.
//
// [Presence.Loads] reads every live server's count, least loaded first:
// what a drain reads to choose where profiles go (each [Load] has the
// JobID, the count, when it was written and how long the beat lives).
// [Presence.List] gives it per entry (Entry.Sessions, SessionsAt). A count
// is only ever given for a live beat: a dead or unknown server's entry is
// ignored. An entry that is not "<sessions>@<ms>" (another tool wrote it),
// or a load key of another type, is ignored with Entry.SessionsErr wrapping
// [ErrBadLoad] naming it; every call on the load hash in the beat is a
// pcall, so a broken load hash never fails a beat (the write is retried on
// the next beat, and a warning logged once).
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
// generation, for new sessions only. Meeting another instance on the JobID
// lapses it at once (above).
//
// Each beat, read and list is one Lua script round trip (EVALSHA; EVAL after
// NOSCRIPT, one more round trip, e.g. right after a restart); a full check
// adds one for the layout mark, and a read that would answer Stopped one or
// two for the layout check. All time on the app server goes through the
// injected [clock.Clock]; Redis-side time comes from TIME.
package presencecore
