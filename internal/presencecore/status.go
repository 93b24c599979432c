package presencecore

import (
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/enum"
)

// Status is the answer to "is this server alive?".
type Status int

const (
	// Unknown means the read failed, or a missing beat is no proof of death yet
	// (Redis restarted or failed over less than one TTL ago). Callers must not
	// treat it as stopped when that would take a live server's lock.
	Unknown Status = iota
	// Alive means the server beat within the TTL, on the Redis clock.
	Alive
	// Stopped means a read that succeeded found no live beat and the Redis run
	// is at least one TTL old: the server has not beaten for a full TTL.
	Stopped
)

// String returns "unknown", "alive" or "stopped" ("Status(N)" otherwise).
func (s Status) String() string {
	if name, ok := enum.Name(s, "unknown", "alive", "stopped"); ok {
		return name
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Reading is the full answer of one presence read.
type Reading struct {
	// Status is the answer.
	Status Status
	// ExpiresIn, when Alive, is the time until this beat expires on the Redis
	// clock: the earliest the server can read Stopped. When Unknown with a nil
	// Err it is the least time before the answer can become Stopped (the rest of
	// the one-TTL grace after a Redis restart). Zero otherwise.
	ExpiresIn time.Duration
	// Err, when Unknown, says why the read failed. It is nil when the answer is
	// unknown only because Redis restarted or failed over recently.
	Err error
	// At is the Redis clock's time of the read (millisecond precision); zero
	// when the read failed. A Stopped reading proves that the server wrote
	// nothing under its lease after At (see Lease), which is how a lock it
	// last refreshed before At can be told from one it took after coming back.
	At time.Time
	// LastBeat, when Stopped, is the Redis clock's time of the server's last
	// beat: its expiry minus the TTL (the servers share one TTL), so At minus
	// LastBeat is how long it has been silent. Zero when that is not known: no
	// beat of it is left in the hash (removed at a clean shutdown, or
	// cleaned), or its beat was stamped ahead of the Redis clock.
	LastBeat time.Time
}

// Entry is one server found in the presence hash by [Presence.List].
type Entry struct {
	// JobID names the server.
	JobID string
	// ExpiresIn is the time until its beat expires on the Redis clock; negative
	// when it has already expired (the field is awaiting cleaning).
	ExpiresIn time.Duration
	// Status is what [Presence.Read] would answer for it.
	Status Status
	// Instance is the process that wrote the beat; "" when none is recorded
	// (the owners hash lost the entry: evicted, or deleted by hand).
	Instance string
	// Shard is the shard it was found in (0 with one shard).
	Shard int
	// Sessions is the server's session count as its beat last wrote it (see
	// Config.Sessions and [Presence.Loads]); meaningful when SessionsAt is
	// not zero, 0 otherwise.
	Sessions int
	// SessionsAt is when that count was written (Redis clock, ms
	// precision). It is zero when no count is known: the server is not
	// Alive (a dead server's count is never given), publishes none (a build
	// before counts, or no Config.Sessions), or its entry is unreadable.
	SessionsAt time.Time
	// SessionsErr, for a live server, says why its stored count was
	// ignored: an error wrapping [ErrBadLoad] that names the stored value
	// or the load hash's own error. nil otherwise.
	SessionsErr error
}
