package presencecore

import (
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
)

var (
	// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
	// refuses; the message names the field.
	ErrInvalidConfig = errors.New("presence: invalid config")

	// ErrInvalidJobID is wrapped in a [Reading] (or error) for a JobID that
	// cannot be a server (see Config.JobID): empty, too long, or holding a
	// character a NATS subject token cannot, the NUL byte of the hash's meta
	// fields among them.
	ErrInvalidJobID = errors.New("presence: invalid JobID")

	// ErrClosed is returned by [Presence.Beat] after [Presence.Close].
	ErrClosed = errors.New("presence: closed")

	// ErrUnexpectedReply means a script answered in a shape this package does
	// not know (a foreign script under the same SHA, or a proxy in between).
	ErrUnexpectedReply = presencescript.ErrUnexpectedReply
)

// ErrBeatTimeout means a beat was not acknowledged within its deadline (one
// Beat); it extends nothing, even if it lands later.
var ErrBeatTimeout = errors.New("presence: beat not acknowledged in time")

// ErrJobIDInUse means another process (another instance) beats this
// server's JobID: [Presence.Claim] found its beat alive and renewed, or a
// running server's beat found it (the server fenced itself). The error is an
// *[InUseError] naming that instance.
var ErrJobIDInUse = errors.New("presence: JobID in use by another instance")

// ErrShardMismatch means servers beating into the shard a reader (or
// writer) looked at use another shard count than it does (Config.Shards), so
// a missing beat proves nothing: the server may beat into a shard this
// reader never reads. A read answers Unknown with an Err wrapping it.
var ErrShardMismatch = errors.New("presence: shard count differs from the other servers'")

// InUseError says which instance holds the JobID. It matches ErrJobIDInUse
// with errors.Is.
type InUseError struct {
	// JobID is the contested JobID.
	JobID string
	// Instance is this process's instance.
	Instance string
	// Other is the instance whose beat was found.
	Other string
	// ExpiresAt is when Other's beat expires (or expired), on the Redis
	// clock (ms precision); zero when unknown.
	ExpiresAt time.Time
	// Fenced is true when this process had been beating the JobID itself:
	// its lease lapsed at once (see Presence.Beat).
	Fenced bool
}

// Error implements error.
func (e *InUseError) Error() string {
	other := "instance " + e.Other
	if e.Fenced {
		return fmt.Sprintf("presence: JobID %q was beaten by %s while instance %s held it; this instance fenced itself",
			e.JobID, other, e.Instance)
	}
	return fmt.Sprintf("presence: JobID %q is in use: %s beats it (this instance is %s)", e.JobID, other, e.Instance)
}

// Is makes errors.Is(err, ErrJobIDInUse) true.
func (e *InUseError) Is(target error) bool { return target == ErrJobIDInUse }
