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
	// (Redis clock).
	Age time.Duration
	// Stale is true when the lock is past the age limit (LockTTL +
	// LockSkew) but carries the presence flag: it goes by age once its
	// holder's presence reads stopped or unknown.
	Stale bool
}
