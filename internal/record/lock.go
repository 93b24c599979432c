package record

import "time"

// Lock is a lock held by another session, as an acquire found it.
type Lock struct {
	// Job is the holder's JobID.
	Job string
	// Token is its lock token.
	Token string
	// Presence is true when the lock carries the presence flag: its holder
	// beats presence, so the lock moves when the holder is proven stopped.
	Presence bool
	// Age is the time since the holder took the lock or last wrote under it
	// (Redis clock; 0 for a lock stamped ahead of it).
	Age time.Duration
}
