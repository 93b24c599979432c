// Package bench measures what playerdata costs and how fast it hands a
// profile over, beside baselines measured in the same run, for the program's
// "playerdata bench" command.
//
// [Run] takes an [Env] (how to make Redis clients, where NATS is, a
// namespace) and a [Config] (how long to measure; [QuickConfig] for a run
// under a minute) and returns a [Result]: the figures the command prints as
// text ([Result.WriteText]), as one JSON object, or as an HTML report with
// charts ([WriteReport]).
//
// # What is measured
//
// Session cycle (cycle.go). One cycle is one player session as a game
// server runs it, in three Redis round trips: the load under the lock, one
// save, and the leave save that writes and releases at once. Each of
// 1, 8 and 64 players (goroutines, each with its own key, on one Node and
// one go-redis pool of 128) runs cycles back to back for a round:
//
//   - ours: Driver.Load → Update → Profile.Save → Update → Profile.Release;
//   - raw: HGETALL, HSET, HSET with plain go-redis, the data decoded and
//     encoded with msgpack like ours: the floor of this shape, with no lock;
//   - redsync: a github.com/go-redsync/redsync/v4 mutex Lock, HGETALL, HSET,
//     HSET, Unlock (five round trips): the common lock-beside-the-data way;
//   - floor: three calls of the floor script (scripts.go's floorScript:
//     TIME, an HMGET of the lock token, ver and data, an HSET of the data,
//     ver and lock.at) with plain go-redis, the data encoded for each: the
//     least any lock that fences every write with its token in a script
//     does per cycle, so that a target beside raw or redsync that the floor
//     itself misses is out of reach on this Redis, and ours ÷ floor is how
//     far the library is from it.
//
// Rounds are interleaved (ours, raw, redsync, floor at 1, 8, 64 players,
// then again) after a warm-up round of each, and the medians of the rounds
// are reported, with the Redis CPU per cycle (INFO cpu, used_cpu_sys +
// used_cpu_user, delta over the round ÷ cycles). Each round runs under a
// fresh namespace (a fresh Node for ours) and deletes its keys after.
//
// Scripts (scripts.go). The average server-side time of each of our
// scripts, from INFO commandstats deltas (cmdstat_evalsha usec ÷ calls) over
// phases that run one script only: acquire, save, release, send; beside a
// trivial script's, and the commands our scripts run inside Redis per cycle.
//
// Handoff (handoff.go). Two Nodes, A and B, each with its own Redis client
// and NATS connection; the key is live on one and the other joins it
// (stale-connection handoff: the holder ends its session, releases, replies;
// the joiner loads). The latency from Join's call to its return, beside the
// floors measured interleaved with it: one trivial EVALSHA round trip and
// one NATS request/reply round trip.
//
// Crash takeover (crash.go). With shortened presence timings, a server
// holding profiles stops (its Redis client and NATS connection are closed,
// nothing released), another joins them: the time from the crash to the
// joiner holding each profile, against the floor TTL + beat.
//
// Presence (presence.go). Many presence.Presence instances beat one hash:
// Redis commands, round trips, script time and Redis CPU per beat.
//
// Memory (memory.go). Redis bytes per record (MEMORY USAGE of the record,
// its history and its inbox) for 1 KiB of data after some saves, and Go heap
// per resident profile.
//
// Messages (messages.go). Live delivery: from the call of Driver.Send on one
// Node to OnMessage running on the holder on another.
//
// Redis-side figures need a real Redis (INFO cpu, INFO commandstats, MEMORY
// USAGE); against an embedded miniredis they are reported as 0 with a note.
// The run never resets server statistics (it takes deltas) and never changes
// the server's configuration.
package bench
