package presence

import "errors"

var (
	// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
	// refuses; the message names the field.
	ErrInvalidConfig = errors.New("presence: invalid config")

	// ErrInvalidJobID is wrapped in a [Reading] (or error) for a JobID that
	// cannot be a server: empty, or starting with a NUL byte (reserved for the
	// hash's meta fields).
	ErrInvalidJobID = errors.New("presence: invalid JobID")

	// ErrClosed is returned by [Presence.Beat] after [Presence.Close].
	ErrClosed = errors.New("presence: closed")

	// ErrUnexpectedReply means a script answered in a shape this package does
	// not know (a foreign script under the same SHA, or a proxy in between).
	ErrUnexpectedReply = errors.New("presence: unexpected script reply")
)

// ErrBeatTimeout means a beat was not acknowledged within its deadline (one
// Beat); it extends nothing, even if it lands later.
var ErrBeatTimeout = errors.New("presence: beat not acknowledged in time")
